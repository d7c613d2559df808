//go:build integration

package worker

import (
	"context"
	"net/url"
	"testing"
	"time"

	"github.com/acme/payout/internal/ledger"
	"github.com/acme/payout/internal/lifecycle"
	"github.com/acme/payout/internal/money"
	"github.com/acme/payout/internal/proof/testenv/nginxtest"
	"github.com/acme/payout/internal/queue"
	"github.com/acme/payout/internal/sandbox"
)

// TestNginxDotSegmentPaidOnce is issue 38's first defect end to end: a
// payout whose externalId is ".." (loaded before the intake rule refused
// it) gets an ambiguous create through a real nginx in front of the PSP.
// Its status query ".../withdrawal-order/.." reaches ".../bridge/" through
// nginx, which answers 404: two such 404s were "confirmed absence", the
// payout was created again and paid twice. It must stay with one order
// (and end for a person to look at); a normal id next to it is found.
func TestNginxDotSegmentPaidOnce(t *testing.T) {
	cfg := fastConfig()
	cfg.Policy.MaxFaults = 3 // checks without an answer before needs_review
	h := newHarness(t, cfg, sandbox.Config{})
	u, err := url.Parse(h.url)
	if err != nil {
		t.Fatal(err)
	}
	h.psp = h.newClient(nginxtest.Start(t, u.Host), 2*time.Second)
	ids := []string{"..", "PO-1"}
	addIDs(h, ids...)
	h.force(sandbox.Force{Fault: sandbox.FaultDrop, Store: true, Op: sandbox.OpWithdrawalCreate, Count: len(ids)})
	h.start()
	h.waitFinal(30 * time.Second)
	h.stop()
	h.assertOrders("..", 1, 1)
	h.assertOrders("PO-1", 1, 1)
	if p := h.payout(".."); p.State != lifecycle.NeedsReview {
		t.Errorf("payout \"..\" is %s, want %s", p.State, lifecycle.NeedsReview)
	}
	if p := h.payout("PO-1"); p.State != lifecycle.Created {
		t.Errorf("payout PO-1 is %s, want %s", p.State, lifecycle.Created)
	}
}

// addIDs registers telecom payouts with the given externalIds and
// enqueues their create tasks, as the loader does.
func addIDs(h *harness, ids ...string) {
	h.t.Helper()
	ctx := context.Background()
	if _, _, err := h.ledger.BeginBatch(ctx, ledger.Batch{ID: h.batch, File: "t.csv", LoadedAt: time.Now(), Rows: int64(len(ids)), Total: money.Zero, Scale: 2}); err != nil {
		h.t.Fatal(err)
	}
	ps := make([]ledger.NewPayout, len(ids))
	for i, id := range ids {
		ps[i] = ledger.NewPayout{Line: i + 2, ExternalID: id, Amount: money.MustParse("10.50"), Telecom: "MTS", Destination: "telecom MTS"}
	}
	if _, err := h.ledger.Register(ctx, h.batch, ps, 2); err != nil {
		h.t.Fatal(err)
	}
	if err := h.ledger.FinishBatch(ctx, h.batch); err != nil {
		h.t.Fatal(err)
	}
	for _, p := range ps {
		if _, err := h.queue.Add(ctx, queue.Step{Kind: queue.Create, Batch: h.batch, ExternalID: p.ExternalID, N: 1, Amount: p.Amount.String(), Destination: p.Destination}); err != nil {
			h.t.Fatal(err)
		}
	}
}
