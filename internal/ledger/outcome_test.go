package ledger

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/acme/payout/internal/decide"
	"github.com/acme/payout/internal/lifecycle"
)

// toAwaiting creates E1 with outcome tracking on (window w).
func toAwaiting(t *testing.T, w time.Duration) (*Ledger, *fakeClock) {
	t.Helper()
	ctx := context.Background()
	l, clk := newTestLedger(t)
	seed(t, l, "b", 1)
	if b, _ := l.BeginCreate(ctx, "b", "E1", 1); b.Action != decide.Proceed {
		t.Fatalf("begin: %v", b.Action)
	}
	if _, err := l.FinishCreate(ctx, "b", "E1", 1, decide.CreateResult{To: lifecycle.Created, OrderID: "WD-1", PSPStatus: "Created", OutcomeWindow: w}); err != nil {
		t.Fatal(err)
	}
	return l, clk
}

func TestOutcomeTransitions(t *testing.T) {
	ctx := context.Background()
	tests := []struct {
		name      string
		verdicts  []decide.Verdict
		advance   time.Duration // before the last verdict
		want      lifecycle.State
		wantError string
	}{
		{name: "paid at once", verdicts: []decide.Verdict{decide.VerdictPaid}, want: lifecycle.Paid},
		{name: "failed after pending", verdicts: []decide.Verdict{decide.VerdictPending, decide.VerdictNoAnswer, decide.VerdictFailed}, want: lifecycle.Failed, wantError: "card blocked"},
		{name: "window over", verdicts: []decide.Verdict{decide.VerdictPending, decide.VerdictPending}, advance: 2 * time.Hour, want: lifecycle.NeedsReview, wantError: "outcome window"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l, clk := toAwaiting(t, time.Hour)
			c, _ := l.counts(ctx, "b")
			if c.Awaiting != 1 || c.Open() != 1 || c.Rows[lifecycle.Created] != 1 {
				t.Fatalf("after create: awaiting %d open %d created %d", c.Awaiting, c.Open(), c.Rows[lifecycle.Created])
			}
			p := mustState(t, l, "b", "E1", lifecycle.Created)
			if !p.Awaiting || p.OutcomeSeq != 1 || !p.OutcomeDue.Equal(clk.now().Add(time.Hour)) {
				t.Fatalf("awaiting %v seq %d due %v", p.Awaiting, p.OutcomeSeq, p.OutcomeDue)
			}
			seq := 1
			var step decide.OutcomeStep
			for i, v := range tt.verdicts {
				if i == len(tt.verdicts)-1 {
					clk.add(tt.advance)
				}
				var err error
				step, err = recordOutcome(ctx, l, "b", "E1", seq, v, "Processing", "card blocked by issuer", 200)
				if err != nil {
					t.Fatal(err)
				}
				if i < len(tt.verdicts)-1 {
					if step.Action != decide.OutcomeAgain || step.Seq != seq+1 || step.Polls != i+1 {
						t.Fatalf("verdict %d: %+v", i, step)
					}
					seq = step.Seq
				}
			}
			p = mustState(t, l, "b", "E1", tt.want)
			if tt.wantError != "" && !strings.Contains(p.Error, tt.wantError) {
				t.Fatalf("error %q lacks %q", p.Error, tt.wantError)
			}
			c, _ = l.counts(ctx, "b")
			if c.Awaiting != 0 || c.AwaitingUnits != 0 || c.Open() != 0 || c.Rows[tt.want] != 1 || c.Rows[lifecycle.Created] != 0 {
				t.Fatalf("counts after: %+v", c)
			}
			// A stale or replayed-by-another-delivery check changes nothing.
			if s, _ := recordOutcome(ctx, l, "b", "E1", seq, decide.VerdictPaid, "Paid", "", 200); s.Action != decide.OutcomeSkip {
				t.Fatalf("check after the end: %+v", s)
			}
		})
	}
	t.Run("stale seq", func(t *testing.T) {
		l, _ := toAwaiting(t, time.Hour)
		recordOutcome(ctx, l, "b", "E1", 1, decide.VerdictPending, "Processing", "", 200)
		if s, _ := recordOutcome(ctx, l, "b", "E1", 1, decide.VerdictPaid, "Paid", "", 200); s.Action != decide.OutcomeStale || s.Seq != 2 {
			t.Fatalf("stale: %+v", s)
		}
		mustState(t, l, "b", "E1", lifecycle.Created)
	})
	t.Run("untracked created is final", func(t *testing.T) {
		l, _ := toAwaiting(t, 0)
		if s, _ := recordOutcome(ctx, l, "b", "E1", 1, decide.VerdictPaid, "Paid", "", 200); s.Action != decide.OutcomeSkip || s.State != lifecycle.Created {
			t.Fatalf("untracked: %+v", s)
		}
		if c, _ := l.counts(ctx, "b"); c.Open() != 0 {
			t.Fatalf("open %d", c.Open())
		}
	})
}
