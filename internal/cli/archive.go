package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/acme/payout/internal/access"
	"github.com/acme/payout/internal/ledger"
	"github.com/acme/payout/internal/report"
	"github.com/acme/payout/internal/results"
	"github.com/acme/payout/internal/view"
)

// days is a duration flag that also accepts whole days ("30d").
type days struct{ d *time.Duration }

func (v days) String() string {
	if v.d == nil {
		return ""
	}
	if *v.d > 0 && *v.d%(24*time.Hour) == 0 {
		return strconv.FormatInt(int64(*v.d/(24*time.Hour)), 10) + "d"
	}
	return v.d.String()
}

func (v days) Set(s string) error {
	if n, ok := strings.CutSuffix(s, "d"); ok {
		d, err := strconv.ParseUint(n, 10, 32)
		if err != nil {
			return fmt.Errorf("%q: want a duration such as 30d or 12h", s)
		}
		*v.d = time.Duration(d) * 24 * time.Hour
		return nil
	}
	d, err := time.ParseDuration(s)
	if err != nil || d < 0 {
		return fmt.Errorf("%q: want a duration such as 30d or 12h", s)
	}
	*v.d = d
	return nil
}

// archiveFlags are the flags of payout archive and of the spool's
// archive step.
type archiveFlags struct {
	olderThan time.Duration
	dir       string
	idWindow  time.Duration
}

func (a *archiveFlags) register(fs *flag.FlagSet, spool bool) {
	a.olderThan, a.idWindow = results.DefaultOlderThan, results.DefaultIDWindow
	if spool {
		fs.Var(days{&a.olderThan}, "archive-after", "spool mode: at the end of each run, archive the batches final for this long (last change, Redis time) and delete them from Redis (0: never)")
		fs.StringVar(&a.dir, "archive-dir", "", "spool mode: the archive folder (default: the spool's archive/)")
	} else {
		fs.Var(days{&a.olderThan}, "older-than", "archive the final batches whose last change (Redis time) is older than this")
		fs.StringVar(&a.dir, "archive-dir", "archive", "the archive folder: NAME.BATCH.archive.jsonl.gz, .result.csv, .audit.jsonl")
	}
	fs.Var(days{&a.idWindow}, "id-window", "an archived batch's externalIds stay refused to other files this long after it is archived")
}

// options are the archive options of the flags; w is told what the
// daily sweep of expired claims dropped.
func (a *archiveFlags) options(w io.Writer) results.ArchiveOptions {
	return results.ArchiveOptions{OlderThan: a.olderThan, Dir: a.dir, IDWindow: a.idWindow, Swept: func(n int64) {
		fmt.Fprintf(w, "%d externalId claims of archived batches expired (id window over) and were dropped\n", n)
	}}
}

func runArchive(ctx context.Context, e *env, args []string) error {
	fs := newFlags(e, "archive", "[flags]")
	var (
		lf     logFlags
		rf     redisFlags
		af     archiveFlags
		rl     rolesFlags
		dryRun bool
	)
	lf.register(fs)
	rf.register(fs)
	rl.register(fs)
	af.register(fs, false)
	fs.BoolVar(&dryRun, "dry-run", false, "list the batches that would be archived; write nothing")
	if err := parse(e, fs, args); err != nil {
		return err
	}
	if fs.NArg() != 0 {
		fs.Usage()
		return usageErr("payout archive takes no arguments")
	}
	if _, err := lf.logger(e); err != nil {
		return err
	}
	if err := rl.mayRun(ctx, e, "archive", dryRunAction(dryRun, access.Archive)); err != nil {
		return err
	}
	rdb, err := rf.open(ctx, e)
	if err != nil {
		return err
	}
	defer rdb.Close()
	o := af.options(e.stdout)
	o.DryRun = dryRun
	out, err := results.Archive(ctx, ledger.New(rdb), o)
	printArchived(e.stdout, out)
	return archiveErr(err)
}

func archiveErr(err error) error {
	var ce *ledger.ChangedError
	switch {
	case err == nil:
		return nil
	case errors.Is(err, results.ErrMismatch), errors.As(err, &ce):
		return &exitError{ExitRejected, err}
	}
	return infraErr(err)
}

func printArchived(w io.Writer, out []results.ArchiveOutcome) {
	for _, o := range out {
		switch {
		case o.DryRun && o.Skipped != "":
			fmt.Fprintf(w, "%s (%s): would be left in Redis: %s (dry run)\n", o.Batch, term(o.File), o.Skipped)
		case o.DryRun && o.Resumed:
			fmt.Fprintf(w, "%s (%s): partly archived; would finish (dry run)\n", o.Batch, term(o.File))
		case o.DryRun:
			fmt.Fprintf(w, "%s (%s): %d payouts; would be archived (dry run)\n", o.Batch, term(o.File), o.Rows)
		case o.Skipped != "":
			fmt.Fprintf(w, "%s (%s): left in Redis: %s\n", o.Batch, term(o.File), o.Skipped)
		case o.Archive == "":
		default:
			resumed := ""
			if o.Resumed {
				resumed = " (finished an interrupted archive)"
			}
			fmt.Fprintf(w, "%s (%s): %d payouts archived to %s%s\n", o.Batch, term(o.File), o.Rows, o.Archive, resumed)
		}
	}
}

// spoolArchive is the archive step at the end of a spool run.
func spoolArchive(e *env, l *ledger.Ledger, spool string, af archiveFlags) func(context.Context) error {
	if af.olderThan <= 0 {
		return nil
	}
	o := af.options(e.stdout)
	if o.Dir == "" {
		o.Dir = filepath.Join(spool, "archive")
	}
	return func(ctx context.Context) error {
		out, err := results.Archive(ctx, l, o)
		printArchived(e.stdout, out)
		return err
	}
}

// resolveAny is resolveBatch that also accepts an archived batch: its
// summary is returned too (nil for a batch in Redis).
func resolveAny(ctx context.Context, l *ledger.Ledger, arg string) (string, *ledger.ArchivedBatch, error) {
	id := arg
	if fid, ok, err := fileBatch(ctx, arg); ok {
		if err != nil {
			return "", nil, err
		}
		id = fid
	}
	a, err := l.Archive().Archived(ctx, id)
	if err == nil {
		return id, &a, nil
	}
	if !errors.Is(err, ledger.ErrNotFound) {
		return "", nil, infraErr(err)
	}
	id, err = resolveBatch(ctx, l, arg)
	return id, nil, err
}

// refuseArchived turns an archived batch into a clear error for the
// commands that would change it.
func refuseArchived(ctx context.Context, l *ledger.Ledger, id string) error {
	err := l.Archive().CheckNotArchived(ctx, id)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, ledger.ErrArchived):
		return usageErr("%v", err)
	}
	return infraErr(err)
}

// withArchived adds the archived batches to the statuses of the batches
// in Redis (a batch being archived shows as archived, phase
// lifecycle.PhaseArchived), newest first, with the archive of each archived
// batch by id.
func withArchived(ctx context.Context, l *ledger.Ledger, sts []view.BatchStatus) ([]view.BatchStatus, map[string]string, error) {
	arch, err := l.Archive().ArchivedBatches(ctx)
	if err != nil {
		return nil, nil, err
	}
	if len(arch) == 0 {
		return sts, nil, nil
	}
	done := map[string]bool{}
	var all []view.BatchStatus
	paths := map[string]string{}
	for _, a := range arch {
		done[a.ID] = true
		paths[a.ID] = a.Archive
		all = append(all, view.BatchStatus{Batch: a.AsBatch(), Counts: a.Counts})
	}
	for _, s := range sts {
		if !done[s.ID] {
			all = append(all, s)
		}
	}
	sort.SliceStable(all, func(i, j int) bool { return all[i].LoadedAt.After(all[j].LoadedAt) })
	return all, paths, nil
}

// printArchivedStatus adds to payout status BATCH what an archived batch
// has: where and when.
func printArchivedStatus(w io.Writer, a *ledger.ArchivedBatch) {
	fmt.Fprintf(w, "archived  %s to %s (Redis keeps this summary only)\n", a.ArchivedAt.Format(time.RFC3339), a.Archive)
	fmt.Fprintf(w, "result    %s\n", a.Result)
	if a.Audit != "" {
		fmt.Fprintf(w, "audit     %s\n", a.Audit)
	}
	fmt.Fprintf(w, "claims    its externalIds stay refused to other files until %s\n", a.ClaimsTill.Format(time.RFC3339))
}

// reportArchived is payout report of an archived batch: the result file is
// written again from the archive.
func reportArchived(e *env, a *ledger.ArchivedBatch, format, out string, failedOnly, inCSV bool) error {
	if failedOnly {
		return usageErr("batch %s was archived at %s: its card numbers are no longer kept, so --failed-only cannot write them; its result file is %s",
			a.ID, a.ArchivedAt.Format(time.RFC3339), a.Result)
	}
	fmt.Fprintf(e.stderr, "batch %s was archived at %s: the report is read from %s\n", a.ID, a.ArchivedAt.Format(time.RFC3339), a.Archive)
	if out == "" {
		sum, err := results.WriteArchived(a.Archive, format, e.stdout, report.CSVOptions{SummaryInCSV: inCSV})
		if err != nil {
			return infraErr(fmt.Errorf("archived batch %s: %w", a.ID, err))
		}
		return summaryExit(sum.Final, sum.Reconciled, hasProblems(sum.ByState))
	}
	tmp := out + ".tmp"
	f, err := os.OpenFile(tmp, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o640)
	if err != nil {
		return infraErr(err)
	}
	sum, err := results.WriteArchived(a.Archive, format, f, report.CSVOptions{SummaryInCSV: inCSV})
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, out)
	}
	if err == nil && format == report.CSV && !inCSV {
		err = writeSummaryFile(report.SummaryPath(out), a, sum)
	}
	if err != nil {
		os.Remove(tmp)
		return infraErr(fmt.Errorf("archived batch %s: %w", a.ID, err))
	}
	if err := reportSummary(e.stdout, sum); err != nil {
		return err
	}
	return summaryExit(sum.Final, sum.Reconciled, hasProblems(sum.ByState))
}

// writeSummaryFile writes the summary file of an archived batch's result.
func writeSummaryFile(path string, a *ledger.ArchivedBatch, sum report.Summary) error {
	tmp := path + ".tmp"
	f, err := os.OpenFile(tmp, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o640)
	if err != nil {
		return err
	}
	err = report.WriteSummary(f, results.Batch(a.AsBatch()), sum)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		return os.Rename(tmp, path)
	}
	os.Remove(tmp)
	return err
}
