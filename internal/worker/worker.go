// Package worker runs the Asynq servers (its dequeue lanes, lanes.go) that
// turn withdrawal tasks into PSP requests: the create and status handlers,
// the retry policy, the pause on configuration faults, the circuit breaker
// for PSP outages and the rate limit shared by all worker processes.
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
	"math/rand/v2"
	"time"

	"github.com/acme/payout/internal/ledger"
	"github.com/acme/payout/internal/psp"
	"github.com/acme/payout/internal/queue"
	"github.com/acme/payout/internal/reconcile"
	"github.com/acme/payout/internal/schedule"
	"github.com/acme/payout/jobs"
	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"
	"github.com/rs/zerolog"
)

// PSP is the part of the PSP client the handlers use.
type PSP interface {
	CreateWithdrawal(ctx context.Context, r psp.WithdrawalRequest) psp.Result
	// CheckWithdrawal queries the status of our order (by its PSP order
	// id, or by externalId: the client's --status-by-external-id) and
	// checks the answer is about it.
	CheckWithdrawal(ctx context.Context, want psp.Expect) psp.Result
	// WithdrawalStatus queries the order whose id is given (the lookup
	// check asks by externalId on purpose).
	WithdrawalStatus(ctx context.Context, id string) psp.Result
}

// Opener decrypts a sealed card number bound to its payout.
type Opener interface {
	Open(sealed, additionalData string) (string, error)
}

// Worker holds the handlers and what they share.
type Worker struct {
	cfg     Config
	rdb     redis.UniversalClient
	ledger  *ledger.Ledger
	psp     PSP
	opener  Opener
	queue   *queue.Queue
	gate    *gate
	lookup  *lookupCheck
	epochs  epochs
	metrics *Metrics
	log     zerolog.Logger
	stop    *stopper // this worker's own stop (stop.go)
}

// keyLister is an Opener that names the data keys it opens with
// (vault.Keyring): the ledger then holds back a create whose card number
// it cannot open (decide.Foreign), before the payout is marked.
type keyLister interface {
	KeyIDs() []string
}

// New builds a Worker from cfg: zero values take their defaults (see
// Config), then cfg must pass Validate; the error lists every problem.
func New(cfg Config) (*Worker, error) {
	cfg = cfg.withDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	rdb, m, log := cfg.Redis, cfg.Metrics, cfg.Logger
	led := cfg.Ledger.WithWatch(cfg.Watch)
	if kl, ok := cfg.Opener.(keyLister); ok {
		led = led.OpeningKeys(kl.KeyIDs())
	}
	return &Worker{
		cfg: cfg, rdb: rdb, ledger: led, psp: cfg.PSP, opener: cfg.Opener, stop: newStopper(),
		queue:   queue.New(rdb, cfg.Queue...),
		gate:    newGate(rdb, cfg, m, log),
		lookup:  &lookupCheck{rdb: rdb, psp: cfg.PSP, log: log, always: cfg.TrustStatusByExternal},
		metrics: m,
		log:     log,
	}, nil
}

// Run serves the payout queue until ctx is done, then shuts down gracefully:
// in-flight requests get ShutdownTimeout to finish; what does not finish is
// left for the next worker to resolve through the ledger. A worker that
// stops itself (stop.go) shuts down the same way and returns a *StopError.
func (w *Worker) Run(ctx context.Context) error {
	lanes, err := w.startLanes()
	if err != nil {
		return err
	}
	w.log.Info().Int("concurrency", w.cfg.Concurrency).Int("lanes", len(lanes)).Str("queue", jobs.Queue).Msg("worker started")
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	defer w.serveNotifications(ctx)()
	defer w.serveMail(ctx)()
	defer w.pumpEvents(ctx)()
	health := &redisHealth{log: w.log.With().Str("component", "redis").Logger()}
	go health.watch(ctx, func(ctx context.Context) error { return w.rdb.Ping(ctx).Err() })
	sweepDone := make(chan struct{})
	go func() {
		defer close(sweepDone)
		if !w.cfg.ReconcileOff {
			w.Sweeper().Run(ctx)
		}
	}()
	releaseDone := make(chan struct{})
	go func() {
		defer close(releaseDone)
		if !w.cfg.ReleaseOff {
			w.Releaser().Run(ctx)
		}
	}()
	watchDone := w.runWatchSweep(ctx)
	stopped := w.stoppedRun(ctx)
	cancel()
	<-sweepDone
	<-watchDone
	<-releaseDone
	w.log.Info().Dur("grace", w.cfg.ShutdownTimeout).Msg("worker stopping; in-flight requests may finish")
	lanes.shutdown()
	w.log.Info().Msg("worker stopped")
	return stopped
}

// Sweeper returns the reconciler this worker runs, counting its repairs in
// the worker's metrics.
func (w *Worker) Sweeper() *reconcile.Sweeper {
	s := reconcile.New(w.rdb, w.ledger, w.cfg.Reconcile, w.log.With().Str("component", "reconciler").Logger())
	s.OnRepair = func(reconcile.Repair) { w.metrics.repairs.WithLabelValues("reconciler").Inc() }
	s.OnSweep = func(rep reconcile.Report) { w.metrics.swept(rep, time.Now()) }
	s.Notify = w.cfg.Notify.Emitter
	return s
}

// Releaser returns the releaser of scheduled payouts this worker runs,
// counting what it releases in the worker's metrics.
func (w *Worker) Releaser() *schedule.Releaser {
	r := schedule.New(w.ledger, w.queue, w.cfg.Release, w.log.With().Str("component", "releaser").Logger())
	r.OnPass = func(p schedule.Pass) { w.metrics.released.Add(float64(p.Released)) }
	return r
}

// Mux returns the task handlers.
func (w *Worker) Mux() *asynq.ServeMux {
	mux := asynq.NewServeMux()
	mux.Use(w.notifyReview, w.refuseStopped)
	mux.HandleFunc(jobs.TypeWithdrawalCreate, w.HandleCreate)
	mux.HandleFunc(jobs.TypeWithdrawalStatus, w.HandleStatus)
	mux.HandleFunc(jobs.TypeWithdrawalOutcome, w.HandleOutcome)
	mux.HandleFunc(jobs.TypeWithdrawalVerify, w.HandleVerify)
	mux.HandleFunc(jobs.TypeWithdrawalWatch, w.HandleWatch)
	return mux
}

// refuseStopped gives back every task that arrives after this worker
// stopped itself, untouched.
func (w *Worker) refuseStopped(h asynq.Handler) asynq.Handler {
	return asynq.HandlerFunc(func(ctx context.Context, t *asynq.Task) error {
		if err := w.refuseWhenStopped(); err != nil {
			return err
		}
		return h.ProcessTask(ctx, t)
	})
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
		Logger:                   newAsynqLogger(w.log.With().Str("component", "asynq").Logger()),
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
