package clustertest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Binaries are the payout and psp-sandbox executables built for a test.
type Binaries struct {
	Payout  string
	Sandbox string
}

// Build compiles cmd/payout and cmd/psp-sandbox into a temporary directory.
func Build(t testing.TB) Binaries {
	t.Helper()
	// go test puts its own GOROOT/bin first on the PATH of the test binary.
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("the go command is needed to build the binaries: %v", err)
	}
	dir := t.TempDir()
	b := Binaries{Payout: filepath.Join(dir, "payout"), Sandbox: filepath.Join(dir, "psp-sandbox")}
	for out, pkg := range map[string]string{
		b.Payout:  "github.com/acme/payout/cmd/payout",
		b.Sandbox: "github.com/acme/payout/cmd/psp-sandbox",
	} {
		cmd := exec.Command(goBin, "build", "-o", out, pkg)
		if o, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("go build %s: %v\n%s", pkg, err, o)
		}
	}
	return b
}

// Env is a clean environment for a subprocess: the current one without any
// PAYOUT_* variable, plus extra.
func Env(extra ...string) []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "PAYOUT_") {
			env = append(env, kv)
		}
	}
	return append(env, extra...)
}

// Proc is a long-running subprocess whose output goes to a log file.
type Proc struct {
	Name    string
	Log     string // path of the combined stdout/stderr
	cmd     *exec.Cmd
	done    chan struct{}
	waitErr error
}

// StartProc starts bin with args and env; it is killed at cleanup if still
// running.
func StartProc(t testing.TB, name string, env []string, bin string, args ...string) *Proc {
	t.Helper()
	p := &Proc{Name: name, Log: filepath.Join(t.TempDir(), name+".log"), done: make(chan struct{})}
	f, err := os.Create(p.Log)
	if err != nil {
		t.Fatal(err)
	}
	p.cmd = exec.Command(bin, args...)
	p.cmd.Env = env
	p.cmd.Stdout, p.cmd.Stderr = f, f
	if err := p.cmd.Start(); err != nil {
		_ = f.Close()
		t.Fatalf("start %s: %v", name, err)
	}
	go func() {
		p.waitErr = p.cmd.Wait()
		_ = f.Close()
		close(p.done)
	}()
	t.Cleanup(func() {
		select {
		case <-p.done:
		default:
			_ = p.cmd.Process.Kill()
			<-p.done
		}
	})
	return p
}

// Pid is the process id.
func (p *Proc) Pid() int { return p.cmd.Process.Pid }

// Exited reports whether the process has ended.
func (p *Proc) Exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// Stop sends SIGTERM and waits up to grace for the exit, then kills. It
// returns the CPU time the process used and its exit error (nil for
// status 0).
func (p *Proc) Stop(grace time.Duration) (time.Duration, error) {
	select {
	case <-p.done:
	default:
		_ = p.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-p.done:
		case <-time.After(grace):
			_ = p.cmd.Process.Kill()
			<-p.done
			return 0, fmt.Errorf("%s: no exit %s after SIGTERM, killed", p.Name, grace)
		}
	}
	st := p.cmd.ProcessState
	return st.UserTime() + st.SystemTime(), p.waitErr
}

// Tail returns the last n bytes of the log.
func (p *Proc) Tail(n int) string {
	b, _ := os.ReadFile(p.Log)
	if len(b) > n {
		b = b[len(b)-n:]
	}
	return string(b)
}

// Sandbox is a running psp-sandbox process.
type Sandbox struct {
	*Proc
	URL string // http://127.0.0.1:PORT
}

// StartSandbox runs the PSP simulator on a free loopback port with the
// given extra flags and waits for /sandbox/health.
func StartSandbox(t testing.TB, bin string, flags ...string) *Sandbox {
	t.Helper()
	var last string
	for try := 0; try < 5; try++ {
		port := freePort(t, false)
		addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
		args := append([]string{"-addr", addr, "-log-level", "warn"}, flags...)
		p := StartProc(t, fmt.Sprintf("psp-sandbox-%d", try), Env(), bin, args...)
		s := &Sandbox{Proc: p, URL: "http://" + addr}
		deadline := time.Now().Add(10 * time.Second)
		for time.Now().Before(deadline) && !p.Exited() {
			resp, err := http.Get(s.URL + "/sandbox/health")
			if err == nil {
				_ = resp.Body.Close()
				if resp.StatusCode == http.StatusOK {
					return s
				}
			}
			time.Sleep(50 * time.Millisecond)
		}
		last = p.Tail(2000)
		_, _ = p.Stop(time.Second)
	}
	t.Fatalf("psp-sandbox did not start:\n%s", last)
	return nil
}

// Order is a withdrawal order as GET /sandbox/orders shows it.
type Order struct {
	Kind       string    `json:"kind"`
	PSPOrderID string    `json:"pspOrderId"`
	ExternalID string    `json:"externalId"`
	Amount     string    `json:"amount"`
	CreatedAt  time.Time `json:"createdAt"`
	Answer     string    `json:"answer"`
}

// Stats are the simulator's counters (GET /sandbox/stats).
type Stats struct {
	CreatesReceived int            `json:"createsReceived"`
	OrdersStored    int            `json:"ordersStored"`
	StatusQueries   int            `json:"statusQueries"`
	Answers         map[string]int `json:"answers"`
	Seed            int64          `json:"seed"`
}

// Orders returns the stored orders.
func (s *Sandbox) Orders(t testing.TB) []Order {
	t.Helper()
	var o []Order
	s.getJSON(t, "/sandbox/orders", &o)
	return o
}

// Stats returns the counters.
func (s *Sandbox) Stats(t testing.TB) Stats {
	t.Helper()
	var st Stats
	s.getJSON(t, "/sandbox/stats", &st)
	return st
}

// Reset forgets orders and counters.
func (s *Sandbox) Reset(t testing.TB) {
	t.Helper()
	resp, err := http.Post(s.URL+"/sandbox/reset", "application/json", nil)
	if err != nil {
		t.Fatalf("sandbox reset: %v", err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("sandbox reset: HTTP %d", resp.StatusCode)
	}
}

func (s *Sandbox) getJSON(t testing.TB, path string, v any) {
	t.Helper()
	resp, err := http.Get(s.URL + path)
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: HTTP %d %v", path, resp.StatusCode, err)
	}
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
}

// CLI runs the payout binary for one-shot commands against one Redis.
type CLI struct {
	Bin     string
	Redis   string // --redis URL
	KeyFile string // --data-key-file
	Env     []string
}

// NewCLI builds a CLI with a fresh data key (payout keygen).
func NewCLI(t testing.TB, bin, redisURL string) *CLI {
	t.Helper()
	c := &CLI{Bin: bin, Redis: redisURL, Env: Env("PAYOUT_LOG_FORMAT=json")}
	out, _, err := c.Run(context.Background(), "keygen")
	if err != nil {
		t.Fatalf("payout keygen: %v", err)
	}
	c.KeyFile = filepath.Join(t.TempDir(), "data.key")
	if err := os.WriteFile(c.KeyFile, bytes.TrimSpace(out), 0o600); err != nil {
		t.Fatal(err)
	}
	return c
}

// ExitCode returns the exit status of an error from Run, or -1.
func ExitCode(err error) int {
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return ee.ExitCode()
	}
	if err == nil {
		return 0
	}
	return -1
}

// Run runs `payout args...` and returns stdout and stderr.
func (c *CLI) Run(ctx context.Context, args ...string) (stdout, stderr []byte, err error) {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, c.Bin, args...)
	cmd.Env = c.Env
	var o, e bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &e
	err = cmd.Run()
	return o.Bytes(), e.Bytes(), err
}

// Load runs `payout load` on the files; it fails the test unless every file
// loaded cleanly.
func (c *CLI) Load(t testing.TB, files ...string) {
	t.Helper()
	args := append([]string{"load", "--redis", c.Redis, "--data-key-file", c.KeyFile}, files...)
	out, errOut, err := c.Run(context.Background(), args...)
	if err != nil {
		t.Fatalf("payout load: %v\n%s\n%s", err, out, errOut)
	}
}

// StartWorker starts `payout worker` with the common flags and extra ones.
func (c *CLI) StartWorker(t testing.TB, name, pspURL string, extra ...string) *Proc {
	t.Helper()
	args := append([]string{"worker", "--redis", c.Redis, "--data-key-file", c.KeyFile,
		"--psp-url", pspURL, "--metrics-addr", "", "--track-outcome=false"}, extra...)
	return StartProc(t, name, append(append([]string{}, c.Env...), "PAYOUT_PSP_TOKEN=sandbox-token"), c.Bin, args...)
}

// BatchStatus is one entry of `payout status --json`.
type BatchStatus struct {
	ID     string         `json:"id"`
	File   string         `json:"file"`
	Counts map[string]int `json:"counts"`
	Rows   int            `json:"rows"`
}

// Final reports whether every row of the batch is created, rejected or
// needs_review.
func (b BatchStatus) Final() bool {
	return b.Counts["created"]+b.Counts["rejected"]+b.Counts["needs_review"] == b.Rows
}

// Status runs `payout status --json`.
func (c *CLI) Status(ctx context.Context) ([]BatchStatus, error) {
	out, errOut, err := c.Run(ctx, "status", "--json", "--redis", c.Redis)
	if err != nil {
		return nil, fmt.Errorf("payout status: %w: %s", err, errOut)
	}
	var bs []BatchStatus
	if err := json.Unmarshal(out, &bs); err != nil {
		return nil, fmt.Errorf("payout status: %w", err)
	}
	return bs, nil
}

// WaitFinal polls `payout status` until batches batches exist and all are
// final, or fails the test after within. tick, if not nil, is called after
// each poll (to watch workers).
func (c *CLI) WaitFinal(t testing.TB, batches int, within time.Duration, tick func()) []BatchStatus {
	t.Helper()
	deadline := time.Now().Add(within)
	var last []BatchStatus
	for {
		bs, err := c.Status(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		last = bs
		done := len(bs) == batches
		for _, b := range bs {
			done = done && b.Final()
		}
		if done {
			return bs
		}
		if tick != nil {
			tick()
		}
		if time.Now().After(deadline) {
			t.Fatalf("batches not final after %s: %+v", within, last)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// Report is the JSON report of one batch (`payout report --format json`).
type Report struct {
	Batch struct {
		ID    string `json:"id"`
		File  string `json:"file"`
		Rows  int    `json:"rows"`
		Total string `json:"total"`
	} `json:"batch"`
	Rows []struct {
		Line       int    `json:"line"`
		ExternalID string `json:"externalId"`
		Amount     string `json:"amount"`
		State      string `json:"state"`
		PSPOrderID string `json:"pspOrderId"`
		Attempts   int    `json:"attempts"`
		Error      string `json:"error"`
	} `json:"rows"`
	Summary struct {
		Rows       int    `json:"rows"`
		Total      string `json:"total"`
		FileRows   int    `json:"fileRows"`
		FileTotal  string `json:"fileTotal"`
		Reconciled bool   `json:"reconciled"`
		Final      bool   `json:"final"`
	} `json:"summary"`
}

// Report runs `payout report BATCH --format json`. Exit status 1 (some rows
// not created) is not an error.
func (c *CLI) Report(t testing.TB, batch string) Report {
	t.Helper()
	out, errOut, err := c.Run(context.Background(), "report", "--format", "json", "--redis", c.Redis, batch)
	if code := ExitCode(err); code != 0 && code != 1 {
		t.Fatalf("payout report %s: %v\n%s", batch, err, errOut)
	}
	var r Report
	if err := json.Unmarshal(out, &r); err != nil {
		t.Fatalf("payout report %s: %v\n%.2000s", batch, err, out)
	}
	return r
}
