package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/alicebob/miniredis/v2"
)

// TestLoadControlTotals: --expect-rows/--expect-total and NAME.ctl refuse a
// file at odds with them (exit 1, both figures named), and are usage
// errors where they cannot apply to one file.
func TestLoadControlTotals(t *testing.T) {
	url := "redis://" + miniredis.RunT(t).Addr()
	dir := t.TempDir()
	good, err := os.ReadFile("../../samples/payouts-good.csv")
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(dir, "p.csv")
	if err := os.WriteFile(file, good, 0o600); err != nil {
		t.Fatal(err)
	}
	base := []string{"load", "--redis", url, "--insecure-plaintext", "--allow-volatile-redis", "--log-level", "error"}
	load := func(args ...string) (int, string) {
		code, out, errs := runMain(t, nil, append(append([]string{}, base...), args...)...)
		return code, out + errs
	}
	for _, tt := range []struct {
		name string
		args []string
		code int
		want string
	}{
		{"rows at odds", []string{"--expect-rows", "21", file}, ExitRejected,
			"p.csv:0: control: control total: the file holds 20 rows totalling 24917.54; --expect-rows/--expect-total declares 21 rows"},
		{"total at odds", []string{"--expect-total", "24917.55", "--dry-run", file}, ExitRejected,
			"--expect-rows/--expect-total declares a total of 24917.55"},
		{"two files", []string{"--expect-rows", "20", file, file}, ExitUsage, "give one FILE"},
		{"a control file alone", []string{"--dry-run", file + ".ctl"}, ExitUsage, "not only control files"},
		{"spool", []string{"--expect-total", "1", "--spool", dir}, ExitUsage, "not with --spool"},
		{"grouped total", []string{"--expect-total", "24,917.54", file}, ExitUsage, "write it plain"},
		{"required", []string{"--require-control", "--dry-run", file}, ExitRejected, "no control total: p.csv.ctl is not next to the file"},
		{"matching", []string{"--expect-rows", "20", "--expect-total", "24917.54", "--dry-run", file}, ExitOK,
			"valid: 20 rows, total 24917.54; the file matches --expect-rows/--expect-total (dry run"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			code, out := load(tt.args...)
			if code != tt.code || !strings.Contains(out, tt.want) {
				t.Fatalf("exit %d, want %d with %q:\n%s", code, tt.code, tt.want, out)
			}
		})
	}
	if err := os.WriteFile(file+".ctl", []byte("rows=20\ntotal=24917.53\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if code, out := load(file); code != ExitRejected || !strings.Contains(out, "p.csv.ctl declares 20 rows totalling 24917.53") {
		t.Fatalf("a NAME.ctl at odds: exit %d\n%s", code, out)
	}
	if err := os.WriteFile(file+".ctl", []byte("rows=20\ntotal=24917.54\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if code, out := load("--require-control", file, file+".ctl"); code != ExitOK || !strings.Contains(out, "loaded 20 rows, total 24917.54, as batch ") || !strings.Contains(out, "; the file matches p.csv.ctl") ||
		!strings.Contains(out, "p.csv.ctl: a control file (read beside p.csv), not a payout file: skipped") {
		t.Fatalf("a matching NAME.ctl: exit %d\n%s", code, out)
	}
}
