package ledger

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/acme/payout/internal/decide"
	"github.com/acme/payout/internal/lifecycle"
	"github.com/acme/payout/internal/money"
)

// A loader whose lease expired while payout discard abandoned its batch
// writes nothing when it wakes: no row, no figures, and the batch is not
// finished to loaded (its payouts would be sent).
func TestLoadStepsAfterDiscardAreFenced(t *testing.T) {
	ctx := context.Background()
	l, clk := newTestLedger(t)
	if _, _, err := l.BeginBatch(ctx, Batch{ID: "b", File: "f.csv", LoadedAt: time.Now(), Total: money.Zero, Scale: 2}); err != nil {
		t.Fatal(err)
	}
	p := func(id string, line int) []NewPayout {
		return []NewPayout{{Line: line, ExternalID: id, Amount: money.MustParse("1"), Destination: "telecom MTS", Telecom: "MTS"}}
	}
	const owner = "loader-1"
	if ok, err := l.Locks().LockLoad(ctx, "b", owner, 20*time.Second); err != nil || !ok {
		t.Fatalf("LockLoad = %v, %v", ok, err)
	}
	if _, err := l.RegisterLocked(ctx, "b", owner, p("e1", 2), 2); err != nil {
		t.Fatal(err)
	}
	clk.m.FastForward(21 * time.Second) // the loader stalls past its lease
	if _, err := l.DiscardBatch(ctx, "b", "rev", "abandon"); err != nil {
		t.Fatal(err)
	}
	check := func(stage string, wantErr error) {
		t.Helper()
		if n, err := l.RegisterLocked(ctx, "b", owner, p("e2", 3), 2); !errors.Is(err, wantErr) || n != 0 {
			t.Errorf("%s: RegisterLocked = %d, %v; want %v", stage, n, err, wantErr)
		}
		if err := l.SetBatchFigures(ctx, "b", owner, Figures{Rows: 2, Total: money.MustParse("2")}); !errors.Is(err, wantErr) {
			t.Errorf("%s: SetBatchFigures = %v; want %v", stage, err, wantErr)
		}
		if err := l.FinishLoad(ctx, "b", owner); !errors.Is(err, wantErr) {
			t.Errorf("%s: FinishLoad = %v; want %v", stage, err, wantErr)
		}
	}
	// The loader wakes: its lock is gone.
	check("lock lost", ErrLoadLockLost)
	// Even holding the lock again, the batch is discarded.
	if ok, err := l.Locks().LockLoad(ctx, "b", owner, 20*time.Second); err != nil || !ok {
		t.Fatalf("LockLoad = %v, %v", ok, err)
	}
	check("discarded", errNotLoading)
	if err := l.FinishBatch(ctx, "b"); !errors.Is(err, errNotLoading) {
		t.Errorf("FinishBatch of a discarded batch = %v, want errNotLoading", err)
	}
	b, err := l.Batch(ctx, "b")
	if err != nil {
		t.Fatal(err)
	}
	if b.Phase != lifecycle.PhaseDiscarded || b.Rows != 0 {
		t.Errorf("batch after the stale loader's steps: phase %s, rows %d; want discarded, 0", b.Phase, b.Rows)
	}
	if _, err := l.Get(ctx, "b", "e2"); !errors.Is(err, ErrNotFound) {
		t.Errorf("e2 registered after the discard: %v", err)
	}
	if bg, err := l.BeginCreate(ctx, "b", "e1", 1); err != nil || bg.Action == decide.Proceed {
		t.Errorf("BeginCreate e1 of a discarded batch = %s, %v", bg.Action, err)
	}
}

// The fenced steps work for the lock's owner on a loading batch, and a
// resumed batch keeps its scale.
func TestLoadStepsForTheOwner(t *testing.T) {
	ctx := context.Background()
	l, _ := newTestLedger(t)
	if _, _, err := l.BeginBatch(ctx, Batch{ID: "b", File: "f.csv", LoadedAt: time.Now(), Total: money.Zero, Scale: 3,
		Reading: "scale=3\n", Policy: "required=true"}); err != nil {
		t.Fatal(err)
	}
	const owner = "loader-1"
	if ok, err := l.Locks().LockLoad(ctx, "b", owner, 20*time.Second); err != nil || !ok {
		t.Fatalf("LockLoad = %v, %v", ok, err)
	}
	if err := l.SetBatchFigures(ctx, "b", owner, Figures{Rows: 1, Total: money.MustParse("1.5"), Hold: "approval required"}); err != nil {
		t.Fatal(err)
	}
	if n, err := l.RegisterLocked(ctx, "b", owner, []NewPayout{{Line: 2, ExternalID: "e1", Amount: money.MustParse("1.5"), Destination: "telecom MTS", Telecom: "MTS"}}, 3); err != nil || n != 1 {
		t.Fatalf("RegisterLocked = %d, %v", n, err)
	}
	b, err := l.Batch(ctx, "b")
	if err != nil {
		t.Fatal(err)
	}
	if b.Scale != 3 || !b.Decided || b.HoldReason != "approval required" || b.Reserved || b.Reading != "scale=3\n" || b.Policy != "required=true" {
		t.Errorf("batch = %+v", b)
	}
	if err := l.FinishLoad(ctx, "b", "someone-else"); !errors.Is(err, ErrLoadLockLost) {
		t.Errorf("FinishLoad by another owner = %v, want ErrLoadLockLost", err)
	}
	if err := l.FinishLoad(ctx, "b", owner); err != nil {
		t.Fatal(err)
	}
	if b, _ := l.Batch(ctx, "b"); b.Phase != lifecycle.PhaseLoaded || !b.TasksPending {
		t.Errorf("after FinishLoad: %+v", b)
	}
}
