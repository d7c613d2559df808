package worker

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/acme/payout/internal/ledger/keys"
	"github.com/acme/payout/internal/psp"
	"github.com/redis/go-redis/v9"
	"github.com/rs/zerolog"
)

// lookupCheck decides whether a 404 to a status query by externalId can be
// believed. The PSP reference does not say what {id} of the status path
// means; if the PSP only knew its own order ids, every such query would
// answer 404 and absence would be "confirmed" for orders that exist. So a
// 404 by externalId counts as a miss only after the PSP has been seen to
// find an order known to exist (one it created for us) by its externalId.
// The sample and the verdict are kept in Redis for every worker, under the
// ledger's keys (ledger.LookupSampleKey, ledger.LookupVerifiedKey).
type lookupCheck struct {
	rdb    redis.UniversalClient
	psp    PSP
	log    zerolog.Logger
	always bool // --trust-status-by-external-id

	mu       sync.Mutex
	verified bool
	sampled  bool
	lastTry  time.Time
}

// retryEvery bounds how often one process tries to verify.
const retryEvery = 5 * time.Second

// sample remembers a payout the PSP created as the verification's subject.
// The first one stays (SET NX): it only gets older, so it is soon past any
// status lag of the PSP. One write per process at most.
func (l *lookupCheck) sample(ctx context.Context, ext string) {
	l.mu.Lock()
	skip := l.always || l.verified || l.sampled
	l.sampled = true
	l.mu.Unlock()
	if skip {
		return
	}
	if err := sampleLookup(ctx, l.rdb, ext); err != nil {
		l.log.Warn().Err(err).Msg("could not record a lookup sample")
	}
}

func (l *lookupCheck) isVerified() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.always || l.verified
}

// trusted reports whether a 404 by externalId may count as a miss, trying
// to verify when it is not known yet.
func (l *lookupCheck) trusted(ctx context.Context) bool {
	if l.isVerified() {
		return true
	}
	if ok, err := lookupVerified(ctx, l.rdb); err == nil && ok {
		l.mu.Lock()
		l.verified = true
		l.mu.Unlock()
		return true
	}
	l.mu.Lock()
	if time.Since(l.lastTry) < retryEvery {
		l.mu.Unlock()
		return false
	}
	l.lastTry = time.Now()
	l.mu.Unlock()

	ext, err := lookupSample(ctx, l.rdb)
	if err != nil || ext == "" {
		return false
	}
	res := l.psp.WithdrawalStatus(ctx, ext)
	if res.Outcome != psp.Created {
		l.log.Warn().Str("externalId", ext).Str("outcome", res.Outcome.String()).
			Msg("the PSP did not find an order it created by its externalId (yet): 404s by externalId are not trusted")
		return false
	}
	if err := markLookupVerified(ctx, l.rdb, time.Now()); err != nil {
		return false
	}
	l.mu.Lock()
	l.verified = true
	l.mu.Unlock()
	l.log.Info().Str("externalId", ext).Msg("verified: the PSP finds orders by externalId; 404s by externalId now count toward confirmed absence")
	return true
}

// sampleLookup records ext, a payout the PSP created, as the subject of the
// lookup check unless one is recorded already (SET NX): the first one
// stays.
func sampleLookup(ctx context.Context, rdb redis.UniversalClient, ext string) error {
	if err := rdb.SetNX(ctx, keys.LookupSample(), ext, 0).Err(); err != nil {
		return fmt.Errorf("worker: record lookup sample: %w", err)
	}
	return nil
}

// lookupSample returns the lookup check's subject; "" when none is
// recorded.
func lookupSample(ctx context.Context, rdb redis.UniversalClient) (string, error) {
	ext, err := rdb.Get(ctx, keys.LookupSample()).Result()
	if errors.Is(err, redis.Nil) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("worker: read lookup sample: %w", err)
	}
	return ext, nil
}

// lookupVerified reports whether a worker recorded that the PSP finds
// orders by externalId.
func lookupVerified(ctx context.Context, rdb redis.UniversalClient) (bool, error) {
	n, err := rdb.Exists(ctx, keys.LookupVerified()).Result()
	if err != nil {
		return false, fmt.Errorf("worker: read lookup verdict: %w", err)
	}
	return n == 1, nil
}

// markLookupVerified records, for every worker, that the PSP found an order
// by its externalId at at.
func markLookupVerified(ctx context.Context, rdb redis.UniversalClient, at time.Time) error {
	if err := rdb.Set(ctx, keys.LookupVerified(), at.UTC().Format(time.RFC3339), 0).Err(); err != nil {
		return fmt.Errorf("worker: record lookup verdict: %w", err)
	}
	return nil
}
