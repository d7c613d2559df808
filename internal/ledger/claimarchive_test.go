package ledger

import (
	"context"
	"fmt"
	"testing"
	"time"
)

// TestArchivedClaimsRefuseThenExpire: an archived batch's claims refuse
// the ids to another batch (Owners, Claim) until the end of the day the
// window ends, then let them go; a taken live key of an archived id is
// given back.
func TestArchivedClaimsRefuseThenExpire(t *testing.T) {
	ctx := context.Background()
	l, clk := newTestLedger(t)
	ids := []string{"A1", "A2", "A3"}
	if _, err := l.Claim(ctx, "old", ids); err != nil {
		t.Fatal(err)
	}
	window := 90 * 24 * time.Hour
	if n, err := l.ArchiveClaims(ctx, "old", ids, clk.t.Add(window), clk.t); err != nil || n != 3 {
		t.Fatalf("ArchiveClaims = %d, %v", n, err)
	}
	for _, tc := range []struct {
		after time.Duration
		owned bool
	}{
		{0, true},
		{window - time.Hour, true},
		{window, true},
		{window + 24*time.Hour + time.Second, false},
	} {
		clk.t = time.Date(2026, 11, 23, 10, 0, 0, 0, time.UTC)
		clk.add(tc.after)
		own, err := l.Owners(ctx, "new", ids)
		if err != nil {
			t.Fatal(err)
		}
		if got := len(own) == 3 && own["A2"] == "old"; got != tc.owned {
			t.Fatalf("after %v: Owners = %v, want owned %v", tc.after, own, tc.owned)
		}
		taken, owners, err := l.ClaimTaken(ctx, "new", ids)
		if err != nil {
			t.Fatal(err)
		}
		if taken[1] == tc.owned || (owners["A2"] == "old") != tc.owned {
			t.Fatalf("after %v: ClaimTaken = %v %v, want owned %v", tc.after, taken, owners, tc.owned)
		}
		if tc.owned && l.rdb.Exists(ctx, l.ownerKey("A2")).Val() != 0 {
			t.Fatalf("after %v: the live key of an archived id was kept", tc.after)
		}
	}
}

// TestArchivedClaimsGenerations: claims beyond a generation's fill go to
// a new generation with twice the buckets; every one is still found.
func TestArchivedClaimsGenerations(t *testing.T) {
	ctx := context.Background()
	l, clk := newTestLedger(t)
	n := claimsPerBucket*claimBuckets0 + 500
	var ids []string
	for i := 0; i < n; i++ {
		ids = append(ids, fmt.Sprintf("G-%06d", i))
	}
	if _, err := l.Claim(ctx, "old", ids); err != nil {
		t.Fatal(err)
	}
	if m, err := l.ArchiveClaims(ctx, "old", ids, clk.t.Add(time.Hour), clk.t); err != nil || m != n {
		t.Fatalf("ArchiveClaims = %d, %v", m, err)
	}
	gens, err := l.claimGens(ctx, claimDay(clk.t))
	if err != nil || len(gens) != 2 {
		t.Fatalf("generations %v, %v", gens, err)
	}
	own, err := l.Owners(ctx, "new", ids)
	if err != nil || len(own) != n {
		t.Fatalf("Owners found %d of %d, %v", len(own), n, err)
	}
}
