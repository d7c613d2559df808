package hostile_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/acme/payout/internal/proof/testenv/gobuild"
	"github.com/acme/payout/internal/proof/testenv/hostile"
	"github.com/acme/payout/internal/proof/testenv/proc"
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

// pollHWM reads the process's VmHWM (peak resident set, KiB) from
// /proc every millisecond until it exits, or kills it after hangBound,
// and returns the last value read.
func pollHWM(t *testing.T, p *proc.Proc) int64 {
	t.Helper()
	status := fmt.Sprintf("/proc/%d/status", p.Pid())
	deadline := time.After(hangBound)
	var hwm int64
	for {
		if b, err := os.ReadFile(status); err == nil {
			for line := range strings.Lines(string(b)) {
				if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
					if n, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64); err == nil && n > hwm {
						hwm = n
					}
				}
			}
		}
		select {
		case <-p.Done():
			return hwm
		case <-deadline:
			p.Kill()
			t.Fatalf("still running after %v", hangBound)
		case <-time.After(time.Millisecond):
		}
	}
}

// TestLoadRefusesHostileWorkbooks runs the real payout binary, `payout
// load --dry-run`, on every hostile workbook and checks its refusal, its
// peak RSS (VmHWM, polled) and its time.
func TestLoadRefusesHostileWorkbooks(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the payout binary and runs it on 300 MB zip bombs")
	}
	if raceEnabled {
		// The race detector slows the XML reader tenfold, and the
		// figures would be the detector's: make test runs this test
		// again without -race.
		t.Skip("memory and time are not measured under -race; make test runs this test without it")
	}
	// PAYOUT_TEST_PAYOUT_BIN runs another build (an older one, to see
	// the test fail on it).
	bin := os.Getenv("PAYOUT_TEST_PAYOUT_BIN")
	if bin == "" {
		bin = gobuild.Binary(t, gobuild.ModulePath+"/cmd/payout")
	}
	mr := miniredis.RunT(t)
	dir := t.TempDir()
	run := func(t *testing.T, name string, data []byte) (proc.Usage, string) {
		path := filepath.Join(dir, name+".xlsx")
		if err := os.WriteFile(path, data, 0o600); err != nil {
			t.Fatal(err)
		}
		p := proc.StartT(t, proc.Spec{Name: "payout load", Bin: bin,
			Args: []string{"load", "--dry-run", "--redis", "redis://" + mr.Addr() + "/0", "--insecure-plaintext", path}})
		hwm := pollHWM(t, p)
		u, err := p.Wait()
		if err != nil {
			t.Fatal(err)
		}
		// ru_maxrss of a child of this process starts from this
		// process's own peak (Linux records the old mm's high-water
		// mark at exec), so the child's VmHWM, polled, is the figure.
		u.MaxRSSKB = hwm
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
