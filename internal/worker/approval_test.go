package worker

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/acme/payout/internal/ledger"
	"github.com/acme/payout/internal/ledger/keys"
	"github.com/acme/payout/internal/lifecycle"
	"github.com/acme/payout/internal/loader"
	"github.com/acme/payout/internal/money"
	"github.com/acme/payout/internal/sandbox"
	"github.com/rs/zerolog"
)

// TestNothingIsSentBeforeApproval registers a batch that awaits approval:
// no task exists, a reconciler sweep restores none, and the PSP receives
// nothing; after approval every row is created with exactly one POST, and
// the payout cancelled before approval is never sent.
func TestNothingIsSentBeforeApproval(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	h := newHarness(t, sweepingConfig(), sandbox.Config{})
	const n = 6
	if _, _, err := h.ledger.BeginBatch(ctx, ledger.Batch{ID: h.batch, File: "t.csv", LoadedAt: time.Now(), Rows: n, Total: money.MustParse("60.00"), Scale: 2, LoadedBy: "alice"}); err != nil {
		t.Fatal(err)
	}
	var ps []ledger.NewPayout
	var ids []string
	for i := 1; i <= n; i++ {
		ext := fmt.Sprintf("AP-%d", i)
		ids = append(ids, ext)
		ps = append(ps, ledger.NewPayout{Line: i + 1, ExternalID: ext, Amount: money.MustParse("10.00"), Telecom: "MTS", Destination: "telecom MTS"})
	}
	if _, err := h.ledger.Register(ctx, h.batch, ps, 2); err != nil {
		t.Fatal(err)
	}
	if err := h.ledger.Controls().HoldBatch(ctx, h.batch, "approval required"); err != nil {
		t.Fatal(err)
	}
	h.start()
	w := h.worker(h.rdb, h.ledger, sweepingConfig(), zerolog.Nop())
	rep, err := w.Sweeper().Sweep(ctx, false)
	if err != nil || len(rep.Repairs) != 0 {
		t.Fatalf("sweep of a batch awaiting approval restored %d tasks (%v)", len(rep.Repairs), err)
	}
	if got := h.sbx.Stats().CreatesReceived; got != 0 {
		t.Fatalf("the PSP received %d creates before approval", got)
	}
	if was, err := h.ledger.Cancel(ctx, h.batch, ids[0], "carol", "not this one"); err != nil || was != lifecycle.Queued {
		t.Fatalf("cancel: %s %v", was, err)
	}
	if _, err := h.ledger.Controls().Approve(ctx, h.batch, ledger.Approval{By: "bob", FourEyes: true}); err != nil {
		t.Fatal(err)
	}
	ld := loader.New(h.ledger, h.queue, nil, zerolog.Nop())
	if got, err := ld.EnqueueApproved(ctx, h.batch); err != nil || got != n-1 {
		t.Fatalf("enqueued %d (%v), want %d", got, err, n-1)
	}
	c := h.waitFinal(20 * time.Second)
	if c.Rows[lifecycle.Created] != n-1 || c.Rows[lifecycle.Cancelled] != 1 {
		t.Fatalf("counts %+v", c.Rows)
	}
	h.assertOrders(ids[0], 0, 0)
	for _, id := range ids[1:] {
		h.assertOrders(id, 1, 1)
	}
}

// TestCreateHeldWhileBatchLoading: a create task of a batch whose load has
// not completed (an older loader enqueued it, or the load died) reaches a
// running worker, which sends nothing and defers the task without using
// its retries; once the batch is loaded the payout is created with
// exactly one POST. Before, the worker sent it at once.
func TestCreateHeldWhileBatchLoading(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	cfg := fastConfig()
	cfg.PauseRetry = 100 * time.Millisecond
	h := newHarness(t, cfg, sandbox.Config{})
	ids := h.add("tel:MTS", "tel:MTS")
	if err := h.rdb.HSet(ctx, keys.Meta(h.batch), "phase", lifecycle.PhaseLoading).Err(); err != nil {
		t.Fatal(err)
	}
	h.start()
	h.waitFor("the create tasks to be deferred", 10*time.Second, func() bool {
		return strings.Contains(h.logs.String(), "create held: the batch is not loaded")
	})
	if got := h.sbx.Stats().CreatesReceived; got != 0 {
		t.Fatalf("the PSP received %d creates for a batch still loading", got)
	}
	for _, ext := range ids {
		if p := h.payout(ext); p.State != lifecycle.Queued || p.Creates != 0 {
			t.Fatalf("%s: %s after %d creates, want queued, none", ext, p.State, p.Creates)
		}
	}
	if err := h.ledger.FinishBatch(ctx, h.batch); err != nil {
		t.Fatal(err)
	}
	h.waitFinal(20 * time.Second)
	for _, ext := range ids {
		h.assertOrders(ext, 1, 1)
	}
}
