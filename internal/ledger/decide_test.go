package ledger

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/acme/payout/internal/decide"
	"github.com/acme/payout/internal/lifecycle"
)

// TestDecideCheck is the status check's answer table, without Redis: the
// payout as read (checking, seq 3, one create, at t0 unless the case says
// otherwise) and an answer, against what decideCheck decides.
func TestDecideCheck(t *testing.T) {
	t0 := time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)
	policy := CheckPolicy{AbsentChecks: 2, AbsentSpacing: time.Minute, MaxCreates: 2, MaxFaults: 4,
		FaultDelay: time.Second, FaultDelayMax: 5 * time.Second}
	found := decide.CheckAnswer{Outcome: decide.Found, OrderID: "WD-1", PSPStatus: "Created"}
	missing := decide.CheckAnswer{Outcome: decide.Missing, HTTPStatus: 404}
	fault := decide.CheckAnswer{Outcome: decide.NoAnswer, Message: "HTTP 503"}
	cases := []struct {
		name   string
		edit   func(*Snapshot)
		seq    int
		answer decide.CheckAnswer
		policy func(*CheckPolicy)
		want   checkDecision
	}{
		{name: "not checking: skip", edit: func(s *Snapshot) { s.State = lifecycle.Created }, answer: found,
			want: checkDecision{step: decide.CheckStep{Action: decide.CheckSkip, Seq: 3}}},
		{name: "another check is current: stale", seq: 2, answer: found,
			want: checkDecision{step: decide.CheckStep{Action: decide.CheckStale, Seq: 3}}},
		{name: "a 404 before the check is due: early, nothing written", edit: func(s *Snapshot) { s.CheckDue = t0.Add(1500 * time.Millisecond) },
			answer: missing, want: checkDecision{step: decide.CheckStep{Action: decide.CheckEarly, Seq: 3, Wait: 1500 * time.Millisecond}}},
		{name: "no answer before the check is due: early", edit: func(s *Snapshot) { s.CheckDue = t0.Add(time.Second) },
			answer: fault, want: checkDecision{step: decide.CheckStep{Action: decide.CheckEarly, Seq: 3, Wait: time.Second}}},
		{name: "found before the check is due still counts", edit: func(s *Snapshot) { s.CheckDue = t0.Add(time.Second) },
			answer: found, want: checkDecision{write: true, to: lifecycle.Created, step: decide.CheckStep{Action: decide.CheckDone}}},
		{name: "found with an outcome window: awaits its outcome", answer: found, policy: func(p *CheckPolicy) { p.OutcomeWindow = time.Hour },
			want: checkDecision{write: true, to: lifecycle.Created, step: decide.CheckStep{Action: decide.CheckDone, Awaiting: true}}},
		{name: "found keeps the counts as read", edit: func(s *Snapshot) { s.Misses, s.Faults = 1, 2 }, answer: found,
			want: checkDecision{write: true, to: lifecycle.Created, misses: 1, faults: 2, step: decide.CheckStep{Action: decide.CheckDone}}},
		{name: "first 404: counted, next check D later", answer: missing,
			want: checkDecision{write: true, keepError: true, misses: 1, countMiss: true,
				step: decide.CheckStep{Action: decide.CheckAgain, Seq: 4, Wait: time.Minute}}},
		{name: "404 within D of the last counted: not counted, next check when it could be",
			edit:   func(s *Snapshot) { s.Misses, s.LastMiss = 1, t0.Add(-20*time.Second) },
			answer: missing,
			want: checkDecision{write: true, keepError: true, misses: 1,
				step: decide.CheckStep{Action: decide.CheckAgain, Seq: 4, Wait: 40 * time.Second}}},
		{name: "404 exactly D after the last counted: K reached, create again",
			edit:   func(s *Snapshot) { s.Misses, s.LastMiss = 1, t0.Add(-time.Minute) },
			answer: missing,
			want: checkDecision{write: true, to: lifecycle.Queued, misses: 2, countMiss: true, errText: policy.recreateNote(),
				step: decide.CheckStep{Action: decide.CheckRecreate, Attempt: 2, Error: policy.recreateNote()}}},
		{name: "K reached after M creates: needs review",
			edit:   func(s *Snapshot) { s.Misses, s.LastMiss, s.Creates = 1, t0.Add(-time.Hour), 2 },
			answer: missing,
			want: checkDecision{write: true, to: lifecycle.NeedsReview, misses: 2, countMiss: true, errText: policy.absentNote(),
				step: decide.CheckStep{Action: decide.CheckReview, Error: policy.absentNote()}}},
		{name: "a 404 after faults says nothing of them", edit: func(s *Snapshot) { s.Faults = 2 }, answer: missing,
			want: checkDecision{write: true, keepError: true, misses: 1, countMiss: true, faults: 2,
				step: decide.CheckStep{Action: decide.CheckAgain, Seq: 4, Wait: time.Minute}}},
		{name: "first fault: FaultDelay", answer: fault,
			want: checkDecision{write: true, faults: 1, errText: "HTTP 503",
				step: decide.CheckStep{Action: decide.CheckAgain, Seq: 4, Faults: 1, Wait: time.Second}}},
		{name: "third fault: doubled twice", edit: func(s *Snapshot) { s.Faults = 2 }, answer: fault,
			policy: func(p *CheckPolicy) { p.MaxFaults = 9 },
			want: checkDecision{write: true, faults: 3, errText: "HTTP 503",
				step: decide.CheckStep{Action: decide.CheckAgain, Seq: 4, Faults: 3, Wait: 4 * time.Second}}},
		{name: "fifth fault: at most FaultDelayMax", edit: func(s *Snapshot) { s.Faults = 4 }, answer: fault,
			policy: func(p *CheckPolicy) { p.MaxFaults = 9 },
			want: checkDecision{write: true, faults: 5, errText: "HTTP 503",
				step: decide.CheckStep{Action: decide.CheckAgain, Seq: 4, Faults: 5, Wait: 5 * time.Second}}},
		{name: "N faults: needs review with the last message", edit: func(s *Snapshot) { s.Faults = 3 }, answer: fault,
			want: checkDecision{write: true, to: lifecycle.NeedsReview, faults: 4, errText: policy.faultNote("HTTP 503"),
				step: decide.CheckStep{Action: decide.CheckReview, Error: policy.faultNote("HTTP 503")}}},
		{name: "defaults: 1s after a fault", answer: fault, policy: func(p *CheckPolicy) { p.FaultDelay, p.FaultDelayMax = 0, 0 },
			want: checkDecision{write: true, faults: 1, errText: "HTTP 503",
				step: decide.CheckStep{Action: decide.CheckAgain, Seq: 4, Faults: 1, Wait: time.Second}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := Snapshot{Payout: Payout{Batch: "b", ExternalID: "E1", State: lifecycle.Checking, Seq: 3, Creates: 1}, Now: t0}
			if tc.edit != nil {
				tc.edit(&s)
			}
			p := policy
			if tc.policy != nil {
				tc.policy(&p)
			}
			seq := tc.seq
			if seq == 0 {
				seq = 3
			}
			if got := decideCheck(s, seq, tc.answer, p); got != tc.want {
				t.Errorf("decideCheck =\n  %+v\nwant\n  %+v", got, tc.want)
			}
		})
	}
}

// TestPreCheck is what a status task comes to before the PSP is asked:
// the worker asks only for the payout's current check, once it is due on
// Redis's clock (the snapshot's Now).
func TestPreCheck(t *testing.T) {
	t0 := time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)
	cases := []struct {
		name     string
		edit     func(*Snapshot)
		seq      int
		wantStep decide.CheckStep
		wantAsk  bool
	}{
		{name: "current and due: ask", seq: 3, wantAsk: true},
		{name: "due this very millisecond: ask", seq: 3, edit: func(s *Snapshot) { s.CheckDue = t0 }, wantAsk: true},
		{name: "queued: skip", seq: 3, edit: func(s *Snapshot) { s.State = lifecycle.Queued },
			wantStep: decide.CheckStep{Action: decide.CheckSkip, Seq: 3}},
		{name: "needs review: skip", seq: 3, edit: func(s *Snapshot) { s.State = lifecycle.NeedsReview },
			wantStep: decide.CheckStep{Action: decide.CheckSkip, Seq: 3}},
		{name: "an older check: stale, naming the current one", seq: 2,
			wantStep: decide.CheckStep{Action: decide.CheckStale, Seq: 3}},
		{name: "a newer check than the payout's: stale too", seq: 4,
			wantStep: decide.CheckStep{Action: decide.CheckStale, Seq: 3}},
		{name: "not due for 1 ms: early", seq: 3, edit: func(s *Snapshot) { s.CheckDue = t0.Add(time.Millisecond) },
			wantStep: decide.CheckStep{Action: decide.CheckEarly, Seq: 3, Wait: time.Millisecond}},
		{name: "another check and not due: stale first", seq: 2, edit: func(s *Snapshot) { s.CheckDue = t0.Add(time.Hour) },
			wantStep: decide.CheckStep{Action: decide.CheckStale, Seq: 3}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := Snapshot{Payout: Payout{Batch: "b", ExternalID: "E1", State: lifecycle.Checking, Seq: 3, Creates: 1}, Now: t0}
			if tc.edit != nil {
				tc.edit(&s)
			}
			step, ask := s.PreCheck(tc.seq)
			if step != tc.wantStep || ask != tc.wantAsk {
				t.Errorf("PreCheck(%d) = %+v, %v; want %+v, %v", tc.seq, step, ask, tc.wantStep, tc.wantAsk)
			}
		})
	}
}

// TestRecordCheckWritesOnlyWhatWasRead: RecordCheck decides from the
// payout as the worker read it before asking the PSP. When another
// delivery recorded that check meanwhile, the write must not happen: the
// answer is stale (another check is current) or skip (the payout left
// checking), and a payout whose counts changed under the same check is a
// conflict. On a write without the comparison the first case would count
// the same 404 twice.
func TestRecordCheckWritesOnlyWhatWasRead(t *testing.T) {
	ctx := context.Background()
	policy := CheckPolicy{AbsentChecks: 2, AbsentSpacing: time.Minute, MaxCreates: 2, MaxFaults: 3}
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

// TestPreOutcome is what an outcome task comes to before the PSP is asked:
// the worker asks only for the payout's current outcome check, while the
// payout awaits its outcome (there is no due time: an outcome check runs
// when its task does).
func TestPreOutcome(t *testing.T) {
	cases := []struct {
		name     string
		edit     func(*Snapshot)
		oseq     int
		wantStep OutcomeStep
		wantAsk  bool
	}{
		{name: "awaiting this check: ask", oseq: 2, wantAsk: true},
		{name: "created, not awaiting: skip", oseq: 2, edit: func(s *Snapshot) { s.Awaiting = false },
			wantStep: OutcomeStep{Action: decide.OutcomeSkip, State: lifecycle.Created}},
		{name: "paid: skip, naming the state", oseq: 2, edit: func(s *Snapshot) { s.State, s.Awaiting = lifecycle.Paid, false },
			wantStep: OutcomeStep{Action: decide.OutcomeSkip, State: lifecycle.Paid}},
		{name: "needs review: skip", oseq: 2, edit: func(s *Snapshot) { s.State, s.Awaiting = lifecycle.NeedsReview, false },
			wantStep: OutcomeStep{Action: decide.OutcomeSkip, State: lifecycle.NeedsReview}},
		{name: "an older check: stale, naming the current one", oseq: 1,
			wantStep: OutcomeStep{Action: decide.OutcomeStale, Seq: 2}},
		{name: "not awaiting and another check: skip first", oseq: 1, edit: func(s *Snapshot) { s.Awaiting = false },
			wantStep: OutcomeStep{Action: decide.OutcomeSkip, State: lifecycle.Created}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := Snapshot{Payout: Payout{Batch: "b", ExternalID: "E1", State: lifecycle.Created, Awaiting: true, OutcomeSeq: 2}}
			if tc.edit != nil {
				tc.edit(&s)
			}
			step, ask := s.PreOutcome(tc.oseq)
			if step != tc.wantStep || ask != tc.wantAsk {
				t.Errorf("PreOutcome(%d) = %+v, %v; want %+v, %v", tc.oseq, step, ask, tc.wantStep, tc.wantAsk)
			}
		})
	}
}

// TestDecideOutcome is the outcome check's answer table, without Redis:
// the payout as read (created, awaiting outcome check 2 after one pending
// answer, window open until t0 + 1h; read at t0) and an answer.
func TestDecideOutcome(t *testing.T) {
	t0 := time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)
	over := func(s *Snapshot) { s.Now = s.OutcomeDue }
	cases := []struct {
		name   string
		edit   func(*Snapshot)
		oseq   int
		answer decide.OutcomeAnswer
		want   outcomeDecision
	}{
		{name: "not created: skip", edit: func(s *Snapshot) { s.State, s.Awaiting = lifecycle.Paid, false },
			answer: decide.OutcomeAnswer{Verdict: decide.VerdictPaid}, want: outcomeDecision{step: OutcomeStep{Action: decide.OutcomeSkip, State: lifecycle.Paid}}},
		{name: "created, not awaiting (no window): skip", edit: func(s *Snapshot) { s.Awaiting = false },
			answer: decide.OutcomeAnswer{Verdict: decide.VerdictPaid}, want: outcomeDecision{step: OutcomeStep{Action: decide.OutcomeSkip, State: lifecycle.Created}}},
		{name: "another check is current: stale", oseq: 1, answer: decide.OutcomeAnswer{Verdict: decide.VerdictPaid},
			want: outcomeDecision{step: OutcomeStep{Action: decide.OutcomeStale, Seq: 2}}},
		{name: "paid", answer: decide.OutcomeAnswer{Verdict: decide.VerdictPaid, PSPStatus: "Paid"},
			want: outcomeDecision{write: true, to: lifecycle.Paid, step: OutcomeStep{Action: decide.OutcomeDone, State: lifecycle.Paid}}},
		{name: "failed keeps its reason", answer: decide.OutcomeAnswer{Verdict: decide.VerdictFailed, PSPStatus: "Declined", Reason: "card closed"},
			want: outcomeDecision{write: true, to: lifecycle.Failed, errText: "card closed", step: OutcomeStep{Action: decide.OutcomeDone, State: lifecycle.Failed}}},
		{name: "paid after the window still counts", edit: over, answer: decide.OutcomeAnswer{Verdict: decide.VerdictPaid},
			want: outcomeDecision{write: true, to: lifecycle.Paid, step: OutcomeStep{Action: decide.OutcomeDone, State: lifecycle.Paid}}},
		{name: "pending: next check", answer: decide.OutcomeAnswer{Verdict: decide.VerdictPending, PSPStatus: "Processing"},
			want: outcomeDecision{write: true, step: OutcomeStep{Action: decide.OutcomeAgain, Seq: 3, Polls: 2}}},
		{name: "no answer: next check", answer: decide.OutcomeAnswer{Verdict: decide.VerdictNoAnswer},
			want: outcomeDecision{write: true, step: OutcomeStep{Action: decide.OutcomeAgain, Seq: 3, Polls: 2}}},
		{name: "pending 1 ms before the window ends: next check", edit: func(s *Snapshot) { s.Now = s.OutcomeDue.Add(-time.Millisecond) },
			answer: decide.OutcomeAnswer{Verdict: decide.VerdictPending}, want: outcomeDecision{write: true, step: OutcomeStep{Action: decide.OutcomeAgain, Seq: 3, Polls: 2}}},
		{name: "pending when the window ends: review, naming the answer's status", edit: over,
			answer: decide.OutcomeAnswer{Verdict: decide.VerdictPending, PSPStatus: "Processing"},
			want: outcomeDecision{write: true, to: lifecycle.NeedsReview, errText: outcomeReviewNote("Processing"),
				step: OutcomeStep{Action: decide.OutcomeReview, State: lifecycle.NeedsReview, Error: outcomeReviewNote("Processing")}}},
		{name: "no answer past the window: review, naming the stored status", edit: func(s *Snapshot) { s.Now = s.OutcomeDue.Add(time.Hour) },
			answer: decide.OutcomeAnswer{Verdict: decide.VerdictNoAnswer},
			want: outcomeDecision{write: true, to: lifecycle.NeedsReview, errText: outcomeReviewNote("Created"),
				step: OutcomeStep{Action: decide.OutcomeReview, State: lifecycle.NeedsReview, Error: outcomeReviewNote("Created")}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := Snapshot{Payout: Payout{Batch: "b", ExternalID: "E1", State: lifecycle.Created, PSPStatus: "Created", Awaiting: true,
				OutcomeSeq: 2, OutcomePolls: 1, OutcomeDue: t0.Add(time.Hour)}, Now: t0}
			if tc.edit != nil {
				tc.edit(&s)
			}
			oseq := tc.oseq
			if oseq == 0 {
				oseq = 2
			}
			if got := decideOutcome(s, oseq, tc.answer); got != tc.want {
				t.Errorf("decideOutcome =\n  %+v\nwant\n  %+v", got, tc.want)
			}
		})
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

// TestDecideFinish is the create answer's one decision besides the state
// the worker asks for: the budget of tries that provably did not reach
// the PSP.
func TestDecideFinish(t *testing.T) {
	cases := []struct {
		name      string
		r         CreateResult
		wantTo    lifecycle.State
		wantNote  string
		wantTries int
	}{
		{"created: as asked, not counted", CreateResult{To: lifecycle.Created, MaxTries: 2, Tries: 2}, lifecycle.Created, "", 0},
		{"checking keeps its error", CreateResult{To: lifecycle.Checking, Error: "timeout", MaxTries: 2}, lifecycle.Checking, "timeout", 0},
		{"queued without a budget (paused queue): not counted", CreateResult{To: lifecycle.Queued, Error: "401", Tries: 7}, lifecycle.Queued, "401", 0},
		{"first try within the budget", CreateResult{To: lifecycle.Queued, Error: "429", MaxTries: 2}, lifecycle.Queued, "429", 1},
		{"last try within the budget", CreateResult{To: lifecycle.Queued, Error: "429", MaxTries: 2, Tries: 1}, lifecycle.Queued, "429", 2},
		{"one past the budget: needs review", CreateResult{To: lifecycle.Queued, Error: "429", MaxTries: 2, Tries: 2}, lifecycle.NeedsReview, decide.TriesNote(2, "429"), 3},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			to, note, tries := decideFinish(tc.r)
			if to != tc.wantTo || note != tc.wantNote || tries != tc.wantTries {
				t.Errorf("decideFinish = %s, %q, %d; want %s, %q, %d", to, note, tries, tc.wantTo, tc.wantNote, tc.wantTries)
			}
		})
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
	_, err := l.FinishCreate(ctx, "b", "E1", 1, CreateResult{To: lifecycle.Queued, Error: "429", MaxTries: 3, Tries: 2})
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
	s, err := l.Snapshot(ctx, "b", "E1")
	if err != nil {
		t.Fatal(err)
	}
	if want := clk.now().Truncate(time.Millisecond); !s.Now.Equal(want) {
		t.Fatalf("snapshot time %v, want Redis's %v", s.Now, want)
	}
	if s.State != lifecycle.Checking || s.Seq != 1 || s.Creates != 1 || s.ExternalID != "E1" {
		t.Fatalf("snapshot payout %+v", s.Payout)
	}
	if _, err := l.Snapshot(ctx, "b", "nope"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("snapshot of a missing payout: %v, want ErrNotFound", err)
	}
}
