package ledger

import (
	"context"
	"testing"

	"github.com/acme/payout/internal/decide"
)

// TestCreateEpoch: each proceed takes the batch's next create epoch, per
// batch; the other decisions take none; and the rollback mark is kept
// (first finding), read and cleared with an audit entry.
func TestCreateEpoch(t *testing.T) {
	ctx := context.Background()
	l, _ := newTestLedger(t)
	seed(t, l, "a", 3)
	seed(t, l, "b", 1)
	for _, tc := range []struct {
		batch, ext string
		attempt    int
		action     decide.BeginAction
		epoch      int64
	}{
		{"a", "E1", 1, decide.Proceed, 1},
		{"a", "E2", 1, decide.Proceed, 2},
		{"b", "E1", 1, decide.Proceed, 1},
		{"a", "E1", 1, decide.CheckNow, 0}, // redelivered: no mark, no epoch
		{"a", "E3", 1, decide.Proceed, 3},
	} {
		b, err := l.BeginCreate(ctx, tc.batch, tc.ext, tc.attempt)
		if err != nil || b.Action != tc.action || b.Epoch != tc.epoch {
			t.Fatalf("%s/%s: %v epoch %d (%v), want %v epoch %d", tc.batch, tc.ext, b.Action, b.Epoch, err, tc.action, tc.epoch)
		}
	}

	if _, found, err := l.RolledBack(ctx); found || err != nil {
		t.Fatalf("a mark before any finding: %v %v", found, err)
	}
	for _, what := range []string{"first", "second"} {
		if err := l.RecordRollback(ctx, what); err != nil {
			t.Fatal(err)
		}
	}
	if what, found, err := l.RolledBack(ctx); !found || what != "first" || err != nil {
		t.Fatalf("RolledBack = %q %v %v, want the first finding", what, found, err)
	}
	if what, err := l.ClearRollback(ctx, "ops", "checked"); what != "first" || err != nil {
		t.Fatalf("ClearRollback = %q %v", what, err)
	}
	if _, found, _ := l.RolledBack(ctx); found {
		t.Fatal("the mark survived ClearRollback")
	}
}
