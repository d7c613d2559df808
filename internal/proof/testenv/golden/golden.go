// Package golden compares test output with files under testdata/: -update
// rewrites them, and a mismatch shows the first differing line.
package golden

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the golden files instead of comparing with them")

// Updating reports whether the test run rewrites golden files (-update).
func Updating() bool { return *update }

// Check compares got with the file at path, or rewrites the file (and its
// directory) under -update. On a mismatch the test fails naming the first
// line that differs.
func Check(t testing.TB, path string, got []byte) {
	t.Helper()
	if *update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -update to create it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs (go test -update rewrites it if the change is intended):\n%s", path, Diff(string(got), string(want)))
	}
}

// CheckString is Check for a string.
func CheckString(t testing.TB, path, got string) {
	t.Helper()
	Check(t, path, []byte(got))
}

// Diff describes the first line where got and want differ, with the line
// counts of both.
func Diff(got, want string) string {
	gl, wl := strings.Split(got, "\n"), strings.Split(want, "\n")
	for i := 0; i < max(len(gl), len(wl)); i++ {
		var g, w string
		if i < len(gl) {
			g = gl[i]
		}
		if i < len(wl) {
			w = wl[i]
		}
		if g != w {
			return "line " + strconv.Itoa(i+1) + ":\n got: " + strconv.Quote(g) + "\nwant: " + strconv.Quote(w) +
				"\n(got " + strconv.Itoa(len(gl)) + " lines, want " + strconv.Itoa(len(wl)) + ")"
		}
	}
	return "no line differs"
}
