package worker

import (
	"context"
	"fmt"
	"time"

	"github.com/acme/payout/internal/decide"
	"github.com/acme/payout/internal/ledger"
	"github.com/acme/payout/internal/lifecycle"
	"github.com/acme/payout/internal/psp"
	"github.com/acme/payout/internal/queue"
	"github.com/acme/payout/jobs"
	"github.com/hibiken/asynq"
)

// watchBatch is how many due watch checks one sweep enqueues at most: the
// rest wait for the next sweep (every WatchSweep, 10 s by default: 4.3
// million a day), so the checks of many paid payouts spread over the day
// instead of flooding the queue the withdrawals share at once.
const watchBatch = 500

// HandleWatch processes a withdrawal:watch task: it asks the PSP for the
// status of a paid payout's order while the payout is watched, and records
// returned (a status of --psp-returned-statuses), the next check, or the
// end of the watch (ledger.RecordWatch, a compare-and-set on the check
// read). A sweep's task whose check is no longer due at its time (done by
// an earlier task of the same ID: a sweep read the check before that task
// recorded it, and watch tasks are not retained) asks nothing; a task
// redelivered while its check is under way asks again and writes nothing.
func (w *Worker) HandleWatch(ctx context.Context, t *asynq.Task) error {
	p, err := jobs.DecodeWatch(t.Payload())
	if err != nil {
		w.log.Error().Err(err).Msg("malformed watch task archived")
		return fmt.Errorf("%w: %w", err, asynq.SkipRetry)
	}
	log := w.log.With().Str("batch", p.Batch).Str("externalId", p.ExternalID).Logger()
	pay, snap, err := w.snapshotOf(ctx, "watch", p.Batch, p.ExternalID, log)
	if err != nil || !snap.PreWatch() {
		return err
	}
	if p.DueMS != 0 && snap.Watch.Due.UnixMilli() != p.DueMS {
		log.Debug().Int64("due_ms", p.DueMS).Time("next", snap.Watch.Due).Msg("watch check done already; nothing asked")
		return nil
	}
	res, err := w.queryStatus(ctx, pay, log)
	if err != nil {
		return err
	}
	ctx, cancel := detached(ctx)
	defer cancel()
	answer, err := w.watchAnswer(ctx, res)
	if err != nil {
		return err
	}
	w.metrics.checks.WithLabelValues("watch_" + watchLabel(answer)).Inc()
	step, err := w.ledger.RecordWatch(ctx, snap, answer)
	if err != nil {
		return err
	}
	switch step.Action {
	case decide.WatchReturned:
		w.metrics.outcomes.WithLabelValues(string(lifecycle.Returned)).Inc()
		log.Warn().Str("order", pay.OrderID).Str("psp_status", answer.PSPStatus).Str("reason", answer.Reason).
			Msg("payout returned: the money came back after paid")
	case decide.WatchEnded:
		log.Debug().Msg("watch of a paid payout ended")
	}
	return nil
}

// watchLabel is the checks metric's label of a watch check's answer.
func watchLabel(a decide.WatchAnswer) string {
	switch {
	case a.Returned:
		return "returned"
	case a.PSPStatus != "":
		return "unchanged"
	}
	return "no_answer"
}

// watchAnswer is what the status answer res says of a paid order: returned
// when its status word is one of --psp-returned-statuses (the one status
// classifier, psp.StatusWords). A refused credential is rechecked
// (authfault.go) and a query not processed defers the task; any other
// answer (a 404, a fault, another word) is no news: the next check follows.
func (w *Worker) watchAnswer(ctx context.Context, res psp.Result) (decide.WatchAnswer, error) {
	a := decide.WatchAnswer{HTTP: res.HTTPStatus}
	switch res.Outcome {
	case psp.Created:
		a.PSPStatus = res.Order.Status
		if w.cfg.Outcome.Words.Outcome(res.Order.Status) == psp.OrderReturned {
			a.Returned, a.Reason, a.ChangedAt = true, res.Order.Reason, res.Order.ChangedAt
		}
	case psp.AuthFault:
		if verdict, err := w.authFault(ctx, res, "watch query"); verdict != authRequest {
			return a, err
		}
	case psp.RetryLater:
		w.metrics.deferred.WithLabelValues("status_not_processed").Inc()
		return a, &deferral{reason: "watch query not processed: " + res.Message, after: w.cfg.Outcome.interval(1)}
	}
	return a, nil
}

// watchNow enqueues a watch check of the watched payout pay at once (a PSP
// callback named it).
func (w *Worker) watchNow(ctx context.Context, pay ledger.Payout) error {
	_, err := w.queue.Remind(ctx, queue.WatchStep(pay, time.Now().Unix()))
	return err
}

// runWatchSweep starts the watch sweep of this worker unless it is off
// (WatchSweep negative, or no watch window); the channel closes when it
// has stopped.
func (w *Worker) runWatchSweep(ctx context.Context) <-chan struct{} {
	done := make(chan struct{})
	if w.cfg.WatchSweep < 0 || w.cfg.Watch.Window <= 0 {
		close(done)
		return done
	}
	log := w.log.With().Str("component", "watch").Logger()
	go func() {
		defer close(done)
		t := time.NewTicker(w.cfg.WatchSweep)
		defer t.Stop()
		for {
			if n, err := w.SweepWatches(ctx); err != nil && ctx.Err() == nil {
				log.Warn().Err(err).Msg("watch sweep failed; next one follows")
			} else if n > 0 {
				log.Debug().Int("enqueued", n).Msg("watch checks due")
			}
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
		}
	}()
	return done
}

// SweepWatches enqueues a watch check task for every watched payout whose
// check is due (ledger.DueWatches, at most watchBatch), with the task ID of
// its due second: idempotent, so every worker may sweep, and a check whose
// task is live is not enqueued twice. It returns how many it enqueued.
func (w *Worker) SweepWatches(ctx context.Context) (int, error) {
	due, err := w.ledger.DueWatches(ctx, watchBatch)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, d := range due {
		s := queue.DueWatchStep(ledger.Payout{Batch: d.Batch, ExternalID: d.ExternalID}, d.Due)
		r, err := w.queue.Remind(ctx, s)
		if err != nil {
			return n, err
		}
		if r != queue.RemindedLive {
			n++
		}
	}
	return n, nil
}
