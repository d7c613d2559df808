package operator

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/acme/payout/internal/decide"
	"github.com/acme/payout/internal/ledger"
	"github.com/acme/payout/internal/ledger/keys"
	"github.com/acme/payout/internal/lifecycle"
	"github.com/acme/payout/internal/money"
	"github.com/acme/payout/internal/proof/testenv/fakeredis"
	"github.com/acme/payout/internal/ui"
)

// consoleBatch registers batch b of n payouts (amount n-i for payout i)
// and sends every fifth to needs_review; it returns those, in file order.
func consoleBatch(t *testing.T, l *ledger.Ledger, n int) []string {
	t.Helper()
	ctx := context.Background()
	if _, _, err := l.BeginBatch(ctx, ledger.Batch{ID: "b", File: "b.csv", LoadedAt: time.Now(), Rows: int64(n), Scale: 2}); err != nil {
		t.Fatal(err)
	}
	var ps []ledger.NewPayout
	for i := range n {
		ps = append(ps, ledger.NewPayout{Line: i + 2, ExternalID: fmt.Sprintf("C%04d", i), Amount: money.FromMinor(int64(n-i), 2), Destination: "telecom MTS"})
	}
	if _, err := l.Register(ctx, "b", ps, 2); err != nil {
		t.Fatal(err)
	}
	if err := l.FinishBatch(ctx, "b"); err != nil {
		t.Fatal(err)
	}
	var review []string
	for i := 0; i < n; i += 5 {
		ext := ps[i].ExternalID
		if _, err := l.BeginCreate(ctx, "b", ext, 1); err != nil {
			t.Fatal(err)
		}
		if _, err := l.FinishCreate(ctx, "b", ext, 1, decide.CreateResult{To: lifecycle.NeedsReview, Error: "no answer", HTTPStatus: 500}); err != nil {
			t.Fatal(err)
		}
		review = append(review, ext)
	}
	return review
}

// TestConsoleFiltersByScanAndByIndex: the work queue and a state filter,
// in file and in amount order, show the same payouts whether they come
// from the scan or from the ledger's index per state, from many requests
// at once (the scan cache is shared).
func TestConsoleFiltersByScanAndByIndex(t *testing.T) {
	ctx := context.Background()
	rdb := fakeredis.Working(t)
	l := ledger.New(rdb)
	review := consoleBatch(t, l, 300)
	byAmount := slices.Clone(review)
	slices.Reverse(byAmount) // amount n-i: the last payout is the smallest
	ids := func(vs []ui.PayoutView) []string {
		out := []string{}
		for _, v := range vs {
			out = append(out, v.ExternalID)
		}
		return out
	}
	check := func(t *testing.T, c Console) {
		var wg sync.WaitGroup
		for range 4 {
			wg.Go(func() {
				q, err := c.Review(ctx, 7)
				if err != nil || !slices.Equal(ids(q), review[:7]) {
					t.Errorf("work queue: %v, %v", ids(q), err)
				}
				for _, c2 := range []struct {
					sort string
					want []string
				}{{ui.SortLine, review[10:20]}, {ui.SortAmountAsc, byAmount[10:20]}} {
					pg, err := c.Payouts(ctx, "b", ui.PayoutQuery{State: string(lifecycle.NeedsReview), Sort: c2.sort, Offset: 10, Limit: 10})
					if err != nil || pg.Total != len(review) || !slices.Equal(ids(pg.Rows), c2.want) {
						t.Errorf("needs review by %q: %d %v, %v", c2.sort, pg.Total, ids(pg.Rows), err)
					}
				}
			})
		}
		wg.Wait()
	}
	t.Run("scan", func(t *testing.T) { check(t, NewConsole(rdb)) })
	for _, ext := range review {
		p, err := l.Get(ctx, "b", ext)
		if err != nil {
			t.Fatal(err)
		}
		rdb.ZAdd(ctx, keys.StateIndex("b", string(lifecycle.NeedsReview)), redis.Z{Score: float64(p.Line), Member: ext})
	}
	if n := rdb.ZCard(ctx, keys.StateIndex("b", string(lifecycle.NeedsReview))).Val(); n != int64(len(review)) {
		t.Fatalf("the index written holds %d payouts of %d", n, len(review))
	}
	t.Run("index", func(t *testing.T) { check(t, NewConsole(rdb)) })
}
