package cli

import (
	"context"
	"testing"

	"github.com/acme/payout/internal/ledger"
	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
)

// TestRecordedDataKey: none until a loader records one, then the last one.
func TestRecordedDataKey(t *testing.T) {
	ctx := context.Background()
	m := miniredis.RunT(t)
	rdb := redis.NewClient(&redis.Options{Addr: m.Addr()})
	t.Cleanup(func() { rdb.Close() })
	l := ledger.New(rdb).As("loader:1")
	if _, found, err := readDataKeyRecord(ctx, rdb); found || err != nil {
		t.Fatalf("found %v, %v before any record", found, err)
	}
	for _, fp := range []string{"fp1", "fp2"} {
		if err := writeDataKeyRecord(ctx, l, "id-"+fp, fp); err != nil {
			t.Fatal(err)
		}
	}
	k, found, err := readDataKeyRecord(ctx, rdb)
	if !found || err != nil || k.Fingerprint != "fp2" || k.ID != "id-fp2" || k.At.IsZero() || k.By != "loader:1" {
		t.Fatalf("%+v, %v, %v", k, found, err)
	}
}
