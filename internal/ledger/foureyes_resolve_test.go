package ledger

import (
	"context"
	"errors"
	"testing"

	"github.com/acme/payout/internal/lifecycle"
)

// Issue 38, item 5: under four-eyes a resolution that decides money
// (created, rejected) needs a second person. The first person's decision
// is a proposal and nothing moves; the same person confirming it is
// refused; another person taking the same decision carries it out; a
// different decision replaces the proposal; a recheck needs nobody else,
// and a proposal holds only for the stay in needs_review it was made in.
func TestResolveFourEyes(t *testing.T) {
	ctx := context.Background()
	alice := Resolution{By: "alice", Note: "seen in the back office", FourEyes: true}
	bob := Resolution{By: "Bob", Note: "agreed", FourEyes: true}
	aliceAgain := Resolution{By: "ALICE", Note: "me again", FourEyes: true} // the same person, spelt otherwise
	created := func(r Resolution) func(l *Ledger) (Resolved, error) {
		return func(l *Ledger) (Resolved, error) {
			return l.ResolveAsConfirmed(ctx, "b", "E1", PSPOrder{OrderID: "WD-7", Status: "Paid"}, r)
		}
	}
	rejected := func(r Resolution) func(l *Ledger) (Resolved, error) {
		return func(l *Ledger) (Resolved, error) { return l.ResolveAsRejected(ctx, "b", "E1", r) }
	}
	recheck := func(r Resolution) func(l *Ledger) (Resolved, error) {
		return func(l *Ledger) (Resolved, error) { return l.Recheck(ctx, "b", "E1", r) }
	}
	type step struct {
		do       func(l *Ledger) (Resolved, error)
		err      error
		state    lifecycle.State
		proposal lifecycle.State // the pending proposal after the step ("": none)
		by       string          // its proposer, or who resolved once carried out
	}
	tests := []struct {
		name  string
		steps []step
	}{
		{"created: proposed, then confirmed by a second person", []step{
			{do: created(alice), state: lifecycle.NeedsReview, proposal: lifecycle.Created, by: "alice"},
			{do: created(bob), state: lifecycle.Created, by: "Bob"},
		}},
		{"rejected: the same person cannot confirm", []step{
			{do: rejected(alice), state: lifecycle.NeedsReview, proposal: lifecycle.Rejected, by: "alice"},
			{do: rejected(aliceAgain), err: errSamePerson, state: lifecycle.NeedsReview, proposal: lifecycle.Rejected, by: "alice"},
			{do: rejected(bob), state: lifecycle.Rejected, by: "Bob"},
		}},
		{"a different decision replaces the proposal", []step{
			{do: rejected(alice), state: lifecycle.NeedsReview, proposal: lifecycle.Rejected, by: "alice"},
			{do: created(bob), state: lifecycle.NeedsReview, proposal: lifecycle.Created, by: "Bob"},
			{do: created(aliceAgain), state: lifecycle.Created, by: "ALICE"},
		}},
		{"a recheck needs no second person and ends the proposal", []step{
			{do: created(alice), state: lifecycle.NeedsReview, proposal: lifecycle.Created, by: "alice"},
			{do: recheck(alice), state: lifecycle.Checking},
		}},
		{"without four-eyes one person decides", []step{
			{do: rejected(Resolution{By: "alice", Note: "n"}), state: lifecycle.Rejected, by: "alice"},
		}},
		{"a system is not a person", []step{
			{do: rejected(Resolution{By: "system:spool(uid 1 x)", Note: "n", FourEyes: true}), err: ErrFourEyes, state: lifecycle.NeedsReview},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l := reviewed(t)
			for i, s := range tt.steps {
				r, err := s.do(l)
				if !errors.Is(err, s.err) || (s.err == nil) != (err == nil) {
					t.Fatalf("step %d: err = %v, want %v", i, err, s.err)
				}
				p := mustState(t, l, "b", "E1", s.state)
				switch {
				case s.proposal != "" && (p.Proposal == nil || p.Proposal.To != s.proposal || p.Proposal.By != s.by):
					t.Fatalf("step %d: proposal %+v, want %s by %s", i, p.Proposal, s.proposal, s.by)
				case s.proposal == "" && p.Proposal != nil:
					t.Fatalf("step %d: proposal %+v still pending", i, p.Proposal)
				case s.proposal == "" && s.by != "" && p.ResolvedBy != s.by:
					t.Fatalf("step %d: resolved by %q, want %q", i, p.ResolvedBy, s.by)
				}
				if err == nil && r.Proposed != (s.proposal != "") {
					t.Fatalf("step %d: Proposed = %v", i, r.Proposed)
				}
			}
		})
	}
}

// A proposal is a compare-and-set: a replayed proposal call answers as
// the first, and the proposal and the audit entry are written once.
func TestResolveFourEyesAudit(t *testing.T) {
	ctx := context.Background()
	l := reviewed(t)
	if _, err := l.ResolveAsRejected(ctx, "b", "E1", Resolution{By: "alice", Note: "no order", FourEyes: true}); err != nil {
		t.Fatal(err)
	}
	r, err := l.ResolveAsRejected(ctx, "b", "E1", Resolution{By: "bob", Note: "agreed", FourEyes: true})
	if err != nil || r.To != lifecycle.Rejected || r.ProposedBy != "alice" {
		t.Fatalf("confirm: %+v %v", r, err)
	}
	var got []string
	if err := l.Audit().Each(ctx, "b", "E1", func(a AuditEntry) error {
		if a.From == string(lifecycle.NeedsReview) {
			got = append(got, a.Actor+":"+a.To+":"+a.Context["proposed"]+":"+a.Context["proposedby"])
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	want := []string{"alice:needs_review:rejected:", "bob:rejected::alice"}
	if len(got) != len(want) || got[0] != want[0] || got[1] != want[1] {
		t.Fatalf("audit %q, want %q", got, want)
	}
}
