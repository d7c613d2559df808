package doccheck

import (
	"flag"
	"go/build"
	"go/doc"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the second column of the package table of docs/design.md from the doc comments")

// packageSentence returns the first sentence of the doc comment of the
// package in dir (the files that are not tests), without its subject
// ("Package ledger ", "Command payout ") and its final period: what the
// package table says the package holds. "" when the package has no doc
// comment.
func packageSentence(t *testing.T, dir string) string {
	t.Helper()
	// The files of the default build (go/build applies build tags and
	// leaves out tests), in name order.
	bp, err := build.ImportDir(dir, 0)
	if err != nil {
		t.Fatal(err)
	}
	files := append([]string(nil), bp.GoFiles...)
	sort.Strings(files)
	var texts []string
	for _, name := range files {
		f, err := parser.ParseFile(token.NewFileSet(), filepath.Join(dir, name), nil, parser.ParseComments|parser.PackageClauseOnly)
		if err != nil {
			t.Fatal(err)
		}
		if f.Doc != nil {
			texts = append(texts, subjectless(bp.Name, new(doc.Package).Synopsis(f.Doc.Text())))
		}
	}
	if len(texts) == 0 {
		return ""
	}
	return texts[0]
}

// subjectless cuts the subject off a package's synopsis and its period.
func subjectless(name, s string) string {
	for _, subject := range []string{"Package " + name + " ", "Command "} {
		if rest, ok := strings.CutPrefix(s, subject); ok {
			if subject == "Command " {
				_, rest, _ = strings.Cut(rest, " ")
			}
			s = rest
			break
		}
	}
	return strings.TrimSuffix(s, ".")
}

// tableCell is s as a cell of a markdown table.
func tableCell(s string) string { return strings.ReplaceAll(s, "|", `\|`) }

// TestPackageTableIsTheDocComments fails naming the package when the
// second column of a row of the package table of docs/design.md is not the
// first sentence of the package's doc comment, or the package has none:
// the table is an index of what each package says it is, so a doc comment
// that stops being true shows in the design, and the other way round.
// -update rewrites the column from the doc comments.
func TestPackageTableIsTheDocComments(t *testing.T) {
	root := moduleRoot(t)
	design := filepath.Join(root, filepath.FromSlash("docs/design.md"))
	b, err := os.ReadFile(design)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(string(b), "\n")
	in, rows := false, 0
	for i, line := range lines {
		if strings.HasPrefix(line, "## ") {
			in = line == "## Packages"
			continue
		}
		if !in || !strings.HasPrefix(line, "|") {
			continue
		}
		cells := strings.Split(line, "|")
		m := packageCellRE.FindStringSubmatch(cells[1])
		if len(cells) < 4 || m == nil || strings.TrimSpace(cells[1]) != m[0] {
			continue
		}
		dir := filepath.Join(root, filepath.FromSlash(m[1]))
		if _, err := os.Stat(dir); err != nil {
			continue // TestDesignListsEveryPackage reports it
		}
		rows++
		want := packageSentence(t, dir)
		if want == "" {
			t.Errorf("package %s has no doc comment for its row in docs/design.md", m[1])
			continue
		}
		if got := strings.TrimSpace(strings.Join(cells[2:len(cells)-1], "|")); got != tableCell(want) {
			if *update {
				lines[i] = "| " + strings.TrimSpace(cells[1]) + " | " + tableCell(want) + " |"
				continue
			}
			t.Errorf("docs/design.md says package %s holds\n\t%s\nbut its doc comment says it\n\t%s\n(go test ./internal/proof/doccheck -run TestPackageTableIsTheDocComments -update rewrites the table)", m[1], got, want)
		}
	}
	if rows == 0 {
		t.Fatal(`docs/design.md has no row of a package under "## Packages"`)
	}
	if *update {
		if err := os.WriteFile(design, []byte(strings.Join(lines, "\n")), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func TestSubjectless(t *testing.T) {
	for _, tc := range []struct{ name, in, want string }{
		{"ledger", "Package ledger keeps the state.", "keeps the state"},
		{"main", "Command payout is the batch payout processor: it loads files.", "is the batch payout processor: it loads files"},
		{"card", "Card numbers are masked.", "Card numbers are masked"},
	} {
		if got := subjectless(tc.name, tc.in); got != tc.want {
			t.Errorf("subjectless(%q, %q) = %q, want %q", tc.name, tc.in, got, tc.want)
		}
	}
}
