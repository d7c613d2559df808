package proc

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/acme/payout/internal/proof/testenv"
)

// The test binary doubles as the subprocess of the tests.
const helperEnv = "PAYOUT_PROC_TEST_HELPER"

func TestMain(m *testing.M) {
	switch os.Getenv(helperEnv) {
	case "":
		os.Exit(m.Run())
	case "sleep":
		fmt.Println("sleeping")
		time.Sleep(time.Minute)
		os.Exit(0)
	case "exit3":
		// Touch 64 MiB so that the peak RSS shows it, print, exit 3.
		b := make([]byte, 64<<20)
		for i := 0; i < len(b); i += 4096 {
			b[i] = 1
		}
		fmt.Println("hello")
		fmt.Println("done")
		fmt.Fprintln(os.Stderr, "to stderr", b[4096])
		os.Exit(3)
	}
	os.Exit(9)
}

func helper(t *testing.T, mode string) Spec {
	t.Helper()
	bin, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return Spec{Name: mode, Bin: bin, Args: []string{"-test.run=^$"}, Env: append(os.Environ(), helperEnv+"="+mode)}
}

func TestRunReportsUsageOutputAndLines(t *testing.T) {
	lines := make(chan string, 8)
	s := helper(t, "exit3")
	s.Lines, s.Log = lines, filepath.Join(t.TempDir(), "stderr")
	u, p, err := Run(context.Background(), s)
	if err != nil {
		t.Fatal(err)
	}
	if u.ExitCode != 3 {
		t.Errorf("exit code %d, want 3", u.ExitCode)
	}
	if u.MaxRSSMB() < 64 || u.MaxRSSMB() > 1024 {
		t.Errorf("peak RSS %.1f MB, want at least the 64 MiB touched", u.MaxRSSMB())
	}
	if u.Wall <= 0 || u.CPU <= 0 {
		t.Errorf("wall %s cpu %s", u.Wall, u.CPU)
	}
	if got := []string{<-lines, <-lines}; got[0] != "hello" || got[1] != "done" {
		t.Errorf("lines %q", got)
	}
	stdout, stderr := p.Output()
	if stdout != "hello\ndone\n" || stderr != "to stderr 1\n" {
		t.Errorf("output %q / %q", stdout, stderr)
	}
	if err := p.Failure(u, "test"); !strings.Contains(err.Error(), "exit 3") || !strings.Contains(err.Error(), "to stderr") {
		t.Errorf("Failure = %v", err)
	}
}

func TestOutputGoesWhereAsked(t *testing.T) {
	log := filepath.Join(t.TempDir(), "both.log")
	var out bytes.Buffer
	for _, s := range []Spec{
		{Log: log},               // both streams appended to the log
		{Log: log, Stdout: &out}, // standard output captured
		{},                       // both in memory
	} {
		h := helper(t, "exit3")
		h.Log, h.Stdout = s.Log, s.Stdout
		u, p, err := Run(context.Background(), h)
		if err != nil || u.ExitCode != 3 {
			t.Fatalf("%+v: exit %d, %v", s, u.ExitCode, err)
		}
		if s.Log == "" {
			if o, e := p.Output(); o != "hello\ndone\n" || e != "to stderr 1\n" {
				t.Errorf("in memory: %q / %q", o, e)
			}
		}
	}
	if b, _ := os.ReadFile(log); string(b) != "hello\ndone\nto stderr 1\nto stderr 1\n" {
		t.Errorf("log %q", b)
	}
	if out.String() != "hello\ndone\n" {
		t.Errorf("captured %q", out.String())
	}
	if _, _, err := Run(context.Background(), Spec{Name: "missing", Bin: filepath.Join(t.TempDir(), "missing")}); err == nil {
		t.Error("a missing binary gave no error")
	}
}

func TestKillAndStop(t *testing.T) {
	for _, how := range []string{"kill", "stop", "cancel"} {
		s := helper(t, "sleep")
		s.Log = filepath.Join(t.TempDir(), "p.log")
		p, err := Start(s)
		if err != nil {
			t.Fatal(err)
		}
		err = testenv.Poll(context.Background(), 10*time.Second, 5*time.Millisecond, func() (bool, error) {
			return p.Tail(100) == "sleeping\n", nil
		})
		if err != nil || p.Exited() {
			t.Fatalf("%s: the helper did not start and stay up: %v", how, err)
		}
		start := time.Now()
		switch how {
		case "kill":
			p.Kill()
			p.Kill() // idempotent
		case "stop":
			if _, err := p.Stop(10 * time.Second); err != nil {
				t.Errorf("stop: %v", err)
			}
		case "cancel":
			ctx, cancel := context.WithCancel(context.Background())
			cancel()
			if _, _, err := Run(ctx, s); !errors.Is(err, context.Canceled) {
				t.Errorf("cancelled run: %v", err)
			}
			p.Kill()
		}
		if !p.Exited() || p.ExitCode() != -1 || time.Since(start) > 5*time.Second {
			t.Errorf("%s: exited=%t code=%d after %s", how, p.Exited(), p.ExitCode(), time.Since(start))
		}
	}
}

func TestTailKeepsTheEnd(t *testing.T) {
	var tl Tail
	for i := 0; i < 5000; i++ {
		fmt.Fprintf(&tl, "line %05d\n", i)
	}
	s := tl.String()
	if len(s) > TailSize || !strings.HasSuffix(s, "line 04999\n") || strings.Contains(s, "line 00000") {
		t.Fatalf("tail of %d bytes ends %q", len(s), s[len(s)-20:])
	}
}
