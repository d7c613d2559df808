package doccheck

import (
	"bufio"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// packageCellRE matches a package path in the first cell of a row of the
// package table: `internal/ledger`, `jobs/`.
var packageCellRE = regexp.MustCompile("`((?:cmd|internal|jobs)(?:/[A-Za-z0-9_-]+)*)/?`")

// tablePackages returns the package paths the first column of the table
// under the heading "## Packages" of the markdown file at path names.
func tablePackages(t *testing.T, path string) []string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []string
	in := false
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "## ") {
			in = line == "## Packages"
			continue
		}
		if !in || !strings.HasPrefix(line, "|") {
			continue
		}
		cells := strings.Split(line, "|")
		if len(cells) < 3 {
			continue
		}
		for _, m := range packageCellRE.FindAllStringSubmatch(cells[1], -1) {
			out = append(out, m[1])
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// modulePackages returns the directories under cmd/, internal/ and jobs/
// that hold a Go package (a .go file that is not a test).
func modulePackages(t *testing.T, root string) []string {
	t.Helper()
	var out []string
	for _, top := range []string{"cmd", "internal", "jobs"} {
		err := filepath.WalkDir(filepath.Join(root, top), func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if d.IsDir() {
				if d.Name() == "testdata" || strings.HasPrefix(d.Name(), ".") {
					return filepath.SkipDir
				}
				return nil
			}
			if strings.HasSuffix(d.Name(), ".go") && !strings.HasSuffix(d.Name(), "_test.go") {
				rel, _ := filepath.Rel(root, filepath.Dir(path))
				if rel = filepath.ToSlash(rel); !slices.Contains(out, rel) {
					out = append(out, rel)
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	return out
}

// TestDesignListsEveryPackage fails when a package under cmd/, internal/
// or jobs/ is missing from the package table of docs/design.md, or when
// the table names a package that does not exist.
func TestDesignListsEveryPackage(t *testing.T) {
	root := moduleRoot(t)
	listed := tablePackages(t, filepath.Join(root, filepath.FromSlash("docs/design.md")))
	if len(listed) == 0 {
		t.Fatal(`docs/design.md has no "## Packages" table`)
	}
	have := modulePackages(t, root)
	for _, p := range have {
		if !slices.Contains(listed, p) {
			t.Errorf("package %s is missing from the table under \"## Packages\" in docs/design.md", p)
		}
	}
	for _, p := range listed {
		if !slices.Contains(have, p) {
			t.Errorf("docs/design.md lists package %s, which does not exist", p)
		}
	}
}

func TestTablePackagesReadsTheFirstColumn(t *testing.T) {
	dir := t.TempDir()
	doc := "# D\n\n## Packages\n\n| path | holds |\n|---|---|\n" +
		"| `cmd/payout` | the binary, not `internal/ui` |\n" +
		"| `jobs/` | the contract |\n\n## Later\n\n| `internal/x` | not in the table |\n"
	path := filepath.Join(dir, "packages.txt")
	if err := os.WriteFile(path, []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
	got := tablePackages(t, path)
	if want := []string{"cmd/payout", "jobs"}; !slices.Equal(got, want) {
		t.Errorf("tablePackages = %q, want %q", got, want)
	}
}
