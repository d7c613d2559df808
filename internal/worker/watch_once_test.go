package worker

import (
	"context"
	"testing"
	"time"

	"github.com/acme/payout/internal/lifecycle"
	"github.com/acme/payout/internal/sandbox"
	"github.com/acme/payout/jobs"
	"github.com/hibiken/asynq"
	"github.com/rs/zerolog"
)

// TestAWatchCheckIsAskedOnce: a sweep may read a due watch check before
// the task of that check records it, and enqueue the same task ID again
// once the first is done (watch tasks are not retained). The second task
// asks the PSP nothing and records nothing; a callback's check (no due
// time) still runs.
func TestAWatchCheckIsAskedOnce(t *testing.T) {
	t.Parallel()
	cfg := watchingConfig(time.Hour, 2*time.Hour)
	cfg.WatchSweep = -1 // the test is the sweep
	h := newHarness(t, cfg, sandbox.Config{SettleAfter: 100 * time.Millisecond})
	ext := h.addReconciled("10.00")[0]
	h.start()
	h.waitFor("paid and watched", 15*time.Second, func() bool {
		p := h.payout(ext)
		return p.State == lifecycle.Paid && p.Watch.On
	})
	h.stop()
	w := h.worker(h.rdb, h.ledger, h.cfg, zerolog.Nop())
	ctx := context.Background()
	before := h.payout(ext).Watch
	check := func(dueMS int64) {
		t.Helper()
		jt, err := jobs.NewWatchTask(jobs.WatchPayload{Batch: h.batch, ExternalID: ext, DueMS: dueMS}, before.Due.Unix())
		if err != nil {
			t.Fatal(err)
		}
		if err := w.HandleWatch(ctx, asynq.NewTask(jt.Type, jt.Payload)); err != nil {
			t.Fatal(err)
		}
	}
	queries := func() int { return h.sbx.Stats().StatusQueries }

	q0 := queries()
	check(before.Due.UnixMilli())
	after := h.payout(ext).Watch
	if queries() != q0+1 || after.Seq != before.Seq+1 || !after.Due.After(before.Due) {
		t.Fatalf("the sweep's check: %d status queries (want 1), watch %+v -> %+v", queries()-q0, before, after)
	}
	check(before.Due.UnixMilli()) // the same check, enqueued again by a sweep that read it early
	if again := h.payout(ext).Watch; queries() != q0+1 || again != after {
		t.Fatalf("the same check again: %d status queries (want 1 in all), watch %+v -> %+v", queries()-q0, after, again)
	}
	check(0) // a callback's check
	if cb := h.payout(ext).Watch; queries() != q0+2 || cb.Seq != after.Seq+1 {
		t.Fatalf("a callback's check: %d status queries (want 2 in all), watch %+v -> %+v", queries()-q0, after, cb)
	}
}
