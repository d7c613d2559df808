package loader

import (
	"context"
	"errors"
	"io/fs"
	"path/filepath"
	"strings"
	"testing"
)

// TestMissingFileNamedOnce: a file that is not there is named once
// ("open nope.csv: no such file", not "open nope.csv: open nope.csv: …"),
// for a CSV and for a workbook (probed first).
func TestMissingFileNamedOnce(t *testing.T) {
	f := newFixture(t)
	for _, name := range []string{"nope.csv", "nope.xlsx"} {
		path := filepath.Join(t.TempDir(), name)
		_, err := f.ld.LoadFile(context.Background(), path, Options{})
		if !errors.Is(err, fs.ErrNotExist) {
			t.Fatalf("%s: %v, want a not-exist error", name, err)
		}
		if n := strings.Count(err.Error(), "open "); n != 1 {
			t.Errorf("%s: %q names the open %d times", name, err, n)
		}
	}
}
