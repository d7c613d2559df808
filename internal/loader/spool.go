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

	"github.com/acme/payout/internal/batchreport"
	"github.com/acme/payout/internal/ledger"
	"github.com/acme/payout/internal/report"
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
	Load       Options
	Settle     time.Duration // a file must be unchanged this long before it is taken
	PurgeAfter time.Duration // delete done/failed files older than this; 0 keeps them
	// Archive, if set, runs after the result files are written, under the
	// spool lock (payout load --archive-after: package archive).
	Archive func(context.Context) error
}

// SpoolResult sums up one spool run.
type SpoolResult struct {
	Locked  bool // another loader holds the spool lock; nothing was done
	Files   []Result
	Reports []string // result files written
	Purged  int
}

// ErrLocked is returned when another loader runs on the same spool.
var ErrLocked = errors.New("another loader is running on this spool")

// Spool runs one pass over dir: resumes files left in processing/ by a
// killed run, loads settled files from inbox/, writes result files for
// batches that became final, and purges old input files. An exclusive
// flock on dir/.lock makes overlapping runs (cron firing while the last run
// is still busy) exit at once without touching anything.
func (ld *Loader) Spool(ctx context.Context, dir string, o SpoolOptions) (SpoolResult, error) {
	var out SpoolResult
	for _, sub := range []string{Inbox, Processing, Done, Failed, Outbox} {
		if err := os.MkdirAll(filepath.Join(dir, sub), 0o750); err != nil {
			return out, fmt.Errorf("spool: %w", err)
		}
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

	// Files a killed run left behind come first: their batches resume.
	left, err := listFiles(filepath.Join(dir, Processing), 0)
	if err != nil {
		return out, err
	}
	if err := ld.tidyControls(dir, left, o.Settle); err != nil {
		return out, err
	}
	fresh, err := listFiles(filepath.Join(dir, Inbox), o.Settle)
	if err != nil {
		return out, err
	}
	now := time.Now()
	for _, name := range fresh {
		// A file waits for its control file (control.go).
		take, withCtl := controlState(filepath.Join(dir, Inbox), name, o.Settle, o.Load.RequireControl, now)
		if !take {
			continue
		}
		if err := os.Rename(filepath.Join(dir, Inbox, name), filepath.Join(dir, Processing, name)); err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				continue // taken by someone else
			}
			return out, fmt.Errorf("spool: claim %s: %w", name, err)
		}
		if withCtl {
			if _, err := moveControl(filepath.Join(dir, Inbox, name), filepath.Join(dir, Processing, name)); err != nil {
				return out, err
			}
		}
		left = append(left, name)
	}
	for _, name := range left {
		if err := ctx.Err(); err != nil {
			return out, err
		}
		res, err := ld.spoolFile(ctx, dir, name, o)
		if err != nil {
			return out, err
		}
		out.Files = append(out.Files, res)
	}
	out.Reports, err = ld.writeFinalReports(ctx, dir)
	if err != nil {
		return out, err
	}
	if o.Archive != nil && !o.Load.DryRun {
		if err := o.Archive(ctx); err != nil {
			return out, err
		}
	}
	if o.PurgeAfter > 0 {
		out.Purged, err = purge(dir, o.PurgeAfter)
	}
	return out, err
}

func (ld *Loader) spoolFile(ctx context.Context, dir, name string, o SpoolOptions) (Result, error) {
	path := filepath.Join(dir, Processing, name)
	opts := o.Load
	if opts.Approval.By == "" {
		// Who loaded a dropped file is whoever owns it (--four-eyes).
		opts.Approval.By = fileOwner(path)
	}
	opts.controlWait = o.Settle
	res, err := ld.LoadFile(ctx, path, opts)
	if err != nil || res.Busy {
		return res, err // stays in processing/: the next run resumes it
	}
	dest := Done
	if !res.Loaded {
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
	// Its control file follows it (after it: a run killed in between
	// leaves a lone .ctl, never a file without its declaration).
	if _, err := moveControl(path, target); err != nil {
		return res, err
	}
	return res, nil
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
	statuses, err := ld.ledger.Statuses(ctx)
	if err != nil {
		return nil, err
	}
	var written []string
	for _, s := range statuses {
		final := s.Phase == ledger.PhaseLoaded || s.Phase == ledger.PhaseDiscarded
		if s.Reported || !final || s.Counts.Open() > 0 {
			continue
		}
		path := filepath.Join(dir, Outbox, s.File+".result.csv")
		if _, err := os.Stat(path); err == nil {
			path = filepath.Join(dir, Outbox, s.File+"."+s.ID+".result.csv")
		}
		// The result CSV and its summary file (FILE.summary.txt) beside it.
		sum, _, err := batchreport.WriteFiles(ctx, ld.ledger, s.ID, path, batchreport.CSV, batchreport.Options{})
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

// listFiles returns the regular files of dir that are settled: not hidden,
// not ending .part, .tmp or .ctl (a control file), and unmodified for at
// least settle.
func listFiles(dir string, settle time.Duration) ([]string, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("spool: %w", err)
	}
	var names []string
	now := time.Now()
	for _, e := range entries {
		n := e.Name()
		if !e.Type().IsRegular() || strings.HasPrefix(n, ".") || strings.HasSuffix(n, ".part") || strings.HasSuffix(n, ".tmp") || IsControlFile(n) {
			continue
		}
		info, err := e.Info()
		if err != nil {
			continue // vanished
		}
		if now.Sub(info.ModTime()) < settle {
			continue
		}
		names = append(names, n)
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
