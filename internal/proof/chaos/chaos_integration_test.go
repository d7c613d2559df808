//go:build integration

package chaos

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/acme/payout/internal/proof/testenv"
)

// logWriter sends each line the run prints to t.Log.
type logWriter struct {
	t  *testing.T
	mu sync.Mutex
}

func (w *logWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

func needTools(t *testing.T) {
	t.Helper()
	testenv.NeedTool(t, "redis-server")
	testenv.NeedTool(t, "go")
}

// TestChaosShort is `make chaos-short`: 1,000 rows through real processes
// with workers killed, Redis restarted and the PSP token rotated, every
// order settling paid or failed and callbacks forged. Every promise must
// hold.
func TestChaosShort(t *testing.T) {
	needTools(t)
	cfg := ShortConfig()
	fig, err := Run(context.Background(), cfg, &logWriter{t: t})
	t.Logf("figures: %s", fig)
	if err != nil {
		t.Fatalf("chaos run: %v", err)
	}
	// The run must have been what it claims: every fault happened.
	checks := []struct {
		what string
		ok   bool
	}{
		{"every row counted", fig.Payouts == cfg.Rows},
		{"payouts created", fig.Created > 0},
		{"magic rows rejected", fig.Rejected > 0},
		{"ambiguous answers resolved", fig.Ambiguous > 0},
		{"workers killed", fig.WorkerKills > 0},
		{"one Redis restart", fig.RedisRestarts == 1},
		{"one token rotation", fig.TokenRotations == 1},
		{"HTTP/2 streams reset", fig.H2Resets > 0},
		{"Redis replies lost", fig.RedisReplyDrops > 0},
		{"tasks deleted in the web UI", fig.TasksDeleted > 0},
		{"lost steps restored", fig.Repaired > 0},
		{"orders paid", fig.Paid > 0},
		{"orders failed", fig.Failed > 0},
		{"every created payout has its outcome", fig.Paid+fig.Failed == fig.Created},
		{"callbacks forged", fig.ForgedCallbacks > 0},
		{"batches approved mid-run", fig.Approved > 0},
		{"payouts cancelled before approval", fig.Cancelled == cfg.Cancels},
		{"every payout final", fig.Created+fig.Rejected+fig.NeedsReview+fig.Cancelled == cfg.Rows},
	}
	for _, c := range checks {
		if !c.ok {
			t.Errorf("%s: not so in %s", c.what, fig)
		}
	}
}

// TestChaosCatchesBrokenWorker proves the suite can fail: with the worker
// built to POST again when it finds a payout in submitting, workers killed
// while the PSP holds stored orders unanswered must show as duplicates.
func TestChaosCatchesBrokenWorker(t *testing.T) {
	needTools(t)
	fig, err := Run(context.Background(), BrokenConfig(), &logWriter{t: t})
	t.Logf("figures: %s", fig)
	if errors.Is(err, ErrHarness) {
		t.Fatalf("chaos run: %v", err)
	}
	if !errors.Is(err, ErrUnsafe) || fig.Duplicates == 0 {
		t.Fatalf("the broken worker build went undetected: err %v, %s", err, fig)
	}
}

// TestChaosCatchesReplayingWorker proves the suite catches a worker whose
// HTTP transport replays a create after an HTTP/2 stream reset.
func TestChaosCatchesReplayingWorker(t *testing.T) {
	needTools(t)
	fig, err := Run(context.Background(), BrokenReplayConfig(), &logWriter{t: t})
	t.Logf("figures: %s", fig)
	if errors.Is(err, ErrHarness) {
		t.Fatalf("chaos run: %v", err)
	}
	if !errors.Is(err, ErrUnsafe) || fig.Duplicates == 0 || fig.H2Resets == 0 {
		t.Fatalf("the replaying worker build went undetected: err %v, %s", err, fig)
	}
}
