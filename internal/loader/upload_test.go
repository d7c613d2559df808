package loader

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/acme/payout/internal/money"
)

// Two uploads of the same bytes, one with control totals and one without,
// each keep their own file and declaration: the second neither replaces
// nor removes the first's .ctl, and each confirms its own.
func TestStageUploadSameBytesKeepsEachUpload(t *testing.T) {
	dir := t.TempDir()
	data := "phone,amount\n+15551234567,10.00\n"
	total, err := money.Parse("10.00", 8)
	if err != nil {
		t.Fatal(err)
	}
	id1, path1, err := StageUpload(dir, "pay.csv", strings.NewReader(data), Control{Rows: 1, Total: total})
	if err != nil {
		t.Fatal(err)
	}
	id2, path2, err := StageUpload(dir, "pay.csv", strings.NewReader(data), Control{})
	if err != nil {
		t.Fatal(err)
	}
	if id1 == id2 || path1 == path2 || id1[:64] != id2[:64] {
		t.Fatalf("same bytes staged as %s and %s: want one hash, two directories", id1, id2)
	}
	ctl, err := os.ReadFile(ControlPath(path1))
	if err != nil || !strings.Contains(string(ctl), "rows=1") || !strings.Contains(string(ctl), "total=10") {
		t.Fatalf("first upload's declaration after a second upload: %q, %v", ctl, err)
	}
	if _, err := os.Stat(ControlPath(path2)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("second upload (no totals) has a declaration: %v", err)
	}
	for id, want := range map[string]string{id1: path1, id2: path2} {
		got, err := StagedFile(dir, id)
		if err != nil || got != want {
			t.Errorf("StagedFile(%s) = %s, %v; want %s", id, got, err, want)
		}
	}
	for _, p := range []string{path1, filepath.Dir(path1)} {
		fi, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		if perm := fi.Mode().Perm(); perm&0o077 != 0 {
			t.Errorf("%s has mode %v: want owner only", p, perm)
		}
	}
}

// The confirm re-checks the bytes against the hash of the ID, and takes
// only a well-formed ID.
func TestStagedFileRefuses(t *testing.T) {
	dir := t.TempDir()
	id, path, err := StageUpload(dir, "pay.csv", strings.NewReader("phone,amount\n"), Control{})
	if err != nil {
		t.Fatal(err)
	}
	for _, bad := range []string{"", id[:64], id + "0", "../" + id, strings.ToUpper(id)} {
		if _, err := StagedFile(dir, bad); !errors.Is(err, ErrNotStaged) {
			t.Errorf("StagedFile(%q): %v, want ErrNotStaged", bad, err)
		}
	}
	if err := os.WriteFile(path, []byte("phone,amount\n+1,99\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := StagedFile(dir, id); !errors.Is(err, ErrNotStaged) || !strings.Contains(err.Error(), "changed") {
		t.Errorf("changed bytes: %v, want ErrNotStaged (changed)", err)
	}
}

type failingReader struct{}

func (failingReader) Read([]byte) (int, error) { return 0, errTestRead }

var errTestRead = errors.New("read failed")

// A failed read leaves nothing staged.
func TestStageUploadReadErrorLeavesNothing(t *testing.T) {
	dir := t.TempDir()
	if _, _, err := StageUpload(dir, "pay.csv", failingReader{}, Control{}); !errors.Is(err, errTestRead) {
		t.Fatalf("err %v, want the read's", err)
	}
	entries, err := os.ReadDir(filepath.Join(dir, Staging))
	if err != nil || len(entries) != 0 {
		t.Fatalf("staging after a failed upload: %v, %v", entries, err)
	}
}
