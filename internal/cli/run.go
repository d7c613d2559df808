package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"strings"
	"time"

	"github.com/acme/payout/internal/ledger"
	"github.com/acme/payout/internal/lifecycle"
	"github.com/acme/payout/internal/loader"
	"github.com/acme/payout/internal/money"
	"github.com/acme/payout/internal/psp"
	"github.com/acme/payout/internal/report"
	"github.com/acme/payout/internal/results"
	"github.com/acme/payout/internal/sandbox"
	"github.com/acme/payout/internal/vault"
	"github.com/acme/payout/internal/view"
	"github.com/acme/payout/internal/worker"
	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
	"github.com/rs/zerolog"
)

// addSandboxFlags registers the simulator's flags on fs, prefixing with
// "sandbox-" those whose names payout already uses.
func addSandboxFlags(fs *flag.FlagSet) *sandbox.Config {
	own := flag.NewFlagSet("sandbox", flag.ContinueOnError)
	cfg := sandbox.RegisterFlags(own)
	own.VisitAll(func(f *flag.Flag) {
		name := f.Name
		if strings.HasPrefix(name, "tls-") || name == "p-h2-reset" {
			return // the in-process simulator is reached over plain HTTP
		}
		if strings.HasPrefix(name, "callback-") || name == "p-callback-dup" {
			return // callbacks are for the standalone simulator (payout sandbox)
		}
		if fs.Lookup(name) != nil || name == "token" {
			name = "sandbox-" + name
		}
		fs.Var(f.Value, name, "with --sandbox: "+f.Usage)
	})
	return cfg
}

// runCmd is one `payout run`: its flags, then what each step sets up for
// the next one.
type runCmd struct {
	e *env
	// flags
	lf                     logFlags
	rf                     redisFlags
	kf                     keyFlags
	ff                     fileFlags
	ef                     enqueueFlags
	af                     approvalFlags
	vf                     velocityFlags
	relf                   releaseFlags
	nf                     notifyFlags
	cf                     controlFlags
	pf                     pspFlags
	pspCA, pspCert, pspKey string
	wf                     workerFlags
	df                     durabilityFlags
	useSbx                 bool
	sbx                    *sandbox.Config
	out, format            string
	partial                bool
	timeout                time.Duration
	showRows               int
	embMax                 int             // --embedded-max-rows
	set                    map[string]bool // flags given on the command line or by the environment
	path                   string          // the payout file
	args                   []string        // the command line, for the one to suggest

	// set up by the steps
	log    zerolog.Logger
	fopts  loader.Options
	wcfg   worker.Config
	rdb    redis.UniversalClient
	ring   *vault.Keyring
	tokens psp.TokenSource
	client *psp.Client
	led    *ledger.Ledger
	ld     *loader.Loader
}

// runRun loads one file, works it off with an in-process worker, waits
// until every payout is final and writes the result file.
func runRun(ctx context.Context, e *env, args []string) error {
	r := &runCmd{e: e}
	if err := r.parse(args); err != nil {
		return err
	}
	if err := r.configure(); err != nil {
		return err
	}
	closeRedis, err := r.openRedis(ctx)
	if err != nil {
		return err
	}
	defer closeRedis()
	closePSP, err := r.openPSP(ctx)
	if err != nil {
		return err
	}
	defer closePSP()
	if err := r.beforeLoad(); err != nil {
		return err
	}
	res, err := r.load(ctx)
	if err != nil {
		return err
	}
	batch := res.Batch
	if res.DuplicateOf != nil {
		batch = res.DuplicateOf.ID
	}
	return r.work(ctx, batch, len(res.Errors) > 0)
}

// parse registers and parses the flags of payout run.
func (r *runCmd) parse(args []string) error {
	fs := newFlags(r.e, "run", "[flags] FILE")
	r.lf.register(fs)
	r.rf.register(fs)
	r.kf.register(fs)
	r.ff.register(fs)
	r.ef.register(fs)
	r.af.register(fs)
	r.vf.register(fs)
	r.relf.register(fs)
	r.nf.register(fs)
	r.cf.register(fs, false)
	r.pf.register(fs)
	fs.StringVar(&r.pspCA, "psp-ca-file", "", "PEM CA certificates that sign the PSP's certificate, trusted instead of the system roots; re-read when it changes")
	fs.StringVar(&r.pspCert, "psp-client-cert", "", "PEM client certificate for mutual TLS with the PSP (with --psp-client-key); re-read when it changes")
	fs.StringVar(&r.pspKey, "psp-client-key", "", "PEM private key of --psp-client-cert; re-read when it changes")
	r.wf.register(fs)
	r.df.registerRun(fs)
	fs.BoolVar(&r.useSbx, "sandbox", false, "start the PSP simulator in-process and send payouts to it")
	r.sbx = addSandboxFlags(fs)
	fs.StringVar(&r.out, "out", "", "result file (default: NAME.result.csv next to the input)")
	fs.StringVar(&r.format, "format", "csv", "result file format: csv or json")
	fs.BoolVar(&r.partial, "partial", false, "load the valid rows of a file that has invalid ones")
	fs.DurationVar(&r.timeout, "timeout", 0, "stop waiting after this long and report what is known (0: wait until every payout is final)")
	fs.IntVar(&r.showRows, "show-rows", 50, "print the result rows as a table when the file has at most this many")
	fs.IntVar(&r.embMax, "embedded-max-rows", DefaultEmbeddedMaxRows, "without --redis, warn before loading a file of more rows than this (0: never) and show the command line for a real Redis")
	if err := parse(r.e, fs, args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		fs.Usage()
		return usageErr("give exactly one payout file")
	}
	r.path = fs.Arg(0)
	r.args = args
	r.set = map[string]bool{}
	fs.Visit(func(f *flag.Flag) { r.set[f.Name] = true })
	return nil
}

// configure checks the flags and builds the loader's options and the
// worker's configuration; every problem of the worker flags, the format
// and the PSP choice is reported at once.
func (r *runCmd) configure() error {
	e := r.e
	var err error
	if r.log, err = r.lf.logger(e); err != nil {
		return err
	}
	if !r.useSbx {
		r.log = r.df.logger(r.log)
	}
	fopts, err := r.ff.options()
	if err != nil {
		return err
	}
	expect, err := r.cf.expect(1, false)
	if err != nil {
		return err
	}
	approval, err := r.af.options(e)
	if err != nil {
		return err
	}
	if err := r.af.roles.mayLoad(approval.By); err != nil {
		return err
	}
	r.fopts = loader.Options{File: fopts, Partial: r.partial, EnqueueWorkers: r.ef.concurrency, Approval: approval,
		Expect: expect, RequireControl: r.cf.require}
	if r.fopts.Velocity, err = r.vf.options(); err != nil {
		return err
	}
	if r.fopts.Release, err = r.relf.options(); err != nil {
		return err
	}
	r.fopts.File.PayDateColumn = r.relf.column
	var probs problems
	r.wcfg = r.wf.config(&r.pf, &probs)
	r.wcfg.Queue = e.hooks.Queue
	if r.format != report.CSV && r.format != report.JSON {
		probs.flag("format", "--format %q: want csv or json", r.format)
	}
	if r.useSbx {
		if err := r.sbx.Validate(); err != nil {
			probs.add("%v", err)
		}
	} else if r.pf.url == "" {
		probs.flag("psp-url", "--psp-url (PAYOUT_PSP_URL) is required, or --sandbox for the simulator")
	} else {
		r.pf.checkURL(&probs)
	}
	if err := probs.err(); err != nil {
		return err
	}
	if !r.useSbx && r.embedded() {
		return r.needDurableRedis()
	}
	if err := r.nf.check(e); err != nil {
		return err
	}
	if r.useSbx && r.sbx.SettleAfter == 0 && r.wcfg.Outcome.Track {
		// The simulator would keep every order "Created": nothing to follow.
		r.wcfg.Outcome.Track = false
		fmt.Fprintln(e.stderr, "note: the simulator settles no orders (--settle-after 0): created is final; give --settle-after to see paid and failed")
	}
	if r.out == "" {
		r.out = strings.TrimSuffix(r.path, ".csv") + ".result." + r.format
	}
	return nil
}

// embedded reports whether run uses its own in-process Redis: no --redis
// on the command line or in the environment (parse marks a flag set from
// its variable as set).
func (r *runCmd) embedded() bool {
	return !r.set["redis"]
}

// needDurableRedis refuses a run against a real PSP on the embedded Redis:
// its ledger dies with the process, so a rerun after a kill or a timeout
// would create every order again. The error shows the command line to use
// instead: the same arguments behind a durable Redis and a data key.
func (r *runCmd) needDurableRedis() error {
	var b strings.Builder
	b.WriteString("against a real PSP, run needs a durable Redis (--redis or PAYOUT_REDIS): the embedded one dies with this command and a rerun after an interruption would create every order again.\n")
	b.WriteString("Start one and run again with it (a rerun of the same file then resumes the same batch and never creates an order twice):\n")
	b.WriteString("  redis-server --appendonly yes --appendfsync always &\n")
	line := []string{"payout", "run", "--redis", "redis://127.0.0.1:6379/0"}
	if r.e.getenv("PAYOUT_DATA_KEY") == "" && !r.set["data-key-file"] {
		b.WriteString("  (umask 077; payout keygen > data.key)\n")
		line = append(line, "--data-key-file", "data.key")
	}
	for _, a := range r.args {
		line = append(line, shellWord(redactUserinfo(a)))
	}
	b.WriteString("  " + strings.Join(line, " "))
	b.WriteString("\n(or --sandbox to try it against the built-in simulator on the embedded Redis)")
	return usageErr("%s", b.String())
}

// openRedis connects the configured Redis, else starts an embedded one
// with an ephemeral data key.
func (r *runCmd) openRedis(ctx context.Context) (closeAll func(), err error) {
	if !r.embedded() {
		if r.rdb, err = r.rf.open(ctx, r.e); err != nil {
			return nil, err
		}
		if r.ring, err = r.kf.keyring(r.e); err != nil {
			r.rdb.Close()
			return nil, err
		}
		if !r.useSbx {
			// Against a real PSP the ledger must outlive a Redis crash:
			// a rerun trusts it not to create an order twice.
			if err := r.df.apply(ctx, r.rdb, &r.wcfg, r.log); err != nil {
				r.rdb.Close()
				return nil, err
			}
		}
		checkHashLimits(ctx, r.rdb, r.log)
		return func() { r.rdb.Close() }, nil
	}
	mr := miniredis.NewMiniRedis()
	if err := mr.Start(); err != nil {
		return nil, infraErr(fmt.Errorf("embedded redis: %w", err))
	}
	r.rdb = redis.NewClient(&redis.Options{Addr: mr.Addr()})
	r.ring = vault.Ephemeral()
	restoreGC := tuneEmbeddedGC(r.e.getenv)
	fmt.Fprintln(r.e.stderr, "payout run: no --redis given: using an embedded in-process Redis; all state is lost when this command exits")
	return func() { r.rdb.Close(); mr.Close(); restoreGC() }, nil
}

// openPSP starts the simulator in-process when --sandbox is given, then
// builds the PSP client.
func (r *runCmd) openPSP(ctx context.Context) (closeAll func(), err error) {
	stopSandbox := func() {}
	if r.useSbx {
		if stopSandbox, err = r.startSandbox(ctx); err != nil {
			return nil, err
		}
	} else if r.tokens, err = r.pf.tokenSource(r.e); err != nil {
		return nil, err
	}
	r.client, err = psp.New(psp.Config{
		BaseURL: r.pf.url, Token: r.tokens, Timeout: r.pf.timeout, AmountAsNumber: r.pf.amountAsNumber,
		StatusIDByExternalID: r.pf.statusByExtID, MaxConnsPerHost: r.wcfg.Concurrency,
		CAFile: r.pspCA, ClientCertFile: r.pspCert, ClientKeyFile: r.pspKey,
		Logger: r.log.With().Str("component", "psp").Logger(),
		Unsafe: r.e.unsafe.PSP,
	})
	if err != nil {
		stopSandbox()
		return nil, configErr(err)
	}
	return func() { r.client.Close(); stopSandbox() }, nil
}

// startSandbox serves the simulator on a loopback port and points the PSP
// flags at it.
func (r *runCmd) startSandbox(ctx context.Context) (stop func(), err error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, infraErr(err)
	}
	srv := sandbox.New(*r.sbx, r.log.With().Str("component", "sandbox").Logger().Level(zerolog.WarnLevel))
	sctx, stop := context.WithCancel(ctx)
	go func() { _ = srv.Serve(sctx, ln) }()
	r.pf.url = "http://" + ln.Addr().String()
	r.tokens = psp.StaticToken(r.sbx.Token)
	fmt.Fprintf(r.e.stderr, "payout run: PSP simulator at %s (p-ambiguous %.2f, p-refuse %.2f, status-lag %s, settle-after %s, p-fail %.2f)\n",
		r.pf.url, r.sbx.PAmbiguous, r.sbx.PRefuse, r.sbx.StatusLag, r.sbx.SettleAfter, r.sbx.PFail)
	return stop, nil
}

// beforeLoad runs after Redis and the PSP are ready and before the file
// is read: the place for checks of the file itself.
func (r *runCmd) beforeLoad() error {
	if r.embedded() {
		warnEmbeddedSize(r.e.stderr, r.path, r.embMax)
	}
	return nil
}

// load validates the file and registers its rows, printing the result;
// a refused file, or one held for an approval nobody can give, ends the
// command.
func (r *runCmd) load(ctx context.Context) (loader.Result, error) {
	e := r.e
	r.led = ledger.New(r.rdb)
	if err := recordDataKey(ctx, r.led, r.ring); err != nil {
		return loader.Result{}, err
	}
	enq, err := r.ef.queue(r.rdb)
	if err != nil {
		return loader.Result{}, err
	}
	r.ld = loader.New(r.led, enq, r.ring, r.log)
	r.ld.Notify = r.nf.emitter(r.rdb)
	res, err := r.loadOnce(ctx)
	if err != nil {
		return res, err
	}
	printResult(e.stdout, e.stderr, res, false)
	if d := res.DuplicateOf; d != nil {
		// A rerun (after a kill, a timeout, a crash): the batch is the
		// same, so its payouts are worked on and reported, never created
		// anew (the ledger decides what each task still does).
		fmt.Fprintf(e.stdout, "resuming batch %s: working its open payouts and reporting\n", d.ID)
		if d.Phase == lifecycle.PhaseAwaiting {
			fmt.Fprintf(e.stdout, "batch %s awaits approval: approve it with `payout approve %s` (another person under four-eyes); waiting for the approval...\n", d.ID, d.ID)
		}
		return res, nil
	}
	if !res.Loaded {
		return res, errRejected
	}
	if res.Held != "" {
		fmt.Fprintf(e.stdout, "batch %s awaits approval (%s): approve it with `payout approve %s` (another person under four-eyes)\n", res.Batch, res.Held, res.Batch)
		if r.embedded() {
			fmt.Fprintln(e.stdout, "the embedded Redis ends with this command: nothing was paid; load it into a real Redis to approve it")
			return res, errRejected
		}
		fmt.Fprintln(e.stdout, "waiting for the approval...")
	}
	return res, nil
}

// busyRetry is how often run tries again to load a file another loader
// holds: a killed run's load lock expires by itself (loader's lock TTL).
const busyRetry = 2 * time.Second

// loadOnce loads the file; while another loader holds its batch (a run
// killed during its load leaves the lock until it expires), it waits and
// tries again rather than fail a rerun.
func (r *runCmd) loadOnce(ctx context.Context) (loader.Result, error) {
	said := false
	for {
		res, err := r.ld.LoadFile(ctx, r.path, r.fopts)
		if errors.Is(err, loader.ErrOtherOptions) {
			return res, &exitError{ExitUsage, err}
		}
		if err != nil {
			return res, infraErr(err)
		}
		if !res.Busy {
			return res, nil
		}
		if !said {
			fmt.Fprintf(r.e.stderr, "payout run: batch %s is being loaded by another loader, or was by one that died (its lock expires within a minute); waiting...\n", res.Batch)
			said = true
		}
		select {
		case <-ctx.Done():
			return res, ctx.Err()
		case <-time.After(busyRetry):
		}
	}
}

// work runs a worker until every payout of the batch is final (or
// --timeout), then reports.
func (r *runCmd) work(ctx context.Context, batch string, rowErrors bool) error {
	w, err := r.newWorker()
	if err != nil {
		return err
	}
	wctx, stopWorker := context.WithCancel(ctx)
	waitCtx, stopWaiting := context.WithCancel(ctx)
	defer stopWaiting()
	done := make(chan error, 1)
	go func() {
		done <- w.Run(wctx)
		stopWaiting() // a worker that stopped itself ends the wait
	}()
	if r.embedded() {
		go dropCompleted(wctx, r.rdb, dropCompletedEvery, r.log)
	}
	start := time.Now()
	counts, waitErr := waitFinal(waitCtx, r.e.stderr, r.led, batch, r.timeout)
	stopWorker()
	if err := <-done; err != nil {
		if errors.Is(err, worker.ErrStopped) {
			return configErr(err)
		}
		return infraErr(err)
	}
	if waitErr != nil && !errors.Is(waitErr, context.DeadlineExceeded) {
		return infraErr(waitErr)
	}
	if err := r.report(ctx, batch, counts, start, waitErr == nil); err != nil {
		return err
	}
	if waitErr != nil {
		fmt.Fprintf(r.e.stdout, "stopped waiting after %s: %d payouts not final yet\n", r.timeout, counts.Open())
		return errRejected
	}
	if counts.Rows[lifecycle.Rejected] > 0 || counts.Rows[lifecycle.NeedsReview] > 0 || rowErrors {
		return errRejected
	}
	return nil
}

// newWorker builds the in-process worker; its ledger transitions go
// through the enqueue connection (--redis-pipeline).
func (r *runCmd) newWorker() (*worker.Worker, error) {
	hot, err := r.ef.conn(r.rdb)
	if err != nil {
		return nil, err
	}
	wlog := r.log
	if wlog.GetLevel() < zerolog.WarnLevel {
		wlog = wlog.Level(zerolog.WarnLevel) // the progress line says enough
	}
	cfg := r.wcfg
	cfg.Notify = worker.NotifyConfig{Emitter: r.ld.Notify, Deliverer: deliverer(r.e, r.rdb, r.log)}
	cfg.Redis, cfg.Ledger, cfg.PSP, cfg.Opener = r.rdb, ledger.New(hot), r.client, r.ring
	cfg.Logger = wlog.With().Str("component", "worker").Logger()
	cfg.Unsafe = r.e.unsafe.Worker
	w, err := worker.New(cfg)
	if err != nil {
		return nil, workerProblems(err)
	}
	return w, nil
}

// report writes the result file, sends the batch-finished notification
// when every payout is final, and prints the rows (small files) and the
// summary.
func (r *runCmd) report(ctx context.Context, batch string, counts ledger.Counts, start time.Time, final bool) error {
	e := r.e
	sum, err := writeReportFile(ctx, r.led, batch, r.format, r.out)
	if err != nil {
		return infraErr(err)
	}
	if final {
		r.nf.finish(ctx, e, r.rdb, batch, sum, r.log)
	}
	if counts.Total() <= int64(r.showRows) {
		if err := printRows(ctx, e.stdout, r.led, batch); err != nil {
			return infraErr(err)
		}
	}
	fmt.Fprintln(e.stdout)
	if err := report.WriteSummaryText(e.stdout, sum); err != nil {
		return err
	}
	fmt.Fprintf(e.stdout, "\nbatch %s: %d payouts in %s; result file: %s\n", batch, counts.Total(), time.Since(start).Round(time.Millisecond), r.out)
	return nil
}

// waitFinal polls the batch counters until no payout is open, showing
// progress.
func waitFinal(ctx context.Context, w io.Writer, l *ledger.Ledger, batch string, timeout time.Duration) (ledger.Counts, error) {
	if timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, timeout)
		defer cancel()
	}
	tty := isTerminal(w)
	lastPrint := time.Time{}
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	for {
		c, err := view.New(l.Redis()).Counts(context.WithoutCancel(ctx), batch)
		if err != nil {
			return c, err
		}
		line := progressLine(c)
		if tty {
			fmt.Fprintf(w, "\r%s", line)
		} else if time.Since(lastPrint) >= 5*time.Second {
			fmt.Fprintln(w, line)
			lastPrint = time.Now()
		}
		if c.Open() == 0 {
			if tty {
				fmt.Fprintln(w)
			}
			return c, nil
		}
		select {
		case <-ctx.Done():
			if tty {
				fmt.Fprintln(w)
			}
			return c, ctx.Err()
		case <-tick.C:
		}
	}
}

func progressLine(c ledger.Counts) string {
	total := c.Total()
	final := total - c.Open()
	pct := 100.0
	if total > 0 {
		pct = 100 * float64(final) / float64(total)
	}
	const width = 30
	filled := int(pct / 100 * width)
	var counts strings.Builder
	for _, s := range lifecycle.States {
		fmt.Fprintf(&counts, "  %s %d", s.Label(), c.Rows[s])
		if s == lifecycle.Created {
			fmt.Fprintf(&counts, "  awaiting outcome %d", c.Awaiting)
		}
	}
	return fmt.Sprintf("[%s%s] %5.1f%%%s",
		strings.Repeat("#", filled), strings.Repeat(".", width-filled), pct, counts.String())
}

func writeReportFile(ctx context.Context, l *ledger.Ledger, batch, format, path string) (report.Summary, error) {
	sum, _, err := results.WriteFiles(ctx, l, batch, path, format, report.CSVOptions{})
	return sum, err
}

// printRows prints the payouts of a batch as an aligned table.
func printRows(ctx context.Context, w io.Writer, l *ledger.Ledger, batch string) error {
	b, err := l.Batch(ctx, batch)
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "\n%-5s %-22s %12s  %-26s %-13s %-8s %s\n", "line", "externalId", "amount", "destination", "state", "attempts", "pspOrderId / error")
	return view.New(l.Redis()).Each(ctx, batch, func(p ledger.Payout) error {
		detail := p.OrderID
		if detail == "" {
			detail = p.Error
		}
		if len(detail) > 70 {
			detail = detail[:67] + "..."
		}
		amount := p.Amount
		if a, err := money.Parse(p.Amount, 18); err == nil {
			amount = a.StringFixed(b.Scale)
		}
		fmt.Fprintf(w, "%-5d %-22s %12s  %-26s %-13s %-8d %s\n", p.Line, p.ExternalID, amount, p.Destination, p.State, p.Creates, detail)
		return nil
	})
}
