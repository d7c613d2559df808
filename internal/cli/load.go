package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"time"

	"github.com/acme/payout/internal/ledger"
	"github.com/acme/payout/internal/loader"
	"github.com/acme/payout/internal/money"
	"github.com/acme/payout/internal/payfile"
	"github.com/acme/payout/internal/vault"
	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
	"github.com/rs/zerolog"
)

// maxPrintedErrors bounds the errors printed per file; the errors file in
// spool mode has them all.
const maxPrintedErrors = 200

// loadCmd is one `payout load`: its flags, then what each step sets up for
// the next one.
type loadCmd struct {
	e  *env
	fs *flag.FlagSet
	// flags
	lf      logFlags
	rf      redisFlags
	kf      keyFlags
	ff      fileFlags
	ef      enqueueFlags
	af      approvalFlags
	vf      velocityFlags
	arf     archiveFlags
	nf      notifyFlags
	cf      controlFlags
	df      durabilityFlags
	relf    releaseFlags
	spool   string
	settle  time.Duration
	deliv   string
	heldRep time.Duration
	purge   time.Duration
	partial bool
	dryRun  bool
	mfile   string

	// set up by the steps
	files    []string // the payout files named (control files left out)
	delivery loader.Delivery
	log      zerolog.Logger
	opts     loader.Options
	led      *ledger.Ledger
	ld       *loader.Loader
}

// runLoad loads the payout files named, or one run's worth of a spool.
func runLoad(ctx context.Context, e *env, args []string) (err error) {
	c := &loadCmd{e: e}
	if err := c.parse(args); err != nil {
		return err
	}
	var tally *loadTally
	if c.mfile != "" && !c.dryRun {
		tally = &loadTally{start: time.Now()}
		defer func() { tally.record(e, c.mfile, err) }()
	}
	if err := c.configure(); err != nil {
		return err
	}
	closeRedis, err := c.openLoader(ctx)
	if err != nil {
		return err
	}
	defer closeRedis()
	if c.spool != "" {
		c.log.Info().Str("spool", c.spool).Str("delivery", string(c.delivery)).Dur("settle", c.settle).
			Msg("spool run: delivery contract in force (also written to inbox/" + loader.DeliveryNote + ")")
		return spoolOnce(ctx, e, c.ld, c.spool, loader.SpoolOptions{Load: c.opts, Delivery: c.delivery, Settle: c.settle, HeldReport: c.heldRep, PurgeAfter: c.purge,
			Archive: spoolArchive(e, c.led, c.spool, c.arf)}, c.log, tally)
	}
	return c.loadFiles(ctx, tally)
}

// parse registers and parses the flags of payout load.
func (c *loadCmd) parse(args []string) error {
	fs := newFlags(c.e, "load", "[flags] FILE... | --spool DIR")
	c.fs = fs
	c.lf.register(fs)
	c.rf.register(fs)
	c.kf.register(fs)
	c.ff.register(fs)
	c.ef.register(fs)
	c.af.register(fs)
	c.vf.register(fs)
	c.arf.register(fs, true)
	c.nf.register(fs)
	c.cf.register(fs, true)
	c.df.registerLoad(fs)
	c.relf.register(fs)
	fs.StringVar(&c.spool, "spool", "", "spool directory: take settled files from DIR/inbox, move them to processing/, done/ or failed/, write reports to outbox/")
	fs.DurationVar(&c.settle, "settle", 30*time.Second, "spool mode: a file (and its NAME.ctl) is taken once unchanged this long")
	fs.StringVar(&c.deliv, "delivery", string(loader.DeliveryControl), "spool mode: how a sender marks a file in inbox/ complete: control (NAME is taken once NAME.ctl is next to it) or rename (every file under its own name is complete: senders write elsewhere and rename); see docs/operations.md")
	fs.DurationVar(&c.heldRep, "held-report", loader.DefaultHeldReport, "spool mode: a file held in inbox/ (incomplete, no NAME.ctl) longer than this is reported: a warning, outbox/held.csv and exit 1")
	fs.DurationVar(&c.purge, "purge-after", 0, "spool mode: delete files in done/ and failed/ older than this (0: keep)")
	fs.BoolVar(&c.partial, "partial", false, "load the valid rows of a file that has invalid ones (default: one bad row refuses the whole file)")
	fs.BoolVar(&c.dryRun, "dry-run", false, "validate only; write nothing")
	fs.StringVar(&c.mfile, "metrics-textfile", "", "write this run's outcome, files and rows to FILE (atomically) in Prometheus text format, for node_exporter's textfile collector (name it *.prom in its --collector.textfile.directory)")
	return parse(c.e, fs, args)
}

// configure checks the flags and the files named, and builds the loader's
// options.
func (c *loadCmd) configure() error {
	if (c.spool == "") == (c.fs.NArg() == 0) {
		c.fs.Usage()
		return usageErr("give payout files or --spool DIR (not both)")
	}
	var err error
	if c.delivery, err = loader.ParseDelivery(c.deliv); err != nil {
		return usageErr("--delivery: %v", err)
	}
	if c.heldRep <= 0 {
		return usageErr("--held-report %s: want a duration above 0 (1h)", c.heldRep)
	}
	if c.log, err = c.lf.logger(c.e); err != nil {
		return err
	}
	c.log = c.df.logger(c.log)
	fopts, err := c.ff.options()
	if err != nil {
		return err
	}
	approval, err := c.af.options(c.e)
	if err != nil {
		return err
	}
	if c.spool != "" {
		// A spool file is loaded by its sender (the loader package: its
		// control file's submitter, else its delivery account as a system
		// identity), not by whoever runs the spool.
		c.log.Info().Str("actor", approval.By).Msg("spool run")
		approval.By = ""
	} else if !c.dryRun {
		if err := c.af.roles.mayLoad(approval.By); err != nil {
			return err
		}
	}
	if err := c.nf.check(c.e); err != nil {
		return err
	}
	c.files = payoutFiles(c.e.stderr, c.fs.Args())
	if c.spool == "" && len(c.files) == 0 {
		return usageErr("give payout files, not only control files")
	}
	expect, err := c.cf.expect(len(c.files), c.spool != "")
	if err != nil {
		return err
	}
	release, err := c.relf.options()
	if err != nil {
		return err
	}
	fopts.PayDateColumn = c.relf.column
	c.opts = loader.Options{File: fopts, Partial: c.partial, DryRun: c.dryRun, EnqueueWorkers: c.ef.concurrency, Approval: approval,
		Expect: expect, RequireControl: c.cf.require, Release: release}
	c.opts.Velocity, err = c.vf.options()
	return err
}

// payoutFiles returns the paths that are not control files: a control file
// named among the files (a glob) is not one of them, it is read beside its
// payout file.
func payoutFiles(stderr io.Writer, paths []string) []string {
	var files []string
	for _, path := range paths {
		if loader.IsControlFile(path) {
			fmt.Fprintf(stderr, "%s: a control file (read beside %s), not a payout file: skipped\n", path, strings.TrimSuffix(filepath.Base(path), loader.ControlExt))
			continue
		}
		files = append(files, path)
	}
	return files
}

// openLoader opens Redis and makes the ledger and the loader; the function
// it returns closes Redis.
func (c *loadCmd) openLoader(ctx context.Context) (closeRedis func(), err error) {
	var sealer loader.Sealer = noSealer{}
	if !c.dryRun {
		ring, err := c.kf.keyring(c.e)
		if err != nil {
			return nil, err
		}
		sealer = ring
	}
	var rdb redis.UniversalClient
	closeRedis = func() { rdb.Close() }
	if c.dryRun && c.spool == "" && !c.rf.given() {
		// A dry run with no Redis given checks the files on their own,
		// on an empty in-memory ledger, rather than the default
		// 127.0.0.1:6379 that may be anyone's, or no one's.
		mr := miniredis.NewMiniRedis()
		if err := mr.Start(); err != nil {
			return nil, fmt.Errorf("dry run: in-memory ledger: %w", err)
		}
		rdb = redis.NewClient(&redis.Options{Addr: mr.Addr()})
		closeRedis = func() { rdb.Close(); mr.Close() }
		fmt.Fprintf(c.e.stderr, "payout load: no Redis given (--redis or %s): the dry run checks the files on their own, not against the batches and payout ids a ledger holds; give --redis to check those too\n", envName("load", "redis"))
	} else if rdb, err = c.rf.open(ctx, c.e); err != nil {
		return nil, err
	}
	if !c.dryRun {
		if _, err := c.df.check(ctx, rdb, c.log); err != nil {
			closeRedis()
			return nil, err
		}
		checkHashLimits(ctx, rdb, c.log)
	}
	client, err := c.ef.queue(rdb)
	if err != nil {
		closeRedis()
		return nil, err
	}
	c.led = ledger.New(rdb)
	if ring, ok := sealer.(*vault.Keyring); ok && !c.dryRun {
		if err := recordDataKey(ctx, c.led, ring); err != nil {
			closeRedis()
			return nil, err
		}
	}
	c.ld = loader.New(c.led, client, sealer, c.log)
	c.ld.Notify = c.nf.emitter(rdb)
	return closeRedis, nil
}

// loadFiles loads the files named, one after the other.
func (c *loadCmd) loadFiles(ctx context.Context, tally *loadTally) error {
	refused := false
	for _, path := range c.files {
		res, err := c.ld.LoadFile(ctx, path, c.opts)
		if errors.Is(err, loader.ErrOtherOptions) {
			// A rerun of an interrupted load under other options: the
			// person's to fix, not an infrastructure fault.
			return &exitError{ExitUsage, err}
		}
		if err != nil {
			return infraErr(err)
		}
		printResult(c.e.stdout, c.e.stderr, res, c.dryRun)
		tally.add(res)
		refused = refused || !res.Loaded || len(res.Errors) > 0
	}
	if refused {
		return errRejected
	}
	return nil
}

func spoolOnce(ctx context.Context, e *env, ld *loader.Loader, dir string, o loader.SpoolOptions, log zerolog.Logger, tally *loadTally) error {
	res, err := ld.Spool(ctx, dir, o)
	if res.Locked {
		tally.skipped()
		log.Info().Str("spool", dir).Msg("another loader is running on this spool; nothing to do")
		return nil
	}
	refused := false
	for _, r := range res.Files {
		printResult(e.stdout, e.stderr, r, o.Load.DryRun)
		tally.add(r)
		refused = refused || !r.Loaded || len(r.Errors) > 0
	}
	for _, h := range res.Overdue() {
		fmt.Fprintf(e.stderr, "%s: held in inbox/ since %s, not loaded: %s (listed in outbox/%s)\n",
			term(h.File), h.Since.UTC().Format(time.RFC3339), term(h.Reason), loader.HeldListing)
		refused = true
	}
	if errors.Is(err, loader.ErrOtherOptions) {
		// An interrupted load resumed under other options: it stays in
		// processing/ until run with the first run's options (or discarded).
		return &exitError{ExitUsage, err}
	}
	if err != nil {
		// Redis (or the spool's filesystem): the files it concerns stay
		// in processing/ for the next run.
		return infraErr(err)
	}
	for _, p := range res.Reports {
		fmt.Fprintf(e.stdout, "result file written: %s\n", p)
	}
	if res.Purged > 0 {
		log.Info().Int("files", res.Purged).Msg("purged old input files")
	}
	if refused {
		return errRejected
	}
	return nil
}

// sheetLine says, for a workbook, how many data rows its sheet shows and
// how many it holds: what a person sees against what is read.
func sheetLine(r loader.Result) string {
	if r.Sheet == "" || r.Rows == 0 {
		return ""
	}
	if r.HiddenRows == 0 {
		return fmt.Sprintf("%s: sheet %s shows all its %d data rows", term(r.File), term(r.Sheet), r.Rows)
	}
	return fmt.Sprintf("%s: sheet %s shows %d data rows and holds %d: %d hidden or filtered out", term(r.File), term(r.Sheet), r.Rows-r.HiddenRows, r.Rows, r.HiddenRows)
}

// printResult prints a file's errors compiler style, then one summary line.
func printResult(stdout, stderr io.Writer, r loader.Result, dryRun bool) {
	for _, w := range r.Warnings {
		fmt.Fprintf(stderr, "%s: warning: %s\n", term(r.File), w)
	}
	for i, err := range r.Errors {
		if i == maxPrintedErrors {
			fmt.Fprintf(stderr, "%s: ... and %d more errors\n", term(r.File), len(r.Errors)-maxPrintedErrors)
			break
		}
		fmt.Fprintln(stderr, term(err.String()))
	}
	if r.LocaleAmounts > 0 {
		fmt.Fprintf(stderr, "%s: hint: %s\n", term(r.File), payfile.AmountFormatHint(r.LocaleAmounts, "--amount-format"))
	}
	if line := sheetLine(r); line != "" {
		fmt.Fprintln(stdout, line)
	}
	switch {
	case r.Busy:
		fmt.Fprintf(stdout, "%s: batch %s is being loaded by another loader right now; nothing done here, run again later\n", term(r.File), r.Batch)
	case r.DuplicateOf != nil:
		d := r.DuplicateOf
		fmt.Fprintf(stdout, "%s: same content as %s, loaded as batch %s at %s; nothing loaded\n",
			term(r.File), term(d.File), d.ID, d.LoadedAt.Format(time.RFC3339))
	case !r.Loaded:
		fmt.Fprintf(stdout, "%s: refused: %d errors in %d rows; nothing loaded\n", term(r.File), len(r.Errors), r.Rows)
	case dryRun:
		fmt.Fprintf(stdout, "%s: valid: %d rows, total %s%s (dry run: nothing loaded)\n", term(r.File), r.Valid, r.Total.StringFixed(r.Scale), matching(r))
	default:
		skipped := ""
		if len(r.Errors) > 0 {
			skipped = fmt.Sprintf(", %d rows skipped (--partial)", r.Rows-r.Valid)
		}
		resumed := ""
		if r.Resumed {
			resumed = " (resumed an interrupted load)"
		}
		fmt.Fprintf(stdout, "%s: loaded %d rows, total %s, as batch %s%s%s%s\n", term(r.File), r.Valid, r.Total.StringFixed(r.Scale), r.Batch, skipped, resumed, matching(r))
		if r.Held != "" {
			fmt.Fprintf(stdout, "%s: batch %s awaits approval (%s); nothing is paid before `payout approve %s`, by another person under four-eyes\n", term(r.File), r.Batch, r.Held, r.Batch)
		}
		if r.VelocityHeld > 0 {
			fmt.Fprintf(stdout, "%s: %d payouts held over their recipient's velocity limit: each waits for `payout release %s EXTERNALID` or `payout cancel` (the console's work queue lists them)\n",
				term(r.File), r.VelocityHeld, r.Batch)
		}
		if r.Scheduled > 0 {
			when := "on their pay dates"
			if !r.ReleaseAt.IsZero() {
				when = "at " + r.ReleaseAt.Format(time.RFC3339) + " (rows with their own pay date on it)"
			}
			fmt.Fprintf(stdout, "%s: %d payouts scheduled: released by the workers %s, none before\n", term(r.File), r.Scheduled, when)
		}
	}
}

// matching says which declarations of what the file holds it matched.
func matching(r loader.Result) string {
	if len(r.Control) == 0 {
		return ""
	}
	sources := make([]string, len(r.Control))
	for i, c := range r.Control {
		sources[i] = c.Source
	}
	return "; the file matches " + strings.Join(sources, " and ")
}

// controlFlags declare what a file holds (control totals; see
// loader/control.go), on load and run.
type controlFlags struct {
	rows    int
	total   string
	require bool
}

func (c *controlFlags) register(fs *flag.FlagSet, spool bool) {
	one, wait := "", ""
	if spool {
		one, wait = "one FILE, not --spool; ", "; in spool mode with --delivery rename a settled file waits up to --settle more for its NAME.ctl"
	}
	fs.IntVar(&c.rows, "expect-rows", 0, "refuse the file unless it has exactly this many data rows, valid or not ("+one+"0: not checked); a NAME.ctl next to the file is checked besides")
	fs.StringVar(&c.total, "expect-total", "", "refuse the file unless the amounts of all its rows add up to exactly this, written plain: 98350.50 ("+one+"empty: not checked)")
	fs.BoolVar(&c.require, "require-control", false, "refuse a file that does not declare what it holds: NAME.ctl next to it (rows=N, total=AMOUNT) or --expect-rows/--expect-total"+wait)
}

// expect returns the command line's declaration, given the number of
// payout files named (or a spool).
func (c *controlFlags) expect(files int, spool bool) (loader.Control, error) {
	d := loader.Control{Source: loader.ExpectFlags}
	if c.rows == 0 && c.total == "" {
		return d, nil
	}
	switch {
	case spool:
		return d, usageErr("--expect-rows and --expect-total declare one file's figures: not with --spool (put NAME.ctl next to each file)")
	case files != 1:
		return d, usageErr("--expect-rows and --expect-total declare one file's figures: give one FILE (or NAME.ctl next to each)")
	case c.rows < 0:
		return d, usageErr("--expect-rows %d: want the number of data rows", c.rows)
	}
	d.Rows = c.rows
	if c.total != "" {
		a, err := money.Parse(c.total, 8)
		if err != nil {
			return d, usageErr("--expect-total: %v (write it plain, as 98350.50)", err)
		}
		d.Total = a
	}
	return d, nil
}

// noSealer is used by dry runs, which never write a card number.
type noSealer struct{}

func (noSealer) Seal(string, string) (string, error) {
	return "", fmt.Errorf("dry run: nothing is sealed")
}
