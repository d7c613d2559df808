package clustertest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/acme/payout/internal/proof/testenv"
	"github.com/acme/payout/internal/proof/testenv/gobuild"
	"github.com/acme/payout/internal/proof/testenv/proc"
	"github.com/acme/payout/internal/sandbox"
)

// Binaries are the payout and psp-sandbox executables built for the tests.
type Binaries struct {
	Payout  string
	Sandbox string
}

// Build compiles cmd/payout and cmd/psp-sandbox once per test run.
func Build(t testing.TB) Binaries {
	t.Helper()
	return Binaries{
		Payout:  gobuild.Binary(t, "github.com/acme/payout/cmd/payout"),
		Sandbox: gobuild.Binary(t, "github.com/acme/payout/cmd/psp-sandbox"),
	}
}

// StartProc starts bin with args and env, its output in a log file; it is
// killed at cleanup if still running.
func StartProc(t testing.TB, name string, env []string, bin string, args ...string) *proc.Proc {
	t.Helper()
	return proc.StartT(t, proc.Spec{Name: name, Bin: bin, Args: args, Env: env, Log: filepath.Join(t.TempDir(), name+".log")})
}

// Stop stops p (SIGTERM, SIGKILL after grace), fails the test unless it
// exited cleanly, and returns the CPU time it used.
func Stop(t testing.TB, p *proc.Proc, grace time.Duration) time.Duration {
	t.Helper()
	u, err := p.Stop(grace)
	if err == nil && u.ExitCode != 0 {
		err = fmt.Errorf("exit status %d", u.ExitCode)
	}
	if err != nil {
		t.Errorf("%s: exit after SIGTERM: %v\n%s", p.Name(), err, p.Tail(2000))
	}
	return u.CPU
}

// Sandbox is a running psp-sandbox process and the client of its admin API.
type Sandbox struct {
	*proc.Proc
	sandbox.Admin
}

// StartSandbox runs the PSP simulator on a free loopback port with the
// given extra flags and waits for /sandbox/health.
func StartSandbox(t testing.TB, bin string, flags ...string) *Sandbox {
	t.Helper()
	var last string
	for try := 0; try < 5; try++ {
		addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(testenv.Port(t)))
		args := append([]string{"-addr", addr, "-log-level", "warn"}, flags...)
		p := StartProc(t, fmt.Sprintf("psp-sandbox-%d", try), testenv.CleanEnv(), bin, args...)
		s := &Sandbox{Proc: p, Admin: sandbox.Admin{URL: "http://" + addr}}
		err := testenv.Poll(context.Background(), 10*time.Second, 50*time.Millisecond, func() (bool, error) {
			if p.Exited() {
				return false, errors.New("exited")
			}
			return s.Health(context.Background()) == nil, nil
		})
		if err == nil {
			return s
		}
		last = p.Tail(2000)
		_, _ = p.Stop(time.Second)
	}
	t.Fatalf("psp-sandbox did not start:\n%s", last)
	return nil
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
	c := &CLI{Bin: bin, Redis: redisURL, Env: testenv.CleanEnv("PAYOUT_LOG_FORMAT=json", "PAYOUT_ALLOW_VOLATILE_REDIS=true")}
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
func (c *CLI) StartWorker(t testing.TB, name, pspURL string, extra ...string) *proc.Proc {
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
