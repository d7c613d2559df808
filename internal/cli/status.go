package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/acme/payout/internal/batchreport"
	"github.com/acme/payout/internal/ledger"
	"github.com/acme/payout/internal/loader"
	"github.com/acme/payout/internal/operator"
	"github.com/acme/payout/internal/ui"
)

// batchViews turns ledger statuses into the figures shown by `payout
// status`, the UI's batches page and its JSON API.
func batchViews(sts []ledger.BatchStatus) []ui.BatchView { return operator.BatchViews(sts) }

func runStatus(ctx context.Context, e *env, args []string) error {
	fs := newFlags(e, "status", "[flags] [BATCH-or-FILE]")
	var (
		lf       logFlags
		rf       redisFlags
		asJSON   bool
		watch    bool
		interval time.Duration
	)
	lf.register(fs)
	rf.register(fs)
	fs.BoolVar(&asJSON, "json", false, "print JSON instead of a table")
	fs.BoolVar(&watch, "watch", false, "refresh until interrupted (or until the batch is final)")
	fs.DurationVar(&interval, "interval", 2*time.Second, "refresh interval of --watch")
	if err := parse(e, fs, args); err != nil {
		return err
	}
	if fs.NArg() > 1 {
		return usageErr("give at most one batch id or file")
	}
	rdb, err := rf.open(ctx)
	if err != nil {
		return err
	}
	defer rdb.Close()
	l := ledger.New(rdb)
	batch := ""
	var arch *ledger.ArchivedBatch
	if fs.NArg() == 1 {
		if batch, arch, err = resolveAny(ctx, l, fs.Arg(0)); err != nil {
			return err
		}
	}
	for {
		views, err := currentViews(ctx, l, batch)
		if err != nil {
			return infraErr(err)
		}
		if watch && isTerminal(e.stdout) {
			fmt.Fprint(e.stdout, "\033[H\033[2J")
		}
		if asJSON {
			enc := json.NewEncoder(e.stdout)
			enc.SetIndent("", "  ")
			if batch != "" && len(views) == 1 {
				err = enc.Encode(views[0])
			} else {
				err = enc.Encode(views)
			}
			if err != nil {
				return err
			}
		} else {
			printStatus(e.stdout, views, batch != "")
			if arch != nil {
				printArchivedStatus(e.stdout, arch)
			}
		}
		if !watch || (batch != "" && len(views) == 1 && open(views[0]) == 0) {
			return nil
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(interval):
		}
	}
}

// open counts the payouts with an automatic step still due, created ones
// awaiting their outcome included (ledger.Counts.Open).
func open(v ui.BatchView) int64 {
	return v.Counts[string(ledger.Queued)] + v.Counts[string(ledger.Submitting)] + v.Counts[string(ledger.Checking)] + v.Awaiting
}

func currentViews(ctx context.Context, l *ledger.Ledger, batch string) ([]ui.BatchView, error) {
	sts, err := l.Statuses(ctx)
	if err != nil {
		return nil, err
	}
	views, err := withArchived(ctx, l, sts)
	if err != nil {
		return nil, err
	}
	if batch != "" {
		for _, v := range views {
			if v.ID == batch {
				return []ui.BatchView{v}, nil
			}
		}
		return nil, fmt.Errorf("batch %s: %w", batch, ledger.ErrNotFound)
	}
	return views, nil
}

func printStatus(w io.Writer, views []ui.BatchView, detail bool) {
	if len(views) == 0 {
		fmt.Fprintln(w, "no batches")
		return
	}
	if detail {
		v := views[0]
		fmt.Fprintf(w, "batch     %s\nfile      %s\nloaded    %s\n", v.ID, v.File, v.LoadedAt.Format(time.RFC3339))
		if v.State != "" && v.State != ledger.PhaseLoaded {
			fmt.Fprintf(w, "phase     %s\n", v.State)
		}
		if v.Interrupted {
			fmt.Fprintf(w, "          no payment is sent: load the same file again to complete it, or payout discard to abandon it\n")
		}
		fmt.Fprintf(w, "progress  %s\n", bar(v))
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintln(tw, "state\trows\t")
		for _, s := range ledger.States {
			fmt.Fprintf(tw, "%s\t%d\t\n", s, v.Counts[string(s)])
			if s == ledger.Created {
				fmt.Fprintf(tw, "created, awaiting outcome\t%d\t\n", v.Awaiting)
			}
		}
		tw.Flush()
		fmt.Fprintf(w, "amount paid %s, failed %s, awaiting outcome %s, created %s, of %s\n",
			v.AmountPaid, v.AmountFailed, v.AmountAwaiting, v.AmountCreated, v.AmountTotal)
		return
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "BATCH\tFILE\tLOADED\tROWS\tPAID\tFAILED\tAWAITING\tCREATED\tREJECTED\tREVIEW\tCHECKING\tQUEUED\tSUBMITTING\tAMOUNT PAID / CREATED / TOTAL")
	for _, v := range views {
		c := v.Counts
		file := v.File
		if v.Archive != "" {
			file += " (archived)"
		}
		if v.Interrupted {
			file += " (loading, interrupted)"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%s / %s / %s\n", v.ID, file, v.LoadedAt.Local().Format("2006-01-02 15:04"),
			v.Rows, c[string(ledger.Paid)], c[string(ledger.Failed)], v.Awaiting, c[string(ledger.Created)], c[string(ledger.Rejected)],
			c[string(ledger.NeedsReview)], c[string(ledger.Checking)], c[string(ledger.Queued)], c[string(ledger.Submitting)],
			v.AmountPaid, v.AmountCreated, v.AmountTotal)
	}
	tw.Flush()
}

func bar(v ui.BatchView) string {
	const width = 30
	pct := 100.0
	if v.Rows > 0 {
		pct = 100 * float64(v.Rows-open(v)) / float64(v.Rows)
	}
	n := int(pct / 100 * width)
	return fmt.Sprintf("[%s%s] %.1f%% final", strings.Repeat("#", n), strings.Repeat(".", width-n), pct)
}

// resolveBatch accepts a batch id or a payout file (found by its content
// hash, so any copy of the file works).
func resolveBatch(ctx context.Context, l *ledger.Ledger, arg string) (string, error) {
	if f, err := os.Open(arg); err == nil {
		defer f.Close()
		id, err := loader.BatchID(f)
		if err != nil {
			return "", usageErr("%v", err)
		}
		if err := refuseArchived(ctx, l, id); err != nil {
			return "", err
		}
		if _, err := l.Batch(ctx, id); err != nil {
			if errors.Is(err, ledger.ErrNotFound) {
				return "", usageErr("%s has not been loaded (no batch %s)", arg, id)
			}
			return "", infraErr(err)
		}
		return id, nil
	}
	if err := refuseArchived(ctx, l, arg); err != nil {
		return "", err
	}
	if _, err := l.Batch(ctx, arg); err != nil {
		if errors.Is(err, ledger.ErrNotFound) {
			return "", usageErr("%q is neither a file nor a known batch id", arg)
		}
		return "", infraErr(err)
	}
	return arg, nil
}

func runReport(ctx context.Context, e *env, args []string) error {
	fs := newFlags(e, "report", "[flags] BATCH-or-FILE")
	var (
		lf         logFlags
		rf         redisFlags
		kf         keyFlags
		format     string
		out        string
		failedOnly bool
		force      bool
	)
	lf.register(fs)
	rf.register(fs)
	fs.StringVar(&format, "format", "csv", "csv or json")
	fs.StringVar(&out, "out", "", "write to this file instead of stdout (the summary then goes to stdout); with --failed-only the default is NAME.failed.csv after the loaded file")
	fs.BoolVar(&failedOnly, "failed-only", false, "write the failed payouts as a payout file to correct and load again: new externalIds (ID-R1, ID-R<n+1>), card numbers in clear (needs the data key), mode 0600")
	fs.BoolVar(&force, "force", false, "with --failed-only: replace an existing --out file")
	fs.StringVar(&kf.keyFile, "data-key-file", "", "with --failed-only: file holding the base64 data key that opens the card numbers in Redis (or the key itself in PAYOUT_DATA_KEY; old keys in PAYOUT_DATA_KEYS_OLD)")
	fs.BoolVar(&kf.plaintext, "insecure-plaintext", false, "with --failed-only: also read card numbers stored unencrypted by an --insecure-plaintext load (never in production)")
	if err := parse(e, fs, args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		fs.Usage()
		return usageErr("give one batch id or payout file")
	}
	if format != batchreport.CSV && format != batchreport.JSON {
		return usageErr("--format %q: want csv or json", format)
	}
	var keys opener
	if failedOnly {
		if format != batchreport.CSV {
			return usageErr("--failed-only writes a payout file (CSV): drop --format %s", format)
		}
		ring, err := kf.keyring(e)
		var ee *exitError
		if errors.As(err, &ee) {
			return &exitError{ee.code, fmt.Errorf("--failed-only writes the card numbers and needs the data key: %w", ee.err)}
		}
		if err != nil {
			return err
		}
		keys = ring
	} else if force {
		return usageErr("--force goes with --failed-only (a result file is always replaced)")
	}
	rdb, err := rf.open(ctx)
	if err != nil {
		return err
	}
	defer rdb.Close()
	l := ledger.New(rdb)
	batch, arch, err := resolveAny(ctx, l, fs.Arg(0))
	if err != nil {
		return err
	}
	if arch != nil {
		return reportArchived(e, arch, format, out, failedOnly)
	}
	if failedOnly {
		return runReportFailed(ctx, e, l, batch, keys, out, force)
	}
	if out == "" {
		sum, err := batchreport.Write(ctx, l, batch, format, e.stdout)
		if err != nil {
			return infraErr(err)
		}
		return summaryExit(sum.Final, sum.Reconciled, hasProblems(sum.ByState))
	}
	sum, err := writeReportFile(ctx, l, batch, format, out)
	if err != nil {
		return infraErr(err)
	}
	if err := reportSummary(e.stdout, sum); err != nil {
		return err
	}
	return summaryExit(sum.Final, sum.Reconciled, hasProblems(sum.ByState))
}
