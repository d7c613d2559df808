package results

import (
	"bufio"
	"compress/gzip"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"iter"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/acme/payout/internal/ledger"
	"github.com/acme/payout/internal/lifecycle"
	"github.com/acme/payout/internal/report"
	"github.com/acme/payout/internal/view"
)

// Defaults of the flags of payout archive (ArchiveOptions).
const (
	DefaultOlderThan = 30 * 24 * time.Hour
	DefaultIDWindow  = 90 * 24 * time.Hour
)

// Steps after which ArchiveOptions.Hook is called.
const (
	StepWritten  = "written"  // archive files written, fsynced and renamed
	StepVerified = "verified" // read back and matched with the counters
	StepSummary  = "summary"  // summary hash and claim expiries written
	StepChunk    = "chunk"    // one chunk of payout hashes deleted
	StepDeleted  = "deleted"  // every payout hash deleted
	StepDropped  = "dropped"  // meta and the other keys deleted: done
)

// ArchiveOptions tune a run of Archive.
type ArchiveOptions struct {
	OlderThan time.Duration // archive batches whose last change is older (Redis time)
	Dir       string        // the archive folder
	IDWindow  time.Duration // claims of an archived batch's externalIds expire after this
	DryRun    bool          // list what would be archived; write nothing
	Chunk     int           // payout hashes deleted per script call (default 500)
	// Hook, if set, runs after each step of each batch; an error stops
	// the run there (tests inject interruptions with it).
	Hook func(batch, step string) error
	// Now, if set, replaces Redis's clock for the age check and the claim
	// window: tests and the bench's 90-day simulation fake time with it;
	// never set in production. Expired claims are dropped by the earlier
	// of Now and Redis's clock (ledger.Claims.SweepArchivedClaims).
	Now func() time.Time
	// Batches, if not empty, limits the run to these batches.
	Batches []string
	// Swept, if set, is told how many expired externalId claims of
	// archived batches the run's daily sweep dropped (when it dropped any).
	Swept func(dropped int64)
}

// now returns o.Now() or, by default, Redis's time.
func (o ArchiveOptions) now(ctx context.Context, l *ledger.Ledger) (time.Time, error) {
	if o.Now != nil {
		return o.Now(), nil
	}
	return l.Time(ctx)
}

// ArchiveOutcome is what a run of Archive did with one batch.
type ArchiveOutcome struct {
	Batch      string
	File       string
	Rows       int64
	Archive    string // path of the archive
	LastChange time.Time
	Resumed    bool   // an interrupted archive of the batch was finished
	DryRun     bool   // would be archived
	Skipped    string // why the batch was left alone ("" when archived)
	Claims     int    // claims given an expiry by this run
}

// ErrMismatch is returned when an archive read back does not match the
// ledger: nothing was deleted.
var ErrMismatch = errors.New("archive does not match the ledger")

// Archive archives every batch that is final and older than o.OlderThan, and
// finishes every interrupted archive. A batch whose archive fails is left
// in Redis; the run goes on with the others and returns the first error.
func Archive(ctx context.Context, l *ledger.Ledger, o ArchiveOptions) ([]ArchiveOutcome, error) {
	if o.Dir == "" {
		return nil, errors.New("archive: no archive folder")
	}
	now, err := o.now(ctx, l)
	if err != nil {
		return nil, err
	}
	prev, err := archivedByID(ctx, l)
	if err != nil {
		return nil, err
	}
	sts, err := view.New(l.Redis()).Statuses(ctx)
	if err != nil {
		return nil, err
	}
	var out []ArchiveOutcome
	var first error
	if !o.DryRun {
		first = sweepClaims(ctx, l, o, now)
	}
	for _, s := range sts {
		if err := ctx.Err(); err != nil {
			return out, err
		}
		if len(o.Batches) > 0 && !slices.Contains(o.Batches, s.ID) {
			continue
		}
		p, resume := prev[s.ID]
		if !resume {
			due, err := dueNow(ctx, l, s, now, o.OlderThan)
			if err != nil {
				return out, err
			}
			if !due {
				continue
			}
		}
		if o.DryRun {
			why, err := outboxWait(ctx, l, s.ID)
			if err != nil {
				return out, err
			}
			out = append(out, ArchiveOutcome{Batch: s.ID, File: s.File, Rows: s.Counts.Total(), Resumed: resume, DryRun: true, Skipped: why})
			continue
		}
		var pp *ledger.ArchivedBatch
		if resume {
			pp = &p
		}
		oc, err := one(ctx, l, o, s.ID, pp)
		out = append(out, oc)
		if err != nil {
			if errors.Is(err, context.Canceled) {
				return out, err
			}
			if first == nil {
				first = fmt.Errorf("archive batch %s: %w", s.ID, err)
			}
		}
	}
	return out, first
}

// outboxWait says why batch cannot be archived yet ("" when it can): its
// outbox goes with the batch's keys (DropBatch), so while it holds events
// no worker's pump has handed to delivery, archiving would drop them. A
// later run finds it drained.
func outboxWait(ctx context.Context, l *ledger.Ledger, batch string) (string, error) {
	n, err := l.OutboxLen(ctx, batch)
	if err != nil || n == 0 {
		return "", err
	}
	return fmt.Sprintf("its outbox holds %d payout events not handed to delivery yet (a worker's events pump drains it)", n), nil
}

// archivedByID is the summaries of the batches archived (or being
// archived), by batch id.
func archivedByID(ctx context.Context, l *ledger.Ledger) (map[string]ledger.ArchivedBatch, error) {
	summaries, err := l.Archive().ArchivedBatches(ctx)
	if err != nil {
		return nil, err
	}
	prev := make(map[string]ledger.ArchivedBatch, len(summaries))
	for _, a := range summaries {
		prev[a.ID] = a
	}
	return prev, nil
}

// sweepClaims expires the externalId claims of batches archived earlier,
// whether or not this run archives anything (the sweep runs once a day),
// and tells o.Swept how many.
func sweepClaims(ctx context.Context, l *ledger.Ledger, o ArchiveOptions, now time.Time) error {
	n, err := l.Claims().SweepArchivedClaims(ctx, now)
	if n > 0 && o.Swept != nil {
		o.Swept(n)
	}
	return err
}

// dueNow reports whether batch s is to be archived now: final, and
// unchanged for olderThan.
func dueNow(ctx context.Context, l *ledger.Ledger, s view.BatchStatus, now time.Time, olderThan time.Duration) (bool, error) {
	if !Archivable(s.Batch, s.Counts) {
		return false, nil
	}
	last, err := lastChangeHint(ctx, l, s.Batch)
	if err != nil {
		return false, err
	}
	return now.Sub(last) >= olderThan, nil
}

// Archivable reports whether a batch may be archived: no payout has an
// automatic step due, none waits for a person (needs_review: archived, it
// could never be resolved), none is paid and still watched (its money may
// come back: the archive keeps each payout's watch end, wend), and it is
// loaded or discarded (not loading, not awaiting approval).
func Archivable(b ledger.Batch, c ledger.Counts) bool {
	return (b.Phase == lifecycle.PhaseLoaded || b.Phase == lifecycle.PhaseDiscarded) && c.Open() == 0 &&
		c.Rows[lifecycle.NeedsReview] == 0 && c.Rows[lifecycle.Held] == 0 && c.Watched == 0
}

// lastChangeHint is the latest of the batch's load, decision and audit
// trail times; without an audit trail (batches loaded before it existed),
// the latest 'updated' of its payouts.
func lastChangeHint(ctx context.Context, l *ledger.Ledger, b ledger.Batch) (time.Time, error) {
	last := later(b.LoadedAt, b.DecidedAt)
	t, ok, err := l.Audit().Last(ctx, b.ID)
	if err != nil {
		return last, err
	}
	if ok {
		return later(last, t), nil
	}
	err = view.New(l.Redis()).EachRaw(ctx, b.ID, func(_ string, f map[string]string) error {
		if f != nil {
			last = later(last, ledger.PayoutFromFields(b.ID, f).UpdatedAt)
		}
		return nil
	})
	return last, err
}

func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// ArchivePaths are the files of one archived batch.
type ArchivePaths struct{ Archive, Result, Audit string }

// ArchivePathsFor names the files of batch b in dir.
func ArchivePathsFor(dir string, b ledger.Batch) ArchivePaths {
	name := strings.NewReplacer("/", "_", "\\", "_").Replace(b.File)
	if name == "" || name[0] == '.' {
		name = "batch" + name
	}
	base := filepath.Join(dir, name+"."+b.ID)
	return ArchivePaths{Archive: base + ".archive.jsonl.gz", Result: base + ".result.csv", Audit: base + ".audit.jsonl"}
}

// record is one line of an archive.
type record struct {
	Batch  map[string]string `json:"batch,omitempty"`
	Counts map[string]string `json:"counts,omitempty"`
	Payout map[string]string `json:"payout,omitempty"`
	End    map[string]string `json:"end,omitempty"`
}

// one archives (or finishes archiving) one batch, under the batch's load
// lock, step by step (see the package comment).
func one(ctx context.Context, l *ledger.Ledger, o ArchiveOptions, id string, prev *ledger.ArchivedBatch) (ArchiveOutcome, error) {
	r := &batchArchive{l: l, o: o, id: id, prev: prev, oc: ArchiveOutcome{Batch: id, Resumed: prev != nil}}
	var tok [8]byte
	_, _ = rand.Read(tok[:])
	r.owner = "archive:" + hex.EncodeToString(tok[:])
	ok, err := l.Locks().LockLoad(ctx, id, r.owner, lockTTL)
	if err != nil {
		return r.oc, err
	}
	if !ok {
		r.oc.Skipped = "a loader or another archive run holds the batch's load lock"
		return r.oc, nil
	}
	defer l.Locks().UnlockLoad(context.WithoutCancel(ctx), id, r.owner)

	for _, step := range []func(context.Context) error{r.load, r.write, r.verify, r.saveSummary, r.deletePayouts} {
		if err := step(ctx); err != nil || r.oc.Skipped != "" {
			return r.oc, err
		}
	}
	// 5. The rest, meta last.
	if err := l.Archive().DropBatch(ctx, id); err != nil {
		return r.oc, err
	}
	return r.oc, r.hook(StepDropped)
}

// lockTTL is how long the batch's load lock is held between refreshes.
const lockTTL = 15 * time.Minute

// batchArchive is the archiving of one batch: each step fills in what the
// next ones need. A step that leaves the batch alone says why in
// oc.Skipped.
type batchArchive struct {
	l     *ledger.Ledger
	o     ArchiveOptions
	id    string
	prev  *ledger.ArchivedBatch // the summary of an interrupted archive, or nil
	owner string                // the load lock's owner token
	oc    ArchiveOutcome

	meta, counts map[string]string // as read from Redis
	b            ledger.Batch
	c            ledger.Counts
	dir          string
	paths        ArchivePaths
	now, last    time.Time
	n            int                  // payouts written
	fps          []ledger.Fingerprint // of the payouts read back
	ids          []string             // their externalIds
	auditPath    string               // "" without an audit trail
}

func (r *batchArchive) hook(step string) error {
	if r.o.Hook == nil {
		return nil
	}
	return r.o.Hook(r.id, step)
}

// load reads the batch, checks it is still final and makes its folder.
func (r *batchArchive) load(ctx context.Context) error {
	meta, counts, err := view.New(r.l.Redis()).RawBatch(ctx, r.id)
	if errors.Is(err, ledger.ErrNotFound) {
		r.oc.Skipped = "archived meanwhile"
		return nil
	}
	if err != nil {
		return err
	}
	r.meta, r.counts = meta, counts
	r.b, r.c = ledger.BatchFromFields(meta), ledger.CountsFromFields(counts)
	r.oc.File, r.oc.Rows = r.b.File, r.c.Total()
	if !Archivable(r.b, r.c) {
		if r.prev != nil {
			return fmt.Errorf("batch is partly archived but has %d open payouts (phase %s): resolve them, then run the archive again", r.c.Open(), r.b.Phase)
		}
		r.oc.Skipped = "not final any more"
		return nil
	}
	if r.oc.Skipped, err = outboxWait(ctx, r.l, r.id); err != nil || r.oc.Skipped != "" {
		return err
	}
	r.dir = r.o.Dir
	if r.prev != nil && r.prev.Archive != "" {
		r.dir = filepath.Dir(r.prev.Archive) // finish where it began
	}
	if err := os.MkdirAll(r.dir, 0o750); err != nil {
		return fmt.Errorf("archive folder: %w", err)
	}
	r.paths = ArchivePathsFor(r.dir, r.b)
	r.oc.Archive = r.paths.Archive
	return nil
}

// kept returns the payouts a run before deleted, from the archive it
// wrote (nil on a first run).
func (r *batchArchive) kept() (map[string]map[string]string, error) {
	if r.prev == nil {
		return nil, nil
	}
	kept := map[string]map[string]string{}
	if _, err := readArchive(r.paths.Archive, func(f map[string]string) error {
		kept[f["ext"]] = f
		return nil
	}); err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, err
	}
	return kept, nil
}

// write is step 1: write the archive, unless the batch changed too
// recently.
func (r *batchArchive) write(ctx context.Context) error {
	kept, err := r.kept()
	if err != nil {
		return err
	}
	if r.now, err = r.o.now(ctx, r.l); err != nil {
		return err
	}
	r.last = later(r.b.LoadedAt, r.b.DecidedAt)
	if t, ok, err := r.l.Audit().Last(ctx, r.id); err != nil {
		return err
	} else if ok {
		r.last = later(r.last, t)
	}
	err = writeFile(r.paths.Archive, func(w io.Writer) error { return r.encode(ctx, w, kept) })
	if errors.Is(err, errTooRecent) {
		r.oc.Skipped = "changed since " + r.last.Format(time.RFC3339)
		return nil
	}
	if err != nil {
		return err
	}
	r.oc.LastChange = r.last
	return r.hook(StepWritten)
}

// encode writes the gzipped archive to w: header, payouts (from Redis, or
// from kept for those a run before deleted), end line.
func (r *batchArchive) encode(ctx context.Context, w io.Writer, kept map[string]map[string]string) error {
	zw := gzip.NewWriter(w)
	enc := json.NewEncoder(zw)
	if err := enc.Encode(record{Batch: r.meta, Counts: r.counts}); err != nil {
		return err
	}
	err := view.New(r.l.Redis()).EachRaw(ctx, r.id, func(ext string, f map[string]string) error {
		if f == nil {
			if f = kept[ext]; f == nil {
				return fmt.Errorf("payout %s is neither in Redis nor in %s", ext, r.paths.Archive)
			}
		}
		f = withoutSealed(f)
		r.last = later(r.last, ledger.PayoutFromFields(r.id, f).UpdatedAt)
		r.n++
		return enc.Encode(record{Payout: f})
	})
	if err != nil {
		return err
	}
	if r.prev == nil && r.now.Sub(r.last) < r.o.OlderThan {
		return errTooRecent
	}
	if err := enc.Encode(record{End: map[string]string{"payouts": strconv.Itoa(r.n)}}); err != nil {
		return err
	}
	return zw.Close()
}

// verify is step 2: read the archive back, match it with the counters,
// write the result file from it and the audit trail beside it.
func (r *batchArchive) verify(ctx context.Context) error {
	if err := r.readBack(); err != nil {
		return err
	}
	if err := r.writeResult(); err != nil {
		return err
	}
	auditPath, err := writeAudit(ctx, r.l, r.id, r.paths.Audit)
	if err != nil {
		return err
	}
	r.auditPath = auditPath
	if err := syncDir(r.dir); err != nil {
		return err
	}
	return r.hook(StepVerified)
}

// readBack reads the archive and matches its payouts per state and their
// amounts with the batch's counters, to the unit.
func (r *batchArchive) readBack() error {
	rows := map[lifecycle.State]int64{}
	units := map[lifecycle.State]int64{}
	got, err := readArchive(r.paths.Archive, func(f map[string]string) error {
		st := lifecycle.State(f["state"])
		rows[st]++
		u, err := strconv.ParseInt(f["units"], 10, 64)
		if err != nil {
			return fmt.Errorf("payout %s: units %q: %w", f["ext"], f["units"], err)
		}
		units[st] += u
		r.fps = append(r.fps, ledger.FingerprintOf(f["ext"], f))
		r.ids = append(r.ids, f["ext"])
		return nil
	})
	if err != nil {
		return fmt.Errorf("read back %s: %w", r.paths.Archive, err)
	}
	if got != r.n {
		return fmt.Errorf("%s: %d payouts read back, %d written: %w", r.paths.Archive, got, r.n, ErrMismatch)
	}
	var total int64
	for _, s := range lifecycle.States {
		if rows[s] != r.c.Rows[s] || units[s] != r.c.Units[s] {
			return fmt.Errorf("%s: %s: %d payouts of %d units, the ledger counts %d of %d: %w",
				r.paths.Archive, s, rows[s], units[s], r.c.Rows[s], r.c.Units[s], ErrMismatch)
		}
		total += rows[s]
	}
	if int64(r.n) != total {
		return fmt.Errorf("%s: %d payouts, the ledger counts %d: %w", r.paths.Archive, r.n, total, ErrMismatch)
	}
	return nil
}

// writeResult writes the result file from the archive, and its summary
// beside it (the result CSV is a clean table).
func (r *batchArchive) writeResult() error {
	sum, _, err := report.WriteFiles(r.paths.Result, report.CSV, Batch(r.b), ArchivedRows(r.paths.Archive), report.CSVOptions{})
	if err != nil {
		return err
	}
	if sum.Rows != r.n {
		return fmt.Errorf("%s: %d rows, the archive has %d: %w", r.paths.Result, sum.Rows, r.n, ErrMismatch)
	}
	return nil
}

// saveSummary is step 3: the summary, then the claims' expiry.
func (r *batchArchive) saveSummary(ctx context.Context) error {
	a := ledger.ArchivedBatch{Batch: r.b, Counts: r.c, Archive: r.paths.Archive, Result: r.paths.Result, Audit: r.auditPath,
		ArchivedAt: r.now, LastChange: r.last, ClaimsTill: r.now.Add(r.o.IDWindow)}
	if r.prev != nil {
		a.ArchivedAt, a.ClaimsTill = r.prev.ArchivedAt, r.prev.ClaimsTill
	}
	if err := r.l.Archive().SaveArchived(ctx, a); err != nil {
		return err
	}
	var err error
	if r.oc.Claims, err = r.l.Claims().ArchiveClaims(ctx, r.id, r.ids, a.ClaimsTill, r.now); err != nil {
		return err
	}
	return r.hook(StepSummary)
}

// deletePayouts is step 4: the payouts, chunk by chunk, each only if
// unchanged.
func (r *batchArchive) deletePayouts(ctx context.Context) error {
	if ok, err := r.l.Locks().RefreshLoad(ctx, r.id, r.owner, lockTTL); err != nil {
		return err
	} else if !ok {
		return fmt.Errorf("lost the batch's load lock: nothing deleted")
	}
	if _, err := r.l.Archive().DeleteArchivedPayouts(ctx, r.id, r.fps, r.o.Chunk, func(int) error { return r.hook(StepChunk) }); err != nil {
		return err
	}
	return r.hook(StepDeleted)
}

var errTooRecent = errors.New("changed too recently")

func withoutSealed(f map[string]string) map[string]string {
	if _, ok := f["sealed"]; !ok {
		return f
	}
	c := make(map[string]string, len(f))
	for k, v := range f {
		if k != "sealed" {
			c[k] = v
		}
	}
	return c
}

// writeAudit writes the batch's audit trail to path and reads it back; it
// returns "" and writes nothing when the batch has no audit trail.
func writeAudit(ctx context.Context, l *ledger.Ledger, batch, path string) (string, error) {
	want, err := l.Audit().Len(ctx, batch)
	if err != nil || want == 0 {
		return "", err
	}
	err = writeFile(path, func(w io.Writer) error {
		enc := json.NewEncoder(w)
		return l.Audit().Each(ctx, batch, "", func(e ledger.AuditEntry) error { return enc.Encode(e) })
	})
	if err != nil {
		return "", err
	}
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	var got int64
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 64<<10), 16<<20)
	for sc.Scan() {
		var a ledger.AuditEntry
		if err := json.Unmarshal(sc.Bytes(), &a); err != nil {
			return "", fmt.Errorf("read back %s: %w", path, err)
		}
		got++
	}
	if err := sc.Err(); err != nil {
		return "", fmt.Errorf("read back %s: %w", path, err)
	}
	if got < want {
		return "", fmt.Errorf("%s: %d audit entries read back, the stream had %d: %w", path, got, want, ErrMismatch)
	}
	return path, nil
}

// writeFile writes path through path.tmp: written, fsynced, renamed.
func writeFile(path string, write func(io.Writer) error) error {
	tmp := path + ".tmp"
	f, err := os.OpenFile(tmp, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o640)
	if err != nil {
		return err
	}
	bw := bufio.NewWriterSize(f, 256<<10)
	err = write(bw)
	if err == nil {
		err = bw.Flush()
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		os.Remove(tmp)
	}
	return err
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("fsync %s: %w", dir, err)
	}
	return nil
}

// readArchive calls fn with the fields of every payout of the archive at
// path and returns how many there were. It fails on a damaged or
// truncated archive (no end line, or one that disagrees).
func readArchive(path string, fn func(map[string]string) error) (int, error) {
	_, n, err := scan(path, fn)
	return n, err
}

// ArchiveHeader returns the batch metadata and counters an archive was written
// with.
func ArchiveHeader(path string) (ledger.Batch, ledger.Counts, error) {
	f, err := os.Open(path)
	if err != nil {
		return ledger.Batch{}, ledger.Counts{}, err
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		return ledger.Batch{}, ledger.Counts{}, fmt.Errorf("%s: %w", path, err)
	}
	var r record
	if err := json.NewDecoder(zr).Decode(&r); err != nil || r.Batch == nil {
		return ledger.Batch{}, ledger.Counts{}, fmt.Errorf("%s: no header line: %v", path, err)
	}
	return ledger.BatchFromFields(r.Batch), ledger.CountsFromFields(r.Counts), nil
}

func scan(path string, fn func(map[string]string) error) (map[string]string, int, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, 0, err
	}
	defer f.Close()
	zr, err := gzip.NewReader(bufio.NewReaderSize(f, 256<<10))
	if err != nil {
		return nil, 0, fmt.Errorf("%s: %w", path, err)
	}
	dec := json.NewDecoder(zr)
	var header map[string]string
	n := 0
	for {
		var r record
		if err := dec.Decode(&r); err != nil {
			if errors.Is(err, io.EOF) {
				return header, n, fmt.Errorf("%s: truncated (no end line): %w", path, ErrMismatch)
			}
			return header, n, fmt.Errorf("%s: %w", path, err)
		}
		switch {
		case r.Batch != nil:
			header = r.Batch
		case r.Payout != nil:
			n++
			if fn != nil {
				if err := fn(r.Payout); err != nil {
					return header, n, err
				}
			}
		case r.End != nil:
			if r.End["payouts"] != strconv.Itoa(n) {
				return header, n, fmt.Errorf("%s: end line says %s payouts, %d read: %w", path, r.End["payouts"], n, ErrMismatch)
			}
			if _, err := dec.Token(); !errors.Is(err, io.EOF) {
				return header, n, fmt.Errorf("%s: data after the end line: %w", path, ErrMismatch)
			}
			return header, n, nil
		}
	}
}

// ArchivedRows iterates the payouts of an archive as result file rows, in
// file order (the order they were archived in).
func ArchivedRows(path string) iter.Seq2[report.Row, error] {
	return rowsOf(func(fn func(ledger.Payout) error) error {
		_, err := readArchive(path, func(f map[string]string) error { return fn(ledger.PayoutFromFields("", f)) })
		return err
	})
}

// WriteArchived writes the result file of an archived batch, read from
// its archive at path, in format (report.Write).
func WriteArchived(path, format string, w io.Writer, o report.CSVOptions) (report.Summary, error) {
	b, _, err := ArchiveHeader(path)
	if err != nil {
		return report.Summary{}, err
	}
	return report.Write(w, format, Batch(b), ArchivedRows(path), o)
}

// EachArchivedPayout calls fn with the stored fields of every payout of
// the archive at path, in order. It fails on a damaged or truncated
// archive.
func EachArchivedPayout(path string, fn func(map[string]string) error) error {
	_, err := readArchive(path, fn)
	return err
}
