package golden

import (
	"path/filepath"
	"strings"
	"testing"
)

func TestDiffNamesTheFirstDifferentLine(t *testing.T) {
	for _, tc := range []struct{ got, want, has string }{
		{"a\nb\nc\n", "a\nx\nc\n", `line 2:` + "\n" + ` got: "b"` + "\n" + `want: "x"`},
		{"a\n", "a\nb\n", `line 2:` + "\n" + ` got: ""` + "\n" + `want: "b"`},
		{"same", "same", "no line differs"},
	} {
		if d := Diff(tc.got, tc.want); !strings.Contains(d, tc.has) {
			t.Errorf("Diff(%q, %q) = %q, want it to contain %q", tc.got, tc.want, d, tc.has)
		}
	}
}

func TestCheckPassesOnEqualAndFailsOnDifferent(t *testing.T) {
	path := filepath.Join("testdata", "example.golden")
	Check(t, path, []byte("a golden file\n"))
	ft := &fakeT{TB: t}
	Check(ft, path, []byte("another text\n"))
	if !ft.failed || !strings.Contains(ft.msg, "line 1") {
		t.Errorf("a different text: failed=%t %q", ft.failed, ft.msg)
	}
}

type fakeT struct {
	testing.TB
	failed bool
	msg    string
}

func (f *fakeT) Helper() {}
func (f *fakeT) Errorf(format string, args ...any) {
	f.failed = true
	f.msg = format
	if len(args) > 1 {
		f.msg = args[1].(string)
	}
}
