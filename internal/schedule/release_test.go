package schedule

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/acme/payout/internal/ledger"
	"github.com/acme/payout/internal/lifecycle"
	"github.com/acme/payout/internal/money"
	"github.com/acme/payout/internal/queue"
	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
	"github.com/rs/zerolog"
)

// fixture is a ledger and a queue on one miniredis, whose clock (Redis's
// TIME, the clock releases are decided by) the test sets.
type fixture struct {
	m   *miniredis.Miniredis
	led *ledger.Ledger
	q   *queue.Queue
	now time.Time
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	m := miniredis.RunT(t)
	rdb := redis.NewClient(&redis.Options{Addr: m.Addr()})
	t.Cleanup(func() { rdb.Close() })
	f := &fixture{m: m, led: ledger.New(rdb), q: queue.New(rdb), now: time.Date(2026, 12, 2, 9, 0, 0, 0, time.UTC)}
	m.SetTime(f.now)
	return f
}

func (f *fixture) at(d time.Duration) { f.m.SetTime(f.now.Add(d)) }

// load registers n payouts of batch, scheduled at release, and leaves the
// batch loaded (or awaiting approval with hold).
func (f *fixture) load(t *testing.T, batch string, n int, release time.Time, hold bool) {
	t.Helper()
	ctx := context.Background()
	if _, _, err := f.led.BeginBatch(ctx, ledger.Batch{ID: batch, File: batch + ".csv", LoadedAt: f.now, Rows: int64(n), Total: money.MustParse("1"), Scale: 2}); err != nil {
		t.Fatal(err)
	}
	var ps []ledger.NewPayout
	var due []ledger.Scheduled
	for i := 1; i <= n; i++ {
		ext := fmt.Sprintf("%s-%d", batch, i)
		ps = append(ps, ledger.NewPayout{Line: i + 1, ExternalID: ext, Amount: money.MustParse("10.00"), Destination: "telecom MTS", Telecom: "MTS"})
		due = append(due, ledger.Scheduled{ExternalID: ext, At: release})
	}
	if _, err := f.led.Register(ctx, batch, ps, 2); err != nil {
		t.Fatal(err)
	}
	if got, err := f.led.Schedule().PutLocked(ctx, batch, "", due); err != nil || got != n {
		t.Fatalf("PutLocked = %d, %v", got, err)
	}
	if err := f.led.Schedule().Index(ctx, batch); err != nil {
		t.Fatal(err)
	}
	if hold {
		if err := f.led.Controls().HoldBatch(ctx, batch, "approval required"); err != nil {
			t.Fatal(err)
		}
		return
	}
	if err := f.led.FinishBatch(ctx, batch); err != nil {
		t.Fatal(err)
	}
}

// states counts the payouts of batch by state.
func (f *fixture) states(t *testing.T, batch string, n int) map[lifecycle.State]int {
	t.Helper()
	out := map[lifecycle.State]int{}
	for i := 1; i <= n; i++ {
		p, err := f.led.Get(context.Background(), batch, fmt.Sprintf("%s-%d", batch, i))
		if err != nil {
			t.Fatal(err)
		}
		out[p.State]++
	}
	return out
}

// hasCreate reports whether the create task of attempt 1 of ext exists.
func (f *fixture) hasCreate(t *testing.T, batch, ext string) bool {
	t.Helper()
	added, err := f.q.Add(context.Background(), queue.Step{Kind: queue.Create, Batch: batch, ExternalID: ext, N: 1})
	if err != nil {
		t.Fatal(err)
	}
	return !added
}

func (f *fixture) releaser() *Releaser {
	return New(f.led, f.q, Config{Payouts: 2}, zerolog.Nop())
}

// TestReleaseAtItsTime: nothing before the release time (Redis's clock),
// everything at it, each create enqueued once, and the batch leaves the
// due index.
func TestReleaseAtItsTime(t *testing.T) {
	f := newFixture(t)
	f.load(t, "B", 5, f.now.Add(time.Hour), false)
	r := f.releaser()
	ctx := context.Background()
	f.at(time.Hour - time.Second)
	if p, err := r.Release(ctx); err != nil || p.Released != 0 || p.Batches != 0 {
		t.Fatalf("before its time: %+v, %v", p, err)
	}
	if got := f.states(t, "B", 5); got[lifecycle.Scheduled] != 5 {
		t.Fatalf("before its time: %v", got)
	}
	f.at(time.Hour)
	if p, err := r.Release(ctx); err != nil || p.Released != 5 {
		t.Fatalf("at its time: %+v, %v", p, err)
	}
	if got := f.states(t, "B", 5); got[lifecycle.Queued] != 5 {
		t.Fatalf("at its time: %v", got)
	}
	for i := 1; i <= 5; i++ {
		if !f.hasCreate(t, "B", fmt.Sprintf("B-%d", i)) {
			t.Errorf("B-%d: no create task", i)
		}
	}
	if p, err := r.Release(ctx); err != nil || p.Released != 0 || p.Batches != 0 {
		t.Fatalf("a pass after: %+v, %v (the batch should have left the due index)", p, err)
	}
}

// TestNextRelease: ledger.Schedule.Next is a batch's earliest pending
// release, and zero once everything of it is released (or for a batch
// without a schedule).
func TestNextRelease(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	f.load(t, "B", 2, f.now.Add(time.Hour), false)
	f.load(t, "C", 1, f.now.Add(30*time.Minute), false)
	for _, tc := range []struct {
		batch string
		want  time.Time
	}{{"B", f.now.Add(time.Hour)}, {"C", f.now.Add(30 * time.Minute)}, {"none", time.Time{}}} {
		if got, err := f.led.Schedule().Next(ctx, tc.batch); err != nil || !got.Equal(tc.want) {
			t.Errorf("Next(%s) = %v, %v; want %v", tc.batch, got, err, tc.want)
		}
	}
	f.at(time.Hour)
	if p, err := f.releaser().Release(ctx); err != nil || p.Released != 3 {
		t.Fatalf("at their time: %+v, %v", p, err)
	}
	if got, err := f.led.Schedule().Next(ctx, "B"); err != nil || !got.IsZero() {
		t.Errorf("Next(B) after the release = %v, %v; want zero", got, err)
	}
}

// TestApprovalComesFirst: a batch awaiting approval is not released at
// its time; once approved it is.
func TestApprovalComesFirst(t *testing.T) {
	f := newFixture(t)
	f.load(t, "H", 2, f.now.Add(time.Minute), true)
	r := f.releaser()
	ctx := context.Background()
	f.at(2 * time.Minute)
	if p, err := r.Release(ctx); err != nil || p.Released != 0 || p.Held != 1 {
		t.Fatalf("awaiting approval: %+v, %v", p, err)
	}
	if got := f.states(t, "H", 2); got[lifecycle.Scheduled] != 2 {
		t.Fatalf("awaiting approval: %v", got)
	}
	if _, err := f.led.Controls().Approve(ctx, "H", ledger.Approval{By: "bob"}); err != nil {
		t.Fatal(err)
	}
	// what approve does after the ledger (loader.EnqueueApproved)
	if err := f.led.Schedule().Index(ctx, "H"); err != nil {
		t.Fatal(err)
	}
	if p, err := r.Release(ctx); err != nil || p.Released != 2 {
		t.Fatalf("approved: %+v, %v", p, err)
	}
}

// TestCancelledIsNeverReleased: a scheduled payout cancelled before its
// time stays cancelled and gets no task.
func TestCancelledIsNeverReleased(t *testing.T) {
	f := newFixture(t)
	f.load(t, "C", 3, f.now.Add(time.Minute), false)
	ctx := context.Background()
	was, err := f.led.Cancel(ctx, "C", "C-2", "carol", "duplicate")
	if err != nil || was != lifecycle.Scheduled {
		t.Fatalf("cancel = %s, %v", was, err)
	}
	f.at(time.Hour)
	if p, err := f.releaser().Release(ctx); err != nil || p.Released != 2 {
		t.Fatalf("release: %+v, %v", p, err)
	}
	if got := f.states(t, "C", 3); got[lifecycle.Queued] != 2 || got[lifecycle.Cancelled] != 1 {
		t.Fatalf("states: %v", got)
	}
	if f.hasCreate(t, "C", "C-2") {
		t.Fatal("the cancelled payout got a create task")
	}
}

// TestReleasersAtOnce: passes running at once (two workers, a redelivery)
// release every payout once.
func TestReleasersAtOnce(t *testing.T) {
	f := newFixture(t)
	f.load(t, "R", 20, f.now, false)
	var wg sync.WaitGroup
	var mu sync.Mutex
	total := 0
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			p, err := f.releaser().Release(context.Background())
			if err != nil {
				t.Error(err)
			}
			mu.Lock()
			total += p.Released
			mu.Unlock()
		}()
	}
	wg.Wait()
	if total != 20 {
		t.Fatalf("released %d in all, want 20 (each once)", total)
	}
	if got := f.states(t, "R", 20); got[lifecycle.Queued] != 20 {
		t.Fatalf("states: %v", got)
	}
}

// TestDiedBeforeTheEnqueue: a payout released whose create was never
// enqueued (the pass died between) gets it from the next pass, which
// finds it queued in the due index.
func TestDiedBeforeTheEnqueue(t *testing.T) {
	f := newFixture(t)
	f.load(t, "D", 1, f.now, false)
	ctx := context.Background()
	if r, _, err := f.led.Schedule().Release(ctx, "D", "D-1"); err != nil || r != ledger.Released {
		t.Fatalf("release = %s, %v", r, err)
	}
	if p, err := f.releaser().Release(ctx); err != nil || p.Released != 0 {
		t.Fatalf("next pass: %+v, %v", p, err)
	}
	if !f.hasCreate(t, "D", "D-1") {
		t.Fatal("the next pass did not enqueue the create")
	}
}
