package loader

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"time"
	"unicode"
)

// Staging is the spool folder where files uploaded in the web UI wait,
// each in staging/HASH-RANDOM/ (HASH: the SHA-256 of its bytes), for the operator
// to confirm their preview. Spool runs never look into it.
const Staging = "staging"

// Typed refusals of an upload.
var (
	// ErrUploadName: the file's name is not a payout file's (.csv or
	// .xlsx, not hidden, printable).
	ErrUploadName = errors.New("upload: want a .csv or .xlsx file")
	// ErrNotStaged: no staged upload has that ID (never uploaded,
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

// StageUpload copies an uploaded file, unloaded, from src into a staging
// directory of its own, staging/ID/ (ID: the SHA-256 of its bytes, a dash
// and a random part), with its declaration (if any) beside it as NAME.ctl,
// and returns the ID and the file's path (to preview it with LoadFile and
// Options.DryRun). Uploads of the same bytes get different directories:
// none replaces or removes another's file or declaration. An error
// reading src (a size limit, a broken connection) is returned wrapped and
// leaves nothing staged.
func StageUpload(dir, name string, src io.Reader, decl Control) (id, path string, err error) {
	if err := uploadName(name); err != nil {
		return "", "", err
	}
	if err := os.MkdirAll(filepath.Join(dir, Staging), 0o700); err != nil {
		return "", "", fmt.Errorf("upload: %w", err)
	}
	// Written under a hidden name, renamed to its ID once its hash is known.
	tmp, err := os.MkdirTemp(filepath.Join(dir, Staging), ".incoming-")
	if err != nil {
		return "", "", fmt.Errorf("upload: %w", err)
	}
	defer func() {
		if err != nil {
			_ = os.RemoveAll(tmp)
		}
	}()
	hash, err := writeStaged(filepath.Join(tmp, name), src, decl)
	if err != nil {
		return "", "", err
	}
	rnd := make([]byte, 8)
	if _, err := rand.Read(rnd); err != nil {
		return "", "", fmt.Errorf("upload: %w", err)
	}
	id = hash + "-" + hex.EncodeToString(rnd)
	sub := filepath.Join(dir, Staging, id)
	if _, err := os.Lstat(sub); !errors.Is(err, fs.ErrNotExist) {
		return "", "", fmt.Errorf("upload: staging %s exists already", id)
	}
	if err := os.Rename(tmp, sub); err != nil {
		return "", "", fmt.Errorf("upload: %w", err)
	}
	return id, filepath.Join(sub, name), nil
}

// writeStaged copies src to path (owner only: payout files hold card
// numbers) and decl to its NAME.ctl, and returns the hash of the bytes.
func writeStaged(path string, src io.Reader, decl Control) (string, error) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return "", fmt.Errorf("upload: %w", err)
	}
	h := sha256.New()
	_, err = io.Copy(io.MultiWriter(f, h), src)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return "", fmt.Errorf("upload: %w", err)
	}
	if decl.Declared() || decl.Release != "" {
		var b strings.Builder
		fmt.Fprintf(&b, "# declared in the upload form\n")
		if decl.Rows > 0 {
			fmt.Fprintf(&b, "rows=%d\n", decl.Rows)
		}
		if !decl.Total.IsZero() {
			fmt.Fprintf(&b, "total=%s\n", decl.Total)
		}
		if decl.Release != "" {
			fmt.Fprintf(&b, "release=%s\n", strings.ReplaceAll(decl.Release, "\n", " "))
		}
		if err := os.WriteFile(ControlPath(path), []byte(b.String()), 0o600); err != nil {
			return "", fmt.Errorf("upload: %w", err)
		}
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// stagedID matches an upload's staging ID: HASH-RANDOM.
var stagedID = regexp.MustCompile(`^([0-9a-f]{64})-[0-9a-f]{16}$`)

// StagedFile returns the path of the staged upload id after checking that
// its bytes still have the hash the ID names: what is loaded is exactly
// what was previewed.
func StagedFile(dir, id string) (string, error) {
	m := stagedID.FindStringSubmatch(id)
	if m == nil {
		return "", ErrNotStaged
	}
	hash := m[1]
	sub := filepath.Join(dir, Staging, id)
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

// LoadStaged loads the staged upload id (StageUpload) as the spool loads a dropped
// file, with by as who loaded it (four-eyes): under the spool lock it
// moves to processing/, is loaded with o.Load, and ends in done/ or
// failed/, its errors in outbox/NAME.errors.csv; the next spool run
// writes its result file. A spool run holding the lock is waited for up
// to 20 s, then ErrLocked is returned and the upload stays staged.
func (ld *Loader) LoadStaged(ctx context.Context, dir, id, by string, o SpoolOptions) (Result, error) {
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
	src, err := StagedFile(dir, id)
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
	return ld.spoolFile(ctx, dir, filepath.Base(dst), false, o)
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
