package decide

import (
	"testing"
	"time"

	"github.com/acme/payout/internal/lifecycle"
)

// TestDecideCheck is the status check's answer table, without Redis: the
// payout as read (checking, seq 3, one create, at t0 unless the case says
// otherwise) and an answer, against what Check decides.
func TestDecideCheck(t *testing.T) {
	t0 := time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)
	policy := CheckPolicy{AbsentChecks: 2, AbsentSpacing: time.Minute, MaxCreates: 2, MaxFaults: 4,
		FaultDelay: time.Second, FaultDelayMax: 5 * time.Second}
	found := CheckAnswer{Outcome: Found, OrderID: "WD-1", PSPStatus: "Created"}
	missing := CheckAnswer{Outcome: Missing, HTTPStatus: 404}
	fault := CheckAnswer{Outcome: NoAnswer, Message: "HTTP 503"}
	cases := []struct {
		name   string
		edit   func(*Snapshot)
		seq    int
		answer CheckAnswer
		policy func(*CheckPolicy)
		want   CheckDecision
	}{
		{name: "not checking: skip", edit: func(s *Snapshot) { s.State = lifecycle.Created }, answer: found,
			want: CheckDecision{Step: CheckStep{Action: CheckSkip, Seq: 3}}},
		{name: "another check is current: stale", seq: 2, answer: found,
			want: CheckDecision{Step: CheckStep{Action: CheckStale, Seq: 3}}},
		{name: "a 404 before the check is due: early, nothing written", edit: func(s *Snapshot) { s.CheckDue = t0.Add(1500 * time.Millisecond) },
			answer: missing, want: CheckDecision{Step: CheckStep{Action: CheckEarly, Seq: 3, Wait: 1500 * time.Millisecond}}},
		{name: "no answer before the check is due: early", edit: func(s *Snapshot) { s.CheckDue = t0.Add(time.Second) },
			answer: fault, want: CheckDecision{Step: CheckStep{Action: CheckEarly, Seq: 3, Wait: time.Second}}},
		{name: "found before the check is due still counts", edit: func(s *Snapshot) { s.CheckDue = t0.Add(time.Second) },
			answer: found, want: CheckDecision{Write: true, To: lifecycle.Created, Step: CheckStep{Action: CheckDone}}},
		{name: "found with an outcome window: awaits its outcome", answer: found, policy: func(p *CheckPolicy) { p.OutcomeWindow = time.Hour },
			want: CheckDecision{Write: true, To: lifecycle.Created, Step: CheckStep{Action: CheckDone, Awaiting: true}}},
		{name: "found keeps the counts as read", edit: func(s *Snapshot) { s.Misses, s.Faults = 1, 2 }, answer: found,
			want: CheckDecision{Write: true, To: lifecycle.Created, Misses: 1, Faults: 2, Step: CheckStep{Action: CheckDone}}},
		{name: "first 404: counted, next check D later", answer: missing,
			want: CheckDecision{Write: true, KeepError: true, Misses: 1, CountMiss: true,
				Step: CheckStep{Action: CheckAgain, Seq: 4, Wait: time.Minute}}},
		{name: "404 within D of the last counted: not counted, next check when it could be",
			edit:   func(s *Snapshot) { s.Misses, s.LastMiss = 1, t0.Add(-20*time.Second) },
			answer: missing,
			want: CheckDecision{Write: true, KeepError: true, Misses: 1,
				Step: CheckStep{Action: CheckAgain, Seq: 4, Wait: 40 * time.Second}}},
		{name: "404 exactly D after the last counted: K reached, create again",
			edit:   func(s *Snapshot) { s.Misses, s.LastMiss = 1, t0.Add(-time.Minute) },
			answer: missing,
			want: CheckDecision{Write: true, To: lifecycle.Queued, Misses: 2, CountMiss: true, ErrText: policy.recreateNote(),
				Step: CheckStep{Action: CheckRecreate, Attempt: 2, Error: policy.recreateNote()}}},
		{name: "K reached after M creates: needs review",
			edit:   func(s *Snapshot) { s.Misses, s.LastMiss, s.Creates = 1, t0.Add(-time.Hour), 2 },
			answer: missing,
			want: CheckDecision{Write: true, To: lifecycle.NeedsReview, Misses: 2, CountMiss: true, ErrText: policy.absentNote(),
				Step: CheckStep{Action: CheckReview, Error: policy.absentNote()}}},
		{name: "a 404 after faults says nothing of them", edit: func(s *Snapshot) { s.Faults = 2 }, answer: missing,
			want: CheckDecision{Write: true, KeepError: true, Misses: 1, CountMiss: true, Faults: 2,
				Step: CheckStep{Action: CheckAgain, Seq: 4, Wait: time.Minute}}},
		{name: "first fault: FaultDelay", answer: fault,
			want: CheckDecision{Write: true, Faults: 1, ErrText: "HTTP 503",
				Step: CheckStep{Action: CheckAgain, Seq: 4, Faults: 1, Wait: time.Second}}},
		{name: "third fault: doubled twice", edit: func(s *Snapshot) { s.Faults = 2 }, answer: fault,
			policy: func(p *CheckPolicy) { p.MaxFaults = 9 },
			want: CheckDecision{Write: true, Faults: 3, ErrText: "HTTP 503",
				Step: CheckStep{Action: CheckAgain, Seq: 4, Faults: 3, Wait: 4 * time.Second}}},
		{name: "fifth fault: at most FaultDelayMax", edit: func(s *Snapshot) { s.Faults = 4 }, answer: fault,
			policy: func(p *CheckPolicy) { p.MaxFaults = 9 },
			want: CheckDecision{Write: true, Faults: 5, ErrText: "HTTP 503",
				Step: CheckStep{Action: CheckAgain, Seq: 4, Faults: 5, Wait: 5 * time.Second}}},
		{name: "N Faults: needs review with the last message", edit: func(s *Snapshot) { s.Faults = 3 }, answer: fault,
			want: CheckDecision{Write: true, To: lifecycle.NeedsReview, Faults: 4, ErrText: policy.faultNote("HTTP 503"),
				Step: CheckStep{Action: CheckReview, Error: policy.faultNote("HTTP 503")}}},
		{name: "defaults: 1s after a fault", answer: fault, policy: func(p *CheckPolicy) { p.FaultDelay, p.FaultDelayMax = 0, 0 },
			want: CheckDecision{Write: true, Faults: 1, ErrText: "HTTP 503",
				Step: CheckStep{Action: CheckAgain, Seq: 4, Faults: 1, Wait: time.Second}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := Snapshot{Batch: "b", ExternalID: "E1", State: lifecycle.Checking, Seq: 3, Creates: 1, Now: t0}
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
			if got := Check(s, seq, tc.answer, p); got != tc.want {
				t.Errorf("Check =\n  %+v\nwant\n  %+v", got, tc.want)
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
		wantStep CheckStep
		wantAsk  bool
	}{
		{name: "current and due: ask", seq: 3, wantAsk: true},
		{name: "due this very millisecond: ask", seq: 3, edit: func(s *Snapshot) { s.CheckDue = t0 }, wantAsk: true},
		{name: "queued: skip", seq: 3, edit: func(s *Snapshot) { s.State = lifecycle.Queued },
			wantStep: CheckStep{Action: CheckSkip, Seq: 3}},
		{name: "needs review: skip", seq: 3, edit: func(s *Snapshot) { s.State = lifecycle.NeedsReview },
			wantStep: CheckStep{Action: CheckSkip, Seq: 3}},
		{name: "an older check: stale, naming the current one", seq: 2,
			wantStep: CheckStep{Action: CheckStale, Seq: 3}},
		{name: "a newer check than the payout's: stale too", seq: 4,
			wantStep: CheckStep{Action: CheckStale, Seq: 3}},
		{name: "not due for 1 ms: early", seq: 3, edit: func(s *Snapshot) { s.CheckDue = t0.Add(time.Millisecond) },
			wantStep: CheckStep{Action: CheckEarly, Seq: 3, Wait: time.Millisecond}},
		{name: "another check and not due: stale first", seq: 2, edit: func(s *Snapshot) { s.CheckDue = t0.Add(time.Hour) },
			wantStep: CheckStep{Action: CheckStale, Seq: 3}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := Snapshot{Batch: "b", ExternalID: "E1", State: lifecycle.Checking, Seq: 3, Creates: 1, Now: t0}
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
			wantStep: OutcomeStep{Action: OutcomeSkip, State: lifecycle.Created}},
		{name: "paid: skip, naming the state", oseq: 2, edit: func(s *Snapshot) { s.State, s.Awaiting = lifecycle.Paid, false },
			wantStep: OutcomeStep{Action: OutcomeSkip, State: lifecycle.Paid}},
		{name: "needs review: skip", oseq: 2, edit: func(s *Snapshot) { s.State, s.Awaiting = lifecycle.NeedsReview, false },
			wantStep: OutcomeStep{Action: OutcomeSkip, State: lifecycle.NeedsReview}},
		{name: "an older check: stale, naming the current one", oseq: 1,
			wantStep: OutcomeStep{Action: OutcomeStale, Seq: 2}},
		{name: "not awaiting and another check: skip first", oseq: 1, edit: func(s *Snapshot) { s.Awaiting = false },
			wantStep: OutcomeStep{Action: OutcomeSkip, State: lifecycle.Created}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := Snapshot{Batch: "b", ExternalID: "E1", State: lifecycle.Created, Awaiting: true, OutcomeSeq: 2}
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
		answer OutcomeAnswer
		want   OutcomeDecision
	}{
		{name: "not created: skip", edit: func(s *Snapshot) { s.State, s.Awaiting = lifecycle.Paid, false },
			answer: OutcomeAnswer{Verdict: VerdictPaid}, want: OutcomeDecision{Step: OutcomeStep{Action: OutcomeSkip, State: lifecycle.Paid}}},
		{name: "created, not awaiting (no window): skip", edit: func(s *Snapshot) { s.Awaiting = false },
			answer: OutcomeAnswer{Verdict: VerdictPaid}, want: OutcomeDecision{Step: OutcomeStep{Action: OutcomeSkip, State: lifecycle.Created}}},
		{name: "another check is current: stale", oseq: 1, answer: OutcomeAnswer{Verdict: VerdictPaid},
			want: OutcomeDecision{Step: OutcomeStep{Action: OutcomeStale, Seq: 2}}},
		{name: "paid", answer: OutcomeAnswer{Verdict: VerdictPaid, PSPStatus: "Paid"},
			want: OutcomeDecision{Write: true, To: lifecycle.Paid, Step: OutcomeStep{Action: OutcomeDone, State: lifecycle.Paid}}},
		{name: "failed keeps its reason", answer: OutcomeAnswer{Verdict: VerdictFailed, PSPStatus: "Declined", Reason: "card closed"},
			want: OutcomeDecision{Write: true, To: lifecycle.Failed, ErrText: "card closed", Step: OutcomeStep{Action: OutcomeDone, State: lifecycle.Failed}}},
		{name: "paid after the window still counts", edit: over, answer: OutcomeAnswer{Verdict: VerdictPaid},
			want: OutcomeDecision{Write: true, To: lifecycle.Paid, Step: OutcomeStep{Action: OutcomeDone, State: lifecycle.Paid}}},
		{name: "pending: next check", answer: OutcomeAnswer{Verdict: VerdictPending, PSPStatus: "Processing"},
			want: OutcomeDecision{Write: true, Step: OutcomeStep{Action: OutcomeAgain, Seq: 3, Polls: 2}}},
		{name: "no answer: next check", answer: OutcomeAnswer{Verdict: VerdictNoAnswer},
			want: OutcomeDecision{Write: true, Step: OutcomeStep{Action: OutcomeAgain, Seq: 3, Polls: 2}}},
		{name: "pending 1 ms before the window ends: next check", edit: func(s *Snapshot) { s.Now = s.OutcomeDue.Add(-time.Millisecond) },
			answer: OutcomeAnswer{Verdict: VerdictPending}, want: OutcomeDecision{Write: true, Step: OutcomeStep{Action: OutcomeAgain, Seq: 3, Polls: 2}}},
		{name: "pending when the window ends: review, naming the answer's status", edit: over,
			answer: OutcomeAnswer{Verdict: VerdictPending, PSPStatus: "Processing"},
			want: OutcomeDecision{Write: true, To: lifecycle.NeedsReview, ErrText: outcomeReviewNote("Processing"),
				Step: OutcomeStep{Action: OutcomeReview, State: lifecycle.NeedsReview, Error: outcomeReviewNote("Processing")}}},
		{name: "no answer past the window: review, naming the stored status", edit: func(s *Snapshot) { s.Now = s.OutcomeDue.Add(time.Hour) },
			answer: OutcomeAnswer{Verdict: VerdictNoAnswer},
			want: OutcomeDecision{Write: true, To: lifecycle.NeedsReview, ErrText: outcomeReviewNote("Created"),
				Step: OutcomeStep{Action: OutcomeReview, State: lifecycle.NeedsReview, Error: outcomeReviewNote("Created")}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := Snapshot{Batch: "b", ExternalID: "E1", State: lifecycle.Created, PSPStatus: "Created", Awaiting: true,
				OutcomeSeq: 2, OutcomePolls: 1, OutcomeDue: t0.Add(time.Hour), Now: t0}
			if tc.edit != nil {
				tc.edit(&s)
			}
			oseq := tc.oseq
			if oseq == 0 {
				oseq = 2
			}
			if got := Outcome(s, oseq, tc.answer); got != tc.want {
				t.Errorf("Outcome =\n  %+v\nwant\n  %+v", got, tc.want)
			}
		})
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
		{"one past the budget: needs review", CreateResult{To: lifecycle.Queued, Error: "429", MaxTries: 2, Tries: 2}, lifecycle.NeedsReview, TriesNote(2, "429"), 3},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			to, note, tries := Finish(tc.r)
			if to != tc.wantTo || note != tc.wantNote || tries != tc.wantTries {
				t.Errorf("Finish = %s, %q, %d; want %s, %q, %d", to, note, tries, tc.wantTo, tc.wantNote, tc.wantTries)
			}
		})
	}
}

// TestNotesForPeople: the errors the transitions keep are built here; the
// report groups needs_review payouts by their first words
// (report.notSentReasons), so those stay as they were.
func TestNotesForPeople(t *testing.T) {
	p := CheckPolicy{AbsentChecks: 3, MaxCreates: 2, MaxFaults: 10}
	for _, tc := range []struct{ got, want string }{
		{TriesNote(5, "HTTP 429"), "PSP did not take the request after 6 tries (nothing was sent): HTTP 429"},
		{p.recreateNote(), "PSP confirmed it has no order after 3 status checks; creating again"},
		{p.absentNote(), "PSP has no order after 2 creates; a person must decide"},
		{p.faultNote("HTTP 502"), "status unknown after 10 status checks without an answer: HTTP 502"},
		{outcomeReviewNote("Processing"), "no final status from the PSP within the outcome window; last status Processing; ask the PSP whether the money was sent"},
		{outcomeReviewNote(""), "no final status from the PSP within the outcome window; last status (none); ask the PSP whether the money was sent"},
	} {
		if tc.got != tc.want {
			t.Errorf("note %q, want %q", tc.got, tc.want)
		}
	}
}
