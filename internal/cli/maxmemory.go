package cli

import (
	"context"
	"strconv"

	"github.com/redis/go-redis/v9"
	"github.com/rs/zerolog"
)

// maxMemoryAdvice says what a worker logs at start of Redis's maxmemory as
// CONFIG GET answered it (err: its refusal): a warning when it is 0 (no
// limit), since the alerts PayoutRedisMemoryHigh and -Critical divide by
// it and can then never fire; nothing when it is set or cannot be read (a
// managed Redis that refuses CONFIG has its own limit and alerts).
func maxMemoryAdvice(got map[string]string, err error) (zerolog.Level, string) {
	if err != nil {
		return zerolog.NoLevel, ""
	}
	n, perr := strconv.ParseInt(got["maxmemory"], 10, 64)
	if perr != nil || n != 0 {
		return zerolog.NoLevel, ""
	}
	return zerolog.WarnLevel, "redis maxmemory is 0 (no limit): the alerts PayoutRedisMemoryHigh and PayoutRedisMemoryCritical can never fire, and Redis grows until the host runs out of memory; set maxmemory (docs/operations.md, \"Sizing Redis\") with CONFIG SET maxmemory and in redis.conf"
}

// checkMaxMemory logs maxMemoryAdvice once; it never fails and changes nothing.
func checkMaxMemory(ctx context.Context, rdb redis.UniversalClient, log zerolog.Logger) {
	got, err := rdb.ConfigGet(ctx, "maxmemory").Result()
	if lvl, msg := maxMemoryAdvice(got, err); lvl != zerolog.NoLevel {
		log.WithLevel(lvl).Str("maxmemory", got["maxmemory"]).Msg(msg)
	}
}
