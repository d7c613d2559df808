package loader

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"
	"unicode"
)

// Staging is the spool folder where files uploaded in the web UI wait,
// each in staging/HASH/ (HASH: the SHA-256 of its bytes), for the operator
// to confirm their preview. Spool runs never look into it.
const Staging = "staging"

// Typed refusals of an upload.
var (
	// ErrUploadName: the file's name is not a payout file's (.csv or
	// .xlsx, not hidden, printable).
	ErrUploadName = errors.New("upload: want a .csv or .xlsx file")
	// ErrNotStaged: no staged upload has that hash (never uploaded,
	// already confirmed, or purged).
	ErrNotStaged = errors.New("upload: no such upload waiting for confirmation")
)

// uploadName checks the name an upload is kept and loaded under.
func uploadName(name string) error {
	ext := strings.ToLower(filepath.Ext(name))
	bad := name == "" || name != filepath.Base(name) || strings.HasPrefix(name, ".") || len(name) > 200 ||
		strings.IndexFunc(name, func(r rune) bool { return !unicode.IsPrint(r) }) >= 0
	if bad || (ext != ".csv" && ext != ".xlsx") {
		return fmt.Errorf("%q: %w", name, ErrUploadName)
	}
	return nil
}

// StageUpload keeps an uploaded file, unloaded, in dir's staging folder
// under the hash of its bytes, with its declaration (if any) beside it as
// NAME.ctl, and returns the hash and the file's path (to preview it with
// LoadFile and Options.DryRun).
func StageUpload(dir, name string, data []byte, decl Control) (hash, path string, err error) {
	if err := uploadName(name); err != nil {
		return "", "", err
	}
	sum := sha256.Sum256(data)
	hash = hex.EncodeToString(sum[:])
	sub := filepath.Join(dir, Staging, hash)
	if err := os.RemoveAll(sub); err != nil {
		return "", "", fmt.Errorf("upload: %w", err)
	}
	if err := os.MkdirAll(sub, 0o700); err != nil {
		return "", "", fmt.Errorf("upload: %w", err)
	}
	path = filepath.Join(sub, name)
	// Payout files hold card numbers: owner only.
	if err := os.WriteFile(path, data, 0o600); err != nil {
		return "", "", fmt.Errorf("upload: %w", err)
	}
	if decl.Declared() {
		var b strings.Builder
		fmt.Fprintf(&b, "# declared in the upload form\n")
		if decl.Rows > 0 {
			fmt.Fprintf(&b, "rows=%d\n", decl.Rows)
		}
		if !decl.Total.IsZero() {
			fmt.Fprintf(&b, "total=%s\n", decl.Total)
		}
		if err := os.WriteFile(ControlPath(path), []byte(b.String()), 0o600); err != nil {
			return "", "", fmt.Errorf("upload: %w", err)
		}
	}
	return hash, path, nil
}

// StagedFile returns the path of the staged upload of hash after checking
// that its bytes still have that hash: what is loaded is exactly what was
// previewed.
func StagedFile(dir, hash string) (string, error) {
	if len(hash) != sha256.Size*2 || strings.Trim(hash, "0123456789abcdef") != "" {
		return "", ErrNotStaged
	}
	sub := filepath.Join(dir, Staging, hash)
	entries, err := os.ReadDir(sub)
	if errors.Is(err, fs.ErrNotExist) {
		return "", ErrNotStaged
	}
	if err != nil {
		return "", fmt.Errorf("upload: %w", err)
	}
	for _, e := range entries {
		if !e.Type().IsRegular() || IsControlFile(e.Name()) {
			continue
		}
		path := filepath.Join(sub, e.Name())
		data, err := os.ReadFile(path)
		if err != nil {
			return "", fmt.Errorf("upload: %w", err)
		}
		if sum := sha256.Sum256(data); hex.EncodeToString(sum[:]) != hash {
			return "", fmt.Errorf("upload %s changed since its preview: %w", e.Name(), ErrNotStaged)
		}
		return path, nil
	}
	return "", ErrNotStaged
}

// lockWait bounds how long LoadStaged waits for a spool run to finish.
const lockWait = 20 * time.Second

// LoadStaged loads the staged upload of hash as the spool loads a dropped
// file, with by as who loaded it (four-eyes): under the spool lock it
// moves to processing/, is loaded with o.Load, and ends in done/ or
// failed/, its errors in outbox/NAME.errors.csv; the next spool run
// writes its result file. A spool run holding the lock is waited for up
// to 20 s, then ErrLocked is returned and the upload stays staged.
func (ld *Loader) LoadStaged(ctx context.Context, dir, hash, by string, o SpoolOptions) (Result, error) {
	for _, sub := range []string{Processing, Done, Failed, Outbox} {
		if err := os.MkdirAll(filepath.Join(dir, sub), 0o750); err != nil {
			return Result{}, fmt.Errorf("spool: %w", err)
		}
	}
	unlock, err := waitLock(ctx, dir)
	if err != nil {
		return Result{}, err
	}
	defer unlock()
	src, err := StagedFile(dir, hash)
	if err != nil {
		return Result{}, err
	}
	dst := uniquePath(filepath.Join(dir, Processing, filepath.Base(src)))
	if err := os.Rename(src, dst); err != nil {
		return Result{}, fmt.Errorf("spool: take upload %s: %w", filepath.Base(src), err)
	}
	if _, err := moveControl(src, dst); err != nil {
		return Result{}, err
	}
	_ = os.RemoveAll(filepath.Dir(src))
	o.Load.Approval.By = by
	o.Load.DryRun = false
	return ld.spoolFile(ctx, dir, filepath.Base(dst), o)
}

func waitLock(ctx context.Context, dir string) (func(), error) {
	deadline := time.Now().Add(lockWait)
	for {
		unlock, err := lockDir(dir)
		if !errors.Is(err, ErrLocked) || time.Now().After(deadline) {
			return unlock, err
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// PurgeStaged removes the staged uploads older than age (previews never
// confirmed) and returns how many.
func PurgeStaged(dir string, age time.Duration) (int, error) {
	entries, err := os.ReadDir(filepath.Join(dir, Staging))
	if errors.Is(err, fs.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("upload: %w", err)
	}
	n := 0
	for _, e := range entries {
		info, err := e.Info()
		if err != nil || !e.IsDir() || time.Since(info.ModTime()) < age {
			continue
		}
		if err := os.RemoveAll(filepath.Join(dir, Staging, e.Name())); err == nil {
			n++
		}
	}
	return n, nil
}
