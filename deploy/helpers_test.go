package deploy

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// readFile reads a file of this directory (tests run in deploy/).
func readFile(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.FromSlash(name))
	if err != nil {
		t.Fatalf("read %s: %v", name, err)
	}
	return string(b)
}

var docSeparator = regexp.MustCompile(`(?m)^---[ \t]*$`)

// splitYAML splits a multi-document YAML text and drops documents that hold
// only comments or whitespace.
func splitYAML(text string) ([]string, error) {
	var docs []string
	for _, d := range docSeparator.Split(text, -1) {
		j, err := yaml.YAMLToJSON([]byte(d))
		if err != nil {
			return nil, err
		}
		if bytes.Equal(bytes.TrimSpace(j), []byte("null")) {
			continue
		}
		docs = append(docs, d)
	}
	return docs, nil
}

// errorsText joins errors one per line for a failure message.
func errorsText(errs []error) string {
	var b strings.Builder
	for _, e := range errs {
		b.WriteString("\n  - ")
		b.WriteString(e.Error())
	}
	return b.String()
}

// mutation is a test case that breaks a good file in one way and names the
// complaint a check must make about it.
type mutation struct {
	name    string
	old     string // text to replace (must occur in the file)
	new     string
	wantErr string // substring of one of the errors
}

// apply returns text with m applied, failing the test if m.old is absent,
// so that a mutation can never silently test the unchanged file.
func (m mutation) apply(t *testing.T, text string) string {
	t.Helper()
	if !strings.Contains(text, m.old) {
		t.Fatalf("mutation %q: %q not found in the file", m.name, m.old)
	}
	return strings.Replace(text, m.old, m.new, 1)
}

// requireErr fails unless one of errs contains want.
func requireErr(t *testing.T, errs []error, want string) {
	t.Helper()
	if len(errs) == 0 {
		t.Fatalf("no error, want one containing %q", want)
	}
	if !strings.Contains(errors.Join(errs...).Error(), want) {
		t.Fatalf("errors do not mention %q:%s", want, errorsText(errs))
	}
}

// secretName reports whether an environment variable or key name looks
// like it holds a secret.
var secretName = regexp.MustCompile(`(?i)(pass(word|wd)?|token|secret|data[-_]?key|redis([-_]?url)?$|auth)`)

// requireCaught runs one subtest per mutation, named prefix+m.name: check
// of good with m applied must make the complaint m names.
func requireCaught(t *testing.T, prefix, good string, check func(string) []error, muts []mutation) {
	t.Helper()
	for _, m := range muts {
		t.Run(prefix+m.name, func(t *testing.T) {
			requireErr(t, check(m.apply(t, good)), m.wantErr)
		})
	}
}

// requireClean fails the test unless errs, what a check found in the file
// called name, is empty.
func requireClean(t *testing.T, name string, errs []error) {
	t.Helper()
	if len(errs) > 0 {
		t.Fatalf("%s:%s", name, errorsText(errs))
	}
}
