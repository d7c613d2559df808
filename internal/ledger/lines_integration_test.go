//go:build integration

package ledger

import (
	"testing"

	"github.com/acme/payout/internal/proof/testenv/redistest"
	"github.com/redis/go-redis/v9"
)

// TestLineIndexMadeOneOnRealRedis is TestLineIndexMadeOne on a
// redis-server: ZRANGE's order of equal scores, the paging and MULTI/EXEC
// are Redis's own, not miniredis's.
func TestLineIndexMadeOneOnRealRedis(t *testing.T) {
	srv := redistest.Start(t)
	db := 0
	checkLineIndexMadeOne(t, func(t *testing.T) *Ledger {
		db++ // each case a database of its own on one server
		rdb := redis.NewClient(&redis.Options{Addr: srv.Addr, DB: db})
		t.Cleanup(func() { rdb.Close() })
		return New(rdb)
	})
}
