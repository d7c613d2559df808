//go:build integration

package metrics

import (
	"context"
	"strings"
	"testing"

	"github.com/acme/payout/internal/proof/testenv/redistest"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// TestCollectorReadsRedisMemory: on a real redis-server (miniredis has no
// INFO memory) the collector exports maxmemory as configured and a used
// memory above zero, and says Redis is up; with Redis gone, only
// payout_redis_up 0.
func TestCollectorReadsRedisMemory(t *testing.T) {
	srv := redistest.Start(t, "--maxmemory", "64mb")
	rdb := srv.ClientT(t)
	c := NewCollector(rdb)
	want := `
# HELP payout_redis_maxmemory_bytes Redis maxmemory (0: no limit) as this worker sees it.
# TYPE payout_redis_maxmemory_bytes gauge
payout_redis_maxmemory_bytes 6.7108864e+07
# HELP payout_redis_up 1 when this worker read Redis for this scrape, else 0.
# TYPE payout_redis_up gauge
payout_redis_up 1
`
	if err := testutil.CollectAndCompare(c, strings.NewReader(want), "payout_redis_maxmemory_bytes", "payout_redis_up"); err != nil {
		t.Error(err)
	}
	used, err := rdb.Info(context.Background(), "memory").Result()
	if err != nil {
		t.Fatal(err)
	}
	if u, _ := memory(used); u <= 0 {
		t.Errorf("used_memory %v", u)
	}
	if n := testutil.CollectAndCount(c, "payout_redis_used_memory_bytes"); n != 1 {
		t.Errorf("%d used_memory series, want 1", n)
	}
	srv.Kill()
	want = `
# HELP payout_redis_up 1 when this worker read Redis for this scrape, else 0.
# TYPE payout_redis_up gauge
payout_redis_up 0
`
	if err := testutil.CollectAndCompare(c, strings.NewReader(want), "payout_redis_up", "payout_redis_used_memory_bytes"); err != nil {
		t.Error(err)
	}
}
