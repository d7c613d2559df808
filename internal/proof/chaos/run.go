package chaos

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	mrand "math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/acme/payout/internal/ledger"
	"github.com/acme/payout/internal/lifecycle"
	"github.com/acme/payout/internal/notify"
	"github.com/acme/payout/internal/proof/redisfault"
	"github.com/acme/payout/internal/proof/testenv"
	"github.com/acme/payout/internal/proof/testenv/gobuild"
	"github.com/acme/payout/internal/proof/testenv/proc"
	"github.com/acme/payout/internal/proof/testenv/redistest"
	"github.com/acme/payout/internal/sandbox"
	"github.com/acme/payout/internal/view"
	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"
)

// Folders of the work directory. The leak scan reads every file of the
// work directory except those under skipScan.
const (
	dirBin     = "bin"
	dirSecrets = "secrets"
	dirStaging = "staging"
	dirSpool   = "spool"
	dirLogs    = "logs"
	dirReports = "reports"
	dirUI      = "ui"
	dirRedis   = "redis"
)

// skipScan lists what the leak scan does not read: binaries, the secret
// files themselves, and the payout files (they hold card numbers by
// design) wherever the spool moved them.
var skipScan = map[string]bool{
	dirBin: true, dirSecrets: true, dirStaging: true,
	apiStaging: true, dirSpool + "/inbox": true, dirSpool + "/processing": true, dirSpool + "/done": true, dirSpool + "/failed": true,
}

// tick is how often the conductor looks at its schedule.
const tick = 100 * time.Millisecond

// harness is one run: its processes, schedule and counters.
type harness struct {
	cfg    Config
	out    io.Writer
	ownLog *os.File
	dir    string
	runID  string
	rng    *mrand.Rand
	files  []PayoutFile
	start  time.Time

	payoutBin, sandboxBin string
	clockBin              string   // ClockPkg built ("" when no worker's clock is off)
	env                   []string // base environment of the subprocesses

	redis  *redistest.Server
	rfault *redisfault.Proxy // in front of Redis for the workers (nil: none)
	rdb    *redis.Client
	led    *ledger.Ledger
	insp   *asynq.Inspector

	sandbox      *proc.Proc
	sandboxURL   string
	sandboxToken string
	gw           *Gateway
	tokens       [2]string // the PSP token before and after the rotation
	tokenFile    string
	keyFile      string
	dataKey      string
	caFile       string // the gateway's CA certificate, trusted by the workers (HTTP/2 over TLS)

	ui             *proc.Proc // read-only: the pages fetched for the leak scan
	uiURL          string
	ops            *proc.Proc // read-write: the API the suite deletes and archives tasks through
	opsURL         string
	uiUser, uiPass string

	workers []*proc.Proc
	skewed  map[*proc.Proc]bool   // workers whose task clock is off
	cbAddr  map[*proc.Proc]string // each worker's callback listener (Config.Callbacks)

	callbackSecret string       // shared by the sandbox and the workers (Config.Callbacks)
	fwd            *Forwarder   // the sandbox's callbacks go through it to live workers
	forge          *forger      // the suite's own forged callbacks
	procs          []*proc.Proc // every long-running process, killed at the end
	nProcs         map[string]int

	kills, restarts, rotations     int
	tasksDeleted, tasksArchived    int
	archived                       int // batches archived by the end (finish)
	pauses, workerExits            int
	loaderRuns, loaderInfra        int
	interruptedLoads, orphaned     int
	finishing                      bool // finish runs the loader: no interruption then
	problems                       []string
	lastPoll, lastProgress         time.Time
	registered, open, batchesReady int64

	ctl controls // approvals and the cancel (Config.Approval)

	webhookSecret string         // PAYOUT_NOTIFY_SECRET of the workers (Config.Events)
	events        *EventReceiver // every worker's --notify-url
	verify        verifyFunc     // the receiver's verifier (node, or Go outside CI)
	verifierName  string

	api *apiSubmission // the file submitted through payout api (Config.APISubmit)
}

// Run carries out one chaos run (see the package documentation) and
// returns its figures; it prints its progress, the findings and the
// figures line to out. The error matches ErrUnsafe when the figures show a
// broken promise (duplicates, lost payouts, leaks, mismatches) and
// ErrHarness when the run could not be carried out; the figures are
// meaningful in both cases. Every process it started is killed before it
// returns.
func Run(ctx context.Context, cfg Config, out io.Writer) (fig Figures, err error) {
	if err := cfg.Validate(); err != nil {
		return fig, fmt.Errorf("%w: config: %w", ErrHarness, err)
	}
	h, err := newHarness(cfg, out)
	if err != nil {
		return fig, fmt.Errorf("%w: %w", ErrHarness, err)
	}
	defer func() {
		// A broken build's run that caught its duplicates went as it
		// should: its work directory goes too.
		caught := (cfg.Broken || cfg.BrokenReplay) && fig.Duplicates > 0 && errors.Is(err, ErrUnsafe)
		h.close(err == nil || caught)
	}()

	if err := h.setUp(ctx); err != nil {
		return fig, fmt.Errorf("%w: %w", ErrHarness, err)
	}
	driveErr := h.drive(ctx)
	if errors.Is(driveErr, context.Canceled) || errors.Is(driveErr, context.DeadlineExceeded) {
		return fig, driveErr
	}
	if driveErr != nil && !errors.Is(driveErr, testenv.ErrDeadline) {
		h.problem("%v", driveErr)
	}
	fig, err = h.finish(ctx)
	if err != nil {
		return fig, fmt.Errorf("%w: %w", ErrHarness, err)
	}
	if err := fig.Err(); err != nil {
		return fig, err
	}
	if len(h.problems) > 0 {
		return fig, fmt.Errorf("%w: %s", ErrHarness, strings.Join(h.problems, "; "))
	}
	return fig, nil
}

func newHarness(cfg Config, out io.Writer) (*harness, error) {
	if out == nil {
		out = io.Discard
	}
	seed := cfg.Seed
	if seed == 0 {
		seed = mrand.Int64N(1<<62) + 1
	}
	cfg.Seed = seed
	if cfg.ModuleDir == "" {
		wd, err := os.Getwd()
		if err != nil {
			return nil, err
		}
		if cfg.ModuleDir, err = gobuild.FindModule(wd); err != nil {
			return nil, err
		}
	}
	dir := cfg.WorkDir
	if dir == "" {
		d, err := os.MkdirTemp("", "payout-chaos-")
		if err != nil {
			return nil, err
		}
		dir = d
	}
	for _, sub := range []string{dirBin, dirSecrets, dirStaging, dirSpool + "/inbox", dirLogs, dirReports, dirUI, dirRedis} {
		if err := os.MkdirAll(filepath.Join(dir, sub), 0o700); err != nil {
			return nil, err
		}
	}
	// The suite's own lines go to logs/chaos.log as well, and are
	// scanned like every other log.
	own, err := os.OpenFile(filepath.Join(dir, dirLogs, "chaos.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, err
	}
	h := &harness{
		cfg: cfg, out: io.MultiWriter(out, own), ownLog: own, dir: dir,
		rng:    mrand.New(mrand.NewPCG(uint64(seed), 0xc4a05)),
		nProcs: map[string]int{}, skewed: map[*proc.Proc]bool{}, cbAddr: map[*proc.Proc]string{},
	}
	h.runID = fmt.Sprintf("%06x", h.rng.Uint32()&0xffffff)
	h.files = Generate(h.rng, h.runID, cfg.Rows, cfg.Files)
	h.planControls()
	return h, nil
}

func (h *harness) path(parts ...string) string {
	return filepath.Join(append([]string{h.dir}, parts...)...)
}

func (h *harness) logf(format string, args ...any) {
	el := 0.0
	if !h.start.IsZero() {
		el = time.Since(h.start).Seconds()
	}
	fmt.Fprintf(h.out, "chaos %6.1fs  %s\n", el, fmt.Sprintf(format, args...))
}

func (h *harness) problem(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	h.problems = append(h.problems, msg)
	h.logf("PROBLEM: %s", msg)
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// setUp builds the binaries and starts Redis, the sandbox, the gateway,
// the workers and the UI. The run's clock starts with the sandbox.
func (h *harness) setUp(ctx context.Context) error {
	c := h.cfg
	h.logf("work directory %s, seed %d, run %s: %d rows in %d files, %d workers x %d, broken=%t, broken-replay=%t",
		h.dir, c.Seed, h.runID, c.Rows, c.Files, c.Workers, c.Concurrency, c.Broken, c.BrokenReplay)
	if err := h.build(ctx); err != nil {
		return err
	}
	for _, f := range h.files {
		if err := os.WriteFile(h.path(dirStaging, f.Name), f.CSV(), 0o600); err != nil {
			return err
		}
	}

	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "PAYOUT_") {
			h.env = append(h.env, kv)
		}
	}

	if err := h.startRedis(ctx); err != nil {
		return err
	}
	if err := h.makeSecrets(ctx); err != nil {
		return err
	}
	if err := h.startSandbox(ctx); err != nil {
		return err
	}
	if err := h.startGateway(); err != nil {
		return err
	}
	for i := 0; i < c.Workers; i++ {
		if err := h.startWorker(i == 0 && c.ClockOffset != 0); err != nil {
			return err
		}
	}
	var err error
	if h.ui, h.uiURL, err = h.startUI(ctx, "ui", true); err != nil {
		// The run goes on without the UI (its pages are then not
		// scanned), and fails as a harness failure at the end.
		h.problem("web UI: %v", err)
		h.ui = nil
	}
	if c.APISubmit {
		if err := h.startAPI(ctx); err != nil {
			return err
		}
	}
	if c.TaskDeleteEvery > 0 {
		if h.ops, h.opsURL, err = h.startUI(ctx, "ui-ops", false); err != nil {
			h.problem("web UI (read-write): %v", err)
			h.ops = nil
		}
	}
	return nil
}

// build builds the binaries the run starts.
func (h *harness) build(ctx context.Context) error {
	t := time.Now()
	bins := binaries(h.cfg)
	paths, err := gobuild.Build(ctx, gobuild.Options{ModuleDir: h.cfg.ModuleDir, Log: h.path(dirLogs, "build.log")}, h.path(dirBin), bins)
	if err != nil {
		return err
	}
	h.payoutBin, h.sandboxBin, h.clockBin = paths["payout"], paths["psp-sandbox"], paths["payout-clock"]
	names := make([]string, len(bins))
	for i, b := range bins {
		names[i] = b.Name
		if len(b.Tags) > 0 {
			names[i] += " (" + strings.Join(b.Tags, ",") + ")"
		}
	}
	h.logf("built %s in %s", strings.Join(names, ", "), time.Since(t).Round(100*time.Millisecond))
	return nil
}

// startRedis starts Redis (with its append-only file) and, with
// RedisReplyDrop, the proxy the workers reach it through.
func (h *harness) startRedis(ctx context.Context) error {
	c := h.cfg
	var err error
	if h.redis, err = redistest.Launch(ctx, redistest.Config{Dir: h.path(dirRedis), Log: h.path(dirLogs, "redis.log"), AOF: true}); err != nil {
		return err
	}
	h.rdb = redis.NewClient(&redis.Options{Addr: h.redis.Addr, DialTimeout: time.Second, ReadTimeout: 5 * time.Second, WriteTimeout: 5 * time.Second})
	h.led = ledger.New(h.rdb)
	h.insp = asynq.NewInspectorFromRedisClient(h.rdb)
	if c.RedisReplyDrop > 0 {
		// A new upstream connection per client connection: the proxy
		// outlives the Redis restart.
		h.rfault, err = redisfault.Start(redisfault.Config{
			Upstream: h.redis.Addr, Seed: c.Seed,
			Rules: []redisfault.Rule{{Commands: []string{"EVAL", "EVALSHA"}, Probability: c.RedisReplyDrop}},
		})
		if err != nil {
			return err
		}
		h.logf("the workers reach Redis through a proxy that loses %.1f%% of their script replies", 100*c.RedisReplyDrop)
	}
	return nil
}

// makeSecrets makes the data key (payout keygen), the PSP tokens, the UI
// password and, with Callbacks, the callback secret with its forger and
// forwarder.
func (h *harness) makeSecrets(ctx context.Context) error {
	c := h.cfg
	code, key, err := runOnce(ctx, h.payoutBin, []string{"keygen"}, h.env, h.path(dirLogs, "keygen.log"), true)
	if err != nil || code != 0 {
		return fmt.Errorf("payout keygen: exit %d: %v", code, err)
	}
	h.dataKey = strings.TrimSpace(string(key))
	h.keyFile = h.path(dirSecrets, "data.key")
	if err := writeSecret(h.keyFile, h.dataKey); err != nil {
		return err
	}
	h.tokens = [2]string{randomHex(20), randomHex(20)}
	h.sandboxToken = randomHex(20)
	h.tokenFile = h.path(dirSecrets, "psp.token")
	if err := writeSecret(h.tokenFile, h.tokens[0]); err != nil {
		return err
	}
	h.uiUser, h.uiPass = "chaos", randomHex(16)
	if c.Events {
		if err := h.startEvents(ctx); err != nil {
			return err
		}
	}
	if c.Callbacks {
		h.callbackSecret = randomHex(20)
		h.forge = newForger(h.callbackSecret)
		if h.fwd, err = NewForwarder(c.Seed); err != nil {
			return err
		}
		h.logf("the sandbox settles orders after %s (%.0f%% fail) and sends its callbacks (%.0f%% twice, delayed up to %s) through a forwarder to the live workers",
			c.SettleAfter, 100*c.PFail, 100*c.PCallbackDup, c.CallbackDelay)
	}
	return nil
}

// startGateway starts the token gateway in front of the sandbox and, with
// H2, its HTTP/2 TLS listener.
func (h *harness) startGateway() error {
	c := h.cfg
	var err error
	if h.gw, err = NewGateway(h.sandboxURL, h.sandboxToken, h.tokens[0]); err != nil {
		return err
	}
	if c.H2 {
		ca, err := h.gw.StartH2(H2Config{ResetP: c.H2Reset, Seed: c.Seed})
		if err != nil {
			return err
		}
		h.caFile = h.path(dirSecrets, "gateway-ca.pem")
		if err := os.WriteFile(h.caFile, ca, 0o600); err != nil {
			return err
		}
		h.logf("the workers reach the PSP over HTTP/2 with TLS; %.0f%% of the creates the sandbox answers 200 get their stream reset", 100*c.H2Reset)
	}
	return nil
}

// workerRedis is the Redis URL of the workers: the fault proxy when there
// is one.
func (h *harness) workerRedis() string {
	if h.rfault != nil {
		return "redis://" + h.rfault.Addr() + "/0"
	}
	return h.redis.URL()
}

func (h *harness) startSandbox(ctx context.Context) error {
	c := h.cfg
	port, err := testenv.FreePort()
	if err != nil {
		return err
	}
	addr := "127.0.0.1:" + strconv.Itoa(port)
	args := []string{
		"--addr", addr, "--log-level", "info",
		"--p-ambiguous", strconv.FormatFloat(c.PAmbiguous, 'g', -1, 64),
		"--p-refuse", strconv.FormatFloat(c.PRefuse, 'g', -1, 64),
		"--status-lag", c.StatusLag.String(), "--latency", c.Latency.String(),
		"--hang-for", c.HangFor.String(), "--seed", strconv.FormatInt(c.Seed, 10),
	}
	if c.Outage != "" {
		args = append(args, "--outage", c.Outage)
	}
	if c.SettleAfter > 0 {
		args = append(args, "--settle-after", c.SettleAfter.String(), "--p-fail", strconv.FormatFloat(c.PFail, 'g', -1, 64))
	}
	env := append(append([]string(nil), h.env...), "PAYOUT_SANDBOX_TOKEN="+h.sandboxToken)
	if h.fwd != nil {
		args = append(args, "--callback-url", h.fwd.URL(),
			"--p-callback-dup", strconv.FormatFloat(c.PCallbackDup, 'g', -1, 64), "--callback-delay", c.CallbackDelay.String())
		env = append(env, "PAYOUT_SANDBOX_CALLBACK_SECRET="+h.callbackSecret)
	}
	p, err := startProc("psp-sandbox", h.sandboxBin, args, env, h.path(dirLogs, "psp-sandbox.log"))
	if err != nil {
		return err
	}
	h.start = time.Now() // the outage window counts from here
	h.sandbox = p
	h.procs = append(h.procs, p)
	h.sandboxURL = "http://" + addr
	err = testenv.Poll(ctx, 15*time.Second, 20*time.Millisecond, func() (bool, error) {
		if p.Exited() {
			return false, fmt.Errorf("psp-sandbox exited (code %d, see logs/psp-sandbox.log)", p.ExitCode())
		}
		return h.sandboxAdmin().Health(ctx) == nil, nil
	})
	if err != nil || c.ForceHangs == 0 {
		return err
	}
	force := sandbox.Force{Fault: sandbox.FaultHang, Count: c.ForceHangs, Store: true, Op: sandbox.OpWithdrawalCreate}
	return h.sandboxAdmin().Force(ctx, force)
}

// sandboxAdmin is the client of the simulator's admin API.
func (h *harness) sandboxAdmin() sandbox.Admin { return sandbox.Admin{URL: h.sandboxURL} }

// startWorker starts a worker; skewed runs the ClockPkg binary with its
// task clock ClockOffset off.
func (h *harness) startWorker(skewed bool) error {
	c := h.cfg
	h.nProcs["worker"]++
	n := h.nProcs["worker"]
	args := []string{
		"worker", "--redis", h.workerRedis(), "--psp-url", h.gw.URL(), "--psp-token-file", h.tokenFile,
		"--data-key-file", h.keyFile, "--concurrency", strconv.Itoa(c.Concurrency),
		"--status-delay", c.StatusDelay.String(), "--absent-spacing", c.AbsentSpacing.String(),
		"--absent-checks", strconv.Itoa(c.AbsentChecks), "--max-creates", strconv.Itoa(c.MaxCreates),
		"--max-status-checks", strconv.Itoa(c.MaxStatusChecks), "--psp-timeout", c.PSPTimeout.String(),
		"--reconcile-interval", c.ReconcileInterval.String(), "--reconcile-grace", c.ReconcileGrace.String(),
		"--metrics-addr=", "--log-format", "json", "--log-level", "info",
	}
	if c.Tracking() {
		args = append(args, "--outcome-intervals", c.OutcomeIntervals, "--outcome-window", c.OutcomeWindow.String())
	} else {
		// The simulator keeps every order Created: created is final.
		args = append(args, "--track-outcome=false")
	}
	if h.caFile != "" {
		args = append(args, "--psp-ca-file", h.caFile)
	}
	name := fmt.Sprintf("worker-%03d", n)
	bin, env := h.payoutBin, append([]string(nil), h.env...)
	if h.events != nil {
		args = append(args, "--notify-url", h.events.URL())
		env = append(env, notify.SecretEnv+"="+h.webhookSecret)
	}
	if skewed {
		name += "-clock"
		bin = h.clockBin
		env = append(env, ClockEnv+"="+c.ClockOffset.String())
	}
	var cbAddr string
	if h.fwd != nil {
		port, err := testenv.FreePort()
		if err != nil {
			return err
		}
		cbAddr = "127.0.0.1:" + strconv.Itoa(port)
		// Every callback comes from 127.0.0.1 (the forwarder, the suite):
		// no per-source limit worth the name.
		args = append(args, "--callback-addr", cbAddr, "--callback-rate", "10000")
		env = append(env, "PAYOUT_CALLBACK_SECRET="+h.callbackSecret)
	}
	p, err := startProc(name, bin, args, env, h.path(dirLogs, name+".log"))
	if err != nil {
		return err
	}
	h.skewed[p] = skewed
	if cbAddr != "" {
		h.cbAddr[p] = cbAddr
	}
	h.workers = append(h.workers, p)
	h.procs = append(h.procs, p)
	h.publishCallbackAddrs()
	return nil
}

// publishCallbackAddrs tells the forwarder the callback listeners of the
// workers running now.
func (h *harness) publishCallbackAddrs() {
	if h.fwd == nil {
		return
	}
	h.fwd.SetTargets(h.liveCallbackAddrs())
}

func (h *harness) liveCallbackAddrs() []string {
	var addrs []string
	for _, w := range h.workers {
		if a := h.cbAddr[w]; a != "" && !w.Exited() {
			addrs = append(addrs, a)
		}
	}
	return addrs
}

// startUI starts `payout ui` named name (its log is logs/NAME.log) with
// basic auth, read-only or not, and returns it with its base URL.
func (h *harness) startUI(ctx context.Context, name string, readOnly bool) (*proc.Proc, string, error) {
	port, err := testenv.FreePort()
	if err != nil {
		return nil, "", err
	}
	addr := "127.0.0.1:" + strconv.Itoa(port)
	env := append(append([]string(nil), h.env...), "PAYOUT_UI_USER="+h.uiUser, "PAYOUT_UI_PASSWORD="+h.uiPass)
	args := []string{"ui", "--addr", addr, "--redis", h.redis.URL(), "--log-format", "json"}
	if readOnly {
		args = append(args, "--read-only")
	}
	p, err := startProc(name, h.payoutBin, args, env, h.path(dirLogs, name+".log"))
	if err != nil {
		return nil, "", err
	}
	h.procs = append(h.procs, p)
	url := "http://" + addr
	return p, url, testenv.Poll(ctx, 15*time.Second, 50*time.Millisecond, func() (bool, error) {
		if p.Exited() {
			return false, fmt.Errorf("payout ui exited (code %d, see logs/%s.log)", p.ExitCode(), name)
		}
		return httpGet(ctx, url+"/healthz", "", "", nil) == nil, nil
	})
}

// loaderResult is the end of one loader run.
type loaderResult struct {
	code   int
	err    error
	killed string // the batch whose load the suite killed mid-file ("": none)
}

// startLoader runs `payout load --spool` once in the background. While
// InterruptLoads are due, it kills the run (SIGKILL) as soon as a batch is
// loading with rows registered: the middle of a file.
func (h *harness) startLoader(ctx context.Context) <-chan loaderResult {
	ch := make(chan loaderResult, 1)
	args := []string{"load", "--spool", h.path(dirSpool), "--delivery", "rename", "--settle", "0s", "--redis", h.redis.URL(),
		"--data-key-file", h.keyFile, "--log-format", "json", "--archive-after", h.cfg.ArchiveAfter.String()}
	args = append(args, h.loaderApprovalArgs()...)
	p, err := startProc("loader", h.payoutBin, args, h.env, h.path(dirLogs, "loader.log"))
	if err != nil {
		ch <- loaderResult{err: err}
		return ch
	}
	interrupt := !h.finishing && h.interruptedLoads < h.cfg.InterruptLoads
	go func() {
		var killed string
		if interrupt {
			killed = h.killMidFile(ctx, p)
		}
		select {
		case <-p.Done():
		case <-ctx.Done():
			p.Kill()
			ch <- loaderResult{err: ctx.Err()}
			return
		}
		u, err := p.Wait()
		ch <- loaderResult{code: u.ExitCode, err: err, killed: killed}
	}()
	return ch
}

// killMidFile watches the ledger while the loader p runs and kills p once
// a batch it works on is loading with rows registered; it returns that
// batch ("" when p ended first).
func (h *harness) killMidFile(ctx context.Context, p *proc.Proc) string {
	t := time.NewTicker(10 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-p.Done():
			return ""
		case <-ctx.Done():
			return ""
		case <-t.C:
		}
		sts, err := view.New(h.led.Redis()).Statuses(ctx)
		if err != nil {
			continue
		}
		for _, b := range sts {
			if b.Phase == lifecycle.PhaseLoading && !b.Interrupted && b.Counts.Rows[lifecycle.Queued] > 0 {
				p.Kill()
				return b.ID
			}
		}
	}
}

// drop moves a staged file into the inbox (a rename: the loader never
// sees half a file).
func (h *harness) drop(f PayoutFile) error {
	return os.Rename(h.path(dirStaging, f.Name), h.path(dirSpool, "inbox", f.Name))
}

// close kills every process still running and removes the work directory
// after a passing run (unless asked to keep it).
func (h *harness) close(passed bool) {
	for _, p := range h.procs {
		p.Kill()
	}
	if h.redis != nil {
		h.redis.Kill()
	}
	if h.rfault != nil {
		_ = h.rfault.Close()
	}
	if h.gw != nil {
		h.gw.Close()
	}
	if h.forge != nil {
		h.forge.wait()
	}
	if h.fwd != nil {
		h.fwd.Close()
	}
	if h.events != nil {
		h.events.Close()
	}
	if h.api != nil {
		h.api.proxy.Close()
	}
	if h.rdb != nil {
		_ = h.rdb.Close()
	}
	defer h.ownLog.Close()
	if passed && !h.cfg.KeepWork && h.cfg.WorkDir == "" {
		_ = os.RemoveAll(h.dir)
		return
	}
	h.logf("work directory kept: %s", h.dir)
}
