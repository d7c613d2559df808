// Package loader turns payout files into ledger entries and create tasks,
// one file at a time (LoadFile) or from a spool directory under its
// delivery contract (Spool).
//
// The spool protocol (spool.go, delivery.go, resume.go) is half of the
// package: the inbox, processing, done, failed and outbox folders, when a
// file in the inbox is complete (delivery.go), the resumption of a run that
// was killed, the result files of batches that became final and the purge
// of old input files.
//
// Loading a file takes three streaming reads and writes nothing of it until
// the file is known to be acceptable:
//
//  1. hash the content: the batch id is derived from it, so the same content
//     under any name is recognised and never loaded twice;
//  2. validate every row (package payfile) and, as the valid rows go by,
//     claim their externalIds for the batch in the background (in a dry
//     run, only look them up): one owned by an earlier batch is an error
//     like any other, and a refused file releases the claims it took
//     (never one of a row registered by an earlier run: see release);
//  3. register the rows in the ledger (state queued) chunk by chunk, the
//     reading and sealing overlapping the registering; then mark the batch
//     loaded and only then enqueue one create task per queued payout.
//
// The batch exists, in phase "loading", from before its first claim, under
// its load lock (a lease the loader renews while it works): a loader that
// dies or fails leaves a batch that `payout status` shows as "loading,
// interrupted" once the lease has expired or been released. No task of it
// exists before it is loaded, and the workers refuse a create of a batch
// that is not loaded (ledger.BeginCreate holds it): a batch pays only when
// all of it is loaded. Running the same content again resumes: claims,
// registrations and enqueues are all idempotent (task IDs derive from the
// externalId); a loader killed while enqueuing leaves a loaded batch with
// TasksPending, which a rerun (or the reconciler) completes. `payout
// discard` abandons an interrupted load and releases its claims.
package loader

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/acme/payout/internal/approval"
	"github.com/acme/payout/internal/extid"
	"github.com/acme/payout/internal/ledger"
	"github.com/acme/payout/internal/lifecycle"
	"github.com/acme/payout/internal/money"
	"github.com/acme/payout/internal/notify"
	"github.com/acme/payout/internal/payfile"
	"github.com/acme/payout/internal/queue"
	"github.com/rs/zerolog"
	"golang.org/x/sync/errgroup"
)

// Sealer encrypts a card number bound to its payout.
type Sealer interface {
	Seal(plaintext, additionalData string) (string, error)
}

// Options tune a load.
type Options struct {
	File           payfile.Options
	Partial        bool // load the valid rows of a file that has invalid ones
	DryRun         bool // validate only; write nothing
	ChunkSize      int  // rows per ledger round trip (default 500)
	EnqueueWorkers int  // concurrent enqueues (default DefaultEnqueueWorkers)
	Progress       time.Duration
	Approval       Approval
	// Expect is what the command line declares the file holds
	// (--expect-rows, --expect-total); a sidecar NAME.ctl is read besides
	// (control.go). A file at odds with a declaration is refused.
	Expect         Control
	RequireControl bool // refuse a file that declares nothing
	// Velocity is the recipient velocity limit (velocity.go; zero: off).
	Velocity Velocity
	// Release holds the file's payouts until a release time (release.go).
	Release     Release
	controlWait time.Duration // spool: how long a missing NAME.ctl was waited for
	// interrupt, for the tests, is called at the points of a load where a
	// crash is interesting; an error it returns ends the load there. The
	// load's registrars and enqueuers reach those points concurrently;
	// withDefaults makes the calls one at a time.
	interrupt func(point string, rows int) error
}

// The points of a load passed to Options.interrupt.
const (
	pointLocked     = "locked"     // the batch is begun, nothing claimed
	pointClaimed    = "claimed"    // rows claimed so far (every chunk of the claim pass)
	pointRegistered = "registered" // rows registered so far (every chunk)
	pointLoaded     = "loaded"     // every row registered, the batch not yet marked loaded
	pointEnqueued   = "enqueued"   // the batch marked loaded, tasks enqueued so far
)

func (o Options) hook(point string, rows int) error {
	if o.interrupt == nil {
		return nil
	}
	return o.interrupt(point, rows)
}

// Approval decides whether a loaded batch goes to the workers at once or
// waits, registered but without a single task, for payout approve.
type Approval struct {
	Required bool   // every batch waits (unless below AutoBelow)
	By       string // who loads; recorded, and compared by four-eyes
	// FourEyes records on the batch that a second person must approve it
	// (ledger.Batch.FourEyes): its loader's approval is refused by every
	// approval path.
	FourEyes bool
	// AutoBelow, with Required, lets a batch whose total is below it go at
	// once (zero: none does).
	AutoBelow money.Amount
	// MaxBatchTotal: a batch above it always waits (zero: no limit).
	MaxBatchTotal money.Amount
	// DailyLimit: a batch that would take the sum let go today (UTC) over
	// it waits (zero: no limit). Checked and counted atomically in Redis.
	DailyLimit money.Amount
	// Rules are the approval rules (--approval-rules): a batch one of them
	// matches waits for the approvals that rule asks for, whatever
	// Required and AutoBelow say; the rule is recorded on the batch.
	Rules approval.Set
	// Expiry is how long a batch awaiting approval may wait: then the
	// reconciler discards it (zero: it never expires).
	Expiry time.Duration
}

// decision is a load's approval decision: why the batch waits ("" : it
// goes), whether the day's sum was reserved, and the rule it waits
// under (ok false: none, one approval).
type decision struct {
	reason   string
	reserved bool
	rule     approval.Rule
	ruled    bool
}

// figures records d on f.
func (d decision) figures(f ledger.Figures) ledger.Figures {
	f.Hold, f.Reserved = d.reason, d.reserved
	if d.ruled {
		f.Need, f.Role, f.Rule = d.rule.N, string(d.rule.Role), d.rule.String()+" ("+d.rule.Source+")"
	}
	return f
}

// decide is hold with the approval rules first: a batch a rule matches
// waits for that rule's approvals, and nothing is reserved.
func (ld *Loader) decide(ctx context.Context, a Approval, facts approval.Facts, scale int) (decision, error) {
	if r, ok := a.Rules.Match(facts); ok {
		return decision{reason: "approval rule " + r.String() + " (" + r.Source + ")", rule: r, ruled: true}, nil
	}
	reason, reserved, err := ld.hold(ctx, a, facts.Total, scale)
	return decision{reason: reason, reserved: reserved}, err
}

// hold decides, before anything is registered, whether the batch must
// wait for approval and why; when it may go, the day's sum is reserved
// (reserved). Amounts in the reason have the file's decimals (scale).
func (ld *Loader) hold(ctx context.Context, a Approval, total money.Amount, scale int) (reason string, reserved bool, err error) {
	switch {
	case a.Required && !(a.AutoBelow.Cmp(money.Zero) > 0 && total.Cmp(a.AutoBelow) < 0):
		return "approval required", false, nil
	case a.MaxBatchTotal.Cmp(money.Zero) > 0 && total.Cmp(a.MaxBatchTotal) > 0:
		return fmt.Sprintf("total %s is above the batch limit %s", total.StringFixed(scale), a.MaxBatchTotal.StringFixed(scale)), false, nil
	}
	if _, _, err := ld.ledger.Controls().ReserveDaily(ctx, total, a.DailyLimit, scale); err != nil {
		if errors.Is(err, ledger.ErrDailyLimit) || errors.Is(err, money.ErrCeiling) {
			return err.Error(), false, nil
		}
		return "", false, err
	}
	return "", true, nil
}

func (o Options) withDefaults() Options {
	if o.ChunkSize <= 0 {
		o.ChunkSize = 500
	}
	if o.ChunkSize > 2000 {
		o.ChunkSize = 2000 // the register script unpacks 2 values a row; Lua's limit is about 8,000
	}
	if o.EnqueueWorkers <= 0 {
		o.EnqueueWorkers = DefaultEnqueueWorkers
	}
	if o.Progress <= 0 {
		o.Progress = 2 * time.Second
	}
	if f := o.interrupt; f != nil {
		var mu sync.Mutex
		o.interrupt = func(point string, rows int) error {
			mu.Lock()
			defer mu.Unlock()
			return f(point, rows)
		}
	}
	return o
}

// DefaultEnqueueWorkers is the default number of concurrent enqueues. With
// an autopipelining Redis client (payout load's default) they share round
// trips, so more of them mean deeper pipelines rather than more connections.
const DefaultEnqueueWorkers = 64

// Result is what happened to one file.
type Result struct {
	File        string // base name
	Batch       string
	Rows        int          // data rows in the file
	Sheet       string       // the sheet read, for a workbook
	HiddenRows  int          // of Rows, those a workbook's sheet does not show (payfile.Summary.HiddenRows)
	Valid       int          // rows without error
	Total       money.Amount // sum of the valid rows
	Scale       int          // decimal places of the file's amounts: how Total is shown (Total.StringFixed(Scale))
	InfoColumns []string     // the file's informational columns (payfile.Summary.Info)
	Errors      []payfile.Error
	Warnings    []string // said once for the file; refuse nothing (payfile.Summary.Warnings)
	Registered  int      // ledger entries written by this run
	Scheduled   int      // of them, payouts scheduled for a release time by this run
	// ReleaseAt is the batch's release time (zero: none; rows may have
	// their own pay dates).
	ReleaseAt time.Time
	Enqueued  int    // create tasks enqueued by this run
	Held      string // why the batch awaits approval ("" when it went to the workers)
	// VelocityHeld counts the rows held over their recipient's velocity
	// limit (--velocity-action hold): registered in state held, no task.
	VelocityHeld int
	Loaded       bool // rows were loaded (or would be, in a dry run)
	Resumed      bool // an interrupted load of the same content was completed
	Busy         bool // another loader is loading the same content right now; nothing done
	DuplicateOf  *ledger.Batch
	// Control: the declarations the file was checked against.
	Control []Control
	// expiry is how long the batch may await approval (Approval.Expiry,
	// as recorded in its policy).
	expiry time.Duration
	// LocaleAmounts counts the amounts refused that look written in
	// another locale's format (payfile.Summary.LocaleAmounts): the caller
	// says once how to declare the format, in its own terms.
	LocaleAmounts int
}

// stageDepth is how many chunks may wait between two stages of a load:
// enough to ride out a slow round trip, few enough that memory does not
// grow with the file (about 2 MB at the default chunk size).
const stageDepth = 4

// LoadLockTTL bounds how long a dead loader blocks a rerun of its batch,
// and how long after its death `payout status` says the load is
// interrupted; a live loader renews the lock every LoadLockTTL/4 and with
// every chunk it registers.
const LoadLockTTL = 20 * time.Second

// loadLockTTL is LoadLockTTL (a variable for the tests).
var loadLockTTL = LoadLockTTL

// ErrRefused is wrapped by the error of a refused file.
var ErrRefused = errors.New("file refused")

// Loader loads payout files.
type Loader struct {
	ledger *ledger.Ledger
	queue  *queue.Queue
	sealer Sealer
	log    zerolog.Logger
	Notify *notify.Emitter // held and final batches are notified to it (nil: none)
}

// New returns a Loader writing to l and enqueuing in q.
func New(l *ledger.Ledger, q *queue.Queue, s Sealer, log zerolog.Logger) *Loader {
	return &Loader{ledger: l, queue: q, sealer: s, log: log}
}

// BatchID derives a batch id from a file's content.
func BatchID(r io.Reader) (string, error) {
	h := sha256.New()
	if _, err := io.Copy(h, r); err != nil {
		return "", fmt.Errorf("hash payout file: %w", err)
	}
	return hex.EncodeToString(h.Sum(nil))[:20], nil
}

// FileBatchID is the batch id the loader gives the file at path, read
// with the sheet named (empty: the workbook's first sheet not hidden):
// the one way a file name is turned into its batch, for CSV and XLSX
// alike, so that every command naming a file finds the batch its load
// made.
func FileBatchID(ctx context.Context, path, sheet string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	return fileBatchID(ctx, f, filepath.Base(path), payfile.Options{Sheet: sheet})
}

// fileBatchID is the batch id of the file at path, opened as f: the hash
// of its bytes, or for an XLSX workbook the hash of its sheet's cells, so
// that the same data saved again (other metadata, other formats) is the
// same batch.
func fileBatchID(ctx context.Context, f io.ReadSeeker, name string, opts payfile.Options) (string, error) {
	if !payfile.IsWorkbook(name) {
		return BatchID(f)
	}
	d, err := payfile.WorkbookDigest(ctx, f, opts.Sheet)
	if errors.Is(err, payfile.ErrNotWorkbook) {
		// Refused by validation with the reason; its bytes name the batch.
		if _, err := f.Seek(0, io.SeekStart); err != nil {
			return "", err
		}
		return BatchID(f)
	}
	if err != nil {
		return "", fmt.Errorf("hash payout workbook: %w", err)
	}
	return hex.EncodeToString(d)[:20], nil
}

// LoadFile validates and loads one file. The returned error is for
// infrastructure faults and unreadable files; refusals are in Result.
func (ld *Loader) LoadFile(ctx context.Context, path string, opts Options) (Result, error) {
	opts = opts.withDefaults()
	name := filepath.Base(path)
	res := Result{File: name, Scale: opts.File.Decimals()}
	f, err := os.Open(path)
	if err != nil {
		return res, err // an *fs.PathError: "open PATH: why"
	}
	defer f.Close()
	if res.Batch, err = fileBatchID(ctx, f, name, opts.File); err != nil {
		return res, fmt.Errorf("%s: %w", path, err)
	}
	log := ld.log.With().Str("file", name).Str("batch", res.Batch).Logger()
	tasksOnly, done, err := ld.seenBefore(ctx, &res, log)
	if done || err != nil {
		return res, err
	}
	if tasksOnly && !opts.DryRun {
		// Loaded, but its loader died while enqueuing: add the missing tasks.
		res.Loaded = true
		n, err := ld.enqueueQueued(ctx, res.Batch, opts, log)
		res.Enqueued = n
		return res, err
	}

	// What the file declares it holds: a broken declaration, or none
	// where one is required, refuses it before anything is claimed.
	decls, problems, err := declarations(path, name, opts)
	if err != nil {
		return res, err
	}
	if len(problems) > 0 {
		res.Errors = problems
		return res, nil
	}
	res.Control = decls
	if problems := resolveRelease(path, name, &opts); len(problems) > 0 {
		res.Errors = problems
		return res, nil
	}
	res.ReleaseAt = opts.Release.at
	return ld.claimAndLoad(ctx, f, path, res, opts, log)
}

// claimAndLoad is LoadFile from the claim pass on, for a file (f, at
// path) not loaded before whose declarations (res.Control) hold: it
// takes the batch's load lease (unless a dry run), claims the file's
// externalIds, judges the file, and loads it, or gives back what it
// claimed if the file is refused or has no valid row.
func (ld *Loader) claimAndLoad(ctx context.Context, f *os.File, path string, res Result, opts Options, log zerolog.Logger) (Result, error) {
	var lk *loadLease
	if !opts.DryRun {
		// From here the batch exists, in phase loading, under this
		// loader's lease: an interruption from now on is visible.
		var (
			fresh bool
			err   error
		)
		if lk, fresh, err = ld.beginLoad(ctx, &res, opts, log); err != nil || lk == nil {
			return res, err
		}
		defer lk.stop()
		ctx = lk.ctx
		lk.fresh = fresh
		if err := opts.hook(pointLocked, 0); err != nil {
			return res, err
		}
	}

	pass, err := ld.claimPass(ctx, f, path, res.Batch, opts)
	if err != nil {
		return res, lk.cause(err)
	}
	bad := badLines(pass.sum.BadLines)
	if !judge(&res, pass, res.Control, bad, opts) || res.Valid == 0 {
		if !opts.DryRun {
			if err := ld.giveBack(ctx, f, res, opts, pass.took, bad, lk); err != nil {
				return res, err
			}
		}
		return res, nil
	}
	res.Loaded = true
	if opts.DryRun {
		return res, nil
	}
	vp, err := ld.countVelocity(ctx, f, res, opts, bad)
	if err != nil {
		return res, lk.cause(err)
	}
	if !vp.refuseOver(&res, bad, opts.Partial) {
		res.Loaded = false
		if err := vp.giveBack(ctx, ld.ledger, res.Batch); err != nil {
			return res, err
		}
		return res, ld.giveBack(ctx, f, res, opts, pass.took, bad, lk)
	}
	res, err = ld.load(ctx, f, res, opts, bad, lk, vp, log)
	return res, lk.cause(err)
}

// giveBack undoes the claim pass of a file that is not loaded (refused,
// or with no valid row): it releases the claims this run took (took) and
// drops the batch if this run created it and it holds no payout. The
// caller holds the load lease lk.
func (ld *Loader) giveBack(ctx context.Context, f *os.File, res Result, opts Options, took *lineBits, bad *lineSet, lk *loadLease) error {
	if err := ld.release(ctx, f, res, opts, took, bad, lk.owner); err != nil {
		return lk.cause(err)
	}
	if lk.fresh {
		if _, err := ld.ledger.DropEmptyBatch(ctx, res.Batch); err != nil {
			return err
		}
	}
	return nil
}

// loadLease is a loader's hold on its batch's load lock: renewed in the
// background every loadLockTTL/4; ctx is cancelled when it is lost.
type loadLease struct {
	ld     *Loader
	batch  string
	owner  string
	fresh  bool         // the batch was begun by this load: it had no rows
	meta   ledger.Batch // the batch as BeginBatch found or made it
	ctx    context.Context
	cancel context.CancelCauseFunc
	done   chan struct{}
	log    zerolog.Logger
}

// beginLoad takes the batch's load lock and begins the batch (phase
// loading), recording how its rows are read and its approval policy. It
// returns nil (and res.Busy) when another loader holds the lock, and nil
// (and res.DuplicateOf) when the batch is no longer loading (finished or
// discarded since seenBefore looked). A batch loading already, begun
// under other reading options, is refused (an *OptionsError): one batch
// never holds rows read two ways.
func (ld *Loader) beginLoad(ctx context.Context, res *Result, opts Options, log zerolog.Logger) (*loadLease, bool, error) {
	owner := rand.Text() // this run's token: only its holder may refresh or release the lock
	locked, err := ld.ledger.Locks().LockLoad(ctx, res.Batch, owner, loadLockTTL)
	if err != nil {
		return nil, false, err
	}
	if !locked { // another loader is loading this batch
		res.Busy = true
		return nil, false, nil
	}
	lctx, cancel := context.WithCancelCause(ctx)
	lk := &loadLease{ld: ld, batch: res.Batch, owner: owner, ctx: lctx, cancel: cancel, done: make(chan struct{}), log: log}
	go lk.renew()
	scale := opts.File.Scale
	if scale == 0 {
		scale = money.DefaultScale
	}
	stored, fresh, err := ld.ledger.BeginBatch(lctx, ledger.Batch{
		ID: res.Batch, File: res.File, LoadedAt: time.Now().UTC(), Total: money.Zero, Scale: scale,
		LoadedBy: opts.Approval.By, FourEyes: opts.Approval.FourEyes,
		Reading: encodeReading(opts), Policy: encodePolicy(opts.Approval),
	})
	switch {
	case err != nil:
		lk.stop()
		return nil, false, err
	case stored.Phase != lifecycle.PhaseLoading:
		lk.stop()
		res.Resumed = false
		res.DuplicateOf = &stored
		log.Warn().Str("phase", stored.Phase).Msg("the batch is no longer loading (finished or discarded meanwhile); nothing done")
		return nil, false, nil
	case !fresh && stored.Reading != "" && stored.Reading != encodeReading(opts):
		lk.stop()
		return nil, false, &OptionsError{Batch: res.Batch, Diffs: readingDiffs(stored.Reading, opts)}
	}
	lk.meta = stored
	return lk, fresh, nil
}

// renew extends the lock until stop; a lock found taken by another owner
// (it expired and another loader took it) cancels the load.
func (lk *loadLease) renew() {
	defer close(lk.done)
	t := time.NewTicker(loadLockTTL / 4)
	defer t.Stop()
	for {
		select {
		case <-lk.ctx.Done():
			return
		case <-t.C:
		}
		held, err := lk.ld.ledger.Locks().RefreshLoad(lk.ctx, lk.batch, lk.owner, loadLockTTL)
		if err != nil {
			continue // Redis unreachable: the load's own steps fail or the next renewal succeeds
		}
		if !held {
			lk.cancel(ledger.ErrLoadLockLost)
			return
		}
	}
}

// stop ends the renewal and releases the lock.
func (lk *loadLease) stop() {
	lk.cancel(nil)
	<-lk.done
	uctx, cancel := context.WithTimeout(context.WithoutCancel(lk.ctx), 5*time.Second)
	defer cancel()
	if err := lk.ld.ledger.Locks().UnlockLoad(uctx, lk.batch, lk.owner); err != nil {
		lk.log.Warn().Err(err).Msg("could not release the load lock; it expires by itself")
	}
}

// cause turns the cancellation of a lost lease into ErrLoadLockLost.
func (lk *loadLease) cause(err error) error {
	if lk == nil || err == nil || !errors.Is(err, context.Canceled) {
		return err
	}
	if c := context.Cause(lk.ctx); errors.Is(c, ledger.ErrLoadLockLost) {
		return fmt.Errorf("%w: %w", c, err)
	}
	return err
}

// judge fills in res's figures and errors from the claim pass and the
// file's declarations (bad gains the rows refused for an id owned
// elsewhere) and tells whether the file is acceptable: no error, or with
// --partial only errors of rows in a file read to its end.
func judge(res *Result, pass claimResult, decls []Control, bad *lineSet, opts Options) bool {
	sum := pass.sum
	res.Rows, res.Valid, res.Total, res.Warnings = sum.Rows, sum.ValidRows, sum.Total, sum.Warnings
	res.Sheet, res.HiddenRows, res.LocaleAmounts = sum.Sheet, sum.HiddenRows, sum.LocaleAmounts
	res.InfoColumns = sum.Info
	partialOK := opts.Partial && !sum.Aborted && !hasStructural(pass.errs)
	errs := refuseOwned(res, pass, bad)
	// A file at odds with what it declares is refused whole, --partial or
	// not; the caller releases the claims the pass took.
	mismatch := checkControl(res.File, decls, sum, pass.counted, opts.Partial, opts.File.Scale)
	// So is a file with a refused pay date: nothing of it is applied.
	mismatch = mergeSorted(mismatch, pass.dates)
	errs = mergeSorted(errs, mismatch)
	res.Errors = errs
	return len(mismatch) == 0 && (len(errs) == 0 || (partialOK && res.Valid > 0))
}

// seenBefore looks up res.Batch: done is true when the file's content was
// loaded before (res.DuplicateOf, also for a batch archived since); an
// interrupted load of it is resumed (res.Resumed), and tasksOnly says the
// batch is loaded but its loader died before every task was enqueued.
func (ld *Loader) seenBefore(ctx context.Context, res *Result, log zerolog.Logger) (tasksOnly, done bool, err error) {
	existing, err := ld.ledger.Batch(ctx, res.Batch)
	switch {
	case err == nil && existing.Phase == lifecycle.PhaseLoaded && existing.TasksPending:
		res.Resumed = true
		log.Warn().Msg("resuming an interrupted load of this file: enqueuing the missing tasks")
		return true, false, nil
	case err == nil && existing.Phase != lifecycle.PhaseLoading:
		res.DuplicateOf = &existing
		return false, true, nil
	case err == nil:
		res.Resumed = true
		log.Warn().Msg("resuming an interrupted load of this file")
		return false, false, nil
	case !errors.Is(err, ledger.ErrNotFound):
		return false, true, err
	}
	// An archived batch (package archive) keeps its content refused.
	a, err := ld.ledger.Archive().Archived(ctx, res.Batch)
	switch {
	case err == nil:
		b := a.AsBatch()
		res.DuplicateOf = &b
		return false, true, nil
	case !errors.Is(err, ledger.ErrNotFound):
		return false, true, err
	}
	return false, false, nil
}

// claimResult is what the validating and claiming pass found.
type claimResult struct {
	sum     payfile.Summary
	errs    []payfile.Error // rows refused on their own, sorted by line
	counted tally           // the whole file's figures, for its declarations
	known   []payfile.Error // rows whose externalId another batch owns, sorted by line
	took    *lineBits       // rows whose claim this pass took
	dates   []payfile.Error // rows whose pay date is refused, sorted by line
}

// claimPass is passes 2 and 3, in one read: validate every row and, as
// each row found valid goes by, claim its externalId for batch (SET NX; in
// a dry run only look it up), several chunks at once in the background.
// Claiming rather than looking up means a file loaded meanwhile cannot
// take an id between this check and registration; a refusal releases the
// claims this run took.
func (ld *Loader) claimPass(ctx context.Context, f *os.File, path, batch string, opts Options) (claimResult, error) {
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return claimResult{}, err
	}
	name := filepath.Base(path)
	owners := ld.newOwnerCheck(ctx, name, batch, opts.ChunkSize, !opts.DryRun)
	var counted tally
	var dates []payfile.Error
	n := 0
	sum, errs, err := payfile.CollectEach(owners.ctx, name, f, opts.File, func(r payfile.Row) error {
		counted.add(r)
		if _, err := opts.rowRelease(r, true); err != nil {
			dates = append(dates, dateError(name, r, opts.File.PayDateColumn, err))
		}
		if err := owners.add(r.ExternalID, r.Line); err != nil {
			return err
		}
		if n++; n%opts.ChunkSize == 0 {
			return opts.hook(pointClaimed, n)
		}
		return nil
	})
	known, took, werr := owners.wait()
	if err == nil || errors.Is(err, context.Canceled) && werr != nil {
		err = werr
	}
	if err != nil {
		return claimResult{}, fmt.Errorf("%s: %w", path, err)
	}
	return claimResult{sum: sum, errs: errs, counted: counted, known: known, took: took, dates: dates}, nil
}

// refuseOwned makes an id owned by another batch an error of its row,
// unless the row is bad already (a repeat within the file) or the file as
// a whole is (its rows after the failure were never read): it marks those
// rows bad, takes them from res.Valid and returns pass's errors with
// theirs.
func refuseOwned(res *Result, pass claimResult, bad *lineSet) []payfile.Error {
	if pass.sum.Aborted {
		return pass.errs
	}
	var owned []payfile.Error
	for _, e := range pass.known {
		if !bad.has(e.Line) {
			owned = append(owned, e)
		}
	}
	for _, e := range owned {
		bad.add(e.Line)
		res.Valid--
	}
	if len(owned) > 0 {
		res.Total = money.Zero // recomputed while loading
	}
	return mergeSorted(pass.errs, owned)
}

// release undoes the claims of a refused file, as far as that is safe: it
// drops only claims this run took (the claim pass's SET NX succeeded) and
// only of rows the ledger does not hold.
//
// A rerun of content whose earlier load died (say with --partial, now
// refused without it) finds its rows claimed by the batch already, and some
// of them registered: those claims are not this run's, and a registered
// row's claim is what stops another file paying the id again. And a claim
// this run did take may meanwhile back a row that a concurrent loader of
// the same content registered (its own SET NX lost to this run's, which it
// took for its own). So the release holds the batch's load lock, under
// which alone rows are registered, and drops a claim only if the batch has
// no payout for it (ledger.Claims.ReleaseUnregistered). If another loader holds
// the lock, nothing is released: an externalId left claimed by a batch
// that never loads is refused by later files, which a person can sort out;
// one released under a registered row could be paid twice.
//
// Each row whose claim this run took was valid on its own, so Each reads
// it, up to where a refused file stopped being read; it may be a repeat of
// an earlier externalId of the file (a bad line), whose claim attempt
// happened to come first.
//
// A row the file repeats in another spelling (po-case-3 after PO-Case-3:
// one claim, extid.Key) may have taken the claim its first spelling's row
// stands on: the claims of such rows are released together with every
// spelling of their id in the file, and only if the batch has a payout
// under none of them.
// The caller holds the batch's load lock (taken before the claim pass).
func (ld *Loader) release(ctx context.Context, f *os.File, res Result, opts Options, took *lineBits, bad *lineSet, owner string) error {
	if took.empty() {
		return nil
	}
	// The keys of the repeated rows whose claim this run took.
	dupKeys, err := repeatedKeys(ctx, f, res, opts, took, bad)
	if err != nil {
		return err
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return err
	}
	var ids []string
	flush := func() error {
		if len(ids) == 0 {
			return nil
		}
		err := ld.releaseClaims(ctx, res.Batch, owner, ids)
		ids = ids[:0]
		return err
	}
	skip := func(line int) bool { return !took.has(line) }
	if len(dupKeys) > 0 {
		// Every row valid on its own, for the spellings of dupKeys.
		skip = func(line int) bool { return !took.has(line) && bad.has(line) }
	}
	err = payfile.Each(ctx, res.File, f, opts.File, skip, func(r payfile.Row) error {
		if spellings, dup := dupKeys[extid.Key(r.ExternalID)]; dup {
			dupKeys[extid.Key(r.ExternalID)] = append(spellings, r.ExternalID)
			return nil
		}
		if !took.has(r.Line) {
			return nil
		}
		ids = append(ids, r.ExternalID)
		if len(ids) >= opts.ChunkSize {
			return flush()
		}
		return nil
	})
	var fileErr payfile.Error
	if err == nil || errors.As(err, &fileErr) {
		// The end of the file, or the point where the refused file stopped
		// being read: no claim lies beyond it.
		err = flush()
		for _, spellings := range dupKeys {
			if err == nil {
				ids = append(ids, spellings...)
				err = flush() // one call per id: its spellings are judged together
			}
		}
	}
	if err != nil {
		return fmt.Errorf("release the externalIds of %s: %w", res.File, err)
	}
	return nil
}

// repeatedKeys is release's first reading of f, from its start: the
// extid.Key of every row whose claim this run took (took) and that is a
// bad line (bad), a repeat of an earlier externalId of the file. Each maps
// to no spelling yet: release gathers them on its second reading. A
// refused file is read up to where it stopped being read.
func repeatedKeys(ctx context.Context, f *os.File, res Result, opts Options, took *lineBits, bad *lineSet) (map[string][]string, error) {
	dupKeys := map[string][]string{}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return nil, err
	}
	err := payfile.Each(ctx, res.File, f, opts.File, func(line int) bool { return !took.has(line) || !bad.has(line) }, func(r payfile.Row) error {
		dupKeys[extid.Key(r.ExternalID)] = nil
		return nil
	})
	var fileErr payfile.Error
	if err != nil && !errors.As(err, &fileErr) {
		return nil, fmt.Errorf("release the externalIds of %s: %w", res.File, err)
	}
	return dupKeys, nil
}

// releaseClaims releases, for release, the claims of ids (externalIds of
// batch) not under a registered payout, after renewing the batch's load
// lock held by owner.
func (ld *Loader) releaseClaims(ctx context.Context, batch, owner string, ids []string) error {
	// As the registrar does: no step without the lock.
	if held, err := ld.ledger.Locks().RefreshLoad(ctx, batch, owner, loadLockTTL); err != nil || !held {
		if err == nil {
			err = ledger.ErrLoadLockLost
		}
		return err
	}
	_, err := ld.ledger.Claims().ReleaseUnregistered(ctx, batch, ids)
	return err
}

// ownerChecks is how many chunks of externalIds are looked up or claimed
// at once, while the file is read on.
const ownerChecks = 4

// ownerCheck looks up or claims externalIds chunk by chunk, several chunks
// at once, and collects the rows whose id another batch owns.
type ownerCheck struct {
	ld    *Loader
	ctx   context.Context
	g     *errgroup.Group
	name  string
	batch string
	claim bool
	chunk int
	ids   []string
	lines []int
	mu    sync.Mutex
	known []payfile.Error
	took  lineBits // lines whose claim this run took
}

func (ld *Loader) newOwnerCheck(ctx context.Context, name, batch string, chunk int, claim bool) *ownerCheck {
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(ownerChecks)
	return &ownerCheck{ld: ld, ctx: gctx, g: g, name: name, batch: batch, claim: claim, chunk: chunk}
}

// add queues one row's externalId; a full chunk goes to Redis in the
// background (add blocks while ownerChecks chunks are in flight).
func (c *ownerCheck) add(id string, line int) error {
	c.ids = append(c.ids, id)
	c.lines = append(c.lines, line)
	if len(c.ids) >= c.chunk {
		c.flush()
	}
	return c.ctx.Err()
}

func (c *ownerCheck) flush() {
	if len(c.ids) == 0 {
		return
	}
	ids, lines := c.ids, c.lines
	c.ids, c.lines = nil, nil
	c.g.Go(func() error {
		var owners map[string]string
		var taken []bool
		var err error
		if c.claim {
			taken, owners, err = c.ld.ledger.Claims().ClaimTaken(c.ctx, c.batch, ids)
		} else {
			owners, err = c.ld.ledger.Claims().Owners(c.ctx, c.batch, ids)
		}
		if err != nil {
			return err
		}
		c.mu.Lock()
		defer c.mu.Unlock()
		for i, t := range taken {
			if t {
				c.took.add(lines[i])
			}
		}
		for i, id := range ids {
			if other, ok := owners[id]; ok {
				c.known = append(c.known, payfile.Error{File: c.name, Line: lines[i], Column: "externalId", Kind: payfile.KindDuplicate,
					Message: fmt.Sprintf("externalId %q was already loaded in batch %s", id, other)})
			}
		}
		return nil
	})
}

// wait sends the last chunk and returns the rows found owned elsewhere,
// sorted by line, and the lines whose claim this run took.
func (c *ownerCheck) wait() ([]payfile.Error, *lineBits, error) {
	c.flush()
	if err := c.g.Wait(); err != nil {
		return nil, nil, err
	}
	payfile.SortErrors(c.known)
	return c.known, &c.took, nil
}

// load is step 3: under the batch's load lock (lk), register its valid
// rows, mark it loaded and enqueue their tasks (or hold it for approval).
func (ld *Loader) load(ctx context.Context, f *os.File, res Result, opts Options, bad *lineSet, lk *loadLease, vp *velocityPass, log zerolog.Logger) (Result, error) {
	total, err := ld.validTotal(ctx, f, res, opts, bad)
	if err != nil {
		return res, err
	}
	res.Total = total
	scale := lk.meta.Scale // BeginBatch's: a resumed batch keeps its scale
	// The approval decision is taken once, by the run that registers the
	// first row, under the policy the batch was begun with, and recorded
	// before that row: a resumed load reuses it, whatever its own options
	// (and never reserves the day's sum again).
	fig := ledger.Figures{Rows: int64(res.Valid), Total: total, Info: res.InfoColumns, Hold: lk.meta.HoldReason, Reserved: lk.meta.Reserved,
		Need: lk.meta.Need, Role: lk.meta.NeedRole, Rule: lk.meta.Rule}
	a := opts.Approval
	if lk.meta.Policy != "" {
		if a, err = decodePolicy(lk.meta.Policy, opts.Approval.By); err != nil {
			return res, err
		}
	}
	if !lk.meta.Decided {
		facts, err := ld.facts(ctx, f, res, opts, bad, total, a)
		if err != nil {
			return res, err
		}
		d, err := ld.decide(ctx, a, facts, res.Scale)
		if err != nil {
			return res, err
		}
		fig = d.figures(fig)
	}
	res.Held, res.expiry = fig.Hold, a.Expiry
	if err := ld.ledger.SetBatchFigures(ctx, res.Batch, lk.owner, fig); err != nil {
		return res, err
	}
	run := &loadRun{ld: ld, res: res, owner: lk.owner, scale: scale, opts: opts, log: log, vel: vp}
	err = run.stages(ctx, f, bad)
	res.Registered = int(run.registered.Load())
	if err != nil {
		return res, err
	}
	if _, err := ld.holdOver(ctx, res.Batch, vp); err != nil {
		return res, err
	}
	if vp != nil {
		res.VelocityHeld = len(vp.held)
	}
	res.Scheduled = int(run.scheduled.Load())
	if err := opts.hook(pointLoaded, res.Registered); err != nil {
		return res, err
	}
	if opts.releasing() {
		// before the batch is handed on: its scheduled payouts' reminder
		if err := ld.ledger.Schedule().Index(ctx, res.Batch); err != nil {
			return res, err
		}
	}
	if res.Held != "" { // a batch that waits gets no task before approval
		return res, ld.holdLoad(ctx, res, opts, log)
	}
	if err := ld.ledger.FinishLoad(ctx, res.Batch, lk.owner); err != nil {
		return res, err
	}
	res.Enqueued, err = ld.enqueueQueued(ctx, res.Batch, opts, log)
	return res, err
}

// validTotal is the sum of the valid rows: the file's total, or summed
// again when rows were dropped after validation.
func (ld *Loader) validTotal(ctx context.Context, f *os.File, res Result, opts Options, bad *lineSet) (money.Amount, error) {
	total := res.Total
	if !total.IsZero() {
		return total, nil
	}
	err := ld.eachValid(ctx, f, res.File, opts, bad, func(rows []payfile.Row) error {
		for _, r := range rows {
			total = total.Add(r.Amount)
		}
		return nil
	})
	return total, err
}

// facts are what the approval rules look at in the batch: its total,
// largest row and destination types (one more read of the file, only
// when there are rules).
func (ld *Loader) facts(ctx context.Context, f *os.File, res Result, opts Options, bad *lineSet, total money.Amount, a Approval) (approval.Facts, error) {
	facts := approval.Facts{Total: total, Largest: money.Zero}
	if a.Rules.Empty() {
		return facts, nil
	}
	err := ld.eachValid(ctx, f, res.File, opts, bad, func(rows []payfile.Row) error {
		for _, r := range rows {
			if r.Amount.Cmp(facts.Largest) > 0 {
				facts.Largest = r.Amount
			}
			if r.CardNumber != "" {
				facts.Cards++
			} else {
				facts.Phones++
			}
		}
		return nil
	})
	return facts, err
}

// holdLoad ends a registered batch that waits for approval (with its
// notification).
func (ld *Loader) holdLoad(ctx context.Context, res Result, opts Options, log zerolog.Logger) error {
	led := ld.ledger
	if opts.Approval.By != "" {
		led = led.As(opts.Approval.By) // the audit trail names who loaded it
	}
	if err := led.Controls().HoldBatchFor(ctx, res.Batch, res.Held, res.expiry); err != nil {
		return err
	}
	log.Info().Str("reason", res.Held).Msg("batch registered; it awaits approval (payout approve), no payment is sent before")
	ld.notifyHeld(ctx, res, log)
	return nil
}

// enqueueQueued enqueues the create task of every queued payout of a
// loaded batch, opts.EnqueueWorkers at a time, and records that the batch
// has all its tasks. A task already present counts as done, so a rerun
// after a crash adds only the missing ones.
func (ld *Loader) enqueueQueued(ctx context.Context, batch string, opts Options, log zerolog.Logger) (int, error) {
	g, gctx := errgroup.WithContext(ctx)
	pending := make(chan ledger.OpenPayout, stageDepth*opts.ChunkSize)
	var enqueued atomic.Int64
	for i := 0; i < opts.EnqueueWorkers; i++ {
		g.Go(func() error {
			for p := range pending {
				s, ok := queue.NextOpen(p)
				if !ok {
					continue
				}
				if _, err := ld.queue.Add(gctx, s); err != nil {
					return err
				}
				if n := enqueued.Add(1); n%int64(opts.ChunkSize) == 0 {
					if err := opts.hook(pointEnqueued, int(n)); err != nil {
						return err
					}
				}
			}
			return nil
		})
	}
	err := ld.ledger.EachQueued(gctx, batch, func(p ledger.OpenPayout) error {
		if p.State != lifecycle.Queued {
			return nil
		}
		select {
		case pending <- p:
			return nil
		case <-gctx.Done():
			return gctx.Err()
		}
	})
	close(pending)
	if werr := g.Wait(); err == nil || errors.Is(err, context.Canceled) && werr != nil {
		err = werr
	}
	if err != nil {
		return int(enqueued.Load()), err
	}
	log.Debug().Int64("tasks", enqueued.Load()).Msg("create tasks enqueued")
	return int(enqueued.Load()), ld.ledger.TasksEnqueued(ctx, batch)
}

// loadRun registers and enqueues the valid rows of one batch under its
// load lock.
type loadRun struct {
	ld         *Loader
	res        Result
	owner      string
	scale      int
	opts       Options
	log        zerolog.Logger
	vel        *velocityPass // the rows' velocity counts (nil: no limit)
	registered atomic.Int64
	scheduled  atomic.Int64
}

// registrars is how many chunks a load writes to the ledger at once: one
// registrar waits for Redis while another builds its call, so Redis is
// kept busy. Each chunk's registration is atomic per script call and
// skips rows stored already, so the order chunks land in does not matter
// (a load interrupted halfway leaves some chunks, which its rerun skips).
const registrars = 3

// stages runs two stages, overlapping: this goroutine reads and seals
// chunk by chunk; registrars write the chunks to the ledger. The channel
// bounds what is in flight to a few chunks, whatever the file's size.
func (r *loadRun) stages(ctx context.Context, f *os.File, bad *lineSet) error {
	g, gctx := errgroup.WithContext(ctx)
	chunks := make(chan []ledger.NewPayout, stageDepth)
	for range registrars {
		g.Go(func() error { return r.registrar(gctx, chunks) })
	}
	err := r.read(gctx, f, bad, chunks)
	close(chunks)
	if werr := g.Wait(); err == nil || errors.Is(err, context.Canceled) && werr != nil {
		err = werr
	}
	return err
}

// registrar writes each chunk to the ledger under the load lock.
func (r *loadRun) registrar(ctx context.Context, chunks <-chan []ledger.NewPayout) error {
	led, batch := r.ld.ledger, r.res.Batch
	for ps := range chunks {
		if held, err := led.Locks().RefreshLoad(ctx, batch, r.owner, loadLockTTL); err != nil || !held {
			if err == nil {
				err = ledger.ErrLoadLockLost
			}
			return err
		}
		// Rows a resumed batch holds already are skipped.
		n, err := led.RegisterLocked(ctx, batch, r.owner, ps, r.scale)
		if err != nil {
			return err
		}
		if err := r.schedule(ctx, ps); err != nil {
			return err
		}
		if err := r.opts.hook(pointRegistered, int(r.registered.Add(int64(n)))); err != nil {
			return err
		}
	}
	return nil
}

// schedule moves the payouts of ps that have a release time, registered
// now or by an earlier run, to scheduled, under the load lock.
func (r *loadRun) schedule(ctx context.Context, ps []ledger.NewPayout) error {
	var due []ledger.Scheduled
	for _, p := range ps {
		if !p.ReleaseAt.IsZero() {
			due = append(due, ledger.Scheduled{ExternalID: p.ExternalID, At: p.ReleaseAt})
		}
	}
	n, err := r.ld.ledger.Schedule().PutLocked(ctx, r.res.Batch, r.owner, due)
	r.scheduled.Add(int64(n))
	return err
}

// read seals the valid rows chunk by chunk and sends each chunk to the
// registrar, logging progress every opts.Progress.
func (r *loadRun) read(ctx context.Context, f *os.File, bad *lineSet, chunks chan<- []ledger.NewPayout) error {
	start := time.Now()
	lastLog := start
	return r.ld.eachValid(ctx, f, r.res.File, r.opts, bad, func(rows []payfile.Row) error {
		ps := make([]ledger.NewPayout, len(rows)) // eachValid reuses rows; ps is the registrar's
		for i, row := range rows {
			p, err := r.ld.newPayout(r.res.Batch, row)
			if err != nil {
				return err
			}
			p.Velocity = r.vel.mark(row.Line)
			if p.ReleaseAt, err = r.opts.rowRelease(row, false); err != nil {
				return fmt.Errorf("%s line %d: %w", r.res.File, row.Line, err)
			}
			if r.vel.holds(row.Line) {
				// held wins: scheduled, it would be released at its time
				// without the person the hold waits for
				p.ReleaseAt = time.Time{}
			}
			ps[i] = p
		}
		select {
		case chunks <- ps:
		case <-ctx.Done():
			return ctx.Err()
		}
		if time.Since(lastLog) >= r.opts.Progress {
			lastLog = time.Now()
			done := int(r.registered.Load())
			r.log.Info().Int("rows", done).Int("of", r.res.Valid).
				Float64("rowsPerSec", float64(done)/time.Since(start).Seconds()).Msg("loading")
		}
		return nil
	})
}

// EnqueueApproved enqueues the create task of every queued payout of an
// approved batch (payout approve, after ledger.Approve). It may be run
// again: a live task is left as it is.
func (ld *Loader) EnqueueApproved(ctx context.Context, batch string) (int, error) {
	var steps []queue.Step
	if err := ld.ledger.EachQueued(ctx, batch, func(p ledger.OpenPayout) error {
		if s, ok := queue.NextOpen(p); ok && p.State == lifecycle.Queued {
			steps = append(steps, s)
		}
		return nil
	}); err != nil {
		return 0, err
	}
	if _, err := ld.queue.RemindBatch(ctx, steps); err != nil {
		return 0, err
	}
	// Its scheduled payouts due already are released at once.
	if err := ld.ledger.Schedule().Index(ctx, batch); err != nil {
		return 0, err
	}
	return len(steps), nil
}

func (ld *Loader) newPayout(batch string, r payfile.Row) (ledger.NewPayout, error) {
	p := ledger.NewPayout{Line: r.Line, ExternalID: r.ExternalID, Amount: r.Amount, Destination: r.Destination(), Telecom: r.TelecomOperator,
		Info: ledger.PackInfo(r.Info)} // kept for the result file, never in the task
	if r.CardNumber != "" {
		sealed, err := ld.sealer.Seal(r.CardNumber, ledger.SealAD(batch, r.ExternalID))
		if err != nil {
			return p, fmt.Errorf("seal card number of %s: %w", r.ExternalID, err)
		}
		p.Sealed = sealed
	}
	if len(r.Extra) > 0 {
		b, err := json.Marshal(r.Extra)
		if err != nil {
			return p, err
		}
		p.Extra = string(b)
	}
	return p, nil
}

// eachValid streams the valid rows in chunks.
func (ld *Loader) eachValid(ctx context.Context, f *os.File, name string, opts Options, bad *lineSet, fn func([]payfile.Row) error) error {
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return err
	}
	chunk := make([]payfile.Row, 0, opts.ChunkSize)
	err := payfile.Each(ctx, name, f, opts.File, bad.has, func(r payfile.Row) error {
		chunk = append(chunk, r)
		if len(chunk) == opts.ChunkSize {
			err := fn(chunk)
			chunk = chunk[:0]
			return err
		}
		return nil
	})
	if err == nil && len(chunk) > 0 {
		err = fn(chunk)
	}
	return err
}

func hasStructural(errs []payfile.Error) bool {
	for _, e := range errs {
		if e.Kind == payfile.KindStructure || e.Kind == payfile.KindEncoding || e.Kind == payfile.KindHeader || e.Kind == payfile.KindEmpty || e.Kind == payfile.KindTotal {
			return true
		}
	}
	return false
}

// mergeSorted merges two error lists sorted by line.
func mergeSorted(a, b []payfile.Error) []payfile.Error {
	if len(b) == 0 {
		return a
	}
	out := make([]payfile.Error, 0, len(a)+len(b))
	out = append(out, a...)
	out = append(out, b...)
	payfile.SortErrors(out)
	return out
}

// lineSet is a set of line numbers: the sorted bad lines of the validation
// plus the few found later.
type lineSet struct {
	mu    sync.Mutex
	lines map[int]struct{}
}

func badLines(sorted []int) *lineSet {
	s := &lineSet{lines: make(map[int]struct{}, len(sorted))}
	for _, l := range sorted {
		s.lines[l] = struct{}{}
	}
	return s
}

func (s *lineSet) add(l int) {
	s.mu.Lock()
	s.lines[l] = struct{}{}
	s.mu.Unlock()
}

func (s *lineSet) has(l int) bool {
	s.mu.Lock()
	_, ok := s.lines[l]
	s.mu.Unlock()
	return ok
}

// lineBits is a set of line numbers, one bit a line: the claims a run took
// cost a few hundred KB for a file of millions of rows. It is not safe for
// concurrent use (ownerCheck adds under its mutex).
type lineBits struct {
	words []uint64
	n     int
}

func (b *lineBits) add(l int) {
	w := l / 64
	for len(b.words) <= w {
		b.words = append(b.words, 0)
	}
	if b.words[w]&(1<<(l%64)) == 0 {
		b.words[w] |= 1 << (l % 64)
		b.n++
	}
}

func (b *lineBits) has(l int) bool {
	w := l / 64
	return l >= 0 && w < len(b.words) && b.words[w]&(1<<(l%64)) != 0
}

func (b *lineBits) empty() bool { return b.n == 0 }
