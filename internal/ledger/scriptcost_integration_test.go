//go:build integration

package ledger

import (
	"context"
	"strconv"
	"strings"
	"testing"

	"github.com/acme/payout/internal/testenv/redistest"
	"github.com/redis/go-redis/v9"
)

// BenchmarkTransitionOnRedis runs a create's two transitions (BeginCreate,
// FinishCreate to created) on a real redis-server and reports the Redis
// time a payout costs (redis-us/payout, from INFO commandstats): the
// figure `make bench` compares with a bare handler's, here without Asynq
// and the PSP around it.
func BenchmarkTransitionOnRedis(b *testing.B) {
	rdb := redis.NewClient(&redis.Options{Addr: redistest.Start(b).Addr})
	defer rdb.Close()
	l := New(rdb)
	ctx := context.Background()
	seedLoaded(b, l, b.N)
	if err := rdb.ConfigResetStat(ctx).Err(); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	runCreates(b, l)
	b.StopTimer()
	info, err := rdb.Info(ctx, "commandstats").Result()
	if err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(scriptUsec(info))/float64(b.N), "redis-us/payout")
}

// scriptUsec is the time Redis spent in EVALSHA and EVAL, from an INFO
// commandstats answer (cmdstat_evalsha:calls=N,usec=U,...): the scripts'
// own commands included.
func scriptUsec(info string) int64 {
	var total int64
	for _, line := range strings.Split(info, "\n") {
		name, rest, ok := strings.Cut(strings.TrimSpace(line), ":")
		if !ok || (name != "cmdstat_evalsha" && name != "cmdstat_eval") {
			continue
		}
		for _, kv := range strings.Split(rest, ",") {
			if v, ok := strings.CutPrefix(kv, "usec="); ok {
				n, _ := strconv.ParseInt(v, 10, 64)
				total += n
			}
		}
	}
	return total
}
