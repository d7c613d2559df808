//go:build integration

package ledger

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/acme/payout/internal/ledger/keys"
	"github.com/acme/payout/internal/money"
	"github.com/acme/payout/internal/proof/testenv/redistest"
	"github.com/acme/payout/internal/vault"
	"github.com/redis/go-redis/v9"
)

// TestCompactEncodingsOnRealRedis: on a redis-server with its default
// encoding limits, a payout with a sealed 19-digit card, a line chunk and
// the buckets of archived claims are listpacks, archived claims cost at
// most 64 bytes each, and claims archived with a window already over are
// gone at once.
func TestCompactEncodingsOnRealRedis(t *testing.T) {
	ctx := context.Background()
	srv := redistest.Start(t)
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr})
	t.Cleanup(func() { rdb.Close() })
	l := New(rdb)
	ring := vault.Ephemeral()

	const n = claimsPerBucket*claimBuckets0 + 3000 // two generations
	ids := make([]string, n)
	ps := make([]NewPayout, 0, 200)
	for i := range ids {
		ids[i] = fmt.Sprintf("PAYOUT-2026-%08d", i)
		if i < 200 {
			sealed, err := ring.Seal("4111111111111111234", SealAD("b", ids[i]))
			if err != nil {
				t.Fatal(err)
			}
			ps = append(ps, NewPayout{Line: i + 2, ExternalID: ids[i], Amount: money.MustParse("1234.56"),
				Destination: "card 411111*********1234", Sealed: sealed})
		}
	}
	if _, err := l.Register(ctx, "b", ps, 2); err != nil {
		t.Fatal(err)
	}
	encoding := func(k string) string { return rdb.ObjectEncoding(ctx, k).Val() }
	if e := encoding(payoutKey("b", ids[0])); e != "listpack" {
		t.Fatalf("payout hash with a sealed card: %s", e)
	}
	if p, err := l.Get(ctx, "b", ids[0]); err != nil || p.Sealed == "" {
		t.Fatal(p, err)
	} else if pan, err := ring.Open(p.Sealed, SealAD("b", ids[0])); err != nil || pan != "4111111111111111234" {
		t.Fatalf("open: %q %v", pan, err)
	}
	if e := encoding(lineChunkKey("b", 0)); e != "listpack" {
		t.Fatalf("line chunk: %s", e)
	}

	if _, err := l.Claims().Claim(ctx, "old", ids); err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	if m, err := l.Claims().ArchiveClaims(ctx, "old", ids, now.Add(90*24*time.Hour), now); err != nil || m != n {
		t.Fatalf("ArchiveClaims = %d, %v", m, err)
	}
	var bytes int64
	buckets := 0
	iter := rdb.Scan(ctx, 0, keys.ArchivedClaimsPattern(), 1000).Iterator()
	for iter.Next(ctx) {
		k := iter.Val()
		bytes += rdb.MemoryUsage(ctx, k, 0).Val()
		if k == claimGensKey() {
			continue
		}
		buckets++
		if e := encoding(k); e != "listpack" {
			t.Fatalf("bucket %s: %s", k, e)
		}
	}
	if per := float64(bytes) / n; per > 64 {
		t.Fatalf("%d archived claims in %d buckets: %.1f bytes each, want <= 64", n, buckets, per)
	} else {
		t.Logf("%d archived claims in %d buckets: %.1f bytes each (MEMORY USAGE)", n, buckets, per)
	}
	own, err := l.Claims().Owners(ctx, "new", ids)
	if err != nil || len(own) != n {
		t.Fatalf("Owners found %d of %d: %v", len(own), n, err)
	}

	// A window that ended yesterday: the buckets go at once.
	if _, err := l.Claims().Claim(ctx, "older", []string{"GONE-1"}); err != nil {
		t.Fatal(err)
	}
	past := now.Add(-100 * 24 * time.Hour)
	if _, err := l.Claims().ArchiveClaims(ctx, "older", []string{"GONE-1"}, past.Add(90*24*time.Hour), past); err != nil {
		t.Fatal(err)
	}
	if own, err := l.Claims().Owners(ctx, "new", []string{"GONE-1"}); err != nil || len(own) != 0 {
		t.Fatalf("expired claim still owns: %v %v", own, err)
	}
	if taken, _, err := l.Claims().ClaimTaken(ctx, "new", []string{"GONE-1", ids[5]}); err != nil || !taken[0] || taken[1] {
		t.Fatalf("ClaimTaken = %v, %v", taken, err)
	}
}
