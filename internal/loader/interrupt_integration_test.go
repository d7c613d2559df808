//go:build integration

package loader

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/acme/payout/internal/decide"
	"github.com/acme/payout/internal/ledger"
	"github.com/acme/payout/internal/ledger/keys"
	"github.com/acme/payout/internal/lifecycle"
	"github.com/acme/payout/internal/proof/testenv"
	"github.com/acme/payout/internal/proof/testenv/redistest"
	"github.com/acme/payout/internal/queue"
	"github.com/acme/payout/internal/vault"
	"github.com/acme/payout/internal/view"
	"github.com/acme/payout/jobs"
	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"
	"github.com/rs/zerolog"
)

var errKilled = errors.New("loader killed (test)")

// interruptRows is the size of the file the interrupted loads work on.
const interruptRows = 1200

// writeBig writes a file of n rows whose amounts are shifted by bump (a
// corrected copy of the same ids when bump differs).
func writeBig(t *testing.T, dir, name string, n, bump int) string {
	t.Helper()
	path := filepath.Join(dir, name)
	out, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	w := bufio.NewWriter(out)
	fmt.Fprintln(w, "externalId,amount,cardNumber,telecomOperator")
	for i := 0; i < n; i++ {
		if i%2 == 0 {
			fmt.Fprintf(w, "INT-%05d,%d.%02d,,MTS\n", i, 1+(i+bump)%300, i%100)
		} else {
			fmt.Fprintf(w, "INT-%05d,%d.%02d,%s,\n", i, 1+(i+bump)%300, i%100, luhnCard(i))
		}
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	out.Close()
	return path
}

// interruptEnv is a loader on a redis-server with AOF (fsync every
// second, as production runs it), so that a crash of Redis keeps nearly
// all it acknowledged. Enqueues go through autopipelining, as payout
// load's do.
type interruptEnv struct {
	srv  *redistest.Server
	rdb  *redis.Client
	led  *ledger.Ledger
	ld   *Loader
	insp *asynq.Inspector
}

func newInterruptEnv(t *testing.T) *interruptEnv {
	t.Helper()
	srv := redistest.StartConfig(t, redistest.Config{AOF: true, Extra: []string{"--appendfsync", "everysec"}})
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr, MaxRetries: 1, DialTimeout: time.Second})
	t.Cleanup(func() { rdb.Close() })
	ap, err := rdb.AutoPipeline()
	if err != nil {
		t.Fatal(err)
	}
	led := ledger.New(rdb)
	return &interruptEnv{srv: srv, rdb: rdb, led: led, insp: asynq.NewInspectorFromRedisClient(rdb),
		ld: New(led, queue.New(ap), vault.Ephemeral(), zerolog.Nop())}
}

// tasks counts the tasks of the queue in any state.
func (e *interruptEnv) tasks(t *testing.T) int {
	t.Helper()
	info, err := e.insp.GetQueueInfo(jobs.Queue)
	if err != nil {
		if strings.Contains(err.Error(), "does not exist") {
			return 0
		}
		t.Fatal(err)
	}
	return info.Size
}

// TestInterruptedLoad kills the loader (a failing step, or Redis itself,
// with AOF) at several points of a load. After each: the batch says
// "loading, interrupted" (unless it was marked loaded already), no create
// may begin for it (the worker's compare-and-set holds it) and no create
// task exists for it; running the file again completes it with exactly one
// create task and one create per row; discarding it instead releases every
// claim, so a corrected file with the same ids loads.
func TestInterruptedLoad(t *testing.T) {
	old := loadLockTTL
	loadLockTTL = 2 * time.Second // a dead loader's lease expires fast
	t.Cleanup(func() { loadLockTTL = old })
	points := []struct {
		point string
		at    int
	}{
		{pointLocked, 0},
		{pointClaimed, interruptRows / 2},
		{pointRegistered, interruptRows / 2},
		{pointLoaded, 0},
		{pointEnqueued, interruptRows / 2},
	}
	for _, fault := range []string{"loader", "redis"} {
		for _, p := range points {
			for _, then := range []string{"rerun", "discard"} {
				if then == "discard" && p.point == pointEnqueued {
					continue // loaded: its tasks may run; nothing to discard
				}
				t.Run(fmt.Sprintf("%s killed at %s %d, then %s", fault, p.point, p.at, then), func(t *testing.T) {
					testInterrupted(t, fault, p.point, p.at, then)
				})
			}
		}
	}
}

func testInterrupted(t *testing.T, fault, point string, at int, then string) {
	ctx := context.Background()
	e := newInterruptEnv(t)
	dir := t.TempDir()
	path := writeBig(t, dir, "big.csv", interruptRows, 0)
	opts := Options{ChunkSize: 100, EnqueueWorkers: 4}
	// The hook runs in the enqueue workers too, several at once: fire
	// once, and kill Redis once.
	var fired atomic.Bool
	opts.interrupt = func(pt string, rows int) error {
		if pt != point || rows < at {
			return nil
		}
		if fired.CompareAndSwap(false, true) && fault == "redis" {
			e.srv.Kill()
		}
		return errKilled
	}
	res, err := e.ld.LoadFile(ctx, path, opts)
	if err == nil || !fired.Load() {
		t.Fatalf("load not interrupted at %s (fired %v): %+v %v", point, fired.Load(), res, err)
	}
	if fault == "redis" {
		if err := e.srv.Restart(ctx); err != nil {
			t.Fatal(err)
		}
	}
	batch := res.Batch
	// The dead loader's lease expires (with AOF every second, a crash of
	// Redis may also lose the last writes, the loaded mark among them).
	testenv.Eventually(t, "the dead loader's lease to expire", func() bool {
		return e.rdb.Exists(ctx, keys.LoadLock(batch)).Val() == 0
	})

	loaded, lost := point == pointEnqueued, false
	if _, err := e.led.Batch(ctx, batch); errors.Is(err, ledger.ErrNotFound) && fault == "redis" {
		lost = true
		// The crash lost the last second of writes (AOF every second),
		// the batch's beginning with them: then none of its claims, which
		// came after it, survived either.
		ids := make([]string, interruptRows)
		for i := range ids {
			ids[i] = fmt.Sprintf("INT-%05d", i)
		}
		owners, err := e.led.Claims().Owners(ctx, "someone-else", ids)
		if err != nil || len(owners) != 0 {
			t.Fatalf("the batch was lost but %d claims survived (%v)", len(owners), err)
		}
		t.Log("the crash lost the whole load: nothing to show or release")
		if then == "discard" {
			return
		}
	} else if !loaded {
		// Visible: loading, interrupted (at once, or when the dead
		// loader's lease expires).
		testenv.Eventually(t, "the load to show as interrupted", func() bool {
			st, err := view.New(e.led.Redis()).Status(ctx, batch)
			return err == nil && st.Interrupted && st.State() == "loading, interrupted"
		})
		// No create: no task exists, and a create task delivered anyway
		// (an older loader's) is held by the ledger.
		if n := e.tasks(t); n != 0 {
			t.Fatalf("%d tasks exist for a batch whose load did not complete", n)
		}
		held := 0
		if err := view.New(e.led.Redis()).Each(ctx, batch, func(p ledger.Payout) error {
			b, err := e.led.BeginCreate(ctx, batch, p.ExternalID, 1)
			if err != nil {
				return err
			}
			if b.Action != decide.Hold {
				t.Errorf("begin create of %s in an interrupted load: %s, want hold", p.ExternalID, b.Action)
			}
			held++
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		t.Logf("%d payouts registered before the interruption, all held", held)
	}

	switch then {
	case "rerun":
		again, err := e.ld.LoadFile(ctx, path, Options{ChunkSize: 100, EnqueueWorkers: 4})
		if err != nil || !again.Loaded || again.Resumed == lost {
			t.Fatalf("rerun: %+v %v, want loaded and resumed", again, err)
		}
		st, err := view.New(e.led.Redis()).Status(ctx, batch)
		if err != nil || st.Phase != lifecycle.PhaseLoaded || st.TasksPending || st.Interrupted || st.Counts.Rows[lifecycle.Queued] != interruptRows {
			t.Fatalf("after the rerun: %+v %v", st, err)
		}
		if n := e.tasks(t); n != interruptRows {
			t.Fatalf("%d tasks after the rerun, want one per row (%d)", n, interruptRows)
		}
		proceeded := 0
		if err := view.New(e.led.Redis()).Each(ctx, batch, func(p ledger.Payout) error {
			for attempt := 0; attempt < 2; attempt++ { // a redelivery never begins a second create
				b, err := e.led.BeginCreate(ctx, batch, p.ExternalID, 1)
				if err != nil {
					return err
				}
				if b.Action == decide.Proceed {
					proceeded++
				}
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		if proceeded != interruptRows {
			t.Fatalf("%d creates began, want exactly one per row (%d)", proceeded, interruptRows)
		}
	case "discard":
		d, err := e.led.DiscardBatch(ctx, batch, "alice", "interrupted, file corrected")
		if err != nil || d.Phase != lifecycle.PhaseLoading {
			t.Fatalf("discard: %+v %v", d, err)
		}
		var claims int
		if point != pointLocked {
			claims = interruptRows // the claim pass runs in chunks ahead of the hook; all or most are claimed
		}
		t.Logf("discard: %d cancelled, %d claims released", d.Cancelled, d.Released)
		if point == pointLoaded && d.Released != claims {
			t.Fatalf("released %d claims, want %d", d.Released, claims)
		}
		fixed := writeBig(t, dir, "big-fixed.csv", interruptRows, 7)
		res, err := e.ld.LoadFile(ctx, fixed, Options{ChunkSize: 100, EnqueueWorkers: 4})
		if err != nil || !res.Loaded || len(res.Errors) != 0 || res.Registered != interruptRows {
			t.Fatalf("corrected file after the discard: registered %d, errors %v, err %v", res.Registered, res.Errors, err)
		}
		if n := e.tasks(t); n != interruptRows {
			t.Fatalf("%d tasks, want the corrected file's %d", n, interruptRows)
		}
		again, err := e.ld.LoadFile(ctx, path, Options{ChunkSize: 100})
		if err != nil || again.Loaded || again.DuplicateOf == nil {
			t.Fatalf("the discarded file again: %+v %v, want refused as discarded", again, err)
		}
	}
}
