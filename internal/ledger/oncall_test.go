package ledger

import (
	"context"
	"testing"
	"time"

	"github.com/acme/payout/internal/decide"
	"github.com/acme/payout/internal/lifecycle"
)

// checkOldest: the age of a payout in its state counts from when it
// entered the state, not from its last status check (which moves
// 'updated'): a payout held in checking for an hour is an hour old there
// however often it is checked.
func checkOldest(t *testing.T, l *Ledger, advance func(time.Duration), now func() time.Time, tol time.Duration) {
	t.Helper()
	ctx := context.Background()
	seed(t, l, "b", 4)
	registered := now()
	advance(time.Minute)

	// E1: submitting, then checking (the answer was lost), then two status
	// checks without an answer.
	if b, err := l.BeginCreate(ctx, "b", "E1", 1); err != nil || b.Action != decide.Proceed {
		t.Fatalf("BeginCreate = %+v, %v", b, err)
	}
	advance(time.Minute)
	if _, err := l.FinishCreate(ctx, "b", "E1", 1, decide.CreateResult{To: lifecycle.Checking, Error: "timeout"}); err != nil {
		t.Fatal(err)
	}
	enteredChecking := now()
	policy := decide.CheckPolicy{AbsentChecks: 3, AbsentSpacing: time.Minute, MaxCreates: 3, MaxFaults: 10, FaultDelay: time.Millisecond, FaultDelayMax: 10 * time.Millisecond}
	for seq := 1; seq <= 2; seq++ {
		advance(20 * time.Minute)
		step, err := recordCheck(ctx, l, "b", "E1", seq, decide.CheckAnswer{Outcome: decide.NoAnswer, Message: "timeout"}, policy)
		if err != nil || step.Action != decide.CheckAgain {
			t.Fatalf("RecordCheck %d = %+v, %v", seq, step, err)
		}
	}
	// E2: created, its outcome followed; E3: created and final.
	for _, ext := range []string{"E2", "E3"} {
		if _, err := l.BeginCreate(ctx, "b", ext, 1); err != nil {
			t.Fatal(err)
		}
	}
	advance(time.Minute)
	if _, err := l.FinishCreate(ctx, "b", "E2", 1, decide.CreateResult{To: lifecycle.Created, OrderID: "WD-2", OutcomeWindow: time.Hour}); err != nil {
		t.Fatal(err)
	}
	awaiting := now()
	if _, err := l.FinishCreate(ctx, "b", "E3", 1, decide.CreateResult{To: lifecycle.Created, OrderID: "WD-3"}); err != nil {
		t.Fatal(err)
	}
	advance(time.Minute)

	got, err := l.Oldest(ctx, "b")
	if err != nil {
		t.Fatal(err)
	}
	want := map[lifecycle.State]time.Time{lifecycle.Queued: registered, lifecycle.Checking: enteredChecking, AwaitingOutcome: awaiting}
	if len(got) != len(want) {
		t.Errorf("Oldest = %v, want %v", got, want)
	}
	for s, w := range want {
		if g := got[s]; g.Sub(w) > tol || w.Sub(g) > tol {
			t.Errorf("Oldest[%s] = %v, want %v", s, g, w)
		}
	}
}

func TestOldestCountsFromEnteringTheState(t *testing.T) {
	l, clk := newTestLedger(t)
	checkOldest(t, l, clk.add, clk.now, 0)
}
