package bench

import (
	"fmt"
	"os"
	"strings"
	"testing"
	"time"
)

// helperEnv makes the test binary act as a measured subprocess.
const helperEnv = "PAYOUT_BENCH_HELPER"

func TestMain(m *testing.M) {
	if os.Getenv(helperEnv) == "1" {
		// Touch 64 MiB so that the peak RSS shows it, print, exit 3.
		b := make([]byte, 64<<20)
		for i := 0; i < len(b); i += 4096 {
			b[i] = 1
		}
		fmt.Println("hello")
		fmt.Println(BareDoneLine)
		fmt.Fprintln(os.Stderr, "to stderr", b[4096])
		os.Exit(3)
	}
	os.Exit(m.Run())
}

func TestProcReportsUsageOutputAndLines(t *testing.T) {
	lines := make(chan string, 8)
	errFile := t.TempDir() + "/stderr"
	p, err := StartProc(Spec{Name: "helper", Bin: os.Args[0], Args: []string{"-test.run=^$"},
		Env: append(os.Environ(), helperEnv+"=1"), Lines: lines, StderrFile: errFile})
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-p.Exited():
	case <-time.After(20 * time.Second):
		t.Fatal("helper did not exit")
	}
	u, err := p.Wait()
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
	if got := []string{<-lines, <-lines}; got[0] != "hello" || got[1] != BareDoneLine {
		t.Errorf("lines %q", got)
	}
	stdout, stderr := p.Output()
	if stdout != "hello\n"+BareDoneLine+"\n" || !strings.Contains(stderr, "to stderr 1") {
		t.Errorf("output %q / %q", stdout, stderr)
	}
	if err := p.Failure(u, "test"); !strings.Contains(err.Error(), "exit 3") {
		t.Errorf("Failure = %v", err)
	}
}

func TestTailKeepsTheEnd(t *testing.T) {
	tl := newTail()
	for i := 0; i < 5000; i++ {
		fmt.Fprintf(tl, "line %05d\n", i)
	}
	s := tl.String()
	if len(s) > tailSize || !strings.HasSuffix(s, "line 04999\n") || strings.Contains(s, "line 00000") {
		t.Fatalf("tail of %d bytes ends %q", len(s), s[len(s)-20:])
	}
}

func TestCleanEnvDropsPayoutSettings(t *testing.T) {
	t.Setenv("PAYOUT_REDIS_URL", "redis://elsewhere:6379/0")
	env := CleanEnv("PAYOUT_PSP_TOKEN=x")
	for _, kv := range env {
		if strings.HasPrefix(kv, "PAYOUT_REDIS_URL=") {
			t.Fatal("PAYOUT_REDIS_URL leaked into the measured processes")
		}
	}
	if env[len(env)-1] != "PAYOUT_PSP_TOKEN=x" {
		t.Fatalf("extra not appended: %v", env[len(env)-1])
	}
}
