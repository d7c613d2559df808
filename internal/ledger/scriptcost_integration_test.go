//go:build integration

package ledger

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/acme/payout/internal/money"
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
	if _, _, err := l.BeginBatch(ctx, Batch{ID: "b", File: "f.csv", LoadedAt: time.Now(), Rows: int64(b.N), Total: money.MustParse("1"), Scale: 2}); err != nil {
		b.Fatal(err)
	}
	ps := make([]NewPayout, b.N)
	for i := range ps {
		ps[i] = NewPayout{Line: i + 2, ExternalID: fmt.Sprintf("E%d", i), Amount: money.MustParse("1.00"), Destination: "411111******1111", Sealed: "v1:0123456789abcdef0123456789abcdef0123456789abcdef"}
	}
	for i := 0; i < len(ps); i += 1000 {
		if _, err := l.Register(ctx, "b", ps[i:min(i+1000, len(ps))], 2); err != nil {
			b.Fatal(err)
		}
	}
	if err := l.FinishBatch(ctx, "b"); err != nil {
		b.Fatal(err)
	}
	if err := rdb.ConfigResetStat(ctx).Err(); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		ext := fmt.Sprintf("E%d", i)
		if _, err := l.BeginCreate(ctx, "b", ext, 1); err != nil {
			b.Fatal(err)
		}
		if _, err := l.FinishCreate(ctx, "b", ext, 1, CreateResult{To: Created, OrderID: "ord-" + ext, PSPStatus: "CREATED", HTTPStatus: 201}); err != nil {
			b.Fatal(err)
		}
	}
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
