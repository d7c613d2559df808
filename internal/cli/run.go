package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"time"

	"github.com/acme/payout/internal/batchreport"
	"github.com/acme/payout/internal/ledger"
	"github.com/acme/payout/internal/loader"
	"github.com/acme/payout/internal/money"
	"github.com/acme/payout/internal/psp"
	"github.com/acme/payout/internal/report"
	"github.com/acme/payout/internal/sandbox"
	"github.com/acme/payout/internal/vault"
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

func runRun(ctx context.Context, e *env, args []string) error {
	fs := newFlags(e, "run", "[flags] FILE")
	var (
		lf       logFlags
		rf       redisFlags
		kf       keyFlags
		ff       fileFlags
		ef       enqueueFlags
		af       approvalFlags
		nf       notifyFlags
		cf       controlFlags
		pf       pspFlags
		pspCA    string
		pspCert  string
		pspKey   string
		wf       workerFlags
		useSbx   bool
		out      string
		format   string
		partial  bool
		timeout  time.Duration
		showRows int
		embMax   int
	)
	lf.register(fs)
	rf.register(fs)
	kf.register(fs)
	ff.register(fs)
	ef.register(fs)
	af.register(fs)
	nf.register(fs)
	cf.register(fs, false)
	pf.register(fs)
	fs.StringVar(&pspCA, "psp-ca-file", "", "PEM CA certificates that sign the PSP's certificate, trusted instead of the system roots; re-read when it changes")
	fs.StringVar(&pspCert, "psp-client-cert", "", "PEM client certificate for mutual TLS with the PSP (with --psp-client-key); re-read when it changes")
	fs.StringVar(&pspKey, "psp-client-key", "", "PEM private key of --psp-client-cert; re-read when it changes")
	wf.register(fs)
	fs.BoolVar(&useSbx, "sandbox", false, "start the PSP simulator in-process and send payouts to it")
	sbx := addSandboxFlags(fs)
	fs.StringVar(&out, "out", "", "result file (default: NAME.result.csv next to the input)")
	fs.StringVar(&format, "format", "csv", "result file format: csv or json")
	fs.BoolVar(&partial, "partial", false, "load the valid rows of a file that has invalid ones")
	fs.DurationVar(&timeout, "timeout", 0, "stop waiting after this long and report what is known (0: wait until every payout is final)")
	fs.IntVar(&showRows, "show-rows", 50, "print the result rows as a table when the file has at most this many")
	fs.IntVar(&embMax, "embedded-max-rows", DefaultEmbeddedMaxRows, "without --redis, warn before loading a file of more rows than this (0: never) and show the command line for a real Redis")
	if err := parse(e, fs, args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		fs.Usage()
		return usageErr("give exactly one payout file")
	}
	path := fs.Arg(0)
	log, err := lf.logger(e)
	if err != nil {
		return err
	}
	fopts, err := ff.options()
	if err != nil {
		return err
	}
	expect, err := cf.expect(1, false)
	if err != nil {
		return err
	}
	wcfg, err := wf.config(&pf)
	if err != nil {
		return err
	}
	if err := nf.check(e); err != nil {
		return err
	}
	if useSbx && sbx.SettleAfter == 0 && wcfg.Outcome.Track {
		// The simulator would keep every order "Created": nothing to follow.
		wcfg.Outcome.Track = false
		fmt.Fprintln(e.stderr, "note: the simulator settles no orders (--settle-after 0): created is final; give --settle-after to see paid and failed")
	}
	if format != batchreport.CSV && format != batchreport.JSON {
		return usageErr("--format %q: want csv or json", format)
	}
	if out == "" {
		out = strings.TrimSuffix(path, ".csv") + ".result." + format
	}

	// Redis: the configured one, else an embedded one.
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	var rdb redis.UniversalClient
	var ring *vault.Keyring
	if set["redis"] || e.getenv("PAYOUT_REDIS_URL") != "" {
		if rdb, err = rf.open(ctx); err != nil {
			return err
		}
		if ring, err = kf.keyring(e); err != nil {
			return err
		}
	} else {
		mr := miniredis.NewMiniRedis()
		if err := mr.Start(); err != nil {
			return infraErr(fmt.Errorf("embedded redis: %w", err))
		}
		defer mr.Close()
		rdb = redis.NewClient(&redis.Options{Addr: mr.Addr()})
		ring = vault.Ephemeral()
		fmt.Fprintln(e.stderr, "payout run: no --redis given: using an embedded in-process Redis; all state is lost when this command exits")
		warnEmbeddedSize(e.stderr, path, embMax)
	}
	defer rdb.Close()

	// PSP: the simulator in-process, or the configured one.
	var tokens psp.TokenSource
	if useSbx {
		if err := sbx.Validate(); err != nil {
			return usageErr("%v", err)
		}
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return infraErr(err)
		}
		srv := sandbox.New(*sbx, log.With().Str("component", "sandbox").Logger().Level(zerolog.WarnLevel))
		sctx, stop := context.WithCancel(ctx)
		defer stop()
		go func() { _ = srv.Serve(sctx, ln) }()
		pf.url = "http://" + ln.Addr().String()
		tokens = psp.StaticToken(sbx.Token)
		fmt.Fprintf(e.stderr, "payout run: PSP simulator at %s (p-ambiguous %.2f, p-refuse %.2f, status-lag %s, settle-after %s, p-fail %.2f)\n",
			pf.url, sbx.PAmbiguous, sbx.PRefuse, sbx.StatusLag, sbx.SettleAfter, sbx.PFail)
	} else {
		if pf.url == "" {
			return usageErr("--psp-url (PAYOUT_PSP_URL) is required, or --sandbox for the simulator")
		}
		if tokens, err = pf.tokenSource(e); err != nil {
			return err
		}
	}
	client, err := psp.New(psp.Config{
		BaseURL: pf.url, Token: tokens, Timeout: pf.timeout, AmountAsNumber: pf.amountAsNumber,
		StatusIDByExternalID: pf.statusByExtID, MaxConnsPerHost: wcfg.Concurrency,
		CAFile: pspCA, ClientCertFile: pspCert, ClientKeyFile: pspKey,
		Logger: log.With().Str("component", "psp").Logger(),
	})
	if err != nil {
		return configErr(err)
	}
	defer client.Close()

	led := ledger.New(rdb)
	enq, err := ef.client(rdb)
	if err != nil {
		return err
	}
	hot, err := ef.conn(rdb) // the worker's ledger transitions
	if err != nil {
		return err
	}
	ld := loader.New(led, enq, ring, log)
	ld.Notify = nf.emitter(rdb)
	approval, err := af.options()
	if err != nil {
		return err
	}
	res, err := ld.LoadFile(ctx, path, loader.Options{File: fopts, Partial: partial, EnqueueWorkers: ef.concurrency, Approval: approval,
		Expect: expect, RequireControl: cf.require})
	if err != nil {
		return infraErr(err)
	}
	printResult(e.stdout, e.stderr, res, false)
	if !res.Loaded {
		return errRejected
	}
	if res.Held != "" {
		embedded := !(set["redis"] || e.getenv("PAYOUT_REDIS_URL") != "")
		fmt.Fprintf(e.stdout, "batch %s awaits approval (%s): approve it with `payout approve %s --by NAME`\n", res.Batch, res.Held, res.Batch)
		if embedded {
			fmt.Fprintln(e.stdout, "the embedded Redis ends with this command: nothing was paid; load it into a real Redis to approve it")
			return errRejected
		}
		fmt.Fprintln(e.stdout, "waiting for the approval...")
	}
	batch := res.Batch
	if res.DuplicateOf != nil {
		batch = res.DuplicateOf.ID
	}

	wctx, stopWorker := context.WithCancel(ctx)
	done := make(chan error, 1)
	wlog := log
	if wlog.GetLevel() < zerolog.WarnLevel {
		wlog = wlog.Level(zerolog.WarnLevel) // the progress line says enough
	}
	wcfg.Notify = worker.NotifyConfig{Emitter: ld.Notify, Deliverer: deliverer(e, log)}
	w := worker.New(rdb, ledger.New(hot), client, ring, wcfg, nil, wlog.With().Str("component", "worker").Logger())
	go func() { done <- w.Run(wctx) }()

	start := time.Now()
	counts, waitErr := waitFinal(ctx, e.stderr, led, batch, timeout)
	stopWorker()
	if err := <-done; err != nil {
		return infraErr(err)
	}
	if waitErr != nil && !errors.Is(waitErr, context.DeadlineExceeded) {
		return infraErr(waitErr)
	}
	sum, err := writeReportFile(ctx, led, batch, format, out)
	if err != nil {
		return infraErr(err)
	}
	if waitErr == nil {
		nf.finish(ctx, e, rdb, batch, sum, log)
	}
	if counts.Total() <= int64(showRows) {
		if err := printRows(ctx, e.stdout, led, batch); err != nil {
			return infraErr(err)
		}
	}
	fmt.Fprintln(e.stdout)
	if err := report.WriteSummaryText(e.stdout, sum); err != nil {
		return err
	}
	fmt.Fprintf(e.stdout, "\nbatch %s: %d payouts in %s; result file: %s\n", batch, counts.Total(), time.Since(start).Round(time.Millisecond), out)
	if waitErr != nil {
		fmt.Fprintf(e.stdout, "stopped waiting after %s: %d payouts not final yet\n", timeout, counts.Open())
		return errRejected
	}
	if counts.Rows[ledger.Rejected] > 0 || counts.Rows[ledger.NeedsReview] > 0 || len(res.Errors) > 0 {
		return errRejected
	}
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
		c, err := l.Counts(context.WithoutCancel(ctx), batch)
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
	outcomes := ""
	if c.Rows[ledger.Paid]+c.Rows[ledger.Failed]+c.Awaiting > 0 {
		outcomes = fmt.Sprintf("paid %d  failed %d  awaiting outcome %d  ", c.Rows[ledger.Paid], c.Rows[ledger.Failed], c.Awaiting)
	}
	return fmt.Sprintf("[%s%s] %5.1f%%  %screated %d  rejected %d  needs_review %d  checking %d  queued %d  submitting %d",
		strings.Repeat("#", filled), strings.Repeat(".", width-filled), pct, outcomes,
		c.Rows[ledger.Created], c.Rows[ledger.Rejected], c.Rows[ledger.NeedsReview],
		c.Rows[ledger.Checking], c.Rows[ledger.Queued], c.Rows[ledger.Submitting])
}

func writeReportFile(ctx context.Context, l *ledger.Ledger, batch, format, path string) (report.Summary, error) {
	tmp := path + ".tmp"
	f, err := os.OpenFile(tmp, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o640)
	if err != nil {
		return report.Summary{}, err
	}
	sum, err := batchreport.Write(ctx, l, batch, format, f)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(tmp)
		return sum, err
	}
	return sum, os.Rename(tmp, path)
}

// printRows prints the payouts of a batch as an aligned table.
func printRows(ctx context.Context, w io.Writer, l *ledger.Ledger, batch string) error {
	b, err := l.Batch(ctx, batch)
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "\n%-5s %-22s %12s  %-26s %-13s %-8s %s\n", "line", "externalId", "amount", "destination", "state", "attempts", "pspOrderId / error")
	return l.Each(ctx, batch, func(p ledger.Payout) error {
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
