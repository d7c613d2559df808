package ledger

import (
	"context"
	"testing"
	"time"

	"github.com/acme/payout/internal/decide"
	"github.com/acme/payout/internal/lifecycle"
)

var testWatch = decide.WatchPolicy{Window: 48 * time.Hour, Intervals: []time.Duration{time.Hour, 6 * time.Hour, 24 * time.Hour}}

func init() {
	transitionCases["paid>returned by worker"] = transitionCase{setup: reachPaidWatched, move: viaWatch(true)}
}

// reachPaidWatched makes E1 paid under the ledger's watch (testWatch).
func reachPaidWatched(t *testing.T, l *Ledger, clk *fakeClock) {
	*l = *l.WithWatch(testWatch)
	reachCreated(t, l, clk)
	_, err := recordOutcome(context.Background(), l, "b", "E1", 1, decide.VerdictPaid, "Paid", "", 200)
	machineMust(t, err)
}

func viaWatch(returned bool) func(*testing.T, *Ledger, *fakeClock) error {
	return func(_ *testing.T, l *Ledger, _ *fakeClock) error {
		_, err := recordWatch(context.Background(), l, "b", "E1", returned)
		return err
	}
}

func recordWatch(ctx context.Context, l *Ledger, batch, ext string, returned bool) (WatchStep, error) {
	_, s, err := l.Snapshot(ctx, batch, ext)
	if err != nil {
		return WatchStep{}, err
	}
	a := decide.WatchAnswer{PSPStatus: "Paid", HTTP: 200}
	if returned {
		a = decide.WatchAnswer{Returned: true, PSPStatus: "Returned", Reason: "account closed", ChangedAt: "2026-11-30T09:00:00Z", HTTP: 200}
	}
	return l.RecordWatch(ctx, s, a)
}

// TestWatchOfAPaidPayout follows one paid payout through its watch: one
// zset member scored by its next check, decaying checks, the end of the
// window (member removed, wend kept, the payout still paid), and the
// counters.
func TestWatchOfAPaidPayout(t *testing.T) {
	ctx := context.Background()
	l, clk := newTestLedger(t)
	seed(t, l, "b", 1)
	reachPaidWatched(t, l, clk)
	p, err := l.Get(ctx, "b", "E1")
	machineMust(t, err)
	if !p.Watch.On || p.Watch.Seq != 1 || p.Watch.End.Sub(p.Watch.Due) != 47*time.Hour {
		t.Fatalf("watch after paid: %+v", p.Watch)
	}
	if n, _ := l.rdb.ZCard(ctx, watchKey("b")).Result(); n != 1 {
		t.Fatalf("watch zset holds %d members, want 1", n)
	}
	if s, _ := l.rdb.ZScore(ctx, watchingKey(), "b").Result(); s < float64(p.Watch.End.UnixMilli()) {
		t.Fatalf("batch entered for the watch with score %v, before the window's end", s)
	}
	due, err := l.DueWatches(ctx, 10)
	if err != nil || len(due) != 0 {
		t.Fatalf("due before the first check: %v, %v", due, err)
	}
	clk.add(time.Hour)
	due, err = l.DueWatches(ctx, 10)
	if err != nil || len(due) != 1 || due[0].ExternalID != "E1" {
		t.Fatalf("due after 1h: %v, %v", due, err)
	}
	step, err := recordWatch(ctx, l, "b", "E1", false)
	if err != nil || step.Action != decide.WatchAgain || step.Seq != 2 || step.Wait != 6*time.Hour {
		t.Fatalf("check 1: %+v, %v", step, err)
	}
	score, _ := l.rdb.ZScore(ctx, watchKey("b"), "E1").Result()
	if want := clk.t.Add(6 * time.Hour).UnixMilli(); int64(score) != want {
		t.Fatalf("next check scored %v, want %d", score, want)
	}
	clk.add(6 * time.Hour)
	step, _ = recordWatch(ctx, l, "b", "E1", false)
	if step.Wait != 24*time.Hour {
		t.Fatalf("check 2: %+v, want daily next", step)
	}
	clk.add(48 * time.Hour)
	step, err = recordWatch(ctx, l, "b", "E1", false)
	if err != nil || step.Action != decide.WatchEnded {
		t.Fatalf("past the window: %+v, %v", step, err)
	}
	p, _ = l.Get(ctx, "b", "E1")
	c, _ := l.counts(ctx, "b")
	if p.State != lifecycle.Paid || p.Watch.On || p.Watch.End.IsZero() || c.Watched != 0 || c.WatchedUnits != 0 {
		t.Fatalf("after the window: state %s, watch %+v, watched %d/%d", p.State, p.Watch, c.Watched, c.WatchedUnits)
	}
	if n, _ := l.rdb.ZCard(ctx, watchKey("b")).Result(); n != 0 {
		t.Fatalf("watch zset holds %d members after the window", n)
	}
	// The batch's entry in PREFIX:watching goes once its score passed.
	clk.add(2 * watchMargin)
	if _, err := l.DueWatches(ctx, 10); err != nil {
		t.Fatal(err)
	}
	if n, _ := l.rdb.ZCard(ctx, watchingKey()).Result(); n != 0 {
		t.Fatalf("PREFIX:watching keeps %d batches after every watch ended", n)
	}
}

// TestReturnedKeepsTheReason: a returned status moves paid to returned with
// the PSP's reason and time, ends the watch, and a redelivered check (or a
// second task of the same check) writes nothing.
func TestReturnedKeepsTheReason(t *testing.T) {
	ctx := context.Background()
	l, clk := newTestLedger(t)
	seed(t, l, "b", 1)
	reachPaidWatched(t, l, clk)
	_, read, err := l.Snapshot(ctx, "b", "E1")
	machineMust(t, err)
	step, err := recordWatch(ctx, l, "b", "E1", true)
	if err != nil || step.Action != decide.WatchReturned {
		t.Fatalf("returned: %+v, %v", step, err)
	}
	p, _ := l.Get(ctx, "b", "E1")
	if p.State != lifecycle.Returned || p.Return.Reason != "account closed" || p.Return.At != "2026-11-30T09:00:00Z" ||
		p.PSPStatus != "Returned" || p.Error == "" || p.Watch.On {
		t.Fatalf("returned payout: %+v", p)
	}
	c, _ := l.counts(ctx, "b")
	if c.Rows[lifecycle.Returned] != 1 || c.Rows[lifecycle.Paid] != 0 || c.Units[lifecycle.Returned] == 0 || c.Units[lifecycle.Paid] != 0 || c.Watched != 0 {
		t.Fatalf("counts: %+v", c)
	}
	if n, _ := l.rdb.ZCard(ctx, watchKey("b")).Result(); n != 0 {
		t.Fatalf("watch zset holds %d members after the return", n)
	}
	// The same check again, as read before the return: nothing written.
	again, err := l.RecordWatch(ctx, read, decide.WatchAnswer{Returned: true, PSPStatus: "Refunded"})
	if err != nil || again.Action != decide.WatchSkip {
		t.Fatalf("redelivered: %+v, %v", again, err)
	}
	if p, _ := l.Get(ctx, "b", "E1"); p.PSPStatus != "Returned" {
		t.Fatalf("a redelivered check overwrote the status: %q", p.PSPStatus)
	}
	var last AuditEntry
	machineMust(t, l.Audit().Each(ctx, "b", "E1", func(e AuditEntry) error { last = e; return nil }))
	if last.From != string(lifecycle.Paid) || last.To != string(lifecycle.Returned) || last.Context["note"] != "account closed" {
		t.Fatalf("audit trail ends %+v, want the move to returned", last)
	}
}

// TestPaidWithoutWatch: a ledger without a watch window leaves paid
// payouts unwatched (no member, no counters).
func TestPaidWithoutWatch(t *testing.T) {
	ctx := context.Background()
	l, clk := newTestLedger(t)
	seed(t, l, "b", 1)
	reachCreated(t, l, clk)
	_, err := recordOutcome(ctx, l, "b", "E1", 1, decide.VerdictPaid, "Paid", "", 200)
	machineMust(t, err)
	p, _ := l.Get(ctx, "b", "E1")
	if p.Watch.On {
		t.Fatalf("watched without a window: %+v", p.Watch)
	}
	if n, _ := l.rdb.Exists(ctx, watchKey("b"), watchingKey()).Result(); n != 0 {
		t.Fatalf("%d watch keys without a window", n)
	}
	step, err := recordWatch(ctx, l, "b", "E1", true)
	if err != nil || step.Action != decide.WatchSkip {
		t.Fatalf("a watch check of an unwatched payout: %+v, %v", step, err)
	}
}
