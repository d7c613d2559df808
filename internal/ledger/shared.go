package ledger

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/go-redis/redis_rate/v10"
	"github.com/redis/go-redis/v9"
)

// The keys the workers share besides the payouts: the PSP lookup check's
// sample and verdict, the PSP request rate limit and the on-call gauges'
// snapshot. The ledger owns their names (keys.go); other packages reach
// them through the methods and functions below, never by key.

// SampleLookup records ext, a payout the PSP created, as the subject of the
// lookup check unless one is recorded already (SET NX): the first one
// stays.
func (l *Ledger) SampleLookup(ctx context.Context, ext string) error {
	if err := l.rdb.SetNX(ctx, lookupSampleKey(), ext, 0).Err(); err != nil {
		return fmt.Errorf("ledger: record lookup sample: %w", err)
	}
	return nil
}

// LookupSample returns the lookup check's subject; "" when none is
// recorded.
func (l *Ledger) LookupSample(ctx context.Context) (string, error) {
	ext, err := l.rdb.Get(ctx, lookupSampleKey()).Result()
	if errors.Is(err, redis.Nil) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("ledger: read lookup sample: %w", err)
	}
	return ext, nil
}

// LookupVerified reports whether a worker recorded that the PSP finds
// orders by externalId.
func (l *Ledger) LookupVerified(ctx context.Context) (bool, error) {
	n, err := l.rdb.Exists(ctx, lookupVerifiedKey()).Result()
	if err != nil {
		return false, fmt.Errorf("ledger: read lookup verdict: %w", err)
	}
	return n == 1, nil
}

// MarkLookupVerified records, for every worker, that the PSP found an order
// by its externalId at at.
func (l *Ledger) MarkLookupVerified(ctx context.Context, at time.Time) error {
	if err := l.rdb.Set(ctx, lookupVerifiedKey(), at.UTC().Format(time.RFC3339), 0).Err(); err != nil {
		return fmt.Errorf("ledger: record lookup verdict: %w", err)
	}
	return nil
}

// RateLimiter is the PSP request rate limit every worker on one Redis
// shares (GCRA, github.com/go-redis/redis_rate).
type RateLimiter struct {
	limiter *redis_rate.Limiter
	limit   redis_rate.Limit
}

// NewRateLimiter returns the shared limit of perSecond PSP requests per
// second on rdb.
func NewRateLimiter(rdb redis.UniversalClient, perSecond int) *RateLimiter {
	return &RateLimiter{limiter: redis_rate.NewLimiter(rdb), limit: redis_rate.PerSecond(perSecond)}
}

// Allow takes one request from the limit if it allows one now; else it
// tells how long until it will.
func (r *RateLimiter) Allow(ctx context.Context) (allowed bool, retryAfter time.Duration, err error) {
	res, err := r.limiter.Allow(ctx, rateLimitKey(), r.limit)
	if err != nil {
		return false, 0, fmt.Errorf("ledger: PSP rate limit: %w", err)
	}
	return res.Allowed > 0, res.RetryAfter, nil
}

// GetMetricsSnapshot queues, in the caller's pipeline, the read of the
// on-call gauges' snapshot: so that a scrape reads it in the same round
// trip as Redis's time and memory.
func GetMetricsSnapshot(ctx context.Context, pipe redis.Pipeliner) *redis.StringCmd {
	return pipe.Get(ctx, metricsSnapshotKey())
}

// StoreMetricsSnapshot writes the encoded on-call gauges' snapshot on rdb,
// where every worker's scrape reads it, for ttl.
func StoreMetricsSnapshot(ctx context.Context, rdb redis.UniversalClient, b []byte, ttl time.Duration) error {
	if err := rdb.Set(ctx, metricsSnapshotKey(), b, ttl).Err(); err != nil {
		return fmt.Errorf("ledger: store metrics snapshot: %w", err)
	}
	return nil
}
