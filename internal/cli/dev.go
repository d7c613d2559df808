package cli

import (
	"context"
	"crypto/rand"
	"encoding/base32"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"github.com/acme/payout/internal/sandbox"
	"github.com/acme/payout/internal/vault"
	"github.com/alicebob/miniredis/v2"
	"golang.org/x/crypto/bcrypt"
)

// devStack is what payout dev starts in one process, each part on its own
// loopback address: the embedded Redis, the PSP simulator, a worker and
// the web console with two named logins (alice and bob, so that four-eyes
// can be tried).
type devStack struct {
	redisAddr, pspAddr, uiAddr string
	settleAfter                string
	logLevel                   string
	dir                        string // the users file, removed at the end
	dataKey                    string
	passwords                  map[string]string
}

// runDev starts the local stack and runs until Ctrl-C (or a part fails).
func runDev(ctx context.Context, e *env, args []string) error {
	fs := newFlags(e, "dev", "[flags]  (a local stack: embedded Redis, PSP simulator, worker and console, until Ctrl-C)")
	s := &devStack{}
	fs.StringVar(&s.redisAddr, "redis-listen", "127.0.0.1:6390", "address of the embedded Redis (in memory: gone at the end)")
	fs.StringVar(&s.pspAddr, "psp-listen", "127.0.0.1:8090", "address of the PSP simulator and its fault API (/sandbox/faults, /sandbox/force)")
	fs.StringVar(&s.uiAddr, "console-listen", "127.0.0.1:8080", "address of the web console and the Asynq web UI")
	fs.StringVar(&s.settleAfter, "settle-after", "5s", "the simulator pays (or fails) an order this long after its creation")
	fs.StringVar(&s.logLevel, "log-level", "warn", "log level of the parts: debug, info, warn, error")
	if err := parse(e, fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usageErr("unexpected argument %q", fs.Arg(0))
	}
	mr := miniredis.NewMiniRedis()
	if err := mr.StartAddr(s.redisAddr); err != nil {
		return usageErr("--redis-listen %s: %v", s.redisAddr, err)
	}
	defer mr.Close()
	if err := s.prepare(); err != nil {
		return err
	}
	defer os.RemoveAll(s.dir)
	return s.run(ctx, e)
}

// prepare makes the data key and the users file with fresh passwords.
func (s *devStack) prepare() error {
	var err error
	if s.dataKey, err = vault.GenerateKey(); err != nil {
		return err
	}
	if s.dir, err = os.MkdirTemp("", "payout-dev-"); err != nil {
		return err
	}
	s.passwords = map[string]string{}
	var lines []string
	for _, name := range []string{"alice", "bob"} {
		b := make([]byte, 10)
		if _, err := rand.Read(b); err != nil {
			return err
		}
		pw := strings.ToLower(base32.StdEncoding.EncodeToString(b))
		hash, err := bcrypt.GenerateFromPassword([]byte(pw), 10)
		if err != nil {
			return err
		}
		s.passwords[name] = pw
		lines = append(lines, name+":"+string(hash))
	}
	return os.WriteFile(s.usersFile(), []byte(strings.Join(lines, "\n")+"\n"), 0o600)
}

func (s *devStack) usersFile() string { return filepath.Join(s.dir, "users") }
func (s *devStack) redisURL() string  { return "redis://" + s.redisAddr + "/0" }

// env is the parts' environment: the caller's, with the stack's data key
// and the simulator's token, and none of the caller's PAYOUT_* settings
// (a PAYOUT_REDIS of the shell must not send the worker elsewhere).
func (s *devStack) env(e *env) *env {
	vars := map[string]string{"PAYOUT_DATA_KEY": s.dataKey, "PAYOUT_PSP_TOKEN": sandbox.DefaultToken,
		// The embedded Redis is in memory by design: nothing of it is real money.
		"PAYOUT_ALLOW_VOLATILE_REDIS": "true"}
	sub := *e
	sub.getenv = func(k string) string {
		if v, ok := vars[k]; ok {
			return v
		}
		if strings.HasPrefix(k, "PAYOUT_") {
			return ""
		}
		return e.getenv(k)
	}
	sub.environ, sub.capture = nil, nil
	return &sub
}

// parts are the commands the stack runs, each as `payout NAME ARGS`.
func (s *devStack) parts() []struct {
	name string
	run  func(context.Context, *env, []string) error
	args []string
} {
	log := []string{"--log-level", s.logLevel}
	redis := []string{"--redis", s.redisURL()}
	return []struct {
		name string
		run  func(context.Context, *env, []string) error
		args []string
	}{
		{"sandbox", runSandbox, append([]string{"--addr", s.pspAddr, "--settle-after", s.settleAfter}, log...)},
		// Outcomes are polled soon: the simulator settles orders in seconds.
		{"worker", runWorker, append(append([]string{"--psp-url", "http://" + s.pspAddr, "--metrics-addr", "",
			"--status-delay", "2s", "--outcome-intervals", "1s,2s,5s,15s"}, redis...), log...)},
		{"ui", runUI, append(append([]string{"--addr", s.uiAddr, "--users", s.usersFile(), "--psp-url", "http://" + s.pspAddr}, redis...), log...)},
	}
}

// run starts every part, prints how to use the stack, and waits for ctx
// or the first part to fail; then stops them all.
func (s *devStack) run(ctx context.Context, e *env) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	sub := s.env(e)
	var wg sync.WaitGroup
	errs := make(chan error, 3)
	for _, p := range s.parts() {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := p.run(ctx, sub, p.args); err != nil && ctx.Err() == nil {
				errs <- fmt.Errorf("payout %s: %w", p.name, err)
			}
		}()
	}
	s.printHelp(e)
	var err error
	select {
	case <-ctx.Done():
	case err = <-errs:
	}
	cancel()
	wg.Wait()
	if err == nil && errors.Is(ctx.Err(), context.Canceled) {
		fmt.Fprintln(e.stderr, "payout dev: stopped; the embedded Redis and its payouts are gone")
	}
	return err
}

func (s *devStack) printHelp(e *env) {
	fmt.Fprintf(e.stdout, `payout dev: a local stack (Ctrl-C stops it; everything is in memory)

  console      http://%[1]s/          sign in as alice (password %[2]s) or bob (%[3]s)
  Asynq UI     http://%[1]s/monitoring/
  PSP sandbox  http://%[4]s           faults: curl -X PUT http://%[4]s/sandbox/faults -d '{"pAmbiguous":0.3}'
  Redis        %[5]s (embedded)

In another terminal:
  export PAYOUT_REDIS=%[5]s PAYOUT_DATA_KEY=%[6]s PAYOUT_ALLOW_VOLATILE_REDIS=true
  export PAYOUT_PSP_URL=http://%[4]s PAYOUT_PSP_TOKEN=%[7]s
  payout load --approval required samples/payouts-good.csv
  payout status
  payout worker --check
`, s.uiAddr, s.passwords["alice"], s.passwords["bob"], s.pspAddr, s.redisURL(), s.dataKey, sandbox.DefaultToken)
}
