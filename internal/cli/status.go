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

	"github.com/acme/payout/internal/access"
	"github.com/acme/payout/internal/ledger"
	"github.com/acme/payout/internal/lifecycle"
	"github.com/acme/payout/internal/loader"
	"github.com/acme/payout/internal/operator"
	"github.com/acme/payout/internal/report"
	"github.com/acme/payout/internal/results"
	"github.com/acme/payout/internal/ui"
	"github.com/acme/payout/internal/view"
	"github.com/redis/go-redis/v9"
)

// statusView is one batch as payout status shows it: the figures of the
// UI's batches page, its phase for people included (ui.BatchView, built by
// operator.BatchViews with results.StatusPhase, as the UI does).
type statusView struct {
	ui.BatchView
	// NextRelease is the earliest pending release time of the batch's
	// scheduled payouts (ledger.Schedule.Next; absent: none scheduled).
	NextRelease *time.Time `json:"nextRelease,omitempty"`
}

// statusViews turns ledger statuses into what payout status shows;
// paused: the payout queue is paused.
func statusViews(sts []view.BatchStatus, archives map[string]string, paused bool) []statusView {
	views := operator.BatchViews(sts, paused)
	out := make([]statusView, len(views))
	for i, v := range views {
		v.Archive = archives[v.ID]
		out[i] = statusView{BatchView: v}
	}
	return out
}

func runStatus(ctx context.Context, e *env, args []string) error {
	fs := newFlags(e, "status", "[flags] [BATCH-or-FILE]")
	var (
		lf       logFlags
		rf       redisFlags
		rl       rolesFlags
		asJSON   bool
		watch    bool
		interval time.Duration
	)
	lf.register(fs)
	rf.register(fs)
	rl.register(fs)
	fs.BoolVar(&asJSON, "json", false, "print JSON instead of a table")
	fs.BoolVar(&watch, "watch", false, "refresh until interrupted (or until the batch is final)")
	fs.DurationVar(&interval, "interval", 2*time.Second, "refresh interval of --watch")
	if err := parse(e, fs, args); err != nil {
		return err
	}
	if fs.NArg() > 1 {
		return usageErr("give at most one batch id or file")
	}
	if err := rl.mayRead(ctx, e, "status"); err != nil {
		return err
	}
	rdb, err := rf.open(ctx, e)
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
		views, err := currentViews(ctx, l, rdb, batch)
		if err != nil {
			return infraErr(err)
		}
		if watch && isTerminal(e.stdout) {
			fmt.Fprint(e.stdout, "\033[H\033[2J")
		}
		if err := writeStatus(e.stdout, views, batch != "", arch, asJSON); err != nil {
			return err
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

// writeStatus prints views as a table (with the archived batch arch, if
// any) or as JSON: one object for one batch asked by name, else a list.
func writeStatus(w io.Writer, views []statusView, one bool, arch *ledger.ArchivedBatch, asJSON bool) error {
	if !asJSON {
		printStatus(w, views, one)
		if arch != nil {
			printArchivedStatus(w, arch)
		}
		return nil
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	if one && len(views) == 1 {
		return enc.Encode(views[0])
	}
	return enc.Encode(views)
}

// open counts the payouts with an automatic step still due, created ones
// awaiting their outcome included (ledger.Counts.Open).
func open(v statusView) int64 {
	n := v.Awaiting
	for _, s := range lifecycle.States {
		if s.Open() {
			n += v.Counts[string(s)]
		}
	}
	return n
}

func currentViews(ctx context.Context, l *ledger.Ledger, queue redis.UniversalClient, batch string) ([]statusView, error) {
	sts, err := view.New(l.Redis()).Statuses(ctx)
	if err != nil {
		return nil, err
	}
	all, archives, err := withArchived(ctx, l, sts)
	if err != nil {
		return nil, err
	}
	paused, err := operator.QueuePaused(ctx, queue)
	if err != nil {
		return nil, err
	}
	views := statusViews(all, archives, paused)
	for i := range views {
		if views[i].Counts[string(lifecycle.Scheduled)] == 0 {
			continue
		}
		next, err := l.Schedule().Next(ctx, views[i].ID)
		if err != nil {
			return nil, err
		}
		if !next.IsZero() {
			views[i].NextRelease = &next
		}
	}
	if batch != "" {
		for _, v := range views {
			if v.ID == batch {
				return []statusView{v}, nil
			}
		}
		return nil, fmt.Errorf("batch %s: %w", batch, ledger.ErrNotFound)
	}
	return views, nil
}

func printStatus(w io.Writer, views []statusView, detail bool) {
	if len(views) == 0 {
		fmt.Fprintln(w, "no batches")
		return
	}
	if detail {
		v := views[0]
		fmt.Fprintf(w, "batch     %s\nfile      %s\nloaded    %s\n", v.ID, term(v.File), v.LoadedAt.Format(time.RFC3339))
		fmt.Fprintf(w, "phase     %s\n", results.Phase{Label: v.PhaseLabel, Reason: v.PhaseReason})
		fmt.Fprintf(w, "progress  %s\n", bar(v))
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintln(tw, "state\trows\t")
		for _, s := range lifecycle.States {
			fmt.Fprintf(tw, "%s\t%d\t\n", s, v.Counts[string(s)])
			if s == lifecycle.Created {
				fmt.Fprintf(tw, "created, awaiting outcome\t%d\t\n", v.Awaiting)
			}
		}
		tw.Flush()
		fmt.Fprintf(w, "amount paid %s, failed %s, awaiting outcome %s, created %s, of %s\n",
			v.AmountPaid, v.AmountFailed, v.AmountAwaiting, v.AmountCreated, v.AmountTotal)
		printScheduled(w, views)
		return
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	head := "BATCH\tFILE\tLOADED\tPHASE\tROWS\t"
	for _, s := range lifecycle.States {
		head += strings.ToUpper(s.Label()) + "\t"
		if s == lifecycle.Created {
			head += "AWAITING\t"
		}
	}
	fmt.Fprintln(tw, head+"AMOUNT PAID / CREATED / TOTAL")
	for _, v := range views {
		file := term(v.File)
		if v.Archive != "" {
			file += " (archived)"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t", v.ID, file, v.LoadedAt.Local().Format("2006-01-02 15:04"), v.PhaseLabel, v.Rows)
		for _, s := range lifecycle.States {
			fmt.Fprintf(tw, "%d\t", v.Counts[string(s)])
			if s == lifecycle.Created {
				fmt.Fprintf(tw, "%d\t", v.Awaiting)
			}
		}
		fmt.Fprintf(tw, "%s / %s / %s\n", v.AmountPaid, v.AmountCreated, v.AmountTotal)
	}
	tw.Flush()
	printScheduled(w, views)
}

// printScheduled says how many payouts of views wait for their release
// time and the earliest of those times: "scheduled: 3 payouts, next
// release 2026-12-10T00:00:00Z" (nothing when none waits).
func printScheduled(w io.Writer, views []statusView) {
	var (
		n    int64
		next time.Time
	)
	for _, v := range views {
		n += v.Counts[string(lifecycle.Scheduled)]
		if v.NextRelease != nil && (next.IsZero() || v.NextRelease.Before(next)) {
			next = *v.NextRelease
		}
	}
	if n == 0 {
		return
	}
	fmt.Fprintf(w, "scheduled: %d payouts", n)
	if !next.IsZero() {
		fmt.Fprintf(w, ", next release %s", next.UTC().Format(time.RFC3339))
	}
	fmt.Fprintln(w)
}

func bar(v statusView) string {
	const width = 30
	pct := 100.0
	if v.Rows > 0 {
		pct = 100 * float64(v.Rows-open(v)) / float64(v.Rows)
	}
	n := int(pct / 100 * width)
	return fmt.Sprintf("[%s%s] %.1f%% final", strings.Repeat("#", n), strings.Repeat(".", width-n), pct)
}

// fileBatch is the batch id of the payout file arg, computed as its load
// computed it (a CSV's bytes, a workbook's cells): ok is false when arg
// is no file.
func fileBatch(ctx context.Context, arg string) (id string, ok bool, err error) {
	if fi, err := os.Stat(arg); err != nil || fi.IsDir() {
		return "", false, nil
	}
	id, err = loader.FileBatchID(ctx, arg, "")
	if err != nil {
		return "", true, usageErr("%v", err)
	}
	return id, true, nil
}

// resolveBatch accepts a batch id or a payout file (found by its content,
// so any copy of the file works; a workbook by its cells).
func resolveBatch(ctx context.Context, l *ledger.Ledger, arg string) (string, error) {
	if id, ok, err := fileBatch(ctx, arg); ok {
		if err != nil {
			return "", err
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

// reportCmd is one `payout report`: its flags and the batch or file named.
type reportCmd struct {
	e            *env
	lf           logFlags
	rf           redisFlags
	rl           rolesFlags
	kf           keyFlags
	format       string
	out          string
	failedOnly   bool
	force        bool
	inCSV        bool
	includeFinal bool
	arg          string // the batch id or payout file
}

// runReport writes the result file of a batch, live or archived, or with
// --failed-only its failed payouts as a payout file to load again.
func runReport(ctx context.Context, e *env, args []string) error {
	c := &reportCmd{e: e}
	if err := c.parse(args); err != nil {
		return err
	}
	if err := c.checkFormat(); err != nil {
		return err
	}
	// The failed rows come with their card numbers in clear, material for
	// a new load: they need the role that loads (maker), not only viewer.
	act := access.Read
	if c.failedOnly {
		act = access.Load
	}
	if err := c.rl.mayRun(ctx, e, "report", act); err != nil {
		return err
	}
	keys, err := c.keys()
	if err != nil {
		return err
	}
	rdb, err := c.rf.open(ctx, e)
	if err != nil {
		return err
	}
	defer rdb.Close()
	l := ledger.New(rdb)
	batch, arch, err := resolveAny(ctx, l, c.arg)
	if err != nil {
		return err
	}
	if arch != nil {
		return reportArchived(e, arch, c.format, c.out, c.failedOnly, c.inCSV)
	}
	if c.failedOnly {
		return runReportFailed(ctx, e, l, batch, keys, c.out, c.force, c.includeFinal)
	}
	return c.write(ctx, l, batch)
}

// parse registers and parses the flags of payout report.
func (c *reportCmd) parse(args []string) error {
	fs := newFlags(c.e, "report", "[flags] BATCH-or-FILE")
	c.lf.register(fs)
	c.rf.register(fs)
	c.rl.register(fs)
	fs.StringVar(&c.format, "format", "", "csv, json or xlsx (default: the --out file's extension, .xlsx or .json, else csv); csv is a clean table, its summary goes to NAME.summary.txt beside --out; xlsx has a Payouts and a Summary sheet")
	fs.StringVar(&c.out, "out", "", "write to this file instead of stdout (the summary then goes to stdout and, for csv, to NAME.summary.txt beside it); with --failed-only the default is NAME.failed.csv after the loaded file")
	fs.BoolVar(&c.inCSV, "summary-in-csv", false, "csv: end the result file with a blank line and the '# ...' summary lines (the layout before the summary file, for readers that parse it); no summary file is written")
	fs.BoolVar(&c.failedOnly, "failed-only", false, "write the failed payouts as a payout file to correct and load again: new externalIds (ID-R1, ID-R<n+1>), the reason each failed, card numbers in clear (needs the data key), mode 0600; payouts failed for good only with --include-final")
	fs.BoolVar(&c.force, "force", false, "with --failed-only: replace an existing --out file")
	fs.BoolVar(&c.includeFinal, "include-final", false, "with --failed-only: also write the payouts the PSP failed for good (reason account closed or card expired), left out by default")
	fs.StringVar(&c.kf.keyFile, "data-key-file", "", "with --failed-only: file holding the base64 data key that opens the card numbers in Redis (or the key itself in PAYOUT_DATA_KEY; old keys in PAYOUT_DATA_KEYS_OLD)")
	fs.BoolVar(&c.kf.plaintext, "insecure-plaintext", false, "with --failed-only: also read card numbers stored unencrypted by an --insecure-plaintext load (never in production)")
	if err := parse(c.e, fs, args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		fs.Usage()
		return usageErr("give one batch id or payout file")
	}
	c.arg = fs.Arg(0)
	return nil
}

// checkFormat settles --format (by default from --out) and checks it goes
// with --out and --summary-in-csv.
func (c *reportCmd) checkFormat() error {
	switch {
	case c.format == "" && c.out != "":
		c.format = report.FormatOf(c.out)
	case c.format == "":
		c.format = report.CSV
	case c.format != report.CSV && c.format != report.JSON && c.format != report.XLSX:
		return usageErr("--format %q: want csv, json or xlsx", c.format)
	case c.out != "" && report.FormatOf(c.out) != c.format && report.FormatOf(c.out) != report.CSV:
		return usageErr("--format %s does not match --out %s", c.format, c.out)
	}
	if c.inCSV && c.format != report.CSV {
		return usageErr("--summary-in-csv goes with the csv format")
	}
	return nil
}

// keys checks the flags that go with --failed-only and, with it, returns
// the data keys that open the card numbers (nil without it).
func (c *reportCmd) keys() (opener, error) {
	if !c.failedOnly {
		if c.force || c.includeFinal {
			return nil, usageErr("--force and --include-final go with --failed-only (a result file is always replaced)")
		}
		return nil, nil
	}
	if c.format != report.CSV {
		return nil, usageErr("--failed-only writes a payout file (CSV): drop --format %s", c.format)
	}
	ring, err := c.kf.keyring(c.e)
	var ee *exitError
	if errors.As(err, &ee) {
		return nil, &exitError{ee.code, fmt.Errorf("--failed-only writes the card numbers and needs the data key: %w", ee.err)}
	}
	if err != nil {
		return nil, err
	}
	return ring, nil
}

// write writes the result file of a live batch to stdout or, with --out,
// to files, and says by the exit code whether the batch is final and
// reconciled.
func (c *reportCmd) write(ctx context.Context, l *ledger.Ledger, batch string) error {
	opts := report.CSVOptions{SummaryInCSV: c.inCSV}
	if c.out == "" {
		sum, err := results.WriteWith(ctx, l, batch, c.format, c.e.stdout, opts)
		if err != nil {
			return infraErr(err)
		}
		return summaryExit(sum.Final, sum.Reconciled, hasProblems(sum.ByState))
	}
	sum, files, err := results.WriteFiles(ctx, l, batch, c.out, c.format, opts)
	if err != nil {
		return infraErr(err)
	}
	if err := reportSummary(c.e.stdout, sum); err != nil {
		return err
	}
	for _, f := range files {
		fmt.Fprintf(c.e.stdout, "%s file written: %s\n", f.Kind, f.Path)
	}
	return summaryExit(sum.Final, sum.Reconciled, hasProblems(sum.ByState))
}
