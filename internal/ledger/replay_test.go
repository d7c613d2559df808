package ledger

import (
	"context"
	"testing"
	"time"

	"github.com/acme/payout/internal/decide"
	"github.com/acme/payout/internal/lifecycle"
)

// fixedOps hands out the same operation id until next is called: two calls
// under one id are what a lower layer sends when it replays a command
// whose reply was lost.
type fixedOps struct{ id string }

func (f *fixedOps) op() string { return f.id }

// TestReplayedTransitionReturnsTheFirstDecision runs every transition
// script twice under the same operation id, as go-redis's retry or the
// autopipeliner does after a lost reply. The replay must return the first
// run's decision and write nothing more; on the code before luaReplay the
// replays answered conflict/skip/check and the caller dropped its
// follow-up step (the payout was stranded).
func TestReplayedTransitionReturnsTheFirstDecision(t *testing.T) {
	ctx := context.Background()
	policy := decide.CheckPolicy{AbsentChecks: 2, AbsentSpacing: time.Minute, MaxCreates: 2, MaxFaults: 2}
	ops := &fixedOps{id: "op-1"}
	l, clk := newTestLedger(t, withOpIDs(ops.op))
	seed(t, l, "b", 1)

	b1, err := l.BeginCreate(ctx, "b", "E1", 1)
	if err != nil || b1.Action != decide.Proceed {
		t.Fatalf("begin: %+v %v", b1, err)
	}
	b2, err := l.BeginCreate(ctx, "b", "E1", 1)
	if err != nil || b2.Action != decide.Proceed || b2.Payout.State != lifecycle.Submitting {
		t.Fatalf("replayed begin = %v (%s), want proceed while submitting", b2.Action, b2.Payout.State)
	}

	// 429: back to queued with the retry counted once.
	ops.id = "op-2"
	f1, err := l.FinishCreate(ctx, "b", "E1", 1, decide.CreateResult{To: lifecycle.Queued, Error: "429", MaxTries: 5})
	if err != nil || f1.State != lifecycle.Queued {
		t.Fatalf("finish: %+v %v", f1, err)
	}
	f2, err := l.FinishCreate(ctx, "b", "E1", 1, decide.CreateResult{To: lifecycle.Queued, Error: "429", MaxTries: 5})
	if err != nil || f2 != f1 {
		t.Fatalf("replayed finish = %+v, %v; want %+v", f2, err, f1)
	}
	if p := mustState(t, l, "b", "E1", lifecycle.Queued); p.Creates != 0 {
		t.Fatalf("creates = %d after the replay, want 0", p.Creates)
	}

	// Ambiguous: to checking, status check 1.
	ops.id = "op-3"
	if b, _ := l.BeginCreate(ctx, "b", "E1", 1); b.Action != decide.Proceed {
		t.Fatalf("second begin: %v", b.Action)
	}
	ops.id = "op-4"
	f1, _ = l.FinishCreate(ctx, "b", "E1", 1, decide.CreateResult{To: lifecycle.Checking})
	f2, err = l.FinishCreate(ctx, "b", "E1", 1, decide.CreateResult{To: lifecycle.Checking})
	if err != nil || f1.State != lifecycle.Checking || f2 != f1 {
		t.Fatalf("replayed ambiguous finish = %+v, %v; first %+v", f2, err, f1)
	}

	// Two misses D apart confirm absence: the replay of the deciding check
	// must still say recreate (before: skip, and create 2 was never queued).
	// A replay sends the same call again: the same snapshot, the same id.
	ops.id = "op-5"
	snap := mustSnapshot(t, l, "b", "E1")
	s, _ := l.RecordCheck(ctx, snap, f1.Seq, decide.CheckAnswer{Outcome: decide.Missing}, policy)
	again, err := l.RecordCheck(ctx, snap, f1.Seq, decide.CheckAnswer{Outcome: decide.Missing}, policy)
	if err != nil || again != s || s.Action != decide.CheckAgain {
		t.Fatalf("replayed miss = %+v, %v; first %+v", again, err, s)
	}
	clk.add(time.Minute)
	ops.id = "op-6"
	snap = mustSnapshot(t, l, "b", "E1")
	s, _ = l.RecordCheck(ctx, snap, s.Seq, decide.CheckAnswer{Outcome: decide.Missing}, policy)
	again, _ = l.RecordCheck(ctx, snap, 2, decide.CheckAnswer{Outcome: decide.Missing}, policy)
	if s.Action != decide.CheckRecreate || again != s {
		t.Fatalf("replayed recreate = %+v; first %+v", again, s)
	}
	if p := mustState(t, l, "b", "E1", lifecycle.Queued); p.Misses != 2 {
		t.Fatalf("misses = %d, want 2", p.Misses)
	}

	// A new call (another id) is judged afresh: the old attempt is stale.
	ops.id = "op-7"
	if b, _ := l.BeginCreate(ctx, "b", "E1", 1); b.Action != decide.Skip {
		t.Fatalf("stale attempt under a new id: %v", b.Action)
	}
}

// TestAbsenceSpacingUsesRedisTime gives two ledgers (two workers) clocks ten
// minutes apart. Counted misses must be D apart on Redis's clock: the
// second miss, recorded by the worker whose clock runs ahead, only seconds
// later in Redis time, must not count. On the code before TIME moved into
// the scripts it counted and confirmed absence inside the PSP's lag.
func TestAbsenceSpacingUsesRedisTime(t *testing.T) {
	ctx := context.Background()
	policy := decide.CheckPolicy{AbsentChecks: 2, AbsentSpacing: time.Minute, MaxCreates: 2, MaxFaults: 3}
	slow, clk := newTestLedger(t)
	fast := New(slow.rdb, WithClock(func() time.Time { return clk.now().Add(10 * time.Minute) }))
	seed(t, slow, "b", 1)
	slow.BeginCreate(ctx, "b", "E1", 1)
	fin, _ := slow.FinishCreate(ctx, "b", "E1", 1, decide.CreateResult{To: lifecycle.Checking})

	s, _ := recordCheck(ctx, slow, "b", "E1", fin.Seq, decide.CheckAnswer{Outcome: decide.Missing}, policy)
	clk.add(5 * time.Second)
	s, _ = recordCheck(ctx, fast, "b", "E1", s.Seq, decide.CheckAnswer{Outcome: decide.Missing}, policy)
	if s.Action != decide.CheckEarly || s.Wait != 55*time.Second {
		t.Fatalf("second miss 5 s later (Redis time) = %+v, want early by 55s", s)
	}
	if p := mustState(t, slow, "b", "E1", lifecycle.Checking); p.Misses != 1 {
		t.Fatalf("misses = %d, want 1", p.Misses)
	}
}
