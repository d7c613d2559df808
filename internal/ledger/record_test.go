package ledger

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/acme/payout/internal/decide"
	"github.com/acme/payout/internal/lifecycle"
)

// TestRecordCheckWritesOnlyWhatWasRead: RecordCheck decides from the
// payout as the worker read it before asking the PSP. When another
// delivery recorded that check meanwhile, the write must not happen: the
// answer is stale (another check is current) or skip (the payout left
// checking), and a payout whose counts changed under the same check is a
// conflict. On a write without the comparison the first case would count
// the same 404 twice.
func TestRecordCheckWritesOnlyWhatWasRead(t *testing.T) {
	ctx := context.Background()
	policy := decide.CheckPolicy{AbsentChecks: 2, AbsentSpacing: time.Minute, MaxCreates: 2, MaxFaults: 3}
	l, clk := checkingLedger(t)
	before := mustSnapshot(t, l, "b", "E1")
	if s, err := l.RecordCheck(ctx, before, 1, decide.CheckAnswer{Outcome: decide.Missing}, policy); err != nil || s.Action != decide.CheckAgain {
		t.Fatalf("first delivery: %+v %v", s, err)
	}
	clk.add(2 * time.Minute)
	s, err := l.RecordCheck(ctx, before, 1, decide.CheckAnswer{Outcome: decide.Missing}, policy)
	if err != nil || s.Action != decide.CheckStale || s.Seq != 2 {
		t.Fatalf("second delivery of check 1, read before the first wrote = %+v %v; want stale, seq 2", s, err)
	}
	if p := mustState(t, l, "b", "E1", lifecycle.Checking); p.Misses != 1 || p.Seq != 2 {
		t.Fatalf("after the stale delivery: misses %d seq %d, want 1 and 2", p.Misses, p.Seq)
	}

	atTwo := mustSnapshot(t, l, "b", "E1")
	if _, err := recordCheck(ctx, l, "b", "E1", 2, decide.CheckAnswer{Outcome: decide.Found, OrderID: "WD-1"}, policy); err != nil {
		t.Fatal(err)
	}
	if s, err := l.RecordCheck(ctx, atTwo, 2, decide.CheckAnswer{Outcome: decide.Missing}, policy); err != nil || s.Action != decide.CheckSkip {
		t.Fatalf("a 404 read while checking, recorded after the order was found = %+v %v; want skip", s, err)
	}
	mustState(t, l, "b", "E1", lifecycle.Created)

	l2, _ := checkingLedger(t)
	read := mustSnapshot(t, l2, "b", "E1")
	if err := l2.rdb.HSet(ctx, payoutKey("b", "E1"), "faults", 2).Err(); err != nil {
		t.Fatal(err)
	}
	if _, err := l2.RecordCheck(ctx, read, 1, decide.CheckAnswer{Outcome: decide.NoAnswer, Message: "503"}, policy); !errors.Is(err, ErrConflict) {
		t.Fatalf("faults changed under the same check: err %v, want ErrConflict", err)
	}
	if p := mustState(t, l2, "b", "E1", lifecycle.Checking); p.Faults != 2 || p.Seq != 1 {
		t.Fatalf("after the conflict: faults %d seq %d, want 2 and 1 (nothing written)", p.Faults, p.Seq)
	}
}

// TestRecordOutcomeWritesOnlyWhatWasRead is TestRecordCheckWritesOnlyWhatWasRead
// for outcome checks: a read that another delivery overtook writes nothing.
func TestRecordOutcomeWritesOnlyWhatWasRead(t *testing.T) {
	ctx := context.Background()
	l, _ := toAwaiting(t, time.Hour)
	before := mustSnapshot(t, l, "b", "E1")
	pending := decide.OutcomeAnswer{Verdict: decide.VerdictPending, PSPStatus: "Processing", HTTPStatus: 200}
	if s, err := l.RecordOutcome(ctx, before, 1, pending); err != nil || s.Action != decide.OutcomeAgain || s.Polls != 1 {
		t.Fatalf("first delivery: %+v %v", s, err)
	}
	s, err := l.RecordOutcome(ctx, before, 1, pending)
	if err != nil || s.Action != decide.OutcomeStale || s.Seq != 2 {
		t.Fatalf("second delivery of check 1, read before the first wrote = %+v %v; want stale, seq 2", s, err)
	}
	if p := mustState(t, l, "b", "E1", lifecycle.Created); p.OutcomePolls != 1 || p.OutcomeSeq != 2 {
		t.Fatalf("after the stale delivery: polls %d oseq %d, want 1 and 2", p.OutcomePolls, p.OutcomeSeq)
	}

	atTwo := mustSnapshot(t, l, "b", "E1")
	if _, err := recordOutcome(ctx, l, "b", "E1", 2, decide.VerdictFailed, "Declined", "card closed", 200); err != nil {
		t.Fatal(err)
	}
	if s, err := l.RecordOutcome(ctx, atTwo, 2, decide.OutcomeAnswer{Verdict: decide.VerdictPaid}); err != nil || s.Action != decide.OutcomeSkip || s.State != lifecycle.Failed {
		t.Fatalf("paid, read while awaiting, recorded after it failed = %+v %v; want skip (failed)", s, err)
	}
	mustState(t, l, "b", "E1", lifecycle.Failed)

	l2, _ := toAwaiting(t, time.Hour)
	read := mustSnapshot(t, l2, "b", "E1")
	if err := l2.rdb.HSet(ctx, payoutKey("b", "E1"), "odue", unixMilli(read.OutcomeDue)+1).Err(); err != nil {
		t.Fatal(err)
	}
	if _, err := l2.RecordOutcome(ctx, read, 1, pending); !errors.Is(err, ErrConflict) {
		t.Fatalf("window changed under the same check: err %v, want ErrConflict", err)
	}
}

// TestFinishCreateComparesTheTriesRead: a counted try whose count is not
// the one stored writes nothing.
func TestFinishCreateComparesTheTriesRead(t *testing.T) {
	ctx := context.Background()
	l, _ := newTestLedger(t)
	seed(t, l, "b", 1)
	if _, err := l.BeginCreate(ctx, "b", "E1", 1); err != nil {
		t.Fatal(err)
	}
	_, err := l.FinishCreate(ctx, "b", "E1", 1, decide.CreateResult{To: lifecycle.Queued, Error: "429", MaxTries: 3, Tries: 2})
	if !errors.Is(err, ErrConflict) {
		t.Fatalf("finish with 2 tries read, 0 stored: %v, want ErrConflict", err)
	}
	if p := mustState(t, l, "b", "E1", lifecycle.Submitting); p.Tries != 0 {
		t.Fatalf("tries %d after the conflict, want 0", p.Tries)
	}
}

// TestSnapshotReadsRedisClock: a snapshot carries the payout and the clock
// of the Redis that holds it (not this process's), in whole milliseconds;
// a payout that does not exist is ErrNotFound.
func TestSnapshotReadsRedisClock(t *testing.T) {
	ctx := context.Background()
	setup, clk := checkingLedger(t)
	clk.add(1234567 * time.Microsecond)
	// A worker whose clock is an hour ahead reads Redis's.
	l := New(setup.rdb, WithClock(func() time.Time { return clk.now().Add(time.Hour) }))
	p, s, err := l.Snapshot(ctx, "b", "E1")
	if err != nil {
		t.Fatal(err)
	}
	if want := clk.now().Truncate(time.Millisecond); !s.Now.Equal(want) {
		t.Fatalf("snapshot time %v, want Redis's %v", s.Now, want)
	}
	if s.State != lifecycle.Checking || s.Seq != 1 || s.Creates != 1 || s.ExternalID != "E1" {
		t.Fatalf("snapshot %+v", s)
	}
	if p.ExternalID != "E1" || p.State != lifecycle.Checking || s != p.decision(s.Now) {
		t.Fatalf("snapshot payout %+v, decision input %+v", p, s)
	}
	if _, _, err := l.Snapshot(ctx, "b", "nope"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("snapshot of a missing payout: %v, want ErrNotFound", err)
	}
}
