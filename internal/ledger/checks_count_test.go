package ledger

import (
	"context"
	"testing"
	"time"

	"github.com/acme/payout/internal/decide"
	"github.com/acme/payout/internal/lifecycle"
)

// TestStatusChecksAreCounted: every status check answered and recorded,
// of an unknown create (RecordCheck) or of a created order's outcome
// (RecordOutcome), counts once on the payout (Payout.Checks) and its batch
// (Counts.Checks), for payout history; a second delivery that writes
// nothing (stale) does not count.
func TestStatusChecksAreCounted(t *testing.T) {
	ctx := context.Background()
	count := func(t *testing.T, l *Ledger, want int) {
		t.Helper()
		p, err := l.Get(ctx, "b", "E1")
		if err != nil {
			t.Fatal(err)
		}
		c, err := l.counts(ctx, "b")
		if err != nil {
			t.Fatal(err)
		}
		if p.Checks != want || c.Checks != int64(want) {
			t.Fatalf("status checks: payout %d, batch %d; want %d", p.Checks, c.Checks, want)
		}
	}
	t.Run("unknown create", func(t *testing.T) {
		policy := decide.CheckPolicy{AbsentChecks: 2, AbsentSpacing: time.Minute, MaxCreates: 2, MaxFaults: 3}
		l, clk := checkingLedger(t)
		count(t, l, 0)
		before := mustSnapshot(t, l, "b", "E1")
		if s, err := l.RecordCheck(ctx, before, 1, decide.CheckAnswer{Outcome: decide.Missing}, policy); err != nil || s.Action != decide.CheckAgain {
			t.Fatalf("check 1: %+v %v", s, err)
		}
		count(t, l, 1)
		clk.add(2 * time.Minute)
		if s, err := l.RecordCheck(ctx, before, 1, decide.CheckAnswer{Outcome: decide.Missing}, policy); err != nil || s.Action != decide.CheckStale {
			t.Fatalf("check 1 again: %+v %v", s, err)
		}
		count(t, l, 1)
		if _, err := recordCheck(ctx, l, "b", "E1", 2, decide.CheckAnswer{Outcome: decide.Found, OrderID: "WD-1"}, policy); err != nil {
			t.Fatal(err)
		}
		mustState(t, l, "b", "E1", lifecycle.Created)
		count(t, l, 2)
	})
	t.Run("outcome of a created order", func(t *testing.T) {
		l, _ := toAwaiting(t, time.Hour)
		if _, err := recordOutcome(ctx, l, "b", "E1", 1, decide.VerdictPending, "Processing", "", 200); err != nil {
			t.Fatal(err)
		}
		count(t, l, 1)
		if _, err := recordOutcome(ctx, l, "b", "E1", 2, decide.VerdictPaid, "Paid", "", 200); err != nil {
			t.Fatal(err)
		}
		mustState(t, l, "b", "E1", lifecycle.Paid)
		count(t, l, 2)
	})
}
