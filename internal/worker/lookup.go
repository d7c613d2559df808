package worker

import (
	"context"
	"sync"
	"time"

	"github.com/acme/payout/internal/ledger"
	"github.com/acme/payout/internal/psp"
	"github.com/rs/zerolog"
)

// lookupCheck decides whether a 404 to a status query by externalId can be
// believed. The PSP reference does not say what {id} of the status path
// means; if the PSP only knew its own order ids, every such query would
// answer 404 and absence would be "confirmed" for orders that exist. So a
// 404 by externalId counts as a miss only after the PSP has been seen to
// find an order known to exist (one it created for us) by its externalId.
// The verdict is kept in Redis for every worker.
type lookupCheck struct {
	ledger *ledger.Ledger
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
	if err := l.ledger.SampleLookup(ctx, ext); err != nil {
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
	if ok, err := l.ledger.LookupVerified(ctx); err == nil && ok {
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

	ext, err := l.ledger.LookupSample(ctx)
	if err != nil || ext == "" {
		return false
	}
	res := l.psp.WithdrawalStatus(ctx, ext)
	if res.Outcome != psp.Created {
		l.log.Warn().Str("externalId", ext).Str("outcome", res.Outcome.String()).
			Msg("the PSP did not find an order it created by its externalId (yet): 404s by externalId are not trusted")
		return false
	}
	if err := l.ledger.MarkLookupVerified(ctx, time.Now()); err != nil {
		return false
	}
	l.mu.Lock()
	l.verified = true
	l.mu.Unlock()
	l.log.Info().Str("externalId", ext).Msg("verified: the PSP finds orders by externalId; 404s by externalId now count toward confirmed absence")
	return true
}
