//go:build integration

package ledger

import (
	"testing"
	"time"

	"github.com/acme/payout/internal/proof/testenv/redistest"
	"github.com/redis/go-redis/v9"
)

// TestLookalikeClaimsOnRealRedis runs the look-alike claim scenario on a
// redis-server: live claims, archived ones within and past the id window,
// legacy claims under the id as written.
func TestLookalikeClaimsOnRealRedis(t *testing.T) {
	srv := redistest.Start(t)
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr})
	t.Cleanup(func() { rdb.Close() })
	lookalikeClaims(t, New(rdb), rdb, time.Now())
}
