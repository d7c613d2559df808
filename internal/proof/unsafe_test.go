package proof

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// unsafeCallRE matches a call of what makes a deliberately broken payout:
// the two constructors of a non-zero Unsafe and cli.MainUnsafe.
var unsafeCallRE = regexp.MustCompile(`\b(UnsafeSkipSubmittingCheck|UnsafeReplayableCreate|MainUnsafe)\(`)

// unsafeDefs are the files that define them (and may name them).
var unsafeDefs = map[string]bool{
	"internal/worker/unsafe.go": true,
	"internal/psp/unsafe.go":    true,
	"internal/cli/cli.go":       true,
}

// TestOnlyTheHarnessMakesAnUnsafePayout fails naming the file and line when
// code that is not a test and not under internal/proof calls what makes a
// deliberately broken worker: the product's binaries are the safe ones,
// whatever their flags and environment.
func TestOnlyTheHarnessMakesAnUnsafePayout(t *testing.T) {
	root := filepath.Join("..", "..")
	n := 0
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel := filepath.ToSlash(strings.TrimPrefix(path, root+string(filepath.Separator)))
		if d.IsDir() {
			if strings.HasPrefix(d.Name(), ".") && path != root || d.Name() == "testdata" || rel == "internal/proof" {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(rel, ".go") || strings.HasSuffix(rel, "_test.go") || unsafeDefs[rel] {
			return nil
		}
		n++
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for i, line := range strings.Split(string(b), "\n") {
			if m := unsafeCallRE.FindString(line); m != "" {
				t.Errorf("%s:%d calls %s: only the harness under internal/proof may make an unsafe payout", rel, i+1, m)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if n < 50 {
		t.Fatalf("scanned %d Go files from %s; is the module root there?", n, root)
	}
}
