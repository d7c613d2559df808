//go:build integration

package worker

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/acme/payout/internal/ledger"
	"github.com/acme/payout/internal/lifecycle"
	"github.com/acme/payout/internal/money"
	"github.com/acme/payout/internal/sandbox"
	"github.com/acme/payout/internal/schedule"
)

// addScheduled registers n telecom payouts scheduled for at, as the
// loader does with --release-at: registered, moved to scheduled, the
// batch in the due index, then loaded, and no task.
func (h *harness) addScheduled(n int, at time.Time) []string {
	h.t.Helper()
	ctx := context.Background()
	if _, _, err := h.ledger.BeginBatch(ctx, ledger.Batch{ID: h.batch, File: "t.csv", LoadedAt: time.Now(), Rows: int64(n), Total: money.Zero, Scale: 2}); err != nil {
		h.t.Fatal(err)
	}
	var ids []string
	var ps []ledger.NewPayout
	var due []ledger.Scheduled
	for i := range n {
		ext := fmt.Sprintf("PO-%d", h.added+i+1)
		ids = append(ids, ext)
		ps = append(ps, ledger.NewPayout{Line: i + 2, ExternalID: ext, Amount: money.MustParse("10.50"), Telecom: "MTS", Destination: "telecom MTS"})
		due = append(due, ledger.Scheduled{ExternalID: ext, At: at})
	}
	h.added += n
	if _, err := h.ledger.Register(ctx, h.batch, ps, 2); err != nil {
		h.t.Fatal(err)
	}
	if _, err := h.ledger.Schedule().PutLocked(ctx, h.batch, "", due); err != nil {
		h.t.Fatal(err)
	}
	if err := h.ledger.Schedule().Index(ctx, h.batch); err != nil {
		h.t.Fatal(err)
	}
	if err := h.ledger.FinishBatch(ctx, h.batch); err != nil {
		h.t.Fatal(err)
	}
	return ids
}

// TestScheduledReleaseAcrossARestart: a batch released at a set time
// sends nothing before it, through a worker restart, and everything after
// it, each payout once; a scheduled payout cancelled before its time is
// never sent. Time is Redis's clock (the one the release is decided by),
// a few seconds ahead, polled with a deadline.
func TestScheduledReleaseAcrossARestart(t *testing.T) {
	cfg := fastConfig()
	cfg.Release = schedule.Config{Interval: 100 * time.Millisecond}
	h := newHarness(t, cfg, sandbox.Config{})
	ctx := context.Background()
	now, err := h.ledger.Time(ctx)
	if err != nil {
		t.Fatal(err)
	}
	at := now.Add(4 * time.Second)
	ids := h.addScheduled(6, at)
	cancelled := ids[2]
	if was, err := h.ledger.Cancel(ctx, h.batch, cancelled, "carol", "duplicate of another row"); err != nil || was != lifecycle.Scheduled {
		t.Fatalf("cancel = %s, %v", was, err)
	}
	h.start()
	restarted := false
	for {
		t0, err := h.ledger.Time(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if !t0.Before(at.Add(-150 * time.Millisecond)) {
			break
		}
		if n := len(h.sbx.Stats().CreatesByExternalID); n != 0 {
			t.Fatalf("%s before the release time %s: the PSP received creates for %d payouts", t0, at, n)
		}
		for _, ext := range ids {
			if p := h.payout(ext); p.State != lifecycle.Scheduled && ext != cancelled {
				t.Fatalf("%s is %s before its release time", ext, p.State)
			}
		}
		if !restarted && at.Sub(t0) < 2*time.Second {
			h.stop() // the worker goes away before the release time, another comes
			h.start()
			restarted = true
		}
		time.Sleep(50 * time.Millisecond)
	}
	if !restarted {
		t.Fatal("the worker was not restarted before the release time")
	}
	h.waitFinal(30 * time.Second)
	for _, ext := range ids {
		p := h.payout(ext)
		if ext == cancelled {
			if p.State != lifecycle.Cancelled {
				t.Errorf("%s: %s, want cancelled", ext, p.State)
			}
			h.assertOrders(ext, 0, 0)
			continue
		}
		if p.State != lifecycle.Created && p.State != lifecycle.Paid {
			t.Errorf("%s: %s (%s), want created", ext, p.State, p.Error)
		}
		if !p.ReleaseAt.Equal(time.UnixMilli(at.UnixMilli()).UTC()) {
			t.Errorf("%s: release time %s, want %s", ext, p.ReleaseAt, at)
		}
		h.assertOrders(ext, 1, 1)
	}
	// Nothing is left for the releaser, and a pass after sends nothing more.
	due, err := h.ledger.Schedule().DueBatches(ctx, at.Add(time.Hour), 10)
	if err != nil || len(due) != 0 {
		t.Fatalf("due index after the release: %v, %v", due, err)
	}
}
