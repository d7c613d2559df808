package deploy

import (
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// TestEveryYAMLParses parses every YAML file under deploy/, so that a file
// added later is at least syntax-checked, with duplicate keys refused.
func TestEveryYAMLParses(t *testing.T) {
	n := 0
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		if ext := filepath.Ext(path); ext != ".yaml" && ext != ".yml" {
			return nil
		}
		n++
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		docs, err := splitYAML(string(b))
		if err != nil {
			t.Errorf("%s: %v", path, err)
			return nil
		}
		if len(docs) == 0 {
			t.Errorf("%s: empty", path)
		}
		for i, doc := range docs {
			if _, err := yaml.YAMLToJSONStrict([]byte(doc)); err != nil {
				t.Errorf("%s doc %d: %v", path, i+1, err)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if n < 8 {
		t.Fatalf("found %d YAML files under deploy/, want at least 8 (compose + k8s)", n)
	}
}

func TestSplitYAML(t *testing.T) {
	docs, err := splitYAML("# only a comment\n---\na: 1\n---\n\n---\nb: 2\n")
	if err != nil {
		t.Fatal(err)
	}
	if len(docs) != 2 || !strings.Contains(docs[0], "a: 1") || !strings.Contains(docs[1], "b: 2") {
		t.Fatalf("got %q", docs)
	}
	if _, err := splitYAML("a: [\n"); err == nil {
		t.Fatal("no error for broken YAML")
	}
	if _, err := yaml.YAMLToJSONStrict([]byte("a: 1\na: 2\n")); err == nil {
		t.Fatal("duplicate keys accepted")
	}
}
