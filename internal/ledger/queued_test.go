package ledger

import (
	"context"
	"fmt"
	"testing"

	"github.com/acme/payout/internal/decide"
	"github.com/acme/payout/internal/lifecycle"
)

// TestEachQueuedMatchesEachOpen checks that EachQueued yields exactly the
// queued payouts EachOpen yields, with the fields a create task needs,
// across several script calls (more than lineChunk payouts per round) and
// with payouts moved out of queued in between.
func TestEachQueuedMatchesEachOpen(t *testing.T) {
	for _, n := range []int{1, lineChunk, 3*lineChunk + 5, eachChunk + 7} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			ctx := context.Background()
			l, _ := newTestLedger(t)
			seed(t, l, "b", n)
			for i := 1; i <= n; i += 7 { // submitting: not queued any more
				if b, err := l.BeginCreate(ctx, "b", fmt.Sprintf("E%d", i), 1); err != nil || b.Action != decide.Proceed {
					t.Fatalf("BeginCreate E%d = %+v, %v", i, b, err)
				}
			}
			want := map[string]OpenPayout{}
			if err := l.EachOpen(ctx, "b", func(p OpenPayout) error {
				if p.State == lifecycle.Queued {
					want[p.ExternalID] = p
				}
				return nil
			}); err != nil {
				t.Fatal(err)
			}
			got := 0
			if err := l.EachQueued(ctx, "b", func(p OpenPayout) error {
				got++
				w, ok := want[p.ExternalID]
				if !ok || p.State != lifecycle.Queued || p.Creates != w.Creates || p.Amount != w.Amount || p.Destination != w.Destination || p.Batch != "b" {
					t.Errorf("EachQueued gave %+v, EachOpen %+v (found %v)", p, w, ok)
				}
				return nil
			}); err != nil {
				t.Fatal(err)
			}
			if got != len(want) || len(want) != n-(n+6)/7 {
				t.Errorf("EachQueued gave %d payouts, EachOpen %d queued, want %d", got, len(want), n-(n+6)/7)
			}
		})
	}
}
