package worker

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/acme/payout/jobs"
	"github.com/rs/zerolog"
)

// rollbackPoll is how often a worker looks at the ledger's rollback mark
// (one GET), so that every worker of the fleet stops creating once one of
// them found the ledger gone back in time, and goes on once an operator
// cleared it.
const rollbackPoll = 5 * time.Second

// epochsKept bounds the batches whose create epoch a worker remembers.
const epochsKept = 4096

// epochs is what this worker saw of the ledger's create epochs (see
// ledger/epoch.go): per batch the highest value a begin-create answered.
// A proceed that answers a value no higher than one seen before the call
// was sent means Redis went back in time: its payouts may have been
// created already, and nothing is sent.
type epochs struct {
	mu      sync.Mutex
	seen    map[string]int64
	halted  bool      // no create: the ledger went back in time
	pending string    // a finding the ledger has not recorded yet
	next    time.Time // when to look at the ledger's mark again
}

// floor is the highest epoch of batch seen so far: a begin-create sent now
// must answer more.
func (e *epochs) floor(batch string) int64 {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.seen[batch]
}

// observe records the epoch got of a proceed sent when floor was the
// highest seen, and reports whether the ledger went back in time. 0 is no
// epoch (a decision the script did not take as proceed).
func (e *epochs) observe(batch string, floor, got int64) bool {
	if got == 0 {
		return false
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if got > e.seen[batch] {
		if e.seen == nil || len(e.seen) >= epochsKept {
			e.seen = map[string]int64{}
		}
		e.seen[batch] = got
	}
	return got <= floor
}

// createsStopped returns a deferral while the ledger is known to have gone
// back in time; every rollbackPoll it looks at the ledger's mark (and
// records a finding not recorded yet).
func (w *Worker) createsStopped(ctx context.Context) error {
	e := &w.epochs
	e.mu.Lock()
	due := !time.Now().Before(e.next)
	if due {
		e.next = time.Now().Add(rollbackPoll)
	}
	e.mu.Unlock()
	if due {
		w.refreshRollback(ctx)
	}
	e.mu.Lock()
	halted := e.halted
	e.mu.Unlock()
	if !halted {
		return nil
	}
	w.metrics.deferred.WithLabelValues("ledger_rolled_back").Inc()
	return &deferral{reason: "the ledger went back in time: no create until an operator reconciled it", after: w.cfg.PauseRetry}
}

// refreshRollback records a pending finding and follows the ledger's mark:
// found, creates stop; cleared by an operator, they go on from the epochs
// the ledger holds now.
func (w *Worker) refreshRollback(ctx context.Context) {
	e := &w.epochs
	e.mu.Lock()
	pending := e.pending
	e.mu.Unlock()
	if pending != "" {
		if err := w.ledger.RecordRollback(ctx, pending); err != nil {
			w.log.Error().Err(err).Msg("ledger went back in time, and recording it failed; creates stay stopped")
			return
		}
	}
	what, found, err := w.ledger.RolledBack(ctx)
	if err != nil {
		return // Redis unreachable: nothing is created either
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.pending == pending {
		e.pending = ""
	}
	switch {
	case found && !e.halted:
		e.halted = true
		w.metrics.rolledBack.Set(1)
		w.log.Error().Str("alert", "ledger_rolled_back").Str("found", what).
			Msg("LEDGER WENT BACK IN TIME (found by a worker): this worker sends no create until it is reconciled")
	case !found && e.halted && e.pending == "":
		e.halted, e.seen = false, map[string]int64{}
		w.metrics.rolledBack.Set(0)
		w.log.Warn().Msg("ledger rollback mark cleared by an operator: creates go on")
	}
}

// rolledBack stops this worker's creates after a proceed answered an epoch
// it had seen before: the payout is left submitting (after a resume, its
// task checks the PSP's status, never sends blindly), the finding is
// recorded for the fleet, the queue is paused and one alert logged.
func (w *Worker) rolledBack(ctx context.Context, p jobs.CreatePayload, floor, got int64, log zerolog.Logger) error {
	what := fmt.Sprintf("batch %s: a create mark took epoch %d after worker %s had seen %d, at %s",
		p.Batch, got, w.ledger.Actor(), floor, time.Now().UTC().Format(time.RFC3339))
	e := &w.epochs
	e.mu.Lock()
	first := !e.halted
	e.halted, e.pending, e.next = true, what, time.Time{}
	e.mu.Unlock()
	w.metrics.rolledBack.Set(1)
	if first {
		log.Error().Str("alert", "ledger_rolled_back").Int64("epoch", got).Int64("seen", floor).
			Msg("LEDGER WENT BACK IN TIME: Redis lost acknowledged writes (restarted from an older snapshot, or a failover); payouts it shows queued may be paid already. NOTHING SENT; all creates stopped and the queue paused. Reconcile with the PSP, then `payout resume --ledger-reconciled`")
		if err := w.queue.Pause(ctx); err == nil {
			w.metrics.pauses.Inc()
			w.notifyPause(ctx, what)
			// payout history (the PayoutQueuePaused runbook's first step)
			// says who paused the queue and why, as for a PSP refusal.
			if aerr := w.ledger.Audit().Queue(ctx, w.ledger.Actor(), "paused", "the ledger went back in time: "+what); aerr != nil {
				log.Warn().Err(aerr).Msg("queue paused, but the audit trail could not record it")
			}
		}
	}
	w.refreshRollback(ctx)
	return &deferral{reason: "the ledger went back in time (" + what + "); nothing sent", after: w.cfg.PauseRetry}
}
