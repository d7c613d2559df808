package results

import (
	"testing"

	"github.com/acme/payout/internal/ledger"
	"github.com/acme/payout/internal/lifecycle"
)

func TestPhaseOf(t *testing.T) {
	for _, tt := range []struct {
		name  string
		f     PhaseFacts
		code  string
		label string
		str   string
	}{
		{"loading", PhaseFacts{Phase: lifecycle.PhaseLoading, Rows: 120, LoadedBy: "alice"}, PhaseLoading, "loading",
			"loading (120 rows registered so far; loaded by alice)"},
		{"awaiting approval", PhaseFacts{Phase: lifecycle.PhaseAwaiting, Rows: 4, Open: 4, WaitReason: "approval required", LoadedBy: "alice"},
			PhaseAwaitingApproval, "awaiting approval", "awaiting approval (approval required; loaded by alice)"},
		{"awaiting approval, four-eyes", PhaseFacts{Phase: lifecycle.PhaseAwaiting, Rows: 4, Open: 4, WaitReason: "total 5000.00 is above the batch limit 1000.00", LoadedBy: "alice", FourEyes: true},
			PhaseAwaitingApproval, "awaiting approval", "awaiting approval (total 5000.00 is above the batch limit 1000.00; loaded by alice; four-eyes: a second person approves)"},
		{"working, went at once", PhaseFacts{Phase: lifecycle.PhaseLoaded, Rows: 10, Open: 3}, PhaseWorking, "working", "working (3 of 10 payouts in progress)"},
		{"approved, working", PhaseFacts{Phase: lifecycle.PhaseLoaded, Rows: 10, Open: 10, DecidedBy: "bob", Note: "approved"}, PhaseWorking, "working",
			"working (10 of 10 payouts in progress; approved by bob)"},
		{"working with a review already", PhaseFacts{Phase: lifecycle.PhaseLoaded, Rows: 10, Open: 1, NeedsReview: 2}, PhaseWorking, "working", "working (1 of 10 payouts in progress)"},
		{"paused queue, payouts in progress", PhaseFacts{Phase: lifecycle.PhaseLoaded, Rows: 10, Open: 4, DecidedBy: "bob", QueuePaused: true}, PhasePaused, "paused",
			"paused (" + PausedReason + "; 4 of 10 payouts in progress; approved by bob)"},
		{"paused queue, finished", PhaseFacts{Phase: lifecycle.PhaseLoaded, Rows: 10, QueuePaused: true}, PhaseFinished, "finished", "finished"},
		{"finished", PhaseFacts{Phase: lifecycle.PhaseLoaded, Rows: 10}, PhaseFinished, "finished", "finished"},
		{"finished, one needs review", PhaseFacts{Phase: lifecycle.PhaseLoaded, Rows: 10, NeedsReview: 1}, PhaseNeedsReview, "finished, 1 needs review",
			"finished, 1 needs review (payout resolve decides each)"},
		{"finished, three need review", PhaseFacts{Phase: lifecycle.PhaseLoaded, Rows: 10, NeedsReview: 3, DecidedBy: "auto: below 1000.00"}, PhaseNeedsReview,
			"finished, 3 need review", "finished, 3 need review (payout resolve decides each; approved by auto: below 1000.00)"},
		{"finished, two held over a velocity limit", PhaseFacts{Phase: lifecycle.PhaseLoaded, Rows: 10, Held: 2, DecidedBy: "bob"}, PhaseHeld,
			"finished, 2 held", "finished, 2 held (over a recipient's velocity limit: payout release or payout cancel decides each; approved by bob)"},
		{"held and a review: the review first", PhaseFacts{Phase: lifecycle.PhaseLoaded, Rows: 10, Held: 2, NeedsReview: 1}, PhaseNeedsReview,
			"finished, 1 needs review", "finished, 1 needs review (payout resolve decides each)"},
		{"discarded", PhaseFacts{Phase: lifecycle.PhaseDiscarded, Rows: 4, DecidedBy: "bob", Note: "wrong month"}, PhaseDiscarded, "discarded",
			"discarded (discarded by bob: wrong month)"},
		{"archived", PhaseFacts{Phase: lifecycle.PhaseArchived, Rows: 4}, PhaseArchived, "archived", "archived"},
		{"archived with reviews", PhaseFacts{Phase: lifecycle.PhaseArchived, Rows: 4, NeedsReview: 2}, PhaseArchived, "archived", "archived (2 need review)"},
		{"a phase this package does not know", PhaseFacts{Phase: "some_new_phase"}, "some_new_phase", "some new phase", "some new phase"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			p := PhaseOf(tt.f)
			if p.Code != tt.code || p.Label != tt.label || p.String() != tt.str {
				t.Errorf("PhaseOf = %+v (%q), want code %q label %q, %q", p, p.String(), tt.code, tt.label, tt.str)
			}
		})
	}
}

// TestFactsOf: the facts come from the ledger's record and counters.
func TestFactsOf(t *testing.T) {
	c := ledger.Counts{Rows: map[lifecycle.State]int64{lifecycle.Queued: 2, lifecycle.NeedsReview: 1, lifecycle.Paid: 3, lifecycle.Created: 1, lifecycle.Held: 2}, Awaiting: 1}
	f := FactsOf(ledger.Batch{Phase: lifecycle.PhaseLoaded, LoadedBy: "alice", DecidedBy: "bob", FourEyes: true}, c)
	if f.Rows != 9 || f.Open != 3 || f.NeedsReview != 1 || f.Held != 2 || f.LoadedBy != "alice" || f.DecidedBy != "bob" || !f.FourEyes {
		t.Errorf("%+v", f)
	}
}
