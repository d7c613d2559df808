package psp

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
)

// TokenSource supplies the bearer token for each request.
type TokenSource interface {
	Token() (string, error)
}

// ErrToken is matched (errors.Is) by every error of the token sources. Such
// errors name the file, never the token.
var ErrToken = errors.New("psp token unavailable")

type tokenError struct{ msg string }

func (e *tokenError) Error() string        { return "psp token: " + e.msg }
func (e *tokenError) Is(target error) bool { return target == ErrToken }

// checkToken refuses empty tokens and characters that cannot travel in an
// HTTP header, without ever echoing the token.
func checkToken(tok string) error {
	if tok == "" {
		return &tokenError{"is empty"}
	}
	for i := 0; i < len(tok); i++ {
		if c := tok[i]; c <= ' ' || c >= 0x7f {
			return &tokenError{fmt.Sprintf("contains a space or control character at byte %d", i)}
		}
	}
	return nil
}

type staticToken string

func (s staticToken) Token() (string, error) {
	tok := strings.TrimSpace(string(s))
	if err := checkToken(tok); err != nil {
		return "", err
	}
	return tok, nil
}

// StaticToken is a TokenSource that always returns tok (whitespace trimmed).
func StaticToken(tok string) TokenSource { return staticToken(tok) }

// FileToken reads the token from a file and reads it again whenever the
// file's modification time or size changes, so that a rotated token is
// picked up without a restart.
type FileToken struct {
	path string

	mu    sync.Mutex
	stamp fileStamp
	token string
}

// TokenFile returns a TokenSource backed by the file at path. The file is
// read on the first call to Token, not here.
func TokenFile(path string) *FileToken { return &FileToken{path: path} }

// Token returns the trimmed content of the file. A file that is missing,
// unreadable, empty or holds a malformed token is an error matching
// ErrToken; the error names the file but never its content.
func (f *FileToken) Token() (string, error) {
	st, err := stampOf(f.path)
	if err != nil {
		return "", fmt.Errorf("%w: %w", ErrToken, err)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.token != "" && st == f.stamp {
		return f.token, nil
	}
	b, err := os.ReadFile(f.path)
	if err != nil {
		return "", fmt.Errorf("%w: %w", ErrToken, err)
	}
	tok := strings.TrimSpace(string(b))
	if err := checkToken(tok); err != nil {
		return "", fmt.Errorf("file %s: %w", f.path, err)
	}
	f.token, f.stamp = tok, st
	return tok, nil
}

// Forget drops the token read last: the next Token reads the file again
// even when it looks unchanged (a recheck after a refusal).
func (f *FileToken) Forget() {
	f.mu.Lock()
	f.token, f.stamp = "", fileStamp{}
	f.mu.Unlock()
}
