package results

import (
	"fmt"
	"strings"

	"github.com/acme/payout/internal/ledger"
	"github.com/acme/payout/internal/lifecycle"
	"github.com/acme/payout/internal/view"
)

// Phase codes: where a batch is, as people are told (payout status, its
// --json, the web UI). They are derived from the ledger's phase and the
// batch's counters by PhaseOf, in one place, so that every view says the
// same.
const (
	PhaseLoading          = "loading"             // rows are being registered
	PhaseInterrupted      = "loading_interrupted" // its load died; nothing is sent until the file is loaded again
	PhaseAwaitingApproval = "awaiting_approval"   // registered; nothing is sent before payout approve
	PhaseWorking          = "working"             // handed to the workers; payouts still in progress
	PhasePaused           = "paused"              // working, but the payout queue is paused: nothing is sent, nothing is lost
	PhaseFinished         = "finished"            // every payout final, none needs a person
	PhaseNeedsReview      = "needs_review"        // every payout final or stopped, N need a person (payout resolve)
	PhaseHeld             = "held"                // every other payout final, N held over a velocity limit (payout release or cancel)
	PhaseDiscarded        = "discarded"           // refused at approval; every payout cancelled
	PhaseArchived         = "archived"            // written to the archive; Redis keeps a summary
)

// Phase is a batch's phase for people.
type Phase struct {
	// Code is one of the Phase* constants (or the ledger's phase as it
	// is, for a phase this package does not know).
	Code string `json:"code"`
	// Label says it in a few words: "awaiting approval", "finished, 3
	// need review".
	Label string `json:"label"`
	// Reason says why, or who decided: "approval required; loaded by
	// alice", "discarded by bob: wrong month".
	Reason string `json:"reason,omitempty"`
}

// String is the label, then the reason in parentheses.
func (p Phase) String() string {
	if p.Reason == "" {
		return p.Label
	}
	return p.Label + " (" + p.Reason + ")"
}

// PhaseFacts are what a batch's phase is decided from: the ledger's phase
// of the batch, its approval record and its counters.
type PhaseFacts struct {
	Phase       string // ledger phase (lifecycle.PhaseLoading, ...)
	Rows        int64  // payouts registered
	Open        int64  // payouts with an automatic step still due (ledger.Counts.Open)
	NeedsReview int64  // payouts in needs_review
	Held        int64  // payouts held over a velocity limit (a person releases or cancels each)
	LoadedBy    string
	WaitReason  string // why it awaits approval
	DecidedBy   string // who approved or discarded it
	Note        string // the note of that decision
	FourEyes    bool   // the batch needs a second person's approval
	// Rule is the approval rule the batch is held under (ledger.Batch.Rule,
	// "" for none); Approvals where its approvals stand ("1 of 2
	// approvals: alice", ledger.Batch.ApprovalProgress); Approvers who
	// approved it.
	Rule      string
	Approvals string
	Approvers string
	// Interrupted: the batch is loading and no loader holds its load
	// lock (view.BatchStatus.Interrupted).
	Interrupted bool
	// QueuePaused: the payout queue is paused (queue.QueuePaused), so a
	// batch with payouts in progress is on hold, not working.
	QueuePaused bool
}

// FactsOf gathers the facts of a batch from the ledger's record and
// counters (an archived batch: ledger.ArchivedBatch.AsBatch and its
// Counts).
func FactsOf(b ledger.Batch, c ledger.Counts) PhaseFacts {
	return PhaseFacts{
		Phase: b.Phase, Rows: c.Total(), Open: c.Open(), NeedsReview: c.Rows[lifecycle.NeedsReview],
		Held:     c.Rows[lifecycle.Held],
		LoadedBy: b.LoadedBy, WaitReason: b.WaitReason, DecidedBy: b.DecidedBy, Note: b.Note,
		FourEyes: b.FourEyes, Rule: b.Rule, Approvals: b.ApprovalProgress(), Approvers: b.ApproverNames(),
	}
}

// StatusPhase is the phase of a batch as view's Statuses report it,
// an interrupted load included; paused: the payout queue is paused.
func StatusPhase(s view.BatchStatus, paused bool) Phase {
	f := FactsOf(s.Batch, s.Counts)
	f.Interrupted, f.QueuePaused = s.Interrupted, paused
	return PhaseOf(f)
}

// PausedReason is what a paused batch's phase says, and the console's
// banner while the queue is paused.
const PausedReason = "payments on hold, nothing is lost: payout resume (or Resume in Queues) sends them"

// PhaseOf names a batch's phase for people. A new ledger phase is one more
// case of the switch (and a constant above).
func PhaseOf(f PhaseFacts) Phase {
	switch f.Phase {
	case lifecycle.PhaseLoading:
		if f.Interrupted {
			return Phase{Code: PhaseInterrupted, Label: "loading, interrupted", Reason: joinReasons(
				"no payment is sent: load the same file again to complete it, or payout discard to abandon it",
				fmt.Sprintf("%d rows registered", f.Rows), by("loaded", f.LoadedBy))}
		}
		return Phase{Code: PhaseLoading, Label: "loading", Reason: joinReasons(fmt.Sprintf("%d rows registered so far", f.Rows), by("loaded", f.LoadedBy))}
	case lifecycle.PhaseAwaiting:
		four := ""
		if f.FourEyes {
			four = "four-eyes: a second person approves"
		}
		return Phase{Code: PhaseAwaitingApproval, Label: "awaiting approval", Reason: joinReasons(f.WaitReason, f.Approvals, by("loaded", f.LoadedBy), four)}
	case lifecycle.PhaseDiscarded:
		return Phase{Code: PhaseDiscarded, Label: "discarded", Reason: decision("discarded", f)}
	case lifecycle.PhaseArchived:
		return Phase{Code: PhaseArchived, Label: "archived", Reason: reviewReason(f)}
	case lifecycle.PhaseLoaded:
		approved := decision("approved", f)
		switch {
		case f.Open > 0 && f.QueuePaused:
			return Phase{Code: PhasePaused, Label: "paused", Reason: joinReasons(PausedReason,
				fmt.Sprintf("%d of %d payouts in progress", f.Open, f.Rows), approved)}
		case f.Open > 0:
			return Phase{Code: PhaseWorking, Label: "working", Reason: joinReasons(
				fmt.Sprintf("%d of %d payouts in progress", f.Open, f.Rows), approved)}
		case f.NeedsReview > 0:
			return Phase{Code: PhaseNeedsReview, Label: fmt.Sprintf("finished, %d %s review", f.NeedsReview, needs(f.NeedsReview)),
				Reason: joinReasons("payout resolve decides each", approved)}
		case f.Held > 0:
			return Phase{Code: PhaseHeld, Label: fmt.Sprintf("finished, %d held", f.Held),
				Reason: joinReasons("over a recipient's velocity limit: payout release or payout cancel decides each", approved)}
		}
		return Phase{Code: PhaseFinished, Label: "finished", Reason: approved}
	}
	return Phase{Code: f.Phase, Label: strings.ReplaceAll(f.Phase, "_", " ")}
}

func needs(n int64) string {
	if n == 1 {
		return "needs"
	}
	return "need"
}

func reviewReason(f PhaseFacts) string {
	if f.NeedsReview > 0 {
		return fmt.Sprintf("%d %s review", f.NeedsReview, needs(f.NeedsReview))
	}
	return ""
}

func by(verb, who string) string {
	if who == "" {
		return ""
	}
	return verb + " by " + who
}

// decision is "approved by bob" or "discarded by bob: wrong month"; empty
// when nobody decided (a batch that went to the workers at once).
func decision(verb string, f PhaseFacts) string {
	if f.DecidedBy == "" {
		return ""
	}
	s := verb + " by " + f.DecidedBy
	if verb == "approved" && strings.Contains(f.Approvers, ", ") {
		s = verb + " by " + f.Approvers // every approver of a rule asking for several
	}
	if f.Note != "" && f.Note != verb {
		s += ": " + f.Note
	}
	return s
}

func joinReasons(parts ...string) string {
	var out []string
	for _, p := range parts {
		if p != "" {
			out = append(out, p)
		}
	}
	return strings.Join(out, "; ")
}
