package loader

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/acme/payout/internal/lifecycle"
	"github.com/acme/payout/internal/payfile"
	"github.com/acme/payout/internal/report"
	"github.com/acme/payout/internal/results"
	"github.com/acme/payout/internal/view"
)

// Spool folders under the spool directory.
const (
	Inbox      = "inbox"      // finance drops files here
	Processing = "processing" // a file being loaded (claimed by rename)
	Done       = "done"       // loaded files
	Failed     = "failed"     // refused files
	Outbox     = "outbox"     // NAME.errors.csv and NAME.result.csv for finance
)

// SpoolOptions tune a spool run.
type SpoolOptions struct {
	Load Options
	// Delivery is the contract by which a file in inbox/ is known to be
	// complete (delivery.go); "" is DeliveryControl.
	Delivery Delivery
	// Settle: a file (and its control file) must be unchanged this long
	// before it is taken.
	Settle time.Duration
	// HeldReport: a file held longer than this is reported (0:
	// DefaultHeldReport).
	HeldReport time.Duration
	PurgeAfter time.Duration // delete done/failed files older than this; 0 keeps them
	// Archive, if set, runs after the result files are written, under the
	// spool lock (payout load --archive-after: package archive).
	Archive func(context.Context) error
	// Now is the clock the settle window and held files are judged by
	// (nil: time.Now).
	Now func() time.Time
}

func (o SpoolOptions) now() time.Time {
	if o.Now != nil {
		return o.Now()
	}
	return time.Now()
}

// SpoolResult sums up one spool run.
type SpoolResult struct {
	Locked  bool // another loader holds the spool lock; nothing was done
	Files   []Result
	Held    []HeldFile // files of inbox/ not taken, and why
	Reports []string   // result files written
	Purged  int
}

// Overdue returns the files held longer than SpoolOptions.HeldReport.
func (r SpoolResult) Overdue() []HeldFile {
	var out []HeldFile
	for _, h := range r.Held {
		if h.Overdue {
			out = append(out, h)
		}
	}
	return out
}

// ErrLocked is returned when another loader runs on the same spool.
var ErrLocked = errors.New("another loader is running on this spool")

// Spool runs one pass over dir: resumes files left in processing/ by a
// killed run, takes the files of inbox/ that are complete under the
// delivery contract (delivery.go) and loads them, writes result files for
// batches that became final, and purges old input files. An exclusive
// flock on dir/.lock makes overlapping runs (cron firing while the last run
// is still busy) exit at once without touching anything.
//
// A file that cannot be read (not a workbook, broken XML, a truncated
// package, binary data, empty) is refused: it goes to failed/ with
// outbox/NAME.errors.csv naming the cause, and the run goes on. An error
// of the infrastructure (Redis) while loading one file leaves that file in
// processing/ (the next run resumes it) and the run goes on with the next
// files; the errors are returned together at the end.
func (ld *Loader) Spool(ctx context.Context, dir string, o SpoolOptions) (SpoolResult, error) {
	var out SpoolResult
	delivery, err := ParseDelivery(string(o.Delivery))
	if err != nil {
		return out, err
	}
	if o.HeldReport <= 0 {
		o.HeldReport = DefaultHeldReport
	}
	if err := makeSpoolDirs(dir); err != nil {
		return out, err
	}
	unlock, err := lockDir(dir)
	if errors.Is(err, ErrLocked) {
		out.Locked = true
		return out, nil
	}
	if err != nil {
		return out, err
	}
	defer unlock()
	if err := writeDeliveryNote(dir, delivery); err != nil {
		return out, err
	}

	// Files a killed run left behind come first: their batches resume
	// (loading the same content again is idempotent: the batch id is its
	// hash).
	left, err := ld.leftBehind(dir)
	if err != nil {
		return out, err
	}
	now := o.now()
	if err := ld.tidyControls(dir, left, o.Settle, now); err != nil {
		return out, err
	}
	resumed := ld.resuming(left)
	taken, err := ld.takeInbox(dir, o, delivery, now, &out)
	if err != nil {
		return out, err
	}
	left = append(left, taken...)
	if err := writeHeld(dir, out.Held); err != nil {
		return out, err
	}
	out.Files, err = ld.spoolFiles(ctx, dir, left, resumed, o)
	if err != nil {
		return out, err
	}
	return out, ld.finishSpool(ctx, dir, o, &out)
}

// makeSpoolDirs makes the spool's folders that do not exist yet.
func makeSpoolDirs(dir string) error {
	for _, sub := range []string{Inbox, Processing, Done, Failed, Outbox} {
		if err := os.MkdirAll(filepath.Join(dir, sub), 0o750); err != nil {
			return fmt.Errorf("spool: %w", err)
		}
	}
	return nil
}

// leftBehind lists the files a killed run left in processing/, once the
// private copies and .sent marks it left without their file are gone.
func (ld *Loader) leftBehind(dir string) ([]string, error) {
	removeStaleCopies(filepath.Join(dir, Processing))
	removeOrphanSent(filepath.Join(dir, Processing), ld.log)
	return listFiles(filepath.Join(dir, Processing))
}

// resuming logs each file left in processing/ and returns them as a set.
func (ld *Loader) resuming(left []string) map[string]bool {
	resumed := make(map[string]bool, len(left))
	for _, name := range left {
		resumed[name] = true
		ld.log.Warn().Str("file", name).Msg("resuming a file left in processing/ by an interrupted run")
	}
	return resumed
}

// takeInbox takes the files of inbox/ that are complete under the delivery
// contract into processing/ and returns their names; the others are held,
// listed in out.Held.
func (ld *Loader) takeInbox(dir string, o SpoolOptions, delivery Delivery, now time.Time, out *SpoolResult) ([]string, error) {
	fresh, err := listFiles(filepath.Join(dir, Inbox))
	if err != nil {
		return nil, err
	}
	var taken []string
	for _, name := range fresh {
		in, ok := inspect(dir, name, o, delivery, now)
		if ok && in.take {
			in, ok = ld.take(dir, name, in)
		}
		if !ok || in.take {
			if in.take {
				taken = append(taken, name)
			}
			continue
		}
		h := HeldFile{File: name, Since: in.since, Reason: in.held, Overdue: now.Sub(in.since) >= o.HeldReport}
		out.Held = append(out.Held, h)
		ev := ld.log.Debug()
		if h.Overdue {
			ev = ld.log.Warn()
		}
		ev.Str("file", name).Time("since", h.Since).Str("reason", h.Reason).Msg("file held in inbox/, not taken")
	}
	return taken, nil
}

// spoolFiles loads the files in processing/, in order, and returns what
// became of them. A file whose load fails on the infrastructure stays in
// processing/ and the others go on; their errors come back together.
func (ld *Loader) spoolFiles(ctx context.Context, dir string, names []string, resumed map[string]bool, o SpoolOptions) ([]Result, error) {
	var files []Result
	var errs []error
	for _, name := range names {
		if err := ctx.Err(); err != nil {
			return files, err
		}
		res, err := ld.spoolFile(ctx, dir, name, resumed[name], o)
		if err != nil {
			if ctx.Err() != nil {
				return files, err
			}
			// This file stays in processing/ for the next run; the
			// others are not held up by it.
			ld.log.Error().Err(err).Str("file", name).Msg("file left in processing/: the next run resumes it")
			errs = append(errs, fmt.Errorf("%s: %w", name, err))
			continue
		}
		files = append(files, res)
	}
	return files, errors.Join(errs...)
}

// finishSpool ends a run whose files all loaded: result files for the
// batches that became final, the archive, the purge of old input files.
func (ld *Loader) finishSpool(ctx context.Context, dir string, o SpoolOptions, out *SpoolResult) error {
	var err error
	out.Reports, err = ld.writeFinalReports(ctx, dir)
	if err != nil {
		return err
	}
	if o.Archive != nil && !o.Load.DryRun {
		if err := o.Archive(ctx); err != nil {
			return err
		}
	}
	if o.PurgeAfter > 0 {
		out.Purged, err = purge(dir, o.PurgeAfter)
	}
	return err
}

// take moves the file name from inbox/ to processing/ (with its control
// file), then checks that it is the file inspected: one whose size or time
// changed meanwhile has a writer still at work, and goes back to inbox/,
// held. ok is false when the file vanished (taken by someone else).
func (ld *Loader) take(dir, name string, in intake) (intake, bool) {
	from, to := filepath.Join(dir, Inbox, name), filepath.Join(dir, Processing, name)
	if err := os.Rename(from, to); err != nil {
		if !errors.Is(err, fs.ErrNotExist) {
			in.take, in.held = false, fmt.Sprintf("cannot be moved to processing/: %v", err)
			return in, true
		}
		return in, false
	}
	fi, err := os.Stat(to)
	if err == nil && fi.Size() == in.size && fi.ModTime().Equal(in.modTime) {
		changed, err := privatize(to, in.size, in.modTime)
		if err != nil {
			ld.log.Error().Err(err).Str("file", name).Msg("no private copy of the file: the sender's file is read")
		}
		if changed {
			return ld.putBack(from, to, in)
		}
		if in.withCtl {
			if _, err := moveControl(from, to); err != nil {
				ld.log.Error().Err(err).Str("file", name).Msg("control file not moved beside its file; the next run brings it back")
			}
		}
		return in, true
	}
	return ld.putBack(from, to, in)
}

// putBack returns a file that changed while it was taken to inbox/, held.
func (ld *Loader) putBack(from, to string, in intake) (intake, bool) {
	if err := os.Rename(to, from); err != nil {
		// Left in processing/: it is loaded as it is now, and was
		// checked as it was a moment ago; say so loudly.
		ld.log.Error().Err(err).Str("file", filepath.Base(to)).Msg("a file changed while it was taken and could not be put back into inbox/")
		return in, true
	}
	in.take, in.held = false, "changed while it was being taken: a writer is still at work on it"
	return in, true
}

// sender is who loaded a dropped file, for the batch and four-eyes: the
// person its control file names (submitter=), else the account that
// delivered it (the sender's inode, when the spool loads its own copy) as a
// system identity, which never counts as a person. A control file at
// fault is left to the load, which refuses the file.
func sender(dir, name string, scale int) string {
	path := filepath.Join(dir, Processing, name)
	if c, found, problems, err := ReadControl(ControlPath(path), scale); found && err == nil && len(problems) == 0 && c.Submitter != "" {
		return c.Submitter
	}
	if by := fileOwner(sentPath(filepath.Join(dir, Processing), name)); by != "" {
		return by
	}
	return fileOwner(path)
}

// spoolFile loads the file name of processing/; resumed: it was there
// before this run, left by a run that was killed.
func (ld *Loader) spoolFile(ctx context.Context, dir, name string, resumed bool, o SpoolOptions) (Result, error) {
	path := filepath.Join(dir, Processing, name)
	opts := o.Load
	if opts.Approval.By == "" {
		opts.Approval.By = sender(dir, name, opts.File.Scale)
	}
	opts.controlWait = o.Settle
	res, err := ld.probe(ctx, path, opts)
	if err == nil && len(res.Errors) == 0 {
		res, err = ld.LoadFile(ctx, path, opts)
	}
	if fe, ok := fileFault(err); ok {
		// The file, not the infrastructure, is at fault: refused.
		ld.log.Warn().Err(err).Str("file", name).Msg("file cannot be read: refused")
		fe.File = name
		res, err = Result{File: name, Batch: res.Batch, Errors: []payfile.Error{fe}}, nil
	}
	if err != nil || res.Busy {
		return res, err // stays in processing/: the next run resumes it
	}
	dest := Done
	// A file the killed run had loaded (its batch, from this very file,
	// exists) is done, not a duplicate of itself.
	ownBatch := resumed && res.DuplicateOf != nil && res.DuplicateOf.ID == res.Batch && res.DuplicateOf.File == name && len(res.Errors) == 0
	if !res.Loaded && !ownBatch {
		dest = Failed
		if err := writeErrors(dir, name, res); err != nil {
			return res, err
		}
	} else if len(res.Errors) > 0 {
		if err := writeErrors(dir, name, res); err != nil {
			return res, err
		}
	}
	target := uniquePath(filepath.Join(dir, dest, name))
	if err := os.Rename(path, target); err != nil {
		return res, fmt.Errorf("spool: move %s to %s: %w", name, dest, err)
	}
	// Processed payout files hold card numbers: owner only.
	if err := os.Chmod(target, 0o600); err != nil {
		return res, fmt.Errorf("spool: chmod %s: %w", target, err)
	}
	if later, size := sentLater(filepath.Join(dir, Processing), name, target); later {
		msg := fmt.Sprintf("its sender wrote to the file after it was taken (it is %d bytes now): what was loaded is the file as taken (%s); the rest is not loaded: the sender breaks the delivery contract",
			size, filepath.Join(dest, filepath.Base(target)))
		ld.log.Error().Str("file", name).Int64("bytes_now", size).Msg(msg)
		res.Warnings = append(res.Warnings, msg)
	}
	// Its control file follows it (after it: a run killed in between
	// leaves a lone .ctl, never a file without its declaration).
	if _, err := moveControl(path, target); err != nil {
		return res, err
	}
	return res, nil
}

// probe reads a workbook through once before the load touches Redis: one
// that cannot be read at all (broken XML, a damaged package) is refused
// here, with the reason, rather than failing the load as an error. Any
// error it meets is the file's (it reads nothing else), save a cancelled
// ctx.
func (ld *Loader) probe(ctx context.Context, path string, opts Options) (Result, error) {
	name := filepath.Base(path)
	res := Result{File: name}
	if !payfile.IsWorkbook(name) {
		return res, nil
	}
	f, err := os.Open(path)
	if err != nil {
		return res, err // an *fs.PathError: "open PATH: why"
	}
	defer f.Close()
	_, err = payfile.WorkbookDigest(ctx, f, opts.File.Sheet)
	switch {
	case err == nil || errors.Is(err, payfile.ErrNotWorkbook):
		return res, nil // loads, or is refused by validation with the reason
	case ctx.Err() != nil:
		return res, ctx.Err()
	}
	res.Errors = []payfile.Error{unreadable(name, err)}
	return res, nil
}

// unreadable is the refusal of a file that cannot be read, for cause.
func unreadable(name string, cause error) payfile.Error {
	return payfile.Error{File: name, Line: 0, Column: payfile.ColumnFile, Kind: payfile.KindEncoding,
		Message: fmt.Sprintf("the file cannot be read (%v): save it again from the spreadsheet as Excel Workbook (.xlsx), or as CSV UTF-8 and name it .csv", cause)}
}

// fileFault returns the refusal for a load error that is the file's
// fault: a payfile.Error (the file stopped being readable) or
// payfile.ErrFileChanged (it changed while being read). Any other error
// (Redis, the filesystem of the spool) is the infrastructure's.
func fileFault(err error) (payfile.Error, bool) {
	var pe payfile.Error
	switch {
	case err == nil:
		return pe, false
	case errors.As(err, &pe):
		return pe, true
	case errors.Is(err, payfile.ErrFileChanged):
		return payfile.Error{Line: 0, Column: payfile.ColumnFile, Kind: payfile.KindEncoding,
			Message: "the file changed while it was being read: a writer is still at work on it (see the delivery contract); deliver it again"}, true
	}
	return pe, false
}

func writeErrors(dir, name string, res Result) error {
	rows := make([]report.ErrorRow, 0, len(res.Errors)+1)
	if res.DuplicateOf != nil {
		d := res.DuplicateOf
		rows = append(rows, report.ErrorRow{File: name, Line: 0, Column: "file",
			Message: fmt.Sprintf("same content as %s, already loaded as batch %s at %s; nothing loaded", d.File, d.ID, d.LoadedAt.Format(time.RFC3339))})
	}
	for _, e := range res.Errors {
		rows = append(rows, report.ErrorRow{File: e.File, Line: e.Line, Column: e.Column, Message: e.Message})
	}
	if res.LocaleAmounts > 0 {
		// Once for the file, not on every row: the spool's own option.
		rows = append(rows, report.ErrorRow{File: name, Line: 0, Column: payfile.ColumnFile,
			Message: payfile.AmountFormatHint(res.LocaleAmounts, "payout load --spool DIR --amount-format")})
	}
	return writeAtomic(filepath.Join(dir, Outbox, name+".errors.csv"), func(f *os.File) error {
		return report.WriteErrorsCSV(f, func(yield func(report.ErrorRow) bool) {
			for _, r := range rows {
				if !yield(r) {
					return
				}
			}
		})
	})
}

// writeFinalReports writes outbox/FILE.result.csv for every batch that has
// no row left in a non-final state and has no result file yet.
func (ld *Loader) writeFinalReports(ctx context.Context, dir string) ([]string, error) {
	statuses, err := view.New(ld.ledger.Redis()).Statuses(ctx)
	if err != nil {
		return nil, err
	}
	var written []string
	for _, s := range statuses {
		final := s.Phase == lifecycle.PhaseLoaded || s.Phase == lifecycle.PhaseDiscarded
		if s.Reported || !final || s.Counts.Open() > 0 {
			continue
		}
		path := filepath.Join(dir, Outbox, s.File+".result.csv")
		if _, err := os.Stat(path); err == nil {
			path = filepath.Join(dir, Outbox, s.File+"."+s.ID+".result.csv")
		}
		// The result CSV and its summary file (FILE.summary.txt) beside it.
		sum, _, err := results.WriteFiles(ctx, ld.ledger, s.ID, path, report.CSV, report.CSVOptions{})
		if err != nil {
			return written, err
		}
		audit := strings.TrimSuffix(path, ".result.csv") + ".audit.jsonl"
		if err := ld.writeAuditFile(ctx, audit, s.ID); err != nil {
			return written, err
		}
		ld.notifyFinal(ctx, s.ID, sum)
		if err := ld.ledger.MarkReported(ctx, s.ID); err != nil {
			return written, err
		}
		written = append(written, path)
	}
	return written, nil
}

// writeAtomic writes through a temporary file renamed into place, so that
// finance never sees half a file.
func writeAtomic(path string, write func(*os.File) error) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*.tmp")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if err := write(tmp); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Chmod(0o640); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}

// listFiles returns the regular files of dir that may be payout files:
// not ignored (hidden, a sender's temporary name, a control file).
func listFiles(dir string) ([]string, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("spool: %w", err)
	}
	var names []string
	for _, e := range entries {
		if n := e.Name(); e.Type().IsRegular() && !ignored(n) {
			names = append(names, n)
		}
	}
	sort.Strings(names)
	return names, nil
}

func uniquePath(p string) string {
	if _, err := os.Stat(p); errors.Is(err, fs.ErrNotExist) {
		return p
	}
	ext := filepath.Ext(p)
	base := strings.TrimSuffix(p, ext)
	for i := 1; ; i++ {
		q := fmt.Sprintf("%s.%d%s", base, i, ext)
		if _, err := os.Stat(q); errors.Is(err, fs.ErrNotExist) {
			return q
		}
	}
}

func purge(dir string, age time.Duration) (int, error) {
	n := 0
	for _, sub := range []string{Done, Failed} {
		entries, err := os.ReadDir(filepath.Join(dir, sub))
		if err != nil {
			return n, err
		}
		for _, e := range entries {
			info, err := e.Info()
			if err != nil || !e.Type().IsRegular() || time.Since(info.ModTime()) < age {
				continue
			}
			if err := os.Remove(filepath.Join(dir, sub, e.Name())); err == nil {
				n++
			}
		}
	}
	return n, nil
}

// lockDir takes an exclusive, non-blocking flock on dir/.lock. The lock
// dies with the process, so a killed loader never leaves it stale.
func lockDir(dir string) (func(), error) {
	f, err := os.OpenFile(filepath.Join(dir, ".lock"), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, fmt.Errorf("spool lock: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, ErrLocked
		}
		return nil, fmt.Errorf("spool lock: %w", err)
	}
	return func() {
		_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
		f.Close()
	}, nil
}
