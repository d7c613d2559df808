//go:build integration

package ledger

import (
	"context"
	"testing"

	"github.com/acme/payout/internal/proof/testenv/redistest"
	"github.com/redis/go-redis/v9"
)

// TestInfoStaysCompactOnRealRedis: informational values of any length
// keep a payout's hash a listpack (values split into 64-byte fields).
func TestInfoStaysCompactOnRealRedis(t *testing.T) {
	srv := redistest.Start(t)
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr})
	t.Cleanup(func() { rdb.Close() })
	for _, k := range infoRoundTrip(t, New(rdb)) {
		if e := rdb.ObjectEncoding(context.Background(), k).Val(); e != "listpack" {
			t.Errorf("%s: %s", k, e)
		}
	}
}
