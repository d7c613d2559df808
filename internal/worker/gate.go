package worker

import (
	"context"
	"errors"
	"math/rand/v2"
	"time"

	"github.com/acme/payout/internal/psp"
	"github.com/redis/go-redis/v9"
	"github.com/rs/zerolog"
	"github.com/sony/gobreaker/v2"
)

// gate decides whether a request may go to the PSP now: the circuit breaker
// holds traffic back while most recent requests fail (PSP outage), and the
// rate limiter keeps all worker processes on the same Redis under Rate
// requests per second. A task that may not go is deferred, not failed.
type gate struct {
	breaker  *gobreaker.TwoStepCircuitBreaker[struct{}]
	cooldown time.Duration
	limiter  *rateLimiter
	metrics  *Metrics
}

// errSick tells the breaker a request failed in a way that shows a sick PSP.
var errSick = errors.New("psp answer shows an outage")

// breakerWindow is the period over which failures are counted.
const breakerWindow = 10 * time.Second

func newGate(rdb redis.UniversalClient, cfg Config, m *Metrics, log zerolog.Logger) *gate {
	g := &gate{cooldown: cfg.BreakerCooldown, metrics: m}
	g.breaker = gobreaker.NewTwoStepCircuitBreaker[struct{}](gobreaker.Settings{
		Name:        "psp",
		MaxRequests: 1,
		Interval:    breakerWindow,
		Timeout:     cfg.BreakerCooldown,
		ReadyToTrip: func(c gobreaker.Counts) bool {
			return c.Requests >= 10 && c.TotalFailures*2 >= c.Requests
		},
		OnStateChange: func(_ string, from, to gobreaker.State) {
			m.breaker.Set(float64(to))
			ev := log.Warn()
			if to == gobreaker.StateClosed {
				ev = log.Info()
			}
			ev.Str("from", from.String()).Str("to", to.String()).Msg(breakerMessage(to, cfg.BreakerCooldown))
		},
	})
	if cfg.Rate > 0 {
		g.limiter = newRateLimiter(rdb, cfg.Rate)
	}
	return g
}

// breakerMessage is the log line of the breaker's change to state to:
// each transition says what it means, not the meaning of "open".
func breakerMessage(to gobreaker.State, cooldown time.Duration) string {
	switch to {
	case gobreaker.StateOpen:
		return "PSP circuit breaker open: most recent PSP requests failed; holding requests back for " + cooldown.String()
	case gobreaker.StateHalfOpen:
		return "PSP circuit breaker half-open: sending one trial request to the PSP"
	case gobreaker.StateClosed:
		return "PSP circuit breaker closed: the PSP answers again; requests go as usual"
	}
	return "PSP circuit breaker changed state to " + to.String()
}

// ticket reports how an allowed request went.
type ticket func(psp.Result)

// hold waits for the shared rate limit and defers the task while the
// breaker is open. It consumes nothing of the breaker: call it before any
// ledger change, then allow right before the request.
func (g *gate) hold(ctx context.Context) error {
	if err := g.wait(ctx); err != nil {
		return err
	}
	if g.breaker.State() == gobreaker.StateOpen {
		g.metrics.deferred.WithLabelValues("breaker_open").Inc()
		return &deferral{reason: "PSP circuit breaker open", after: g.cooldown}
	}
	return nil
}

// allow asks the breaker for one request. It returns a *deferral when the
// request must not be sent now, else a ticket that must be given the
// request's result.
func (g *gate) allow() (ticket, error) {
	done, err := g.breaker.Allow()
	if err != nil {
		if errors.Is(err, gobreaker.ErrOpenState) || errors.Is(err, gobreaker.ErrTooManyRequests) {
			g.metrics.deferred.WithLabelValues("breaker_open").Inc()
			return nil, &deferral{reason: "PSP circuit breaker open", after: g.cooldown}
		}
		return nil, err
	}
	// Answers that show a sick PSP (5xx, 423, timeouts, refused
	// connections) count as failures; any other answer, even a refusal,
	// shows it is up.
	return func(res psp.Result) {
		if res.Outcome == psp.Ambiguous || (res.Outcome == psp.RetryLater && res.HTTPStatus == 0) {
			done(errSick)
			return
		}
		done(nil)
	}, nil
}

// wait blocks until the shared rate limit allows one request, for at most a
// few seconds; longer waits defer the task.
func (g *gate) wait(ctx context.Context) error {
	if g.limiter == nil {
		return nil
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		allowed, retryAfter, err := g.limiter.allow(ctx)
		if err != nil {
			return err
		}
		if allowed {
			return nil
		}
		if time.Now().Add(retryAfter).After(deadline) {
			g.metrics.deferred.WithLabelValues("rate_limit").Inc()
			return &deferral{reason: "PSP rate limit", after: retryAfter}
		}
		// Jittered, so that the waiters do not all wake for the same token.
		t := time.NewTimer(retryAfter + time.Duration(rand.Int64N(int64(retryAfter)+int64(time.Millisecond))))
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
	}
}
