//go:build integration

package ledger

import (
	"testing"

	"github.com/acme/payout/internal/proof/testenv/redistest"
	"github.com/redis/go-redis/v9"
)

// TestLuaMovesAreTheTableOnRealRedis is TestLuaMovesAreTheTable on a
// redis-server: a script's error and what it wrote before are Redis's own.
func TestLuaMovesAreTheTableOnRealRedis(t *testing.T) {
	srv := redistest.Start(t)
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr})
	t.Cleanup(func() { rdb.Close() })
	checkLuaMoves(t, rdb)
}
