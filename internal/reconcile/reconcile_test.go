package reconcile

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/acme/payout/internal/decide"
	"github.com/acme/payout/internal/ledger"
	"github.com/acme/payout/internal/ledger/keys"
	"github.com/acme/payout/internal/lifecycle"
	"github.com/acme/payout/internal/money"
	"github.com/acme/payout/internal/queue"
	"github.com/acme/payout/jobs"
	"github.com/alicebob/miniredis/v2"
	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"
	"github.com/rs/zerolog"
)

type fixture struct {
	t      *testing.T
	m      *miniredis.Miniredis
	rdb    *redis.Client
	ledger *ledger.Ledger
	queue  *queue.Queue
	insp   *asynq.Inspector
	now    time.Time
}

func newFixture(t *testing.T, n int) *fixture {
	t.Helper()
	m := miniredis.RunT(t)
	rdb := redis.NewClient(&redis.Options{Addr: m.Addr()})
	t.Cleanup(func() { rdb.Close() })
	f := &fixture{t: t, m: m, rdb: rdb, queue: queue.New(rdb),
		insp: asynq.NewInspectorFromRedisClient(rdb), now: time.Date(2026, 11, 25, 10, 0, 0, 0, time.UTC)}
	// The ledger stamps registrations with the process's clock and
	// transitions with Redis's TIME: both follow the fixture's clock, or
	// the test depends on the time of day it runs at.
	f.ledger = ledger.New(rdb, ledger.WithClock(func() time.Time { return f.now }))
	m.SetTime(f.now)
	ctx := context.Background()
	if _, _, err := f.ledger.BeginBatch(ctx, ledger.Batch{ID: "b", File: "f.csv", LoadedAt: f.now, Rows: int64(n), Total: money.MustParse("1"), Scale: 2}); err != nil {
		t.Fatal(err)
	}
	var ps []ledger.NewPayout
	for i := 1; i <= n; i++ {
		ps = append(ps, ledger.NewPayout{Line: i + 1, ExternalID: fmt.Sprintf("E%d", i), Amount: money.MustParse("1.00"), Destination: "card 411111******1111"})
	}
	if _, err := f.ledger.Register(ctx, "b", ps, 2); err != nil {
		t.Fatal(err)
	}
	if err := f.ledger.FinishBatch(ctx, "b"); err != nil {
		t.Fatal(err)
	}
	return f
}

func (f *fixture) advance(d time.Duration) { f.now = f.now.Add(d); f.m.SetTime(f.now) }

func (f *fixture) enqueueCreate(ext string, attempt int) {
	f.t.Helper()
	if _, err := f.queue.Add(context.Background(), queue.Step{Kind: queue.Create, Batch: "b", ExternalID: ext, N: attempt}); err != nil {
		f.t.Fatal(err)
	}
}

func (f *fixture) taskState(id string) string {
	info, err := f.insp.GetTaskInfo(jobs.Queue, id)
	if err != nil {
		return "none"
	}
	return info.State.String()
}

func (f *fixture) state(ext string) ledger.Payout {
	p, err := f.ledger.Get(context.Background(), "b", ext)
	if err != nil {
		f.t.Fatal(err)
	}
	return p
}

// TestSweepRestoresLostReminders builds one payout per way a reminder gets
// lost and checks what one sweep restores. On the code before the
// reconciler, every one of these payouts stayed open forever.
func TestSweepRestoresLostReminders(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t, 8)
	// E1 queued, its create task deleted in the UI (never enqueued here).
	// E2 queued with a live create task.
	f.enqueueCreate("E2", 1)
	// E3 checking, its status task archived in the UI.
	f.ledger.BeginCreate(ctx, "b", "E3", 1)
	fin, _ := f.ledger.FinishCreate(ctx, "b", "E3", 1, decide.CreateResult{To: lifecycle.Checking})
	if _, err := f.queue.Add(ctx, queue.Step{Kind: queue.Status, Batch: "b", ExternalID: "E3", N: fin.Seq}); err != nil {
		t.Fatal(err)
	}
	if err := f.insp.ArchiveTask(jobs.Queue, jobs.StatusTaskID("E3", fin.Seq)); err != nil {
		t.Fatal(err)
	}
	// E4 submitting, its create task gone (the worker's answer was lost).
	f.ledger.BeginCreate(ctx, "b", "E4", 1)
	// E5 created: final, nothing to do.
	f.ledger.BeginCreate(ctx, "b", "E5", 1)
	f.ledger.FinishCreate(ctx, "b", "E5", 1, decide.CreateResult{To: lifecycle.Created, OrderID: "WD-5"})
	// E8 created, awaiting its outcome: its outcome check was deleted.
	f.ledger.BeginCreate(ctx, "b", "E8", 1)
	f.ledger.FinishCreate(ctx, "b", "E8", 1, decide.CreateResult{To: lifecycle.Created, OrderID: "WD-8", OutcomeWindow: time.Hour})
	f.advance(2 * time.Minute)
	// E6 submitting only just now: within the grace period, its handler acts.
	f.ledger.BeginCreate(ctx, "b", "E6", 1)
	// E7 queued whose create attempt 1 task completed after a lost reply.
	f.enqueueCreate("E7", 1)
	f.rdb.HSet(ctx, "asynq:{payouts}:t:create:E7:1", "state", "completed") // as Asynq marks it
	f.rdb.LRem(ctx, "asynq:{payouts}:pending", 0, "create:E7:1")
	f.rdb.ZAdd(ctx, "asynq:{payouts}:completed", redis.Z{Score: float64(f.now.Add(time.Hour).Unix()), Member: "create:E7:1"})

	s := New(f.rdb, f.ledger, Config{Interval: time.Minute, Grace: time.Minute}, zerolog.Nop())
	dry, err := s.Sweep(ctx, true)
	if err != nil {
		t.Fatal(err)
	}
	if got := found(dry); got != "E1:queued:create:E1:1 E3:checking:status:E3:1 E4:submitting:create:E4:1 E7:queued:create:E7:1 E8:created:outcome:E8:1" {
		t.Fatalf("dry run found %s", got)
	}
	if p := f.state("E4"); p.State != lifecycle.Submitting {
		t.Fatalf("dry run moved E4 to %s", p.State)
	}

	rep, err := s.Sweep(ctx, false)
	if err != nil {
		t.Fatal(err)
	}
	if got := found(rep); got != "E1:queued:create:E1:1 E3:checking:status:E3:1 E4:submitting:status:E4:1 E7:queued:create:E7:1 E8:created:outcome:E8:1" {
		t.Fatalf("sweep repaired %s", got)
	}
	for id, want := range map[string]string{
		"create:E1:1": "live", "create:E2:1": "live", "status:E3:1": "live",
		"status:E4:1": "live", "create:E4:1": "none", "create:E7:1": "live", "create:E6:1": "none", "outcome:E8:1": "live",
	} {
		got := f.taskState(id)
		if got == "pending" || got == "scheduled" {
			got = "live"
		}
		if got != want {
			t.Errorf("task %s is %s, want %s", id, got, want)
		}
	}
	if p := f.state("E4"); p.State != lifecycle.Checking || p.Seq != 1 {
		t.Fatalf("E4 is %s seq %d, want checking seq 1: never a second create", p.State, p.Seq)
	}
	if p := f.state("E6"); p.State != lifecycle.Submitting {
		t.Fatalf("E6 within grace is %s", p.State)
	}

	// A second sweep finds nothing: every open payout has its live task.
	again, err := s.Sweep(ctx, false)
	if err != nil || len(again.Repairs) != 0 {
		t.Fatalf("second sweep: %+v %v", again.Repairs, err)
	}
}

func found(r Report) string {
	s := ""
	for _, x := range r.Repairs {
		if s != "" {
			s += " "
		}
		s += x.ExternalID + ":" + string(x.Found) + ":" + x.Task
	}
	return s
}

func TestLeaseLetsOneSweeperRun(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t, 1)
	a, err := f.ledger.Locks().TryLease(ctx, "reconcile", "a", time.Minute)
	if err != nil || !a {
		t.Fatalf("first lease: %v %v", a, err)
	}
	if b, _ := f.ledger.Locks().TryLease(ctx, "reconcile", "b", time.Minute); b {
		t.Fatal("second holder got the lease")
	}
	f.m.FastForward(time.Minute)
	if b, _ := f.ledger.Locks().TryLease(ctx, "reconcile", "b", time.Minute); !b {
		t.Fatal("lease not free after its ttl")
	}
}

// TestLoadingBatchQueuedLeftToTheLoader: in a batch still loading, queued
// payouts are the loader's to enqueue; a begun one is swept.
func TestLoadingBatchQueuedLeftToTheLoader(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t, 2)
	f.ledger.BeginCreate(ctx, "b", "E2", 1) // begun while loaded, say by an older version
	f.rdb.HSet(ctx, keys.Meta("b"), "phase", lifecycle.PhaseLoading)
	f.advance(2 * time.Minute)
	rep, err := New(f.rdb, f.ledger, Config{Grace: time.Minute}, zerolog.Nop()).Sweep(ctx, false)
	if err != nil {
		t.Fatal(err)
	}
	if got := found(rep); got != "E2:submitting:status:E2:1" {
		t.Fatalf("repaired %q", got)
	}
}
