package loader

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/acme/payout/internal/ledger"
	"github.com/acme/payout/internal/ledger/keys"
	"github.com/acme/payout/internal/lifecycle"
	"github.com/acme/payout/internal/money"
	"github.com/acme/payout/internal/payfile"
	"github.com/acme/payout/internal/proof/redisdump"
	"github.com/acme/payout/internal/queue"
	"github.com/acme/payout/internal/vault"
	"github.com/acme/payout/internal/view"
	"github.com/acme/payout/jobs"
	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"
	"github.com/rs/zerolog"
)

type fixture struct {
	t    *testing.T
	rdb  *redis.Client
	led  *ledger.Ledger
	ld   *Loader
	ring *vault.Keyring
	insp *asynq.Inspector
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	opt, err := redis.ParseURL(testRedisURL(t))
	if err != nil {
		t.Fatal(err)
	}
	rdb := redis.NewClient(opt)
	t.Cleanup(func() { rdb.Close() })
	ring := vault.Ephemeral()
	led := ledger.New(rdb)
	// Enqueues go through autopipelining, as payout load's do by default.
	ap, err := rdb.AutoPipeline()
	if err != nil {
		t.Fatal(err)
	}
	return &fixture{t: t, rdb: rdb, led: led, ring: ring, insp: asynq.NewInspectorFromRedisClient(rdb),
		ld: New(led, queue.New(ap), ring, zerolog.Nop())}
}

func writeFile(t *testing.T, dir, name, content string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func (f *fixture) pending() int {
	info, err := f.insp.GetQueueInfo(jobs.Queue)
	if err != nil {
		return 0
	}
	return info.Pending
}

// pendingTasks lists the pending tasks of the payouts queue; a queue
// nothing was ever enqueued to does not exist, and has none.
func (f *fixture) pendingTasks() []*asynq.TaskInfo {
	f.t.Helper()
	tasks, err := f.insp.ListPendingTasks(jobs.Queue, asynq.PageSize(1000))
	if errors.Is(err, asynq.ErrQueueNotFound) {
		return nil
	}
	if err != nil {
		f.t.Fatal(err)
	}
	return tasks
}

func (f *fixture) keys() int {
	n, err := f.rdb.DBSize(context.Background()).Result()
	if err != nil {
		f.t.Fatal(err)
	}
	return int(n)
}

const goodCSV = "externalId,amount,cardNumber,telecomOperator\n" +
	"A-1,10.50,4111 1111 1111 1111,\n" +
	"A-2,20,,MTS\n" +
	"A-3,0.01,5555-5555-5555-4444,\n"

func TestLoadGoodFileThenDuplicate(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	dir := t.TempDir()
	res, err := f.ld.LoadFile(ctx, writeFile(t, dir, "a.csv", goodCSV), Options{})
	if err != nil || !res.Loaded || res.Registered != 3 || res.Enqueued != 3 || res.Total.String() != "30.51" {
		t.Fatalf("load: %+v %v", res, err)
	}
	if f.pending() != 3 {
		t.Fatalf("pending tasks %d, want 3", f.pending())
	}
	p, err := f.led.Get(ctx, res.Batch, "A-1")
	if err != nil || p.State != lifecycle.Queued || p.Destination != "card 411111******1111" || p.Line != 2 {
		t.Fatalf("ledger entry %+v %v", p, err)
	}
	if pan, err := f.ring.Open(p.Sealed, ledger.SealAD(res.Batch, "A-1")); err != nil || pan != "4111111111111111" {
		t.Fatalf("sealed card does not open to the normalised number: %v", err)
	}
	keysBefore := f.keys()
	// The same content under another name is recognised and adds nothing.
	again, err := f.ld.LoadFile(ctx, writeFile(t, dir, "copy-of-a.csv", goodCSV), Options{})
	if err != nil || again.DuplicateOf == nil || again.DuplicateOf.ID != res.Batch || again.Loaded {
		t.Fatalf("reload: %+v %v", again, err)
	}
	if f.keys() != keysBefore || f.pending() != 3 {
		t.Fatalf("reload wrote to Redis: keys %d -> %d, pending %d", keysBefore, f.keys(), f.pending())
	}
}

func TestNoFullCardNumberInRedis(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	if _, err := f.ld.LoadFile(ctx, writeFile(t, t.TempDir(), "a.csv", goodCSV), Options{}); err != nil {
		t.Fatal(err)
	}
	contents, err := redisdump.Contents(ctx, f.rdb)
	if err != nil || len(contents) == 0 {
		t.Fatal(err)
	}
	for k, dump := range contents {
		for _, pan := range []string{"4111111111111111", "5555555555554444"} {
			if strings.Contains(dump, pan) || strings.Contains(k, pan) {
				t.Fatalf("key %s holds the full card number %s", k, pan)
			}
		}
	}
}

func TestAllOrNothing(t *testing.T) {
	bad := goodCSV + "A-4,1e3,4111111111111111,\nA-2,5,,MTS\n"
	tests := []struct {
		name       string
		opts       Options
		loaded     bool
		registered int
		errLines   []int
	}{
		{"default refuses the whole file", Options{}, false, 0, []int{5, 6}},
		{"partial loads the valid rows", Options{Partial: true}, true, 3, []int{5, 6}},
		{"dry run writes nothing", Options{DryRun: true, Partial: true}, true, 0, []int{5, 6}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t)
			res, err := f.ld.LoadFile(context.Background(), writeFile(t, t.TempDir(), "bad.csv", bad), tt.opts)
			if err != nil {
				t.Fatal(err)
			}
			if res.Loaded != tt.loaded || res.Registered != tt.registered {
				t.Fatalf("loaded %v registered %d, want %v %d", res.Loaded, res.Registered, tt.loaded, tt.registered)
			}
			var lines []int
			for _, e := range res.Errors {
				lines = append(lines, e.Line)
			}
			if fmt.Sprint(lines) != fmt.Sprint(tt.errLines) {
				t.Fatalf("error lines %v, want %v: %v", lines, tt.errLines, res.Errors)
			}
			if tt.registered == 0 && f.keys() != 0 {
				t.Fatalf("a refused or dry-run file left %d keys in Redis", f.keys())
			}
			if f.pending() != tt.registered {
				t.Fatalf("pending %d, want %d", f.pending(), tt.registered)
			}
		})
	}
}

func TestExternalIDKnownFromEarlierBatch(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	dir := t.TempDir()
	first, err := f.ld.LoadFile(ctx, writeFile(t, dir, "a.csv", goodCSV), Options{})
	if err != nil || !first.Loaded {
		t.Fatal(err)
	}
	second := "externalId,amount,telecomOperator\nB-1,5,MTS\nA-2,7,MTS\n"
	res, err := f.ld.LoadFile(ctx, writeFile(t, dir, "b.csv", second), Options{})
	if err != nil {
		t.Fatal(err)
	}
	if res.Loaded || len(res.Errors) != 1 {
		t.Fatalf("res %+v", res)
	}
	e := res.Errors[0]
	want := fmt.Sprintf("b.csv:3: externalId: externalId \"A-2\" was already loaded in batch %s", first.Batch)
	if e.String() != want || !errors.Is(e, payfile.KindDuplicate) {
		t.Fatalf("error %q, want %q", e.String(), want)
	}
	if _, err := f.led.Batch(ctx, res.Batch); !errors.Is(err, ledger.ErrNotFound) {
		t.Fatalf("refused file left a batch: %v", err)
	}
	if owners, _ := f.led.Claims().Owners(ctx, "someone-else", []string{"B-1"}); len(owners) != 0 {
		t.Fatalf("the refused file kept its claim on B-1: %v", owners)
	}
}

// TestResumeAfterCrash: a loader killed mid-file (batch in phase loading,
// some rows registered and enqueued) is completed by the next run without
// a second task for any row.
func TestResumeAfterCrash(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	path := writeFile(t, t.TempDir(), "a.csv", goodCSV)
	full, err := f.ld.LoadFile(ctx, path, Options{DryRun: true})
	if err != nil {
		t.Fatal(err)
	}
	// Simulate the dead run: batch begun, ids claimed, row A-1 registered
	// and enqueued, nothing else.
	crashing := *f.ld
	if _, err := crashing.LoadFile(ctx, path, Options{ChunkSize: 1, EnqueueWorkers: 1}); err != nil {
		t.Fatal(err)
	}
	if err := f.rdb.HSet(ctx, keys.Meta(full.Batch), "phase", lifecycle.PhaseLoading).Err(); err != nil {
		t.Fatal(err)
	}
	for _, ext := range []string{"A-2", "A-3"} {
		if err := f.rdb.Del(ctx, keys.Payout(full.Batch, ext)).Err(); err != nil {
			t.Fatal(err)
		}
		if err := f.insp.DeleteTask(jobs.Queue, jobs.CreateTaskID(ext, 1)); err != nil {
			t.Fatal(err)
		}
	}
	// Fix the counters the deletions skewed, as a real crash would not
	// have counted those rows.
	if err := f.rdb.HIncrBy(ctx, keys.Counts(full.Batch), "n:queued", -2).Err(); err != nil {
		t.Fatal(err)
	}
	f.rdb.HIncrBy(ctx, keys.Counts(full.Batch), "u:queued", -2001)

	res, err := f.ld.LoadFile(ctx, path, Options{})
	if err != nil || !res.Resumed || !res.Loaded || res.Registered != 2 || res.Enqueued != 3 {
		t.Fatalf("resume: %+v %v", res, err)
	}
	if f.pending() != 3 {
		t.Fatalf("pending %d, want 3 (one per row)", f.pending())
	}
	c, _ := view.New(f.led.Redis()).Counts(ctx, full.Batch)
	if c.Rows[lifecycle.Queued] != 3 || c.Units[lifecycle.Queued] != 3051 {
		t.Fatalf("counts %+v", c)
	}
}

func TestSpoolMovesFilesAndWritesErrors(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	dir := t.TempDir()
	os.MkdirAll(filepath.Join(dir, Inbox), 0o750)
	writeFile(t, filepath.Join(dir, Inbox), "good.csv", goodCSV)
	writeFile(t, filepath.Join(dir, Inbox), "bad.csv", "externalId,amount,telecomOperator\nX-1,-5,MTS\n")
	writeFile(t, filepath.Join(dir, Inbox), "upload.csv.part", goodCSV)
	writeFile(t, filepath.Join(dir, Inbox), ".hidden.csv", goodCSV)
	res, err := f.ld.Spool(ctx, dir, SpoolOptions{Delivery: DeliveryRename})
	if err != nil || len(res.Files) != 2 {
		t.Fatalf("spool: %+v %v", res, err)
	}
	for _, c := range []struct{ path string }{
		{filepath.Join(dir, Done, "good.csv")}, {filepath.Join(dir, Failed, "bad.csv")},
		{filepath.Join(dir, Inbox, "upload.csv.part")}, {filepath.Join(dir, Inbox, ".hidden.csv")},
		{filepath.Join(dir, Outbox, "bad.csv.errors.csv")},
	} {
		if _, err := os.Stat(c.path); err != nil {
			t.Errorf("missing %s", c.path)
		}
	}
	if info, err := os.Stat(filepath.Join(dir, Done, "good.csv")); err == nil && info.Mode().Perm() != 0o600 {
		t.Errorf("done file mode %v, want 0600", info.Mode().Perm())
	}
	errs, _ := os.ReadFile(filepath.Join(dir, Outbox, "bad.csv.errors.csv"))
	if !strings.Contains(string(errs), "bad.csv,2,amount,") {
		t.Errorf("errors file:\n%s", errs)
	}
}

func TestSpoolSettle(t *testing.T) {
	f := newFixture(t)
	dir := t.TempDir()
	os.MkdirAll(filepath.Join(dir, Inbox), 0o750)
	p := writeFile(t, filepath.Join(dir, Inbox), "fresh.csv", goodCSV)
	res, err := f.ld.Spool(context.Background(), dir, SpoolOptions{Delivery: DeliveryRename, Settle: time.Hour})
	if err != nil || len(res.Files) != 0 {
		t.Fatalf("an unsettled file was taken: %+v %v", res, err)
	}
	old := time.Now().Add(-2 * time.Hour)
	os.Chtimes(p, old, old)
	res, err = f.ld.Spool(context.Background(), dir, SpoolOptions{Delivery: DeliveryRename, Settle: time.Hour})
	if err != nil || len(res.Files) != 1 {
		t.Fatalf("a settled file was not taken: %+v %v", res, err)
	}
}

// TestOverlappingSpoolRuns: two loaders on one spool at once (cron firing
// while the last run is busy) load every file exactly once.
func TestOverlappingSpoolRuns(t *testing.T) {
	f := newFixture(t)
	dir := t.TempDir()
	os.MkdirAll(filepath.Join(dir, Inbox), 0o750)
	const files = 6
	for i := 0; i < files; i++ {
		var b strings.Builder
		b.WriteString("externalId,amount,telecomOperator\n")
		for r := 0; r < 200; r++ {
			fmt.Fprintf(&b, "F%d-R%d,1.%02d,MTS\n", i, r, r%100)
		}
		writeFile(t, filepath.Join(dir, Inbox), fmt.Sprintf("f%d.csv", i), b.String())
	}
	var wg sync.WaitGroup
	results := make([]SpoolResult, 4)
	for i := range results {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var err error
			results[i], err = f.ld.Spool(context.Background(), dir, SpoolOptions{Delivery: DeliveryRename})
			if err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	// Late runs find the inbox empty; run once more to be sure nothing is
	// left behind.
	if _, err := f.ld.Spool(context.Background(), dir, SpoolOptions{Delivery: DeliveryRename}); err != nil {
		t.Fatal(err)
	}
	loaded := 0
	for _, r := range results {
		for _, fr := range r.Files {
			if fr.Loaded {
				loaded++
			}
		}
	}
	batches, _ := view.New(f.led.Redis()).BatchIDs(context.Background())
	if loaded != files || len(batches) != files || f.pending() != files*200 {
		t.Fatalf("loaded %d files, %d batches, %d tasks; want %d, %d, %d", loaded, len(batches), f.pending(), files, files, files*200)
	}
	done, _ := os.ReadDir(filepath.Join(dir, Done))
	if len(done) != files {
		t.Fatalf("%d files in done/, want %d", len(done), files)
	}
}

func TestSpoolPurgesOldInputFiles(t *testing.T) {
	f := newFixture(t)
	dir := t.TempDir()
	for _, sub := range []string{Done, Failed, Inbox} {
		os.MkdirAll(filepath.Join(dir, sub), 0o750)
	}
	old := writeFile(t, filepath.Join(dir, Done), "old.csv", goodCSV)
	oldFailed := writeFile(t, filepath.Join(dir, Failed), "old-bad.csv", "x")
	fresh := writeFile(t, filepath.Join(dir, Done), "fresh.csv", goodCSV)
	long := time.Now().Add(-48 * time.Hour)
	os.Chtimes(old, long, long)
	os.Chtimes(oldFailed, long, long)
	res, err := f.ld.Spool(context.Background(), dir, SpoolOptions{PurgeAfter: 24 * time.Hour})
	if err != nil || res.Purged != 2 {
		t.Fatalf("purged %d, %v; want 2", res.Purged, err)
	}
	for _, p := range []string{old, oldFailed} {
		if _, err := os.Stat(p); !os.IsNotExist(err) {
			t.Errorf("%s survived the purge", p)
		}
	}
	if _, err := os.Stat(fresh); err != nil {
		t.Errorf("a fresh file was purged: %v", err)
	}
}

// TestRefusedCorpusWritesNothing runs every file of the bad-input corpus
// through the loader: each is refused, and nothing of it reaches Redis.
func TestRefusedCorpusWritesNothing(t *testing.T) {
	files, err := filepath.Glob("../payfile/testdata/bad/*.csv")
	if err != nil || len(files) < 30 {
		t.Fatalf("corpus: %d files, %v", len(files), err)
	}
	f := newFixture(t)
	// The corpus's own options (see payfile's corpus test).
	opts := Options{File: payfile.Options{MaxAmount: money.MustParse("1000000.00"), MaxLineBytes: 4096}}
	// Chunks of one row: every valid row's externalId is claimed while the
	// file is still being validated, so the release after the refusal must
	// find them all, up to where an aborted file stopped being read.
	for _, chunk := range []int{0, 1} {
		opts.ChunkSize = chunk
		for _, path := range files {
			res, err := f.ld.LoadFile(context.Background(), path, opts)
			if err != nil {
				t.Errorf("chunk %d: %s: %v", chunk, filepath.Base(path), err)
				continue
			}
			if res.Loaded || len(res.Errors) == 0 {
				t.Errorf("chunk %d: %s: loaded=%v with %d errors, want refused", chunk, filepath.Base(path), res.Loaded, len(res.Errors))
			}
			if n := f.keys(); n != 0 {
				t.Fatalf("chunk %d: %s: refused file left %d keys in Redis", chunk, filepath.Base(path), n)
			}
		}
	}
}

// TestConcurrentLoadOfTheSameContent: while one loader holds a batch's load
// lock, another load of the same content does nothing and says so; after
// the lock is released it completes the batch, without a second row or
// task.
func TestConcurrentLoadOfTheSameContent(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	dir := t.TempDir()
	path := writeFile(t, dir, "a.csv", goodCSV)
	dry, err := f.ld.LoadFile(ctx, path, Options{DryRun: true})
	if err != nil {
		t.Fatal(err)
	}
	if ok, err := f.led.Locks().LockLoad(ctx, dry.Batch, "another-loader", time.Minute); !ok || err != nil {
		t.Fatalf("lock: %v %v", ok, err)
	}
	res, err := f.ld.LoadFile(ctx, writeFile(t, dir, "copy.csv", goodCSV), Options{})
	if err != nil || !res.Busy || res.Loaded || res.Registered != 0 || f.pending() != 0 {
		t.Fatalf("load while locked: %+v %v (pending %d)", res, err, f.pending())
	}
	if err := f.led.Locks().UnlockLoad(ctx, dry.Batch, "another-loader"); err != nil {
		t.Fatal(err)
	}
	res, err = f.ld.LoadFile(ctx, path, Options{})
	if err != nil || !res.Loaded || res.Registered != 3 || f.pending() != 3 {
		t.Fatalf("load after unlock: %+v %v", res, err)
	}
}

// stealingSealer seals like its keyring and, at its nth call, hands the
// batch's load lock to another owner, as a loader that outlived its lock
// would find it.
type stealingSealer struct {
	*vault.Keyring
	rdb        *redis.Client
	lock       string
	calls, nth int
}

func (s *stealingSealer) Seal(plaintext, ad string) (string, error) {
	s.calls++
	if s.calls == s.nth {
		if err := s.rdb.Set(context.Background(), s.lock, "another-loader", time.Minute).Err(); err != nil {
			return "", err
		}
	}
	return s.Keyring.Seal(plaintext, ad)
}

// TestLoadStopsWhenTheLockIsLost: the registrar checks the load lock
// before every chunk; once another loader holds it, nothing more is
// registered, the load fails with ErrLoadLockLost, and no task was
// enqueued for a row that is not in the ledger. The enqueuers stop with
// the registrar: on a slow machine they may have enqueued nothing, and
// the queue then does not exist yet.
func TestLoadStopsWhenTheLockIsLost(t *testing.T) {
	const rows, chunk = 80, 5
	tests := []struct {
		name     string
		nth      int // Seal call at which the lock is stolen
		min, max int // rows registered
	}{
		// Sealing runs at most stageDepth+registrars chunks ahead of
		// registration (stageDepth queued, one in each registrar's
		// hands): by the 76th row, chunks 1-15 were handed over, so at
		// least the first 15-stageDepth-registrars were registered; the
		// last chunk (rows 76-80) never is.
		{name: "lost mid-load", nth: 76, min: (75/chunk - stageDepth - registrars) * chunk, max: rows - chunk},
		// Lost before the registrar's first check: nothing registered,
		// nothing enqueued, no queue.
		{name: "lost before the first chunk", nth: 1, min: 0, max: 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t)
			ctx := context.Background()
			var b strings.Builder
			b.WriteString("externalId,amount,cardNumber\n")
			for i := 0; i < rows; i++ {
				fmt.Fprintf(&b, "L-%02d,1.00,4111111111111111\n", i)
			}
			path := writeFile(t, t.TempDir(), "l.csv", b.String())
			dry, err := f.ld.LoadFile(ctx, path, Options{DryRun: true})
			if err != nil {
				t.Fatal(err)
			}
			s := &stealingSealer{Keyring: f.ring, rdb: f.rdb, lock: keys.LoadLock(dry.Batch), nth: tt.nth}
			ld := New(f.led, queue.New(f.rdb), s, zerolog.Nop())
			res, err := ld.LoadFile(ctx, path, Options{ChunkSize: chunk, EnqueueWorkers: 2})
			if !errors.Is(err, ledger.ErrLoadLockLost) {
				t.Fatalf("err = %v, want ErrLoadLockLost (result %+v)", err, res)
			}
			if res.Registered < tt.min || res.Registered > tt.max || res.Enqueued > res.Registered {
				t.Fatalf("registered %d (want %d-%d), enqueued %d of %d rows", res.Registered, tt.min, tt.max, res.Enqueued, rows)
			}
			c, err := view.New(f.led.Redis()).Counts(ctx, dry.Batch)
			if err != nil || c.Rows[lifecycle.Queued] != int64(res.Registered) {
				t.Fatalf("ledger holds %d rows, load reported %d registered (%v)", c.Rows[lifecycle.Queued], res.Registered, err)
			}
			tasks := f.pendingTasks()
			if len(tasks) != res.Enqueued {
				t.Fatalf("%d pending tasks, load reported %d enqueued", len(tasks), res.Enqueued)
			}
			for _, task := range tasks {
				p, err := jobs.DecodeCreate(task.Payload)
				if err != nil {
					t.Fatal(err)
				}
				if _, err := f.led.Get(ctx, dry.Batch, p.ExternalID); err != nil {
					t.Errorf("task for %s, which is not in the ledger: %v", p.ExternalID, err)
				}
			}
		})
	}
}
