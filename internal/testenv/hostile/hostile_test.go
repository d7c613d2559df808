package hostile_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/acme/payout/internal/testenv/gobuild"
	"github.com/acme/payout/internal/testenv/hostile"
	"github.com/acme/payout/internal/testenv/proc"
	"github.com/alicebob/miniredis/v2"
)

func TestMain(m *testing.M) { os.Exit(gobuild.Main(m)) }

// maxRSS is the bound of the issue: a hostile workbook is refused in at
// most 256 MiB of resident memory.
const maxRSS = 256 << 10 // KiB

// hangBound catches a hang; the figures of the cases are a few seconds
// of CPU at most (docs/file-formats.md).
const hangBound = 2 * time.Minute

var (
	casesOnce sync.Once
	cases     []hostile.Case
)

// Cases are generated once per test process.
func Cases() []hostile.Case {
	casesOnce.Do(func() { cases = hostile.Cases() })
	return cases
}

// TestLoadRefusesHostileWorkbooks runs the real payout binary, `payout
// load --dry-run`, on every hostile workbook and checks its refusal, its
// peak RSS (the kernel's ru_maxrss of the process) and its time.
func TestLoadRefusesHostileWorkbooks(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the payout binary and runs it on 300 MB zip bombs")
	}
	bin := gobuild.Binary(t, gobuild.ModulePath+"/cmd/payout")
	mr := miniredis.RunT(t)
	dir := t.TempDir()
	run := func(t *testing.T, name string, data []byte) (proc.Usage, string) {
		path := filepath.Join(dir, name+".xlsx")
		if err := os.WriteFile(path, data, 0o600); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), hangBound)
		defer cancel()
		u, p, err := proc.Run(ctx, proc.Spec{Name: "payout load", Bin: bin,
			Args: []string{"load", "--dry-run", "--redis", "redis://" + mr.Addr() + "/0", "--insecure-plaintext", path}})
		if err != nil {
			t.Fatal(err)
		}
		stdout, stderr := p.Output()
		t.Logf("%s: %d bytes: peak RSS %.1f MiB, %v wall, %v CPU, exit %d", name, len(data), u.MaxRSSMB(), u.Wall.Round(time.Millisecond), u.CPU.Round(time.Millisecond), u.ExitCode)
		return u, stdout + stderr
	}
	t.Run("good", func(t *testing.T) {
		u, out := run(t, "good", hostile.Good())
		if u.ExitCode != 0 || !strings.Contains(out, "valid: 1 rows, total 10") {
			t.Fatalf("exit %d:\n%s", u.ExitCode, out)
		}
	})
	for _, c := range Cases() {
		t.Run(c.Name, func(t *testing.T) {
			u, out := run(t, c.Name, c.Data)
			if u.ExitCode == 0 || !strings.Contains(out, "refused") || !strings.Contains(out, c.Want) {
				t.Errorf("exit %d, want a refusal saying %q:\n%s", u.ExitCode, c.Want, out)
			}
			if u.MaxRSSKB > maxRSS {
				t.Errorf("peak RSS %.1f MiB, over %d MiB", u.MaxRSSMB(), maxRSS>>10)
			}
		})
	}
}
