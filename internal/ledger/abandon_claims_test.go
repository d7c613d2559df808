package ledger

import (
	"context"
	"testing"
	"time"

	"github.com/acme/payout/internal/lifecycle"
	"github.com/acme/payout/internal/money"
)

// A discard must keep the claim of every payout that may have been sent,
// whatever the case of its externalId: a claim is stored under the folded
// id (extid.Key), the payout under the id as written.
func TestDiscardBatchKeepsClaimsOfPayoutsPastQueued(t *testing.T) {
	ctx := context.Background()
	l, _ := newTestLedger(t)
	if _, _, err := l.BeginBatch(ctx, Batch{ID: "b", File: "f.csv", LoadedAt: time.Now(), Total: money.Zero, Scale: 2}); err != nil {
		t.Fatal(err)
	}
	ids := []string{"PO-Sent-1", "po-sent-2", "Queued-3", "never-registered-4"}
	if owners, err := l.Claims().Claim(ctx, "b", ids); err != nil || owners != nil {
		t.Fatalf("Claim = %v, %v", owners, err)
	}
	var ps []NewPayout
	for i, id := range ids[:3] {
		ps = append(ps, NewPayout{Line: i + 2, ExternalID: id, Amount: money.MustParse("1"), Destination: "telecom MTS", Telecom: "MTS"})
	}
	if _, err := l.Register(ctx, "b", ps, 2); err != nil {
		t.Fatal(err)
	}
	// The first two are past queued (as if a worker had sent them).
	for _, id := range ids[:2] {
		if err := l.rdb.HSet(ctx, payoutKey("b", id), "state", string(lifecycle.Created)).Err(); err != nil {
			t.Fatal(err)
		}
	}
	res, err := l.DiscardBatch(ctx, "b", "rev", "test")
	if err != nil {
		t.Fatal(err)
	}
	own, err := l.Claims().Owners(ctx, "other", ids)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		id   string
		kept bool
	}{{"PO-Sent-1", true}, {"po-sent-2", true}, {"Queued-3", false}, {"never-registered-4", false}} {
		if got := own[tc.id] == "b"; got != tc.kept {
			t.Errorf("claim of %s kept = %v, want %v (owners %v)", tc.id, got, tc.kept, own)
		}
	}
	if res.Released != 2 || res.Cancelled != 1 {
		t.Errorf("DiscardBatch = %+v, want 1 cancelled (lifecycle.Queued-3) and 2 released", res)
	}
}
