package schedule

import (
	"context"
	"fmt"
	"time"

	"github.com/acme/payout/internal/ledger"
	"github.com/acme/payout/internal/lifecycle"
	"github.com/acme/payout/internal/queue"
	"github.com/rs/zerolog"
)

// Defaults of Config.
const (
	DefaultInterval  = 10 * time.Second
	DefaultHoldRetry = 30 * time.Second
)

// Config tunes a Releaser.
type Config struct {
	// Interval between passes of Run (one pass per interval across all
	// the workers, by a lease). Default 10s: a payout leaves at most about
	// this long after its release time.
	Interval time.Duration
	// HoldRetry: a batch with payouts due that is not approved yet is
	// looked at again after this long (its approval makes them due at
	// once). Default 30s.
	HoldRetry time.Duration
	// Batches and Payouts bound one pass: batches looked at, payouts
	// released per batch per round (it goes on while a round is full).
	Batches, Payouts int
}

func (c Config) withDefaults() Config {
	if c.Interval <= 0 {
		c.Interval = DefaultInterval
	}
	if c.HoldRetry <= 0 {
		c.HoldRetry = DefaultHoldRetry
	}
	if c.Batches <= 0 {
		c.Batches = 100
	}
	if c.Payouts <= 0 {
		c.Payouts = 500
	}
	return c
}

// Pass sums up one pass of the releaser.
type Pass struct {
	Batches  int // batches with payouts due that were looked at
	Released int // payouts moved scheduled -> queued, their create enqueued
	Held     int // batches with payouts due that wait for approval
}

// Releaser moves the scheduled payouts whose time has come to queued and
// enqueues their creates. Every move is the ledger's compare-and-set
// (ledger.Schedule.Release: only a scheduled payout, only at or after its
// time on Redis's clock, only in a loaded batch), and the create is
// enqueued under its task ID (queue.Remind), before the payout leaves the
// due index: a pass that dies anywhere, two passes at once, or a worker
// restart, release nothing twice, and the next pass finishes the work.
type Releaser struct {
	ledger *ledger.Ledger
	queue  *queue.Queue
	cfg    Config
	log    zerolog.Logger
	// OnPass is called after every pass of Run that finished (metrics); may be nil.
	OnPass func(Pass)
}

// New builds a Releaser on the ledger l and the queue q.
func New(l *ledger.Ledger, q *queue.Queue, cfg Config, log zerolog.Logger) *Releaser {
	return &Releaser{ledger: l, queue: q, cfg: cfg.withDefaults(), log: log}
}

// Release makes one pass: every batch whose earliest pending release is
// due (Redis's clock), and each of its payouts due.
func (r *Releaser) Release(ctx context.Context) (Pass, error) {
	var p Pass
	now, err := r.ledger.Time(ctx)
	if err != nil {
		return p, err
	}
	batches, err := r.ledger.Schedule().DueBatches(ctx, now, r.cfg.Batches)
	if err != nil {
		return p, err
	}
	for _, b := range batches {
		p.Batches++
		n, held, err := r.batch(ctx, b, now)
		p.Released += n
		if err != nil {
			return p, err
		}
		if held {
			p.Held++
		}
	}
	return p, nil
}

// batch releases what is due of one batch and puts the batch back in the
// due index at its next release (or later, while it waits for approval).
func (r *Releaser) batch(ctx context.Context, batch string, now time.Time) (released int, held bool, err error) {
	sch := r.ledger.Schedule()
	for {
		ids, err := sch.Due(ctx, batch, now, r.cfg.Payouts)
		if err != nil {
			return released, false, err
		}
		for _, ext := range ids {
			ok, hold, err := r.one(ctx, batch, ext)
			if err != nil {
				return released, false, err
			}
			if hold {
				r.log.Info().Str("batch", batch).Msg("payouts due but their batch is not approved: released once it is")
				return released, true, sch.Later(ctx, batch, now.Add(r.cfg.HoldRetry))
			}
			if ok {
				released++
			}
		}
		if len(ids) < r.cfg.Payouts {
			return released, false, sch.Index(ctx, batch)
		}
	}
}

// one releases payout ext of batch if it is due: the compare-and-set, the
// create enqueued, then the payout out of the due index. It reports
// whether this call released it, and hold when its batch is not loaded.
func (r *Releaser) one(ctx context.Context, batch, ext string) (released, hold bool, err error) {
	sch := r.ledger.Schedule()
	res, found, err := sch.Release(ctx, batch, ext)
	if err != nil {
		return false, false, err
	}
	switch {
	case res == ledger.HeldBatch:
		return false, true, nil
	case res == ledger.NotDue:
		return false, false, nil // Redis's clock says later: a next pass
	case res == ledger.NotSchedule && found != string(lifecycle.Queued):
		return false, false, sch.Forget(ctx, batch, ext) // cancelled, or released and gone on
	}
	// Released now, or by an earlier pass that died before the enqueue
	// (queued, still in the due index): its create is due.
	p, err := r.ledger.Get(ctx, batch, ext)
	if err != nil {
		return false, false, err
	}
	if s, ok := queue.NextStep(p); ok && !s.InFlight && !s.Scheduler() {
		if _, err := r.queue.Remind(ctx, s); err != nil {
			return false, false, fmt.Errorf("release %s: %w", ext, err)
		}
	}
	if res == ledger.Released {
		r.log.Info().Str("batch", batch).Str("externalId", ext).Time("releaseAt", p.ReleaseAt).Msg("scheduled payout released")
	}
	return res == ledger.Released, false, sch.Forget(ctx, batch, ext)
}

// Run makes a pass every Interval until ctx is done, in whichever process
// holds the releaser's lease for that interval.
func (r *Releaser) Run(ctx context.Context) {
	r.ledger.Locks().Leased(ctx, "release", r.cfg.Interval, func(err error) {
		r.log.Warn().Err(err).Msg("releaser: could not take the lease; next interval")
	}, func(ctx context.Context) {
		p, err := r.Release(ctx)
		if err != nil {
			r.log.Error().Err(err).Msg("releaser pass failed; next interval")
			return
		}
		if p.Batches > 0 {
			r.log.Info().Int("batches", p.Batches).Int("released", p.Released).Int("held", p.Held).Msg("releaser pass")
		}
		if r.OnPass != nil {
			r.OnPass(p)
		}
	})
}
