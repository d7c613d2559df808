package ledger

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/acme/payout/internal/decide"
	"github.com/acme/payout/internal/lifecycle"
)

// A payout a person marks created awaits its outcome like one the PSP
// created (issue 43, defect 1): outcome check 1 is due, the batch is not
// finished, and the outcome is recorded when the PSP reports it.
func TestResolvedCreatedAwaitsItsOutcome(t *testing.T) {
	ctx := context.Background()
	tests := []struct {
		name     string
		window   time.Duration
		awaiting bool
	}{
		{"outcomes followed", time.Hour, true},
		{"created is final (--track-outcome=false)", 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l := reviewed(t)
			r, err := l.resolveAsCreated(ctx, "b", "E1", "WD-77", "Created", Resolution{By: "alice", Note: "seen", OutcomeWindow: tt.window})
			if err != nil {
				t.Fatal(err)
			}
			p := mustState(t, l, "b", "E1", lifecycle.Created)
			if r.Awaiting != tt.awaiting || p.Awaiting != tt.awaiting {
				t.Fatalf("awaiting: resolved %v, payout %v, want %v", r.Awaiting, p.Awaiting, tt.awaiting)
			}
			c, _ := l.counts(ctx, "b")
			if got := c.Awaiting == 1; got != tt.awaiting {
				t.Errorf("counts awaiting %d", c.Awaiting)
			}
			if !tt.awaiting {
				return
			}
			if p.OutcomeSeq != 1 || r.Payout.OutcomeSeq != 1 || !p.OutcomeDue.After(time.Date(2026, 11, 23, 10, 59, 0, 0, time.UTC)) {
				t.Errorf("outcome seq %d due %v", p.OutcomeSeq, p.OutcomeDue)
			}
			_, snap, err := l.Snapshot(ctx, "b", "E1")
			if err != nil {
				t.Fatal(err)
			}
			s, err := l.RecordOutcome(ctx, snap, 1, decide.OutcomeAnswer{Verdict: decide.VerdictPaid, PSPStatus: "Paid", HTTPStatus: 200})
			if err != nil || s.Action != decide.OutcomeDone || s.State != lifecycle.Paid {
				t.Fatalf("outcome: %+v %v", s, err)
			}
			mustState(t, l, "b", "E1", lifecycle.Paid)
			if c, _ := l.counts(ctx, "b"); c.Awaiting != 0 || c.Rows[lifecycle.Paid] != 1 {
				t.Errorf("counts after paid %+v", c)
			}
		})
	}
}

// A PSP answer that contradicts a person's "rejected" moves the payout to
// needs_review; a rejection the PSP gave itself, and any other state, are
// left alone.
func TestContradictRejected(t *testing.T) {
	ctx := context.Background()
	c := Contradiction{OrderID: "WD-9", PSPStatus: "Paid", Note: "marked rejected by alice, but the PSP holds order WD-9"}
	t.Run("rejected by a person", func(t *testing.T) {
		l := reviewed(t)
		if _, err := l.ResolveAsRejected(ctx, "b", "E1", Resolution{By: "alice", Note: "closed"}); err != nil {
			t.Fatal(err)
		}
		if err := l.ContradictRejected(ctx, "b", "E1", c); err != nil {
			t.Fatal(err)
		}
		p := mustState(t, l, "b", "E1", lifecycle.NeedsReview)
		if p.OrderID != "WD-9" || p.PSPStatus != "Paid" || p.Error != c.Note {
			t.Errorf("payout %+v", p)
		}
		if n, _ := l.counts(ctx, "b"); n.Rows[lifecycle.NeedsReview] != 1 || n.Rows[lifecycle.Rejected] != 0 {
			t.Errorf("counts %+v", n)
		}
		// A person can decide again.
		if _, err := l.resolveAsCreated(ctx, "b", "E1", "WD-9", "Paid", Resolution{By: "bob", Note: "paid after all"}); err != nil {
			t.Errorf("resolve again: %v", err)
		}
	})
	t.Run("rejected by the PSP", func(t *testing.T) {
		l, _ := newTestLedger(t)
		seed(t, l, "b", 1)
		toState(t, l, lifecycle.Rejected)
		if err := l.ContradictRejected(ctx, "b", "E1", c); !errors.Is(err, ErrConflict) {
			t.Fatalf("err %v, want conflict", err)
		}
		mustState(t, l, "b", "E1", lifecycle.Rejected)
	})
	t.Run("not rejected", func(t *testing.T) {
		l := reviewed(t)
		if err := l.ContradictRejected(ctx, "b", "E1", c); !errors.Is(err, ErrConflict) {
			t.Fatalf("err %v, want conflict", err)
		}
	})
	t.Run("no payout", func(t *testing.T) {
		l := reviewed(t)
		if err := l.ContradictRejected(ctx, "b", "NOPE", c); !errors.Is(err, ErrNotFound) {
			t.Fatalf("err %v, want not found", err)
		}
	})
}
