package worker

import (
	"errors"
	"fmt"
	"time"

	"github.com/acme/payout/internal/decide"
	"github.com/acme/payout/internal/ledger"
	"github.com/acme/payout/internal/psp"
	"github.com/acme/payout/internal/queue"
	"github.com/acme/payout/internal/reconcile"
	"github.com/acme/payout/internal/schedule"
	"github.com/redis/go-redis/v9"
	"github.com/rs/zerolog"
)

// Config is everything a Worker needs: what it talks to, and how it is
// tuned. Redis, Ledger, PSP and Opener are required. A tuning field left
// at its zero value takes the default given in its comment (those of
// DefaultConfig); a negative value is an error (Validate), never replaced.
type Config struct {
	// Redis is the client the Asynq tasks, the pause flag, the breaker
	// hints and the shared rate limit live on. Required.
	Redis redis.UniversalClient
	// Ledger holds the payouts; its connection may differ from Redis (a
	// pipelining one). Required.
	Ledger *ledger.Ledger
	// Queue configures the queue the tasks are enqueued in (test code sets
	// its clock: queue.WithClock).
	Queue []queue.Option
	// PSP sends the create and status requests. Required.
	PSP PSP
	// Opener decrypts the sealed card numbers. Required.
	Opener Opener
	// Metrics counts what the handlers do. nil: a set of its own that no
	// registry scrapes.
	Metrics *Metrics
	// Logger receives the worker's logs; the zero value logs nothing.
	Logger zerolog.Logger

	Concurrency int // payouts processed at once; default 10
	Rate        int // PSP requests per second, shared through Redis; 0 = unlimited
	// Lanes is how many Asynq servers this process runs on the payout
	// queue, each with its own dequeue loop, Concurrency shared between
	// them (lanes.go); default 4, never more than Concurrency.
	Lanes int
	// StatusDelay: the first status check after an ambiguous create;
	// default 10s.
	StatusDelay time.Duration
	// Policy of the status checks: AbsentChecks (default 2), MaxCreates
	// (default 3), MaxFaults (default 20) take their defaults at zero;
	// AbsentSpacing is used as given (0: no spacing; DefaultConfig has
	// DefaultAbsentSpacing). OutcomeWindow and the fault delays are derived from Outcome
	// and StatusDelay.
	Policy decide.CheckPolicy
	// TrustStatusByExternal believes a 404 to a status query by externalId
	// without first seeing the PSP find a known order that way.
	TrustStatusByExternal bool
	// MaxCreateRetries: retries of creates that provably did not reach
	// the PSP; default 10.
	MaxCreateRetries int
	// ShutdownTimeout: how long in-flight requests may finish after
	// SIGTERM; default 35s.
	ShutdownTimeout time.Duration
	// BreakerCooldown: how long the breaker stays open before a probe;
	// default 5s.
	BreakerCooldown time.Duration
	// PauseRetry: retry delay of tasks held by a paused queue; default 10s.
	PauseRetry time.Duration
	// PollInterval is how often Asynq moves due scheduled and retry tasks
	// to pending; default 1s.
	PollInterval time.Duration
	// Reconcile tunes the sweep that restores lost tasks (package
	// reconcile, with its own defaults); ReconcileOff turns it off in this
	// process.
	Reconcile    reconcile.Config
	ReconcileOff bool
	// Release tunes the releaser of scheduled payouts (package schedule,
	// with its own defaults); ReleaseOff turns it off in this process.
	Release    schedule.Config
	ReleaseOff bool
	// WaitReplicas > 0 makes every create wait, after the submitting mark
	// and before the POST, until that many replicas acknowledged the mark
	// (Redis WAIT, at most WaitTimeout, default 1s). Without the
	// acknowledgement the payout goes back to queued and nothing is sent.
	// Default 0: set it when the Redis master has replicas (the CLI does
	// so by itself).
	WaitReplicas int
	WaitTimeout  time.Duration
	// Outcome follows created orders to paid or failed.
	Outcome OutcomePolicy
	// Watch: how long and how often a paid payout's order is asked about
	// again, in case the money comes back (watch.go). A zero Window
	// watches nothing; DefaultConfig (and the CLI) watch 30 days.
	Watch decide.WatchPolicy
	// WatchSweep is how often this worker looks for due watch checks
	// (default 10s, each sweep enqueueing at most watchBatch: 4.3 million
	// checks a day, above the 3.2 million of 100,000 paid payouts a day;
	// negative: never).
	WatchSweep time.Duration
	Notify     NotifyConfig // notifications emitted and delivered (notify.go)
	Mail       MailConfig   // the mail to people this worker sends (mail.go)
	// AuthConfirmWindow: a refusal of the PSP credentials pauses the
	// queue only when a second worker reports one within this window
	// (authfault.go); alone, the worker stops itself. Default 10m.
	AuthConfirmWindow time.Duration
	// Unsafe is zero in the product: only the proof of safety's broken
	// worker sets it (unsafe.go).
	Unsafe Unsafe
}

// OutcomePolicy says whether and how a created order is followed to its
// outcome. The zero value (Track false) keeps created final.
type OutcomePolicy struct {
	Track bool
	// Window: a created payout without a final status after this long
	// needs review. Default 72h.
	Window time.Duration
	// Intervals between outcome checks: the n-th check waits Intervals[n-1],
	// the last one repeating. Default (when empty) DefaultOutcomeIntervals.
	Intervals []time.Duration
	// Words classifies the PSP's status words (psp.NewStatusWords); the
	// zero value counts nothing as final.
	Words psp.StatusWords
}

// DefaultOutcomeIntervals are the waits between outcome checks.
var DefaultOutcomeIntervals = []time.Duration{30 * time.Second, time.Minute, 2 * time.Minute, 5 * time.Minute, 15 * time.Minute}

// defaultNotifyConcurrency is the delivery server's concurrency when
// NotifyConfig.Concurrency is zero.
const defaultNotifyConcurrency = 2

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

// DefaultStatusLag is the longest PSP status lag (a new order answering
// 404 to a status query) the default absence policy covers: absence is
// confirmed no sooner than (K-1) x D after the first counted 404, and an
// order the PSP stores but does not show yet must not be created again.
const DefaultStatusLag = 5 * time.Minute

// DefaultAbsentSpacing is D of the default policy (K = 2): the whole
// DefaultStatusLag between the two counted 404s. Before it was 60s, and a
// PSP lagging more than a minute was paid twice.
const DefaultAbsentSpacing = DefaultStatusLag

// DefaultConfig returns the documented defaults of the tuning fields (no
// dependencies).
func DefaultConfig() Config {
	return Config{
		Concurrency:      10,
		Lanes:            4,
		StatusDelay:      10 * time.Second,
		Policy:           decide.CheckPolicy{AbsentChecks: 2, AbsentSpacing: DefaultAbsentSpacing, MaxCreates: 3, MaxFaults: 20},
		MaxCreateRetries: 10,
		ShutdownTimeout:  35 * time.Second,
		BreakerCooldown:  5 * time.Second,
		PauseRetry:       10 * time.Second,
		PollInterval:     time.Second,
		WaitTimeout:      time.Second,
		Outcome:          OutcomePolicy{Window: 72 * time.Hour, Intervals: DefaultOutcomeIntervals},
		Watch:            decide.WatchPolicy{Window: decide.DefaultWatchWindow, Intervals: decide.DefaultWatchIntervals},
		WatchSweep:       10 * time.Second,
		Notify:           NotifyConfig{Concurrency: defaultNotifyConcurrency},
	}
}

// orDefault returns d when v is the zero value, else v.
func orDefault[T comparable](v, d T) T {
	var zero T
	if v == zero {
		return d
	}
	return v
}

// withDefaults gives the zero-valued fields their defaults and derives the
// policy's outcome window and fault delays. Negative values stay, for
// Validate to report.
func (c Config) withDefaults() Config {
	d := DefaultConfig()
	c.Concurrency = orDefault(c.Concurrency, d.Concurrency)
	c.Lanes = orDefault(c.Lanes, d.Lanes)
	c.StatusDelay = orDefault(c.StatusDelay, d.StatusDelay)
	c.Policy.AbsentChecks = orDefault(c.Policy.AbsentChecks, d.Policy.AbsentChecks)
	c.Policy.MaxCreates = orDefault(c.Policy.MaxCreates, d.Policy.MaxCreates)
	c.Policy.MaxFaults = orDefault(c.Policy.MaxFaults, d.Policy.MaxFaults)
	c.MaxCreateRetries = orDefault(c.MaxCreateRetries, d.MaxCreateRetries)
	c.ShutdownTimeout = orDefault(c.ShutdownTimeout, d.ShutdownTimeout)
	c.BreakerCooldown = orDefault(c.BreakerCooldown, d.BreakerCooldown)
	c.PauseRetry = orDefault(c.PauseRetry, d.PauseRetry)
	c.PollInterval = orDefault(c.PollInterval, d.PollInterval)
	c.WaitTimeout = orDefault(c.WaitTimeout, d.WaitTimeout)
	c.Outcome.Window = orDefault(c.Outcome.Window, d.Outcome.Window)
	if len(c.Outcome.Intervals) == 0 {
		c.Outcome.Intervals = d.Outcome.Intervals
	}
	c.Notify.Concurrency = orDefault(c.Notify.Concurrency, d.Notify.Concurrency)
	c.WatchSweep = orDefault(c.WatchSweep, d.WatchSweep)
	if len(c.Watch.Intervals) == 0 {
		c.Watch.Intervals = d.Watch.Intervals
	}
	c.AuthConfirmWindow = orDefault(c.AuthConfirmWindow, defaultAuthConfirmWindow)
	if c.Metrics == nil {
		c.Metrics = NewMetrics(nil)
	}
	c.Policy.OutcomeWindow = c.Outcome.window()
	c.Policy.FaultDelay, c.Policy.FaultDelayMax = c.StatusDelay, 5*time.Minute
	return c
}

// FieldError is one problem of a Config.
type FieldError struct {
	Field   string // the field's path in Config, e.g. "Policy.AbsentChecks"
	Value   any    // the value found; nil for a missing dependency
	Problem string // what is wrong with it
}

func (e *FieldError) Error() string {
	if e.Value == nil {
		return fmt.Sprintf("worker config: %s: %s", e.Field, e.Problem)
	}
	return fmt.Sprintf("worker config: %s %v: %s", e.Field, e.Value, e.Problem)
}

// Validate reports every problem of c at once: errors.Join of
// *FieldError, nil when there is none. Zero tuning values are fine (they
// take their defaults); negative ones and missing dependencies are not.
func (c Config) Validate() error {
	var errs []error
	required := func(field string, missing bool) {
		if missing {
			errs = append(errs, &FieldError{Field: field, Problem: "required"})
		}
	}
	required("Redis", c.Redis == nil)
	required("Ledger", c.Ledger == nil)
	required("PSP", c.PSP == nil)
	required("Opener", c.Opener == nil)
	if err := c.ValidateSettings(); err != nil {
		errs = append(errs, err.(interface{ Unwrap() []error }).Unwrap()...)
	}
	return errors.Join(errs...)
}

// ValidateSettings is Validate without the dependencies, for a caller that
// checks its flags before it opens any connection.
func (c Config) ValidateSettings() error {
	var errs []error
	nonNegative := func(field string, v int64, show any) {
		if v < 0 {
			errs = append(errs, &FieldError{Field: field, Value: show, Problem: "must not be negative"})
		}
	}
	for _, f := range []struct {
		name string
		v    int
	}{
		{"Concurrency", c.Concurrency}, {"Lanes", c.Lanes}, {"Rate", c.Rate},
		{"Policy.AbsentChecks", c.Policy.AbsentChecks}, {"Policy.MaxCreates", c.Policy.MaxCreates},
		{"Policy.MaxFaults", c.Policy.MaxFaults}, {"MaxCreateRetries", c.MaxCreateRetries},
		{"WaitReplicas", c.WaitReplicas}, {"Notify.Concurrency", c.Notify.Concurrency},
	} {
		nonNegative(f.name, int64(f.v), f.v)
	}
	for _, f := range []struct {
		name string
		v    time.Duration
	}{
		{"StatusDelay", c.StatusDelay}, {"Policy.AbsentSpacing", c.Policy.AbsentSpacing},
		{"ShutdownTimeout", c.ShutdownTimeout}, {"BreakerCooldown", c.BreakerCooldown},
		{"PauseRetry", c.PauseRetry}, {"PollInterval", c.PollInterval}, {"WaitTimeout", c.WaitTimeout},
		{"Reconcile.Interval", c.Reconcile.Interval}, {"Reconcile.Grace", c.Reconcile.Grace},
		{"Outcome.Window", c.Outcome.Window},
	} {
		nonNegative(f.name, int64(f.v), f.v)
	}
	for i, d := range c.Outcome.Intervals {
		if d <= 0 {
			errs = append(errs, &FieldError{Field: fmt.Sprintf("Outcome.Intervals[%d]", i), Value: d, Problem: "must be positive"})
		}
	}
	return errors.Join(errs...)
}
