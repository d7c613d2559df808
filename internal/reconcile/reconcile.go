// Package reconcile restores lost reminders. The ledger is the truth about
// every payout; Asynq tasks only remind a worker of the next step. A task
// can be lost: its handler returned after a Redis reply was lost, an
// operator deleted or archived it in the web UI, a process died between
// two writes. A sweep finds every open payout (queued, submitting,
// checking, created awaiting its outcome) whose next step (queue.NextStep)
// has no live task and restores that step; a submitting payout's step is
// the create in flight, which is never enqueued again: the payout is moved
// to checking first (the create may have been sent), and its status check
// follows. A scheduled payout has no task: its reminder is its batch's
// place in the releaser's due index (ledger.Schedule), which a sweep puts
// back should it be missing.
//
// A task is live only where something will run it (queue.Liveness): a
// pending task in the queue's pending list, an active one in the active
// list with a lease not expired longer ago than LeaseGrace, a scheduled or
// retry one in its zset. Any other task holding the step's ID (an active
// task without a lease, as hibiken/asynq#1051 and #1144 leave behind, a
// pending one not in the list...) is an orphan: it is removed
// (queue.RemoveOrphan, which checks again atomically) and the step restored
// as for a deleted task, so that exactly one task holds the ID.
//
// A payout whose last transition is younger than the grace period is left
// to the handler that is acting on it. Every repair is a compare-and-set in
// the ledger or an idempotent enqueue (queue.Remind), so two sweeps at once,
// or a sweep racing a worker, do no harm; the lease only saves work.
package reconcile

import (
	"context"
	"fmt"
	"time"

	"github.com/acme/payout/internal/ledger"
	"github.com/acme/payout/internal/lifecycle"
	"github.com/acme/payout/internal/notify"
	"github.com/acme/payout/internal/queue"
	"github.com/acme/payout/internal/view"
	"github.com/redis/go-redis/v9"
	"github.com/rs/zerolog"
)

// Defaults of Config.
const (
	DefaultInterval = 3 * time.Minute
	DefaultGrace    = time.Minute
)

// Config tunes a Sweeper.
type Config struct {
	// Interval between sweeps of Run (one sweep per interval across all
	// processes that run it). Default 3m.
	Interval time.Duration
	// Grace leaves alone a payout whose last transition is younger (on
	// Redis's clock). It must exceed the time a handler needs between a
	// transition and the enqueue that follows it. Default 1m.
	Grace time.Duration
	// LeaseGrace: an active task whose lease expired longer ago than this
	// is lost (Asynq's recoverer, which acts on leases expired 30 s ago
	// once a minute, would have moved it). Default queue.DefaultLeaseGrace
	// (2m).
	LeaseGrace time.Duration
}

// Validate reports what is wrong with c.
func (c Config) Validate() error {
	if c.Interval < 0 || c.Grace < 0 || c.LeaseGrace < 0 {
		return fmt.Errorf("reconcile: interval and graces must not be negative")
	}
	if c.LeaseGrace > 0 && c.LeaseGrace < 90*time.Second {
		return fmt.Errorf("reconcile: lease grace %s is shorter than Asynq's recoverer takes (90s): a task it is about to recover would be run twice", c.LeaseGrace)
	}
	return nil
}

func (c Config) withDefaults() Config {
	if c.Interval == 0 {
		c.Interval = DefaultInterval
	}
	if c.Grace == 0 {
		c.Grace = DefaultGrace
	}
	if c.LeaseGrace == 0 {
		c.LeaseGrace = queue.DefaultLeaseGrace
	}
	return c
}

// Repair is one restored step.
type Repair struct {
	Batch      string
	ExternalID string
	Found      lifecycle.State // the payout's state when found
	Task       string          // the task ID restored
	Orphan     bool            // a task held the ID where nothing runs it; it was removed
	Done       bool            // false in a dry run
}

// Report sums up a sweep.
type Report struct {
	Batches int // batches with open payouts that were swept
	Open    int // open payouts looked at
	Repairs []Repair
	// Expired are the batches whose approval request expired: discarded
	// (or, in a dry run, to be discarded) with every payout cancelled.
	Expired []Expiry
}

// Expiry is a batch awaiting approval whose approval request expired.
type Expiry struct {
	Batch     string
	Reason    string // "approval expired after 7 days"
	Cancelled int    // payouts cancelled
	Done      bool   // false in a dry run
}

// Sweeper finds and repairs open payouts without a live task.
type Sweeper struct {
	ledger   *ledger.Ledger
	queue    *queue.Queue
	cfg      Config
	log      zerolog.Logger
	OnRepair func(Repair) // called for every repair done (metrics); may be nil
	OnSweep  func(Report) // called after every sweep of Run that finished (metrics); may be nil
	// Notify is told of every batch the sweep discards because its
	// approval request expired (notify.Expired); may be nil.
	Notify *notify.Emitter
}

// New builds a Sweeper on rdb (the client the Asynq tasks live on) and l.
func New(rdb redis.UniversalClient, l *ledger.Ledger, cfg Config, log zerolog.Logger) *Sweeper {
	return &Sweeper{ledger: l, queue: queue.New(rdb), cfg: cfg.withDefaults(), log: log}
}

// chunk is how many open payouts one pipelined task lookup covers.
const chunk = 1000

// Sweep looks at every open payout of every loaded batch once and restores
// the next step of those that have no live task. With dryRun it only
// reports what it would restore.
func (s *Sweeper) Sweep(ctx context.Context, dryRun bool) (Report, error) {
	var rep Report
	live := s.queue.Liveness(s.cfg.LeaseGrace)
	now, err := s.ledger.Time(ctx)
	if err != nil {
		return rep, err
	}
	batches, err := view.New(s.ledger.Redis()).Statuses(ctx)
	if err != nil {
		return rep, err
	}
	if err := s.expire(ctx, now, batches, dryRun, &rep); err != nil {
		return rep, err
	}
	for _, b := range batches {
		if b.Counts.Open() == 0 {
			continue
		}
		// The queued payouts of a batch still loading belong to its
		// loader, which enqueues what it registered (a rerun of the load
		// resumes it); what workers have begun is swept like any other.
		loading := b.Phase != lifecycle.PhaseLoaded
		rep.Batches++
		if b.Counts.Rows[lifecycle.Scheduled] > 0 && !dryRun {
			// A scheduled payout's reminder is its batch's place in the
			// releaser's due index: restored here should it be lost.
			if err := s.ledger.Schedule().Index(ctx, b.ID); err != nil {
				return rep, err
			}
		}
		var buf []ledger.OpenPayout
		flush := func() error {
			err := s.repairChunk(ctx, live, now, buf, dryRun, &rep)
			buf = buf[:0]
			return err
		}
		err := s.ledger.EachOpen(ctx, b.ID, func(p ledger.OpenPayout) error {
			if loading && p.State == lifecycle.Queued {
				return nil
			}
			rep.Open++
			buf = append(buf, p)
			if len(buf) == chunk {
				return flush()
			}
			return nil
		})
		if err == nil && len(buf) > 0 {
			err = flush()
		}
		if err != nil {
			return rep, err
		}
	}
	return rep, nil
}

// expire discards the batches awaiting approval whose approval request
// expired (ledger.Controls.ExpireBatch: a compare-and-set against the
// approvals), cancels their payouts and emits batch_expired; a batch
// discarded so whose payouts were not all cancelled (a sweep died) is
// taken up again. Nothing of an expired batch is ever enqueued.
func (s *Sweeper) expire(ctx context.Context, now time.Time, batches []view.BatchStatus, dryRun bool, rep *Report) error {
	for _, b := range batches {
		due := b.Phase == lifecycle.PhaseAwaiting && !b.ExpiresAt.IsZero() && !now.Before(b.ExpiresAt)
		redo := b.Phase == lifecycle.PhaseDiscarded && b.ExpiredDiscard && b.Counts.Rows[lifecycle.Queued] > 0
		if !due && !redo {
			continue
		}
		if dryRun {
			rep.Expired = append(rep.Expired, Expiry{Batch: b.ID, Reason: ledger.ExpiryReason(b.Expiry)})
			continue
		}
		x, ok, err := s.ledger.Controls().ExpireBatch(ctx, b.ID)
		if err != nil {
			return err
		}
		if !ok {
			continue // approved or discarded by a person first
		}
		rep.Expired = append(rep.Expired, Expiry{Batch: b.ID, Reason: x.Reason, Cancelled: x.Cancelled, Done: true})
		s.log.Warn().Str("batch", b.ID).Str("reason", x.Reason).Int("cancelled", x.Cancelled).
			Msg("batch discarded: its approval request expired; nothing of it is sent")
		if err := s.Notify.Emit(ctx, notify.Expired(b.ID, x.Reason)); err != nil {
			s.log.Error().Err(err).Str("batch", b.ID).Msg("notification of the expired batch not queued")
		}
	}
	return nil
}

// repairChunk restores the lost tasks of ps, a chunk of open payouts: a
// payout settled for the grace period whose next step's task nothing runs
// is added to rep.Repairs once restored, or as it is found if dryRun.
func (s *Sweeper) repairChunk(ctx context.Context, lv *queue.Liveness, now time.Time, ps []ledger.OpenPayout, dryRun bool, rep *Report) error {
	ps, steps := s.settled(now, ps)
	ids := make([]string, len(ps))
	for i, st := range steps {
		ids[i] = st.ID()
	}
	live, err := lv.Live(ctx, ids)
	if err != nil {
		return err
	}
	for i, p := range ps {
		if live[i] {
			continue
		}
		r := Repair{Batch: p.Batch, ExternalID: p.ExternalID, Found: p.State, Task: ids[i]}
		if !dryRun {
			restored, err := s.restore(ctx, steps[i], &r)
			if err != nil {
				return err
			}
			if !restored {
				continue
			}
		}
		rep.Repairs = append(rep.Repairs, r)
	}
	return nil
}

// settled is the payouts of ps that have a next step and have not moved
// for the grace period, with their next steps.
func (s *Sweeper) settled(now time.Time, ps []ledger.OpenPayout) ([]ledger.OpenPayout, []queue.Step) {
	// A payout that moved within the grace period is its handler's.
	settled := ps[:0:0]
	var steps []queue.Step
	for _, p := range ps {
		step, ok := queue.NextOpen(p)
		if ok && !step.Scheduler() && now.Sub(p.UpdatedAt) >= s.cfg.Grace {
			settled = append(settled, p)
			steps = append(steps, step)
		}
	}
	return settled, steps
}

// restore restores the next step of the payout r, whose task (r.Task)
// nothing runs, and reports whether it did (r.Done, r.Orphan). It does
// not when the task is found live after all, when it is an active task
// only suspected orphaned yet, or when the payout moved on meanwhile.
func (s *Sweeper) restore(ctx context.Context, step queue.Step, r *Repair) (bool, error) {
	// A task holding the ID where nothing runs it goes first (the
	// step's task gets the same ID); one found live after all
	// stays, and nothing is restored.
	o, err := s.queue.RemoveOrphan(ctx, r.Task, s.cfg.LeaseGrace, 2*s.cfg.Interval+s.cfg.LeaseGrace)
	if err != nil {
		return false, err
	}
	if o == queue.OrphanLive {
		return false, nil
	}
	if o == queue.OrphanSuspect {
		// Lost in this sweep's eyes; removed when a sweep at least
		// the lease grace later still finds it so.
		s.log.Info().Str("batch", r.Batch).Str("externalId", r.ExternalID).Str("task", r.Task).
			Msg("active task looks orphaned: removed if still so after the lease grace")
		return false, nil
	}
	r.Orphan = o == queue.OrphanRemoved
	ok, err := s.repair(ctx, step, r)
	if err != nil {
		return false, err
	}
	if !ok {
		return false, nil // it moved on meanwhile: its handler is acting
	}
	r.Done = true
	if s.OnRepair != nil {
		s.OnRepair(*r)
	}
	s.log.Warn().Str("batch", r.Batch).Str("externalId", r.ExternalID).Str("found", string(r.Found)).
		Str("task", r.Task).Bool("orphanRemoved", r.Orphan).Msg("reconciler restored a lost task")
	return true, nil
}

// repair restores step, the next step of a payout (r); false means the
// ledger moved on first. A step in flight (a submitting payout's create)
// is interrupted in the ledger first: the payout moves to checking, and
// its status check is restored instead, never a second create.
func (s *Sweeper) repair(ctx context.Context, step queue.Step, r *Repair) (bool, error) {
	if step.InFlight {
		seq, ok, err := s.ledger.InterruptSubmitting(ctx, step.Batch, step.ExternalID, step.N, s.cfg.Grace)
		if err != nil || !ok {
			return false, err
		}
		step.Kind, step.N, step.InFlight = queue.Status, seq, false
		r.Task = step.ID()
	}
	if _, err := s.queue.Remind(ctx, step); err != nil {
		return false, err
	}
	return true, nil
}

// Run sweeps every Interval until ctx is done, in whichever process holds
// the sweep's lease for that interval.
func (s *Sweeper) Run(ctx context.Context) {
	s.ledger.Locks().Leased(ctx, "reconcile", s.cfg.Interval, func(err error) {
		s.log.Warn().Err(err).Msg("reconciler: could not take the lease; next interval")
	}, func(ctx context.Context) {
		rep, err := s.Sweep(ctx, false)
		if err != nil {
			s.log.Error().Err(err).Msg("reconciler sweep failed; next interval")
			return
		}
		s.log.Info().Int("batches", rep.Batches).Int("open", rep.Open).Int("repaired", len(rep.Repairs)).
			Int("expired", len(rep.Expired)).Msg("reconciler sweep")
		if s.OnSweep != nil {
			s.OnSweep(rep)
		}
	})
}
