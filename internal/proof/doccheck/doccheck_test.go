package doccheck

import (
	"bufio"
	"bytes"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"unicode"
)

var (
	// urlRE matches absolute URLs, which are not checked (and whose paths
	// must not be taken for repository paths).
	urlRE = regexp.MustCompile(`[A-Za-z][A-Za-z0-9+.-]*://[^\s)>\]"'` + "`" + `]*`)
	// mdNameRE matches a mention of a markdown file: a path ending in .md.
	mdNameRE = regexp.MustCompile(`[A-Za-z0-9_./-]*[A-Za-z0-9_-]\.md\b`)
	// linkRE matches an inline markdown link or image: [text](target "title").
	linkRE = regexp.MustCompile(`!?\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+"[^"]*")?\s*\)`)
	// climbRE matches a relative path that starts by going up, which is
	// followed to see whether it leaves the repository.
	climbRE = regexp.MustCompile(`(?:^|[\s(\x60"'\[])((?:\.\./)+[A-Za-z0-9_.-][A-Za-z0-9_./-]*)`)
)

// moduleRoot walks up from the test's directory to the folder with go.mod.
func moduleRoot(t *testing.T) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("no go.mod above the test's directory")
		}
		dir = parent
	}
}

type problem struct {
	file string
	line int
	msg  string
}

// checker resolves references found in one repository.
type checker struct {
	root     string
	problems []problem
	anchors  map[string]map[string]bool // markdown file -> heading anchors
}

// inside reports whether the absolute path p is the root or below it.
func (c *checker) inside(p string) bool {
	rel, err := filepath.Rel(c.root, p)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator))
}

func exists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

func (c *checker) report(file string, line int, format string, args ...any) {
	rel, _ := filepath.Rel(c.root, file)
	c.problems = append(c.problems, problem{rel, line, fmt.Sprintf(format, args...)})
}

// resolveMention resolves a mentioned file name: relative to the citing
// file's folder, else to the module root. It returns "" when neither
// exists inside the repository, and whether the mention leaves it.
func (c *checker) resolveMention(from, name string) (found string, outside bool) {
	for _, base := range []string{filepath.Dir(from), c.root} {
		p := filepath.Clean(filepath.Join(base, filepath.FromSlash(name)))
		if !c.inside(p) {
			outside = true
			continue
		}
		if exists(p) {
			return p, false
		}
	}
	return "", outside
}

// checkText looks at one line of Go or markdown text.
func (c *checker) checkText(file string, line int, text string, markdown bool) {
	if markdown {
		for _, m := range linkRE.FindAllStringSubmatch(text, -1) {
			c.checkLink(file, line, m[1])
		}
		// Links were checked as links; the rest is checked as text.
		text = linkRE.ReplaceAllString(text, " ")
	}
	text = urlRE.ReplaceAllString(text, " ")
	for _, m := range climbRE.FindAllStringSubmatch(text, -1) {
		p := filepath.Clean(filepath.Join(filepath.Dir(file), filepath.FromSlash(m[1])))
		if !c.inside(p) {
			c.report(file, line, "%s points outside the repository", m[1])
		}
	}
	for _, name := range mdNameRE.FindAllString(text, -1) {
		if strings.HasPrefix(name, "../") && !c.inside(filepath.Clean(filepath.Join(filepath.Dir(file), name))) {
			continue // reported above
		}
		found, outside := c.resolveMention(file, strings.TrimPrefix(name, "/"))
		switch {
		case found != "":
		case outside:
			c.report(file, line, "%s points outside the repository", name)
		default:
			c.report(file, line, "%s is cited but is not in the repository", name)
		}
	}
}

// checkLink checks the target of a markdown link written in file.
func (c *checker) checkLink(file string, line int, target string) {
	if urlRE.MatchString(target) || strings.HasPrefix(target, "mailto:") {
		return
	}
	path, frag, _ := strings.Cut(target, "#")
	dest := file
	if path != "" {
		dest = filepath.Clean(filepath.Join(filepath.Dir(file), filepath.FromSlash(path)))
		if strings.HasPrefix(path, "/") {
			dest = filepath.Clean(filepath.Join(c.root, filepath.FromSlash(path)))
		}
		if !c.inside(dest) {
			c.report(file, line, "link %s points outside the repository", target)
			return
		}
		if !exists(dest) {
			c.report(file, line, "link %s: %s does not exist", target, path)
			return
		}
	}
	if frag == "" || !strings.HasSuffix(dest, ".md") {
		return
	}
	if !c.headingAnchors(dest)[strings.ToLower(frag)] {
		c.report(file, line, "link %s: no heading with the anchor #%s", target, frag)
	}
}

// headingAnchors returns the anchors GitHub gives the headings of a
// markdown file (lower case, punctuation dropped, spaces as dashes).
func (c *checker) headingAnchors(file string) map[string]bool {
	if a, ok := c.anchors[file]; ok {
		return a
	}
	a := map[string]bool{}
	c.anchors[file] = a
	b, err := os.ReadFile(file)
	if err != nil {
		return a
	}
	fence := false
	for _, l := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(strings.TrimSpace(l), "```") {
			fence = !fence
			continue
		}
		if fence || !strings.HasPrefix(l, "#") {
			continue
		}
		h := strings.TrimSpace(strings.TrimLeft(l, "#"))
		var s strings.Builder
		for _, r := range strings.ToLower(h) {
			switch {
			case unicode.IsLetter(r) || unicode.IsDigit(r) || r == '-' || r == '_':
				s.WriteRune(r)
			case r == ' ':
				s.WriteRune('-')
			}
		}
		a[s.String()] = true
	}
	return a
}

// checkFile scans one file line by line; fenced code blocks in markdown
// are checked like text.
func (c *checker) checkFile(t *testing.T, file string) {
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	markdown := strings.HasSuffix(file, ".md")
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 0, 64*1024), 4*1024*1024)
	for n := 1; sc.Scan(); n++ {
		c.checkText(file, n, sc.Text(), markdown)
	}
	if err := sc.Err(); err != nil {
		t.Fatalf("%s: %v", file, err)
	}
}

// TestCitedDocumentsAreInTheRepository fails when a Go or markdown file
// cites a document that a fresh clone does not have.
func TestCitedDocumentsAreInTheRepository(t *testing.T) {
	c := &checker{root: moduleRoot(t), anchors: map[string]map[string]bool{}}
	files := 0
	err := filepath.WalkDir(c.root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if p != c.root && (strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata" || d.Name() == "vendor" || d.Name() == "node_modules") {
				return filepath.SkipDir
			}
			// A nested module is another repository's business.
			if p != c.root && exists(filepath.Join(p, "go.mod")) {
				return filepath.SkipDir
			}
			return nil
		}
		if strings.HasSuffix(p, ".go") || strings.HasSuffix(p, ".md") {
			files++
			c.checkFile(t, p)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if files < 10 {
		t.Fatalf("scanned only %d files from %s: is the module root right?", files, c.root)
	}
	for _, p := range c.problems {
		t.Errorf("%s:%d: %s", p.file, p.line, p.msg)
	}
}

// TestCheckerCatchesDeadCitations proves the checker can fail: a small
// repository with a good and a bad citation of each kind.
func TestCheckerCatchesDeadCitations(t *testing.T) {
	root := t.TempDir()
	write := func(name, text string) string {
		p := filepath.Join(root, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	// The fixtures spell ".md" as "%MD" so that this file cites nothing.
	md := func(s string) string { return strings.ReplaceAll(s, "%MD", ".md") }
	write(md("docs/design%MD"), "# Design\n\n## Never twice\n")
	goFile := write("internal/x/x.go", md("// See docs/design%MD and DESIGN%MD.\npackage x\n"))
	mdFile := write(md("README%MD"), md(strings.Join([]string{
		"[ok](docs/design%MD#never-twice) [bad anchor](docs/design%MD#nope)",
		"[gone](docs/gone%MD) [up](../shared/reference/api%MD)",
		"see `../shared/DESIGN%MD` and [web](https://example.com/x%MD)",
	}, "\n")))
	c := &checker{root: root, anchors: map[string]map[string]bool{}}
	c.checkFile(t, goFile)
	c.checkFile(t, mdFile)
	var got []string
	for _, p := range c.problems {
		got = append(got, fmt.Sprintf("%s:%d", p.file, p.line))
	}
	want := []string{
		"internal/x/x.go:1", // the design document outside docs/
		"README.md:1",       // bad anchor
		"README.md:2",       // gone
		"README.md:2",       // up and out
		"README.md:3",       // out, as a code span
	}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		for _, p := range c.problems {
			t.Logf("%s:%d: %s", p.file, p.line, p.msg)
		}
		t.Fatalf("problems at %v, want %v", got, want)
	}
}
