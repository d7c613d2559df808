package ledger

import (
	"context"
	"testing"
	"time"

	"github.com/acme/payout/internal/ledger/keys"
	"github.com/acme/payout/internal/money"
	"github.com/redis/go-redis/v9"
)

// lookalikeClaims runs the claim scenario of look-alike externalIds (issue
// 26 item 3) on l, whose Redis is rdb and clock now: a second spelling of
// an id (case, Unicode form) is owned by the first's batch, live and
// archived, and claims written before ids were folded (under the id as
// written) still refuse the id as written and move under the key when
// archived.
func lookalikeClaims(t *testing.T, l *Ledger, rdb redis.UniversalClient, now time.Time) {
	t.Helper()
	ctx := context.Background()
	const nfc, nfd = "PO-caf\u00e9-2", "PO-cafe\u0301-2"

	// Live: b1 claims, b2's look-alikes are b1's.
	if owners, err := l.Claims().Claim(ctx, "b1", []string{"PO-Case-3", nfc}); err != nil || owners != nil {
		t.Fatalf("b1 Claim = %v, %v", owners, err)
	}
	taken, owners, err := l.Claims().ClaimTaken(ctx, "b2", []string{"po-case-3", nfd, "PO-CASE-3", "PO-other"})
	if err != nil {
		t.Fatal(err)
	}
	if taken[0] || taken[1] || taken[2] || !taken[3] || owners["po-case-3"] != "b1" || owners[nfd] != "b1" || owners["PO-CASE-3"] != "b1" || len(owners) != 3 {
		t.Fatalf("b2 ClaimTaken = %v, %v; want the look-alikes owned by b1", taken, owners)
	}
	if own, err := l.Claims().Owners(ctx, "b3", []string{"PO-CASE-3", nfd, "po-other"}); err != nil || own["PO-CASE-3"] != "b1" || own[nfd] != "b1" || own["po-other"] != "b2" {
		t.Fatalf("Owners = %v, %v", own, err)
	}

	// Archived: the claims of b1 leave their live keys and still refuse
	// the look-alikes; a live key b3 takes meanwhile is given back.
	if n, err := l.Claims().ArchiveClaims(ctx, "b1", []string{"PO-Case-3", nfc}, now.Add(24*time.Hour), now); err != nil || n != 2 {
		t.Fatalf("ArchiveClaims = %d, %v", n, err)
	}
	if rdb.Exists(ctx, keys.OwnerOf("PO-Case-3"), keys.OwnerOf(nfc)).Val() != 0 {
		t.Fatal("archived claims kept their live keys")
	}
	taken, owners, err = l.Claims().ClaimTaken(ctx, "b3", []string{"po-CASE-3", nfd})
	if err != nil || taken[0] || taken[1] || owners["po-CASE-3"] != "b1" || owners[nfd] != "b1" {
		t.Fatalf("b3 ClaimTaken after archiving = %v, %v, %v", taken, owners, err)
	}
	if rdb.Exists(ctx, keys.OwnerOf("po-case-3")).Val() != 0 {
		t.Fatal("the live key taken for an archived id was not given back")
	}

	// A legacy live claim (the id as written, before folding) refuses the
	// id as written; its batch releases it; archiving moves it under the
	// key, where a look-alike meets it.
	if err := rdb.Set(ctx, ownerKey("PO-Legacy-1"), "old", 0).Err(); err != nil {
		t.Fatal(err)
	}
	taken, owners, err = l.Claims().ClaimTaken(ctx, "b4", []string{"PO-Legacy-1"})
	if err != nil || taken[0] || owners["PO-Legacy-1"] != "old" {
		t.Fatalf("ClaimTaken of a legacy-claimed id = %v, %v, %v", taken, owners, err)
	}
	if rdb.Exists(ctx, keys.OwnerOf("PO-Legacy-1")).Val() != 0 {
		t.Fatal("the key taken for a legacy-claimed id was not given back")
	}
	if own, err := l.Claims().Owners(ctx, "b4", []string{"PO-Legacy-1"}); err != nil || own["PO-Legacy-1"] != "old" {
		t.Fatalf("Owners of a legacy-claimed id = %v, %v", own, err)
	}
	if n, err := l.Claims().ArchiveClaims(ctx, "old", []string{"PO-Legacy-1"}, now.Add(24*time.Hour), now); err != nil || n != 1 {
		t.Fatalf("ArchiveClaims of a legacy claim = %d, %v", n, err)
	}
	if rdb.Exists(ctx, ownerKey("PO-Legacy-1")).Val() != 0 {
		t.Fatal("archiving kept the legacy live key")
	}
	if own, err := l.Claims().Owners(ctx, "b4", []string{"po-legacy-1"}); err != nil || own["po-legacy-1"] != "old" {
		t.Fatalf("a look-alike of an archived legacy claim: Owners = %v, %v", own, err)
	}
	if err := rdb.Set(ctx, ownerKey("PO-Legacy-2"), "old", 0).Err(); err != nil {
		t.Fatal(err)
	}
	if err := l.Claims().release(ctx, "old", []string{"PO-Legacy-2"}); err != nil || rdb.Exists(ctx, ownerKey("PO-Legacy-2")).Val() != 0 {
		t.Fatalf("Release of a legacy claim: %v", err)
	}

	// A legacy archived claim (field and bucket of the id as written).
	day := rdb.HGet(ctx, claimBucketKey(0, "po-case-3"), "po-case-3").Val()
	if day == "" {
		t.Fatal("no archived claim under the key po-case-3")
	}
	if err := rdb.HSet(ctx, claimBucketKey(0, "PO-Old-9"), "PO-Old-9", "old9"+day[len("b1"):]).Err(); err != nil {
		t.Fatal(err)
	}
	if own, err := l.Claims().Owners(ctx, "b5", []string{"PO-Old-9"}); err != nil || own["PO-Old-9"] != "old9" {
		t.Fatalf("Owners of a legacy archived id = %v, %v", own, err)
	}

	// Claims archived with their window over: the look-alikes are free.
	if _, err := l.Claims().Claim(ctx, "gone", []string{"PO-Gone-1"}); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Claims().ArchiveClaims(ctx, "gone", []string{"PO-Gone-1"}, now.Add(-48*time.Hour), now); err != nil {
		t.Fatal(err)
	}
	if taken, owners, err := l.Claims().ClaimTaken(ctx, "b6", []string{"po-gone-1"}); err != nil || !taken[0] || owners != nil {
		t.Fatalf("a look-alike after the window: ClaimTaken = %v, %v, %v", taken, owners, err)
	}
}

func TestLookalikeClaims(t *testing.T) {
	l, clk := newTestLedger(t)
	lookalikeClaims(t, l, l.rdb, clk.t)
}

// TestReleaseUnregisteredSpellings: the claim two spellings of one id
// share is not released while the batch has a payout under either.
func TestReleaseUnregisteredSpellings(t *testing.T) {
	ctx := context.Background()
	l, _ := newTestLedger(t)
	seed(t, l, "b", 0)
	claimed(t, l, "b", "PO-Case-3", "PO-Free-1")
	if _, err := l.Register(ctx, "b", []NewPayout{{Line: 2, ExternalID: "PO-Case-3", Amount: money.MustParse("1"), Destination: "telecom MTS", Telecom: "MTS"}}, 2); err != nil {
		t.Fatal(err)
	}
	n, err := l.Claims().ReleaseUnregistered(ctx, "b", []string{"po-case-3", "PO-Case-3", "po-free-1", "PO-FREE-1"})
	if err != nil || n != 1 {
		t.Fatalf("ReleaseUnregistered = %d, %v; want 1 (PO-Free-1's claim)", n, err)
	}
	if own, err := l.Claims().Owners(ctx, "other", []string{"po-case-3", "PO-Free-1"}); err != nil || own["po-case-3"] != "b" || own["PO-Free-1"] != "" {
		t.Fatalf("Owners = %v, %v", own, err)
	}
}
