package results_test

import (
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/acme/payout/internal/decide"
	"github.com/acme/payout/internal/ledger"
	"github.com/acme/payout/internal/ledger/keys"
	"github.com/acme/payout/internal/lifecycle"
	"github.com/acme/payout/internal/loader"
	"github.com/acme/payout/internal/queue"
	"github.com/acme/payout/internal/report"
	"github.com/acme/payout/internal/results"
	"github.com/acme/payout/internal/vault"
	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
	"github.com/rs/zerolog"
)

const day = 24 * time.Hour

type fixture struct {
	t   *testing.T
	m   *miniredis.Miniredis
	rdb *redis.Client
	led *ledger.Ledger
	ld  *loader.Loader
	dir string // archive folder
	in  string // payout files
	now time.Time
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	m := miniredis.RunT(t)
	now := time.Now().UTC().Truncate(time.Millisecond)
	m.SetTime(now)
	rdb := redis.NewClient(&redis.Options{Addr: m.Addr()})
	t.Cleanup(func() { rdb.Close() })
	led := ledger.New(rdb)
	return &fixture{t: t, m: m, rdb: rdb, led: led, now: now,
		ld:  loader.New(led, queue.New(rdb), vault.Ephemeral(), zerolog.Nop()),
		dir: filepath.Join(t.TempDir(), "archive"), in: t.TempDir()}
}

// load loads a file of n rows PREFIX-1..n (card numbers), then makes every
// payout final: created, but the last one rejected.
func (f *fixture) load(name, prefix string, n int) string {
	f.t.Helper()
	ctx := context.Background()
	var b strings.Builder
	b.WriteString("externalId,amount,cardNumber\n")
	for i := 1; i <= n; i++ {
		fmt.Fprintf(&b, "%s-%d,%d.25,4111111111111111\n", prefix, i, i)
	}
	path := filepath.Join(f.in, name)
	if err := os.WriteFile(path, []byte(b.String()), 0o600); err != nil {
		f.t.Fatal(err)
	}
	res, err := f.ld.LoadFile(ctx, path, loader.Options{})
	if err != nil || !res.Loaded {
		f.t.Fatalf("load %s: %+v %v", name, res, err)
	}
	for i := 1; i <= n; i++ {
		ext := fmt.Sprintf("%s-%d", prefix, i)
		if _, err := f.led.BeginCreate(ctx, res.Batch, ext, 1); err != nil {
			f.t.Fatal(err)
		}
		r := decide.CreateResult{To: lifecycle.Created, OrderID: "o-" + ext, PSPStatus: "accepted"}
		if i == n {
			r = decide.CreateResult{To: lifecycle.Rejected, Error: "card blocked", PSPStatus: "rejected"}
		}
		if _, err := f.led.FinishCreate(ctx, res.Batch, ext, 1, r); err != nil {
			f.t.Fatal(err)
		}
	}
	f.drain(res.Batch)
	return res.Batch
}

// drain empties batch's outbox as a worker's events pump does once it has
// queued the deliveries.
func (f *fixture) drain(batch string) {
	f.t.Helper()
	ctx := context.Background()
	evs, err := f.led.Outbox(ctx, batch, 1<<20)
	if err != nil {
		f.t.Fatal(err)
	}
	ids := make([]string, len(evs))
	for i, e := range evs {
		ids[i] = e.StreamID
	}
	if err := f.led.AckOutbox(ctx, batch, ids...); err != nil {
		f.t.Fatal(err)
	}
}

// TestArchiveWaitsForTheOutbox: a final batch whose outbox still holds
// payout events (no worker's pump queued their deliveries) is left alone
// with the reason, all its keys kept; once drained it is archived.
func TestArchiveWaitsForTheOutbox(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t)
	batch := f.load("events.csv", "E", 2)
	// An event written after the pump's last pass (as a transition writes
	// it), not handed on yet.
	f.rdb.XAdd(ctx, &redis.XAddArgs{Stream: keys.Events(batch), Values: []any{"ext", "E-1", "seq", "9", "type", "payout.created"}})
	f.age(365 * day)
	out, err := results.Archive(ctx, f.led, f.opts())
	if err != nil || len(out) != 1 || !strings.Contains(out[0].Skipped, "outbox holds 1 payout events") {
		t.Fatalf("archive with a pending event: %+v %v", out, err)
	}
	if n, _ := f.led.OutboxLen(ctx, batch); n != 1 || len(f.batchKeys(batch)) == 0 {
		t.Fatalf("the skipped batch lost keys: outbox %d, keys %v", n, f.batchKeys(batch))
	}
	f.drain(batch)
	out, err = results.Archive(ctx, f.led, f.opts())
	if err != nil || len(out) != 1 || out[0].Skipped != "" || len(f.batchKeys(batch)) != 0 {
		t.Fatalf("archive after the drain: %+v %v, keys left %v", out, err, f.batchKeys(batch))
	}
}

func (f *fixture) opts() results.ArchiveOptions {
	return results.ArchiveOptions{OlderThan: results.DefaultOlderThan, IDWindow: results.DefaultIDWindow, Dir: f.dir, Chunk: 3}
}

// batchKeys lists the keys of batch left in Redis, the summary excepted.
func (f *fixture) batchKeys(batch string) []string {
	f.t.Helper()
	var out []string
	for _, k := range f.m.Keys() {
		if strings.HasPrefix(k, keys.BatchPrefix(batch)) && k != keys.Archived(batch) {
			out = append(out, k)
		}
	}
	return out
}

func (f *fixture) age(d time.Duration) { f.m.SetTime(f.now.Add(d)) }

// checkArchivedClaim checks that id's live claim key is gone and that its
// bucketed claim names batch.
func (f *fixture) checkArchivedClaim(id, batch string) {
	f.t.Helper()
	if f.m.Exists(keys.OwnerOf(id)) {
		f.t.Fatalf("live claim of %s kept", id)
	}
	own, err := f.led.Claims().Owners(context.Background(), "new", []string{id})
	if err != nil || own[id] != batch {
		f.t.Fatalf("archived claim of %s: %v %v", id, own, err)
	}
}

func TestArchiveThenReloadRefused(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t)
	batch := f.load("a.csv", "A", 4)
	hadAudit, _ := f.led.Audit().Len(ctx, batch)

	// Too recent: nothing.
	if out, err := results.Archive(ctx, f.led, f.opts()); err != nil || len(out) != 0 {
		t.Fatalf("recent batch: %+v %v", out, err)
	}
	f.age(31 * day)
	o := f.opts()
	o.DryRun = true
	out, err := results.Archive(ctx, f.led, o)
	if err != nil || len(out) != 1 || !out[0].DryRun || out[0].Batch != batch || out[0].Rows != 4 {
		t.Fatalf("dry run: %+v %v", out, err)
	}
	if len(f.batchKeys(batch)) == 0 || fileExists(results.ArchivePathsFor(f.dir, ledger.Batch{ID: batch, File: "a.csv"}).Archive) {
		t.Fatal("the dry run wrote something")
	}

	out, err = results.Archive(ctx, f.led, f.opts())
	if err != nil || len(out) != 1 || out[0].Skipped != "" || out[0].Claims != 4 {
		t.Fatalf("archive: %+v %v", out, err)
	}
	if left := f.batchKeys(batch); len(left) != 0 {
		t.Fatalf("keys left: %v", left)
	}
	a, err := f.led.Archive().Archived(ctx, batch)
	if err != nil {
		t.Fatal(err)
	}
	if a.Counts.Rows[lifecycle.Created] != 3 || a.Counts.Rows[lifecycle.Rejected] != 1 || a.File != "a.csv" || a.Archive != out[0].Archive {
		t.Fatalf("summary: %+v", a)
	}
	if (hadAudit > 0) != (a.Audit != "") || (a.Audit != "" && !fileExists(a.Audit)) {
		t.Fatalf("audit trail: stream had %d entries, summary names %q", hadAudit, a.Audit)
	}
	f.checkArchivedClaim("A-1", batch)
	checkArchive(t, a.Archive, 4)

	// The result file is the archive's, exactly as written before.
	var regen bytes.Buffer
	sum, err := results.WriteArchived(a.Archive, "csv", &regen, report.CSVOptions{})
	if err != nil || sum.Rows != 4 || !sum.Reconciled {
		t.Fatalf("report: %+v %v", sum, err)
	}
	saved, _ := os.ReadFile(a.Result)
	if !bytes.Equal(saved, regen.Bytes()) {
		t.Fatalf("result file differs from the archive's report:\n%s\n%s", saved, regen.Bytes())
	}

	// The same content again: refused, naming the archived batch.
	res, err := f.ld.LoadFile(ctx, filepath.Join(f.in, "a.csv"), loader.Options{})
	if err != nil || res.Loaded || res.DuplicateOf == nil || res.DuplicateOf.ID != batch || res.DuplicateOf.Phase != lifecycle.PhaseArchived {
		t.Fatalf("reload: %+v %v", res, err)
	}
	// Another file reusing an archived externalId: refused within the window.
	other := filepath.Join(f.in, "b.csv")
	if err := os.WriteFile(other, []byte("externalId,amount,cardNumber\nA-2,9,4111111111111111\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	res, err = f.ld.LoadFile(ctx, other, loader.Options{})
	if err != nil || res.Loaded || len(res.Errors) != 1 || !strings.Contains(res.Errors[0].Message, batch) {
		t.Fatalf("reused id within the window: %+v %v", res, err)
	}
	// After the window the claims are gone: the id may be paid again.
	// (A claim lasts to the end of the day the window ends.)
	f.m.FastForward(results.DefaultIDWindow + 24*time.Hour + time.Second)
	f.m.SetTime(f.now.Add(results.DefaultIDWindow + 24*time.Hour + time.Second))
	if own, err := f.led.Claims().Owners(ctx, "new", []string{"A-1"}); err != nil || len(own) != 0 {
		t.Fatalf("claim outlived the window: %v %v", own, err)
	}
	res, err = f.ld.LoadFile(ctx, other, loader.Options{})
	if err != nil || !res.Loaded {
		t.Fatalf("reused id after the window: %+v %v", res, err)
	}
	// The summary stays (no expiry): the very same file stays refused.
	res, err = f.ld.LoadFile(ctx, filepath.Join(f.in, "a.csv"), loader.Options{})
	if err != nil || res.DuplicateOf == nil || res.DuplicateOf.ID != batch {
		t.Fatalf("reload after the window: %+v %v", res, err)
	}
}

func TestArchiveLeavesOpenBatchesAlone(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t)
	final := f.load("done.csv", "D", 2)
	path := filepath.Join(f.in, "open.csv")
	os.WriteFile(path, []byte("externalId,amount,cardNumber\nO-1,1,4111111111111111\nO-2,2,4111111111111111\n"), 0o600)
	res, err := f.ld.LoadFile(ctx, path, loader.Options{})
	if err != nil || !res.Loaded {
		t.Fatal(res, err)
	}
	// One payout final, one still queued.
	f.led.BeginCreate(ctx, res.Batch, "O-1", 1)
	f.led.FinishCreate(ctx, res.Batch, "O-1", 1, decide.CreateResult{To: lifecycle.Created, OrderID: "o"})
	f.age(365 * day)
	out, err := results.Archive(ctx, f.led, f.opts())
	if err != nil || len(out) != 1 || out[0].Batch != final {
		t.Fatalf("%+v %v", out, err)
	}
	if len(f.batchKeys(res.Batch)) == 0 {
		t.Fatal("the open batch was archived")
	}
	if _, err := f.led.Archive().Archived(ctx, res.Batch); !errors.Is(err, ledger.ErrNotFound) {
		t.Fatal("the open batch has a summary", err)
	}
}

// TestArchiveInterrupted stops a run after each step, then checks that
// nothing is lost and that a second run finishes the archive.
func TestArchiveInterrupted(t *testing.T) {
	steps := []string{results.StepWritten, results.StepVerified, results.StepSummary, results.StepChunk, results.StepDeleted, results.StepDropped}
	for _, step := range steps {
		t.Run(step, func(t *testing.T) {
			ctx := context.Background()
			f := newFixture(t)
			batch := f.load("a.csv", "A", 7)
			f.age(31 * day)
			boom := errors.New("killed")
			o := f.opts()
			o.Hook = func(_, s string) error {
				if s == step {
					return boom
				}
				return nil
			}
			if _, err := results.Archive(ctx, f.led, o); !errors.Is(err, boom) {
				t.Fatalf("run: %v", err)
			}
			paths := results.ArchivePathsFor(f.dir, ledger.Batch{ID: batch, File: "a.csv"})
			_, metaErr := f.led.Batch(ctx, batch)
			if metaErr != nil {
				// The keys are gone: the archive must be complete.
				checkArchive(t, paths.Archive, 7)
			}
			if _, err := f.led.Archive().Archived(ctx, batch); err == nil {
				checkArchive(t, paths.Archive, 7)
			} else if n := len(f.batchKeys(batch)); n < 7+3 {
				t.Fatalf("no summary and only %d keys", n)
			}
			out, err := results.Archive(ctx, f.led, f.opts())
			if err != nil {
				t.Fatal(err)
			}
			if step != results.StepDropped && (len(out) != 1 || out[0].Skipped != "") {
				t.Fatalf("re-run: %+v", out)
			}
			if left := f.batchKeys(batch); len(left) != 0 {
				t.Fatalf("keys left after the re-run: %v", left)
			}
			checkArchive(t, paths.Archive, 7)
			f.checkArchivedClaim("A-7", batch)
			if tmp, _ := filepath.Glob(filepath.Join(f.dir, "*.tmp")); len(tmp) != 0 {
				t.Fatalf("temporary files left: %v", tmp)
			}
		})
	}
}

// TestArchiveChangedUnderneath: a payout changed between the archive and
// the deletion stops the deletion; the next run archives the new state.
func TestArchiveChangedUnderneath(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t)
	batch := f.load("a.csv", "A", 7)
	f.age(31 * day)
	o := f.opts()
	o.Hook = func(_, s string) error {
		if s == results.StepChunk { // the first chunk is gone; touch a later payout
			return f.rdb.HSet(ctx, keys.Payout(batch, "A-6"), "updated", f.now.Add(32*day).UnixMilli(), "error", "late").Err()
		}
		return nil
	}
	_, err := results.Archive(ctx, f.led, o)
	var ce *ledger.ChangedError
	if !errors.As(err, &ce) || ce.ExternalID != "A-6" {
		t.Fatalf("run: %v", err)
	}
	if _, err := results.Archive(ctx, f.led, f.opts()); err != nil {
		t.Fatal(err)
	}
	paths := results.ArchivePathsFor(f.dir, ledger.Batch{ID: batch, File: "a.csv"})
	found := false
	checkArchiveFn(t, paths.Archive, 7, func(p map[string]string) {
		if p["ext"] == "A-6" && p["error"] == "late" {
			found = true
		}
	})
	if !found {
		t.Fatal("the archive lacks the later change of A-6")
	}
}

func checkArchive(t *testing.T, path string, want int) {
	t.Helper()
	checkArchiveFn(t, path, want, nil)
}

func checkArchiveFn(t *testing.T, path string, want int, fn func(map[string]string)) {
	t.Helper()
	n := 0
	var buf bytes.Buffer
	_, err := results.WriteArchived(path, "json", &buf, report.CSVOptions{})
	if err != nil {
		t.Fatalf("archive %s: %v", path, err)
	}
	fh, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer fh.Close()
	zr, err := gzip.NewReader(fh)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := io.ReadAll(zr)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(raw, []byte("4111111111111111")) || bytes.Contains(raw, []byte(`"sealed"`)) {
		t.Fatal("the archive holds a card number")
	}
	err = results.EachArchivedPayout(path, func(p map[string]string) error {
		n++
		if fn != nil {
			fn(p)
		}
		return nil
	})
	if err != nil || n != want {
		t.Fatalf("archive %s: %d payouts, %v", path, n, err)
	}
}

func fileExists(p string) bool { _, err := os.Stat(p); return err == nil }

// TestSpoolArchives: the archive step at the end of a spool run archives
// the batches final for long enough, into the spool's archive folder.
func TestSpoolArchives(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t)
	batch := f.load("a.csv", "A", 3)
	spool := t.TempDir()
	o := f.opts()
	o.Dir = filepath.Join(spool, "archive")
	so := loader.SpoolOptions{Archive: func(ctx context.Context) error {
		_, err := results.Archive(ctx, f.led, o)
		return err
	}}
	if _, err := f.ld.Spool(ctx, spool, so); err != nil {
		t.Fatal(err)
	}
	if len(f.batchKeys(batch)) == 0 {
		t.Fatal("a recent batch was archived")
	}
	f.age(31 * day)
	if _, err := f.ld.Spool(ctx, spool, so); err != nil {
		t.Fatal(err)
	}
	if len(f.batchKeys(batch)) != 0 {
		t.Fatal("the spool run did not archive the batch")
	}
	a, err := f.led.Archive().Archived(ctx, batch)
	if err != nil || filepath.Dir(a.Archive) != o.Dir {
		t.Fatalf("%+v %v", a, err)
	}
	checkArchive(t, a.Archive, 3)
}
