package worker

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/acme/payout/internal/ledger/keys"
	"github.com/redis/go-redis/v9"
)

// reportAuthFaultScript records that worker ARGV[1] had its credentials
// refused now (Redis time), forgets reports older than ARGV[2] ms, and
// returns how many distinct workers reported within that window.
// KEYS: the auth faults zset.
var reportAuthFaultScript = redis.NewScript(`
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local window = tonumber(ARGV[2])
redis.call('ZADD', KEYS[1], string.format('%.0f', now), ARGV[1])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', string.format('(%.0f', now - window))
redis.call('PEXPIRE', KEYS[1], window)
return redis.call('ZCARD', KEYS[1])
`)

// reportAuthFault records that worker (its host:pid) had its PSP
// credentials refused, confirmed by its own recheck, and returns how many
// distinct workers did so within window, this one included: the fleet
// pauses only when two agree (authfault.go).
func reportAuthFault(ctx context.Context, rdb redis.UniversalClient, worker string, window time.Duration) (int, error) {
	if window <= 0 {
		return 0, errors.New("worker: auth fault window must be positive")
	}
	n, err := reportAuthFaultScript.Run(ctx, rdb, []string{keys.AuthFaults()}, worker, window.Milliseconds()).Int()
	if err != nil {
		return 0, fmt.Errorf("worker: report auth fault: %w", err)
	}
	return n, nil
}
