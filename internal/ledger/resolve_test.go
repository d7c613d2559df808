package ledger

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/acme/payout/internal/decide"
	"github.com/acme/payout/internal/lifecycle"
)

// toState brings payout E1 of batch b (seeded, queued) to state s through
// the transitions the worker uses.
func toState(t *testing.T, l *Ledger, s lifecycle.State) {
	t.Helper()
	ctx := context.Background()
	if s == lifecycle.Queued {
		return
	}
	if b, err := l.BeginCreate(ctx, "b", "E1", 1); err != nil || b.Action != decide.Proceed {
		t.Fatalf("begin: %+v %v", b, err)
	}
	if s == lifecycle.Submitting {
		return
	}
	if _, err := l.FinishCreate(ctx, "b", "E1", 1, decide.CreateResult{To: s, OrderID: "WD-0", Error: "PSP unreachable"}); err != nil {
		t.Fatalf("finish to %s: %v", s, err)
	}
	mustState(t, l, "b", "E1", s)
}

func reviewed(t *testing.T, opts ...Option) *Ledger {
	t.Helper()
	l, _ := newTestLedger(t, opts...)
	seed(t, l, "b", 1)
	toState(t, l, lifecycle.NeedsReview)
	return l
}

func TestResolve(t *testing.T) {
	ctx := context.Background()
	who := Resolution{By: "alice", Note: "=seen in the PSP back office"}
	tests := []struct {
		name      string
		do        func(l *Ledger) (Resolved, error)
		want      lifecycle.State
		wantSeq   int
		wantOrder string
		wantError string // the reason left in the payout
	}{
		{"recheck", func(l *Ledger) (Resolved, error) { return l.Recheck(ctx, "b", "E1", who) },
			lifecycle.Checking, 1, "", "PSP unreachable"},
		{"as created", func(l *Ledger) (Resolved, error) {
			return l.resolveAsCreated(ctx, "b", "E1", "WD-77", "Created", who)
		}, lifecycle.Created, 0, "WD-77", ""},
		{"as rejected", func(l *Ledger) (Resolved, error) { return l.ResolveAsRejected(ctx, "b", "E1", who) },
			lifecycle.Rejected, 0, "", "PSP unreachable"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l := reviewed(t)
			// A worn-out checking episode before the review: the recheck
			// must start afresh.
			l.rdb.HSet(ctx, payoutKey("b", "E1"), "misses", 2, "lastmiss", 5, "faults", 3)
			r, err := tt.do(l)
			if err != nil {
				t.Fatal(err)
			}
			if r.From != lifecycle.NeedsReview || r.To != tt.want || r.Seq != tt.wantSeq || r.Payout.State != tt.want {
				t.Fatalf("resolved = %+v", r)
			}
			p := mustState(t, l, "b", "E1", tt.want)
			if p.ResolvedBy != "alice" || p.ResolutionNote != who.Note || !p.ResolvedAt.Equal(time.Date(2026, 11, 23, 10, 0, 0, 0, time.UTC)) {
				t.Errorf("resolution recorded as %q %q %v", p.ResolvedBy, p.ResolutionNote, p.ResolvedAt)
			}
			if p.OrderID != tt.wantOrder || p.Error != tt.wantError {
				t.Errorf("order %q error %q, want %q %q", p.OrderID, p.Error, tt.wantOrder, tt.wantError)
			}
			if tt.want == lifecycle.Checking && (p.Misses != 0 || p.Faults != 0 || p.Seq != 1) {
				t.Errorf("recheck left misses %d faults %d seq %d", p.Misses, p.Faults, p.Seq)
			}
			if p.Creates != 1 {
				t.Errorf("creates = %d: a resolution never creates", p.Creates)
			}
			c, _ := l.counts(ctx, "b")
			if c.Rows[tt.want] != 1 || c.Rows[lifecycle.NeedsReview] != 0 || c.Units[tt.want] != 1025 || c.Units[lifecycle.NeedsReview] != 0 || c.Total() != 1 {
				t.Errorf("counts %+v", c)
			}
			// Resolved once: a second resolution is refused.
			if _, err := l.ResolveAsRejected(ctx, "b", "E1", who); !errors.Is(err, ErrConflict) {
				t.Errorf("second resolution: %v, want conflict", err)
			}
		})
	}
}

func TestRecheckThenStatusCheckFindsTheOrder(t *testing.T) {
	ctx := context.Background()
	l := reviewed(t)
	r, err := l.Recheck(ctx, "b", "E1", Resolution{By: "bob", Note: "PSP was down"})
	if err != nil {
		t.Fatal(err)
	}
	policy := decide.CheckPolicy{AbsentChecks: 2, AbsentSpacing: time.Minute, MaxCreates: 1, MaxFaults: 3}
	s, err := recordCheck(ctx, l, "b", "E1", r.Seq, decide.CheckAnswer{Outcome: decide.Found, OrderID: "WD-5", PSPStatus: "Created"}, policy)
	if err != nil || s.Action != decide.CheckDone {
		t.Fatalf("check %d after recheck: %+v %v", r.Seq, s, err)
	}
	if p := mustState(t, l, "b", "E1", lifecycle.Created); p.OrderID != "WD-5" || p.ResolvedBy != "bob" {
		t.Fatalf("after the check: %+v", p)
	}
}

func TestResolveRefusedOutsideNeedsReview(t *testing.T) {
	ctx := context.Background()
	who := Resolution{By: "alice", Note: "n"}
	for _, st := range []lifecycle.State{lifecycle.Queued, lifecycle.Submitting, lifecycle.Checking, lifecycle.Created, lifecycle.Rejected} {
		for _, op := range []struct {
			name string
			do   func(l *Ledger) (Resolved, error)
		}{
			{"recheck", func(l *Ledger) (Resolved, error) { return l.Recheck(ctx, "b", "E1", who) }},
			{"created", func(l *Ledger) (Resolved, error) { return l.resolveAsCreated(ctx, "b", "E1", "WD-1", "", who) }},
			{"rejected", func(l *Ledger) (Resolved, error) { return l.ResolveAsRejected(ctx, "b", "E1", who) }},
		} {
			t.Run(string(st)+"/"+op.name, func(t *testing.T) {
				l, _ := newTestLedger(t)
				seed(t, l, "b", 1)
				toState(t, l, st)
				before, _ := l.Get(ctx, "b", "E1")
				_, err := op.do(l)
				var ce *ConflictError
				if !errors.Is(err, ErrConflict) || !errors.As(err, &ce) || ce.Found != st {
					t.Fatalf("err = %v, want a conflict naming %s", err, st)
				}
				if after, _ := l.Get(ctx, "b", "E1"); after != before {
					t.Fatalf("a refused resolution wrote: %+v -> %+v", before, after)
				}
			})
		}
	}
}

func TestResolveRefusesIncompleteOrUnknown(t *testing.T) {
	ctx := context.Background()
	l := reviewed(t)
	tests := []struct {
		name string
		do   func() (Resolved, error)
		want error
	}{
		{"no operator", func() (Resolved, error) { return l.ResolveAsRejected(ctx, "b", "E1", Resolution{Note: "n"}) }, ErrBadResolution},
		{"no note", func() (Resolved, error) { return l.Recheck(ctx, "b", "E1", Resolution{By: "a", Note: "  "}) }, ErrBadResolution},
		{"no order id", func() (Resolved, error) {
			return l.resolveAsCreated(ctx, "b", "E1", "", "", Resolution{By: "a", Note: "n"})
		}, ErrBadResolution},
		{"unknown payout", func() (Resolved, error) { return l.Recheck(ctx, "b", "E9", Resolution{By: "a", Note: "n"}) }, ErrNotFound},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := tt.do(); !errors.Is(err, tt.want) {
				t.Fatalf("err = %v, want %v", err, tt.want)
			}
		})
	}
	mustState(t, l, "b", "E1", lifecycle.NeedsReview)
}

// TestReplayedResolutionReturnsTheFirstDecision: the same call sent again
// under its operation id (a lost reply) gets the first decision, with the
// same seq, and does not move counters twice; a new call is refused.
func TestReplayedResolutionReturnsTheFirstDecision(t *testing.T) {
	ctx := context.Background()
	who := Resolution{By: "alice", Note: "n"}
	tests := []struct {
		name string
		do   func(l *Ledger) (Resolved, error)
	}{
		{"recheck", func(l *Ledger) (Resolved, error) { return l.Recheck(ctx, "b", "E1", who) }},
		{"created", func(l *Ledger) (Resolved, error) { return l.resolveAsCreated(ctx, "b", "E1", "WD-1", "", who) }},
		{"rejected", func(l *Ledger) (Resolved, error) { return l.ResolveAsRejected(ctx, "b", "E1", who) }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ops := &fixedOps{}
			l := reviewed(t, withOpIDs(func() string {
				if ops.id == "" {
					return randomOp() // the setup's transitions: one id each
				}
				return ops.op()
			}))
			ops.id = "op-resolve"
			first, err := tt.do(l)
			if err != nil {
				t.Fatal(err)
			}
			again, err := tt.do(l)
			if err != nil || again.To != first.To || again.Seq != first.Seq || again.Payout != first.Payout {
				t.Fatalf("replay = %+v, %v; first %+v", again, err, first)
			}
			c, _ := l.counts(ctx, "b")
			if c.Rows[first.To] != 1 || c.Rows[lifecycle.NeedsReview] != 0 || c.Total() != 1 {
				t.Fatalf("counts after the replay %+v", c)
			}
			if p, _ := l.Get(ctx, "b", "E1"); p.Seq != first.Payout.Seq {
				t.Fatalf("seq %d after the replay, want %d", p.Seq, first.Payout.Seq)
			}
			ops.id = "op-new"
			if _, err := tt.do(l); !errors.Is(err, ErrConflict) {
				t.Fatalf("a new call after the resolution: %v, want conflict", err)
			}
		})
	}
}
