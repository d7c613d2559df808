//go:build integration

package ledger

import (
	"context"
	"strconv"
	"strings"
	"testing"

	"github.com/acme/payout/internal/decide"
	"github.com/acme/payout/internal/lifecycle"
	"github.com/acme/payout/internal/proof/testenv/redistest"
	"github.com/redis/go-redis/v9"
)

// BenchmarkTransitionOnRedis runs a create's two transitions (BeginCreate,
// FinishCreate to created) on a real redis-server and reports the Redis
// time a payout costs (redis-us/payout, from INFO commandstats): the
// figure `make bench` compares with a bare handler's, here without Asynq
// and the PSP around it.
func BenchmarkTransitionOnRedis(b *testing.B) {
	l := seededOnRedis(b)
	b.ReportAllocs()
	b.ResetTimer()
	runCreates(b, l)
	reportScriptTime(b, l, "redis-us/payout")
}

// seededOnRedis starts a private redis-server for b with payouts
// E0..E(b.N-1) of batch b loaded (seedLoaded), and resets its command
// statistics.
func seededOnRedis(b *testing.B) *Ledger {
	b.Helper()
	rdb := redis.NewClient(&redis.Options{Addr: redistest.Start(b).Addr})
	b.Cleanup(func() { rdb.Close() })
	l := New(rdb)
	seedLoaded(b, l, b.N)
	if err := rdb.ConfigResetStat(context.Background()).Err(); err != nil {
		b.Fatal(err)
	}
	return l
}

// reportScriptTime stops b's timer and reports the Redis time of its
// scripts per iteration as unit.
func reportScriptTime(b *testing.B, l *Ledger, unit string) {
	b.Helper()
	b.StopTimer()
	info, err := l.rdb.Info(context.Background(), "commandstats").Result()
	if err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(scriptUsec(info))/float64(b.N), unit)
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

// BenchmarkBeginCreateParts splits the Redis time of a begin-create
// (redis-us/call, from INFO commandstats) into its parts, each run as a
// script of its own on the same keys and arguments: an empty script (what
// any EVALSHA with these keys and arguments costs), the preludes every
// transition script starts with (the machine's constants, luaMove's and
// luaReplay's functions), then those and the one HMGET that reads the
// payout with its replay memo (fetch), then the whole script (queued to
// submitting: its HGET of the batch's phase, TIME, HSET, and move's
// counters, index per state and audit entry). bench/README.md quotes it.
func BenchmarkBeginCreateParts(b *testing.B) {
	preludes := luaMachine(lifecycle.RoleWorker) + luaMove + luaReplay
	fetchOnly := preludes + "\nlocal first, h = fetch(KEYS[1], 'state', 'creates', 'units', 'seq', 'amount', 'dest', 'sealed', 'tel', 'extra', 'tries')\nreturn {'x'}"
	for _, part := range []struct {
		name   string
		script *redis.Script
	}{
		{"empty", redis.NewScript("return {'x'}")},
		{"preludes", redis.NewScript(preludes + "\nreturn {'x'}")},
		{"fetch", redis.NewScript(fetchOnly)},
		{"begin", beginCreateScript},
	} {
		b.Run(part.name, func(b *testing.B) {
			l := seededOnRedis(b)
			ctx := context.Background()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				ext := "E" + strconv.Itoa(i)
				res, err := l.transitionKeys(ctx, part.script, beginKeys("b", ext), beginArgs{Attempt: 1, Note: interruptedNote}).StringSlice()
				if err != nil || len(res) == 0 || part.name == "begin" && res[0] != string(decide.Proceed) {
					b.Fatalf("%s of %s: %q %v", part.name, ext, res, err)
				}
			}
			reportScriptTime(b, l, "redis-us/call")
		})
	}
}
