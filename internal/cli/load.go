package cli

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/acme/payout/internal/ledger"
	"github.com/acme/payout/internal/loader"
	"github.com/rs/zerolog"
)

// maxPrintedErrors bounds the errors printed per file; the errors file in
// spool mode has them all.
const maxPrintedErrors = 200

func runLoad(ctx context.Context, e *env, args []string) error {
	fs := newFlags(e, "load", "[flags] FILE... | --spool DIR")
	var (
		lf      logFlags
		rf      redisFlags
		kf      keyFlags
		ff      fileFlags
		ef      enqueueFlags
		af      approvalFlags
		arf     archiveFlags
		nf      notifyFlags
		spool   string
		settle  time.Duration
		purge   time.Duration
		partial bool
		dryRun  bool
	)
	lf.register(fs)
	rf.register(fs)
	kf.register(fs)
	ff.register(fs)
	ef.register(fs)
	af.register(fs)
	arf.register(fs, true)
	nf.register(fs)
	fs.StringVar(&spool, "spool", "", "spool directory: take settled files from DIR/inbox, move them to processing/, done/ or failed/, write reports to outbox/")
	fs.DurationVar(&settle, "settle", 30*time.Second, "spool mode: a file is taken once unchanged this long")
	fs.DurationVar(&purge, "purge-after", 0, "spool mode: delete files in done/ and failed/ older than this (0: keep)")
	fs.BoolVar(&partial, "partial", false, "load the valid rows of a file that has invalid ones (default: one bad row refuses the whole file)")
	fs.BoolVar(&dryRun, "dry-run", false, "validate only; write nothing")
	if err := parse(e, fs, args); err != nil {
		return err
	}
	if (spool == "") == (fs.NArg() == 0) {
		fs.Usage()
		return usageErr("give payout files or --spool DIR (not both)")
	}
	log, err := lf.logger(e)
	if err != nil {
		return err
	}
	fopts, err := ff.options()
	if err != nil {
		return err
	}
	approval, err := af.options()
	if err != nil {
		return err
	}
	if err := nf.check(e); err != nil {
		return err
	}
	opts := loader.Options{File: fopts, Partial: partial, DryRun: dryRun, EnqueueWorkers: ef.concurrency, Approval: approval}
	var sealer loader.Sealer = noSealer{}
	if !dryRun {
		ring, err := kf.keyring(e)
		if err != nil {
			return err
		}
		sealer = ring
	}
	rdb, err := rf.open(ctx)
	if err != nil {
		return err
	}
	defer rdb.Close()
	client, err := ef.client(rdb)
	if err != nil {
		return err
	}
	led := ledger.New(rdb)
	ld := loader.New(led, client, sealer, log)
	ld.Notify = nf.emitter(rdb)

	if spool != "" {
		return spoolOnce(ctx, e, ld, spool, loader.SpoolOptions{Load: opts, Settle: settle, PurgeAfter: purge,
			Archive: spoolArchive(e, led, spool, arf)}, log)
	}
	refused := false
	for _, path := range fs.Args() {
		res, err := ld.LoadFile(ctx, path, opts)
		if err != nil {
			return infraErr(err)
		}
		printResult(e.stdout, e.stderr, res, dryRun)
		refused = refused || !res.Loaded || len(res.Errors) > 0
	}
	if refused {
		return errRejected
	}
	return nil
}

func spoolOnce(ctx context.Context, e *env, ld *loader.Loader, dir string, o loader.SpoolOptions, log zerolog.Logger) error {
	res, err := ld.Spool(ctx, dir, o)
	if err != nil {
		return infraErr(err)
	}
	if res.Locked {
		log.Info().Str("spool", dir).Msg("another loader is running on this spool; nothing to do")
		return nil
	}
	refused := false
	for _, r := range res.Files {
		printResult(e.stdout, e.stderr, r, o.Load.DryRun)
		refused = refused || !r.Loaded || len(r.Errors) > 0
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

// printResult prints a file's errors compiler style, then one summary line.
func printResult(stdout, stderr io.Writer, r loader.Result, dryRun bool) {
	for _, w := range r.Warnings {
		fmt.Fprintf(stderr, "%s: warning: %s\n", r.File, w)
	}
	for i, err := range r.Errors {
		if i == maxPrintedErrors {
			fmt.Fprintf(stderr, "%s: ... and %d more errors\n", r.File, len(r.Errors)-maxPrintedErrors)
			break
		}
		fmt.Fprintln(stderr, err.String())
	}
	switch {
	case r.Busy:
		fmt.Fprintf(stdout, "%s: batch %s is being loaded by another loader right now; nothing done here, run again later\n", r.File, r.Batch)
	case r.DuplicateOf != nil:
		d := r.DuplicateOf
		fmt.Fprintf(stdout, "%s: same content as %s, loaded as batch %s at %s; nothing loaded\n",
			r.File, d.File, d.ID, d.LoadedAt.Format(time.RFC3339))
	case !r.Loaded:
		fmt.Fprintf(stdout, "%s: refused: %d errors in %d rows; nothing loaded\n", r.File, len(r.Errors), r.Rows)
	case dryRun:
		fmt.Fprintf(stdout, "%s: valid: %d rows, total %s (dry run: nothing loaded)\n", r.File, r.Valid, r.Total)
	default:
		skipped := ""
		if len(r.Errors) > 0 {
			skipped = fmt.Sprintf(", %d rows skipped (--partial)", r.Rows-r.Valid)
		}
		resumed := ""
		if r.Resumed {
			resumed = " (resumed an interrupted load)"
		}
		fmt.Fprintf(stdout, "%s: loaded %d rows, total %s, as batch %s%s%s\n", r.File, r.Valid, r.Total, r.Batch, skipped, resumed)
		if r.Held != "" {
			fmt.Fprintf(stdout, "%s: batch %s awaits approval (%s); nothing is paid before `payout approve %s --by NAME`\n", r.File, r.Batch, r.Held, r.Batch)
		}
	}
}

// noSealer is used by dry runs, which never write a card number.
type noSealer struct{}

func (noSealer) Seal(string, string) (string, error) {
	return "", fmt.Errorf("dry run: nothing is sealed")
}
