package worker

import (
	"context"
	"fmt"
	"time"

	"github.com/acme/payout/internal/ledger/keys"
	"github.com/go-redis/redis_rate/v10"
	"github.com/redis/go-redis/v9"
)

// rateLimiter is the PSP request rate limit every worker on one Redis
// shares (GCRA, github.com/go-redis/redis_rate), under the ledger's key
// (ledger.RateLimitKey).
type rateLimiter struct {
	limiter *redis_rate.Limiter
	limit   redis_rate.Limit
}

// newRateLimiter returns the shared limit of perSecond PSP requests per
// second on rdb.
func newRateLimiter(rdb redis.UniversalClient, perSecond int) *rateLimiter {
	return &rateLimiter{limiter: redis_rate.NewLimiter(rdb), limit: redis_rate.PerSecond(perSecond)}
}

// allow takes one request from the limit if it allows one now; else it
// tells how long until it will.
func (r *rateLimiter) allow(ctx context.Context) (allowed bool, retryAfter time.Duration, err error) {
	res, err := r.limiter.Allow(ctx, keys.RateLimit(), r.limit)
	if err != nil {
		return false, 0, fmt.Errorf("worker: PSP rate limit: %w", err)
	}
	return res.Allowed > 0, res.RetryAfter, nil
}
