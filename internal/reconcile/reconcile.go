// Package reconcile restores lost reminders. The ledger is the truth about
// every payout; Asynq tasks only remind a worker of the next step. A task
// can be lost: its handler returned after a Redis reply was lost, an
// operator deleted or archived it in the web UI, a process died between
// two writes. A sweep finds every open payout (queued, submitting,
// checking) whose next step has no live task and restores that step:
//
//	queued      -> the create task of the next attempt
//	checking    -> the current status check
//	submitting  -> moved to checking (the create may have been sent), then
//	               its status check: never a create
//	created     -> (awaiting its outcome) the current outcome check
//
// A task is live only where something will run it (jobs.Liveness): a
// pending task in the queue's pending list, an active one in the active
// list with a lease not expired longer ago than LeaseGrace, a scheduled or
// retry one in its zset. Any other task holding the step's ID (an active
// task without a lease, as hibiken/asynq#1051 and #1144 leave behind, a
// pending one not in the list...) is an orphan: it is removed
// (jobs.RemoveOrphan, which checks again atomically) and the step restored
// as for a deleted task, so that exactly one task holds the ID.
//
// A payout whose last transition is younger than the grace period is left
// to the handler that is acting on it. Every repair is a compare-and-set in
// the ledger or an idempotent enqueue (jobs.Ensure), so two sweeps at once,
// or a sweep racing a worker, do no harm; the lease only saves work.
package reconcile

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/acme/payout/internal/ledger"
	"github.com/acme/payout/jobs"
	"github.com/hibiken/asynq"
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
	// once a minute, would have moved it). Default jobs.DefaultLeaseGrace
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
		c.LeaseGrace = jobs.DefaultLeaseGrace
	}
	return c
}

// Repair is one restored step.
type Repair struct {
	Batch      string
	ExternalID string
	Found      ledger.State // the payout's state when found
	Task       string       // the task ID restored
	Orphan     bool         // a task held the ID where nothing runs it; it was removed
	Done       bool         // false in a dry run
}

// Report sums up a sweep.
type Report struct {
	Batches int // batches with open payouts that were swept
	Open    int // open payouts looked at
	Repairs []Repair
}

// Sweeper finds and repairs open payouts without a live task.
type Sweeper struct {
	rdb      redis.UniversalClient
	ledger   *ledger.Ledger
	client   *asynq.Client
	insp     *asynq.Inspector
	cfg      Config
	log      zerolog.Logger
	OnRepair func(Repair) // called for every repair done (metrics); may be nil
	OnSweep  func(Report) // called after every sweep of Run that finished (metrics); may be nil
}

// New builds a Sweeper on rdb (the client the Asynq tasks live on) and l.
func New(rdb redis.UniversalClient, l *ledger.Ledger, cfg Config, log zerolog.Logger) *Sweeper {
	return &Sweeper{
		rdb: rdb, ledger: l, cfg: cfg.withDefaults(), log: log,
		client: asynq.NewClientFromRedisClient(rdb),
		insp:   asynq.NewInspectorFromRedisClient(rdb),
	}
}

// chunk is how many open payouts one pipelined task lookup covers.
const chunk = 1000

// Sweep looks at every open payout of every loaded batch once and restores
// the next step of those that have no live task. With dryRun it only
// reports what it would restore.
func (s *Sweeper) Sweep(ctx context.Context, dryRun bool) (Report, error) {
	var rep Report
	live := jobs.NewLiveness(s.rdb, s.cfg.LeaseGrace)
	now, err := s.ledger.Time(ctx)
	if err != nil {
		return rep, err
	}
	batches, err := s.ledger.Statuses(ctx)
	if err != nil {
		return rep, err
	}
	for _, b := range batches {
		if b.Counts.Open() == 0 {
			continue
		}
		// The queued payouts of a batch still loading belong to its
		// loader, which enqueues what it registered (a rerun of the load
		// resumes it); what workers have begun is swept like any other.
		loading := b.Phase != ledger.PhaseLoaded
		rep.Batches++
		var buf []ledger.OpenPayout
		flush := func() error {
			err := s.repairChunk(ctx, live, now, buf, dryRun, &rep)
			buf = buf[:0]
			return err
		}
		err := s.ledger.EachOpen(ctx, b.ID, func(p ledger.OpenPayout) error {
			if loading && p.State == ledger.Queued {
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

// due is the task ID of the step an open payout waits for.
func due(p ledger.OpenPayout) string {
	switch p.State {
	case ledger.Queued:
		return jobs.CreateTaskID(p.ExternalID, p.Creates+1)
	case ledger.Submitting:
		return jobs.CreateTaskID(p.ExternalID, p.Creates)
	case ledger.Created:
		return jobs.OutcomeTaskID(p.ExternalID, p.OutcomeSeq)
	}
	return jobs.StatusTaskID(p.ExternalID, p.Seq)
}

func (s *Sweeper) repairChunk(ctx context.Context, lv *jobs.Liveness, now time.Time, ps []ledger.OpenPayout, dryRun bool, rep *Report) error {
	// A payout that moved within the grace period is its handler's.
	settled := ps[:0:0]
	for _, p := range ps {
		if now.Sub(p.UpdatedAt) >= s.cfg.Grace {
			settled = append(settled, p)
		}
	}
	ps = settled
	ids := make([]string, len(ps))
	for i, p := range ps {
		ids[i] = due(p)
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
			// A task holding the ID where nothing runs it goes first (the
			// step's task gets the same ID); one found live after all
			// stays, and nothing is restored.
			o, err := jobs.RemoveOrphan(ctx, s.rdb, ids[i], s.cfg.LeaseGrace, 2*s.cfg.Interval+s.cfg.LeaseGrace)
			if err != nil {
				return err
			}
			if o == jobs.OrphanLive {
				continue
			}
			if o == jobs.OrphanSuspect {
				// Lost in this sweep's eyes; removed when a sweep at least
				// the lease grace later still finds it so.
				s.log.Info().Str("batch", p.Batch).Str("externalId", p.ExternalID).Str("task", ids[i]).
					Msg("active task looks orphaned: removed if still so after the lease grace")
				continue
			}
			r.Orphan = o == jobs.OrphanRemoved
			ok, err := s.repair(ctx, p, &r)
			if err != nil {
				return err
			}
			if !ok {
				continue // it moved on meanwhile: its handler is acting
			}
			r.Done = true
			if s.OnRepair != nil {
				s.OnRepair(r)
			}
			s.log.Warn().Str("batch", r.Batch).Str("externalId", r.ExternalID).Str("found", string(r.Found)).
				Str("task", r.Task).Bool("orphanRemoved", r.Orphan).Msg("reconciler restored a lost task")
		}
		rep.Repairs = append(rep.Repairs, r)
	}
	return nil
}

// repair restores p's next step; false means the ledger moved on first.
func (s *Sweeper) repair(ctx context.Context, p ledger.OpenPayout, r *Repair) (bool, error) {
	var (
		t   *asynq.Task
		err error
	)
	switch p.State {
	case ledger.Queued:
		t, err = jobs.NewCreateTask(jobs.CreatePayload{Batch: p.Batch, ExternalID: p.ExternalID, Attempt: p.Creates + 1,
			Amount: p.Amount, Destination: p.Destination})
	case ledger.Submitting:
		// The create may have been sent: only the status path may follow.
		seq, ok, ierr := s.ledger.InterruptSubmitting(ctx, p.Batch, p.ExternalID, p.Creates, s.cfg.Grace)
		if ierr != nil || !ok {
			return false, ierr
		}
		r.Task = jobs.StatusTaskID(p.ExternalID, seq)
		t, err = jobs.NewStatusTask(jobs.StatusPayload{Batch: p.Batch, ExternalID: p.ExternalID, Seq: seq,
			Amount: p.Amount, Destination: p.Destination}, 0)
	case ledger.Created: // awaiting its outcome
		t, err = jobs.NewOutcomeTask(jobs.OutcomePayload{Batch: p.Batch, ExternalID: p.ExternalID, Seq: p.OutcomeSeq,
			Amount: p.Amount, Destination: p.Destination}, 0)
	default:
		t, err = jobs.NewStatusTask(jobs.StatusPayload{Batch: p.Batch, ExternalID: p.ExternalID, Seq: p.Seq,
			Amount: p.Amount, Destination: p.Destination}, 0)
	}
	if err != nil {
		return false, err
	}
	if _, err := jobs.Ensure(ctx, s.client, s.insp, t, r.Task); err != nil {
		return false, err
	}
	return true, nil
}

// Run sweeps every Interval until ctx is done, in whichever process holds
// the sweep's lease for that interval.
func (s *Sweeper) Run(ctx context.Context) {
	host, _ := os.Hostname()
	owner := fmt.Sprintf("%s:%d:%d", host, os.Getpid(), time.Now().UnixNano())
	t := time.NewTicker(s.cfg.Interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		ok, err := s.ledger.Locks().TryLease(ctx, "reconcile", owner, s.cfg.Interval)
		if err != nil {
			s.log.Warn().Err(err).Msg("reconciler: could not take the lease; next interval")
			continue
		}
		if !ok {
			continue
		}
		rep, err := s.Sweep(ctx, false)
		if err != nil {
			s.log.Error().Err(err).Msg("reconciler sweep failed; next interval")
			continue
		}
		s.log.Info().Int("batches", rep.Batches).Int("open", rep.Open).Int("repaired", len(rep.Repairs)).Msg("reconciler sweep")
		if s.OnSweep != nil {
			s.OnSweep(rep)
		}
	}
}
