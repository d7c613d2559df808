// Package worker runs the Asynq server that turns withdrawal tasks into PSP
// requests: the create and status handlers, the retry policy, the pause on
// configuration faults, the circuit breaker for PSP outages and the rate
// limit shared by all worker processes.
//
// Safety rests on the ledger, not on Asynq's delivery: a handler may run
// twice for the same task (redelivery after a crash or lease expiry), so
// every decision is taken by a ledger compare-and-set before any request is
// sent, and a create whose outcome is unknown is only ever followed by status
// queries until the PSP confirms the order is absent.
package worker

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/acme/payout/internal/ledger"
	"github.com/acme/payout/internal/psp"
	"github.com/acme/payout/internal/reconcile"
	"github.com/acme/payout/jobs"
	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"
	"github.com/rs/zerolog"
)

// PSP is the part of the PSP client the handlers use.
type PSP interface {
	CreateWithdrawal(ctx context.Context, r psp.WithdrawalRequest) psp.Result
	WithdrawalStatus(ctx context.Context, id string) psp.Result
}

// Opener decrypts a sealed card number bound to its payout.
type Opener interface {
	Open(sealed, additionalData string) (string, error)
}

// Config tunes the workers. Zero values take the defaults of DefaultConfig.
type Config struct {
	Concurrency      int
	Rate             int           // PSP requests per second, shared through Redis; 0 = unlimited
	StatusDelay      time.Duration // first status check after an ambiguous create
	Policy           ledger.CheckPolicy
	StatusByExternal bool // always query status by externalId, even when the order id is known
	// TrustStatusByExternal believes a 404 to a status query by externalId
	// without first seeing the PSP find a known order that way.
	TrustStatusByExternal bool
	MaxCreateRetries      int           // retries of creates that provably did not reach the PSP
	ShutdownTimeout       time.Duration // how long in-flight requests may finish after SIGTERM
	BreakerCooldown       time.Duration // how long the breaker stays open before a probe
	PauseRetry            time.Duration // retry delay of tasks held by a paused queue
	// PollInterval is how often Asynq moves due scheduled and retry tasks
	// to pending (default 1s).
	PollInterval time.Duration
	// Reconcile tunes the sweep that restores lost tasks (package
	// reconcile); ReconcileOff turns it off in this process.
	Reconcile    reconcile.Config
	ReconcileOff bool
	// WaitReplicas > 0 makes every create wait, after the submitting mark
	// and before the POST, until that many replicas acknowledged the mark
	// (Redis WAIT, at most WaitTimeout). Without the acknowledgement the
	// payout goes back to queued and nothing is sent. Default 0: set it
	// when the Redis master has replicas (the CLI does so by itself).
	WaitReplicas int
	WaitTimeout  time.Duration
	// Outcome follows created orders to paid or failed.
	Outcome OutcomePolicy
	Notify  NotifyConfig // notifications emitted and delivered (notify.go)
}

// OutcomePolicy says whether and how a created order is followed to its
// outcome. The zero value (Track false) keeps created final.
type OutcomePolicy struct {
	Track bool
	// Window: a created payout without a final status after this long
	// needs review. Default 72h.
	Window time.Duration
	// Intervals between outcome checks: the n-th check waits Intervals[n-1],
	// the last one repeating. Default 30s, 1m, 2m, 5m, 15m.
	Intervals []time.Duration
	// Words classifies the PSP's status words (psp.NewStatusWords); the
	// zero value counts nothing as final.
	Words psp.StatusWords
}

// DefaultOutcomeIntervals are the waits between outcome checks.
var DefaultOutcomeIntervals = []time.Duration{30 * time.Second, time.Minute, 2 * time.Minute, 5 * time.Minute, 15 * time.Minute}

// interval is the wait before outcome check number polls+1.
func (o OutcomePolicy) interval(polls int) time.Duration {
	if polls < 1 {
		polls = 1
	}
	if polls > len(o.Intervals) {
		polls = len(o.Intervals)
	}
	return o.Intervals[polls-1]
}

// window is the outcome window a created payout gets (0: not tracked).
func (o OutcomePolicy) window() time.Duration {
	if !o.Track {
		return 0
	}
	return o.Window
}

// DefaultConfig returns the documented defaults.
func DefaultConfig() Config {
	return Config{
		Concurrency:      10,
		StatusDelay:      10 * time.Second,
		Policy:           ledger.CheckPolicy{AbsentChecks: 2, AbsentSpacing: 60 * time.Second, MaxCreates: 3, MaxFaults: 20},
		MaxCreateRetries: 10,
		ShutdownTimeout:  35 * time.Second,
		BreakerCooldown:  5 * time.Second,
		PauseRetry:       10 * time.Second,
		PollInterval:     time.Second,
		WaitTimeout:      time.Second,
		Outcome:          OutcomePolicy{Window: 72 * time.Hour, Intervals: DefaultOutcomeIntervals},
	}
}

func (c Config) withDefaults() Config {
	d := DefaultConfig()
	if c.Concurrency <= 0 {
		c.Concurrency = d.Concurrency
	}
	if c.StatusDelay <= 0 {
		c.StatusDelay = d.StatusDelay
	}
	if c.Policy.AbsentChecks <= 0 {
		c.Policy.AbsentChecks = d.Policy.AbsentChecks
	}
	if c.Policy.AbsentSpacing < 0 {
		c.Policy.AbsentSpacing = d.Policy.AbsentSpacing
	}
	if c.Policy.MaxCreates <= 0 {
		c.Policy.MaxCreates = d.Policy.MaxCreates
	}
	if c.Policy.MaxFaults <= 0 {
		c.Policy.MaxFaults = d.Policy.MaxFaults
	}
	if c.MaxCreateRetries <= 0 {
		c.MaxCreateRetries = d.MaxCreateRetries
	}
	if c.ShutdownTimeout <= 0 {
		c.ShutdownTimeout = d.ShutdownTimeout
	}
	if c.BreakerCooldown <= 0 {
		c.BreakerCooldown = d.BreakerCooldown
	}
	if c.PauseRetry <= 0 {
		c.PauseRetry = d.PauseRetry
	}
	if c.PollInterval <= 0 {
		c.PollInterval = d.PollInterval
	}
	if c.WaitTimeout <= 0 {
		c.WaitTimeout = d.WaitTimeout
	}
	if c.Outcome.Window <= 0 {
		c.Outcome.Window = d.Outcome.Window
	}
	if len(c.Outcome.Intervals) == 0 {
		c.Outcome.Intervals = d.Outcome.Intervals
	}
	c.Policy.OutcomeWindow = c.Outcome.window()
	c.Policy.FaultDelay, c.Policy.FaultDelayMax = c.StatusDelay, 5*time.Minute
	return c
}

// Worker holds the handlers and what they share.
type Worker struct {
	cfg     Config
	rdb     redis.UniversalClient
	ledger  *ledger.Ledger
	psp     PSP
	opener  Opener
	client  *asynq.Client
	insp    *asynq.Inspector
	gate    *gate
	lookup  *lookupCheck
	metrics *Metrics
	log     zerolog.Logger
}

// New builds a Worker. metrics may be nil.
func New(rdb redis.UniversalClient, l *ledger.Ledger, p PSP, o Opener, cfg Config, m *Metrics, log zerolog.Logger) *Worker {
	cfg = cfg.withDefaults()
	if m == nil {
		m = NewMetrics(nil)
	}
	return &Worker{
		cfg: cfg, rdb: rdb, ledger: l, psp: p, opener: o,
		client:  asynq.NewClientFromRedisClient(rdb),
		insp:    asynq.NewInspectorFromRedisClient(rdb),
		gate:    newGate(rdb, cfg, m, log),
		lookup:  &lookupCheck{rdb: rdb, psp: p, log: log, always: cfg.TrustStatusByExternal},
		metrics: m,
		log:     log,
	}
}

// Run serves the payout queue until ctx is done, then shuts down gracefully:
// in-flight requests get ShutdownTimeout to finish; what does not finish is
// left for the next worker to resolve through the ledger.
func (w *Worker) Run(ctx context.Context) error {
	srv := asynq.NewServerFromRedisClient(w.rdb, w.serverConfig())
	if err := srv.Start(w.Mux()); err != nil {
		return fmt.Errorf("worker: start asynq server: %w", err)
	}
	w.log.Info().Int("concurrency", w.cfg.Concurrency).Str("queue", jobs.Queue).Msg("worker started")
	defer w.serveNotifications(ctx)()
	sweepDone := make(chan struct{})
	go func() {
		defer close(sweepDone)
		if !w.cfg.ReconcileOff {
			w.Sweeper().Run(ctx)
		}
	}()
	<-ctx.Done()
	<-sweepDone
	w.log.Info().Dur("grace", w.cfg.ShutdownTimeout).Msg("worker stopping; in-flight requests may finish")
	srv.Shutdown()
	w.log.Info().Msg("worker stopped")
	return nil
}

// Sweeper returns the reconciler this worker runs, counting its repairs in
// the worker's metrics.
func (w *Worker) Sweeper() *reconcile.Sweeper {
	s := reconcile.New(w.rdb, w.ledger, w.cfg.Reconcile, w.log.With().Str("component", "reconciler").Logger())
	s.OnRepair = func(reconcile.Repair) { w.metrics.repairs.WithLabelValues("reconciler").Inc() }
	return s
}

// Mux returns the task handlers.
func (w *Worker) Mux() *asynq.ServeMux {
	mux := asynq.NewServeMux()
	mux.Use(w.notifyReview)
	mux.HandleFunc(jobs.TypeWithdrawalCreate, w.HandleCreate)
	mux.HandleFunc(jobs.TypeWithdrawalStatus, w.HandleStatus)
	mux.HandleFunc(jobs.TypeWithdrawalOutcome, w.HandleOutcome)
	return mux
}

func (w *Worker) serverConfig() asynq.Config {
	return asynq.Config{
		Concurrency:              w.cfg.Concurrency,
		Queues:                   map[string]int{jobs.Queue: 1},
		RetryDelayFunc:           retryDelay,
		IsFailure:                isFailure,
		ShutdownTimeout:          w.cfg.ShutdownTimeout,
		DelayedTaskCheckInterval: w.cfg.PollInterval,
		TaskCheckInterval:        w.cfg.PollInterval,
		Logger:                   asynqLogger{w.log.With().Str("component", "asynq").Logger()},
		LogLevel:                 asynq.WarnLevel,
	}
}

// deferral is returned by a handler that did not act on the task because of
// something outside the task (paused queue, open breaker, rate limit). Asynq
// retries it after its delay without counting a failure (IsFailure false), so
// the task's retry budget is not burnt.
type deferral struct {
	reason string
	after  time.Duration
}

func (d *deferral) Error() string { return "deferred: " + d.reason }

// retryAfter is a failure whose retry delay the PSP or the policy chose.
type retryAfter struct {
	err   error
	after time.Duration
}

func (r *retryAfter) Error() string { return r.err.Error() }
func (r *retryAfter) Unwrap() error { return r.err }

func isFailure(err error) bool {
	var d *deferral
	return !errors.As(err, &d)
}

// retryDelay honours deferrals and Retry-After, else backs off exponentially
// from 1s to 5 minutes with full jitter on the upper half.
func retryDelay(n int, err error, _ *asynq.Task) time.Duration {
	var d *deferral
	if errors.As(err, &d) {
		return jitter(d.after)
	}
	var r *retryAfter
	if errors.As(err, &r) && r.after > 0 {
		return r.after
	}
	return backoff(time.Second, n, 5*time.Minute)
}

// backoff returns base*2^n capped at max, jittered in [d/2, d].
func backoff(base time.Duration, n int, max time.Duration) time.Duration {
	d := base
	for i := 0; i < n && d < max; i++ {
		d *= 2
	}
	if d > max {
		d = max
	}
	return d/2 + time.Duration(rand.Int64N(int64(d/2)+1))
}

// jitter spreads d by +-20% so that deferred tasks do not return in a herd.
func jitter(d time.Duration) time.Duration {
	if d <= 0 {
		return time.Second
	}
	return d*4/5 + time.Duration(rand.Int64N(int64(d*2/5)+1))
}

// detached returns a context for ledger writes after a PSP request: they
// must happen even when the task's context was cancelled by shutdown.
func detached(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(ctx), 15*time.Second)
}
