package worker

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/acme/payout/internal/callback"
	"github.com/acme/payout/internal/decide"
	"github.com/acme/payout/internal/ledger"
	"github.com/acme/payout/internal/lifecycle"
	"github.com/acme/payout/internal/psp"
	"github.com/acme/payout/internal/queue"
	"github.com/acme/payout/jobs"
	"github.com/hibiken/asynq"
	"github.com/rs/zerolog"
)

// followOutcome queues the first outcome check of pay, just created, when
// the transition that created it made it await its outcome.
func (w *Worker) followOutcome(ctx context.Context, pay ledger.Payout, awaiting bool) error {
	if !w.cfg.Outcome.Track || !awaiting {
		return nil
	}
	return w.enqueueOutcome(ctx, pay, 1, w.cfg.Outcome.interval(1))
}

// HandleOutcome processes a withdrawal:outcome task: it asks the PSP for
// the status of a created order and records paid, failed or (still
// pending) the next check. A callback only moves such a check to now; the
// status answer is the proof.
func (w *Worker) HandleOutcome(ctx context.Context, t *asynq.Task) error {
	p, err := jobs.DecodeOutcome(t.Payload())
	if err != nil {
		w.log.Error().Err(err).Msg("malformed outcome task archived")
		return fmt.Errorf("%w: %w", err, asynq.SkipRetry)
	}
	log := w.log.With().Str("batch", p.Batch).Str("externalId", p.ExternalID).Int("oseq", p.Seq).Logger()
	pay, snap, err := w.snapshotOf(ctx, "outcome", p.Batch, p.ExternalID, log)
	if err != nil {
		return err
	}
	if step, ask := snap.PreOutcome(p.Seq); !ask {
		switch {
		case step.Action == decide.OutcomeStale:
			// Another check is current: make sure it is enqueued.
			return w.enqueueOutcome(ctx, pay, step.Seq, w.cfg.Outcome.interval(1))
		case pay.State == lifecycle.NeedsReview:
			log.Warn().Msg("outcome task of a payout that needs review does nothing: use `payout resolve`")
		}
		return nil
	}
	res, err := w.queryStatus(ctx, pay, log)
	if err != nil {
		return err
	}
	ctx, cancel := detached(ctx)
	defer cancel()
	verdict, reason, err := w.verdict(ctx, pay, res, log)
	if err != nil {
		return err
	}
	w.metrics.checks.WithLabelValues("outcome_" + string(verdict)).Inc()
	step, err := w.ledger.RecordOutcome(ctx, snap, p.Seq,
		decide.OutcomeAnswer{Verdict: verdict, PSPStatus: res.Order.Status, Reason: reason, HTTPStatus: res.HTTPStatus})
	if err != nil {
		return err
	}
	switch step.Action {
	case decide.OutcomeDone:
		w.outcome(ctx, p.Batch, step.State)
		ev := log.Info()
		if step.State == lifecycle.Failed {
			ev = log.Warn().Str("reason", reason)
		}
		ev.Str("order", pay.OrderID).Str("psp_status", res.Order.Status).Msg("payout " + string(step.State))
	case decide.OutcomeAgain:
		pay.OutcomeSeq = step.Seq
		return w.enqueueOutcome(ctx, pay, step.Seq, w.cfg.Outcome.interval(step.Polls+1))
	case decide.OutcomeReview:
		w.outcome(ctx, p.Batch, lifecycle.NeedsReview)
		log.Error().Str("reason", step.Error).Msg("payout needs review")
		return needsReview(p.ExternalID, step.Error)
	case decide.OutcomeStale:
		pay.OutcomeSeq = step.Seq
		return w.enqueueOutcome(ctx, pay, step.Seq, w.cfg.Outcome.interval(1))
	}
	return nil
}

// verdict is what the status answer res says of the outcome of pay's
// order, with the reason of a failure. A refused credential is rechecked
// (authfault.go) and a query not processed defers the task: neither is
// recorded unless the recheck shows the credentials work (no answer).
func (w *Worker) verdict(ctx context.Context, pay ledger.Payout, res psp.Result, log zerolog.Logger) (decide.Verdict, string, error) {
	switch res.Outcome {
	case psp.Created:
		switch w.cfg.Outcome.Words.Outcome(res.Order.Status) {
		case psp.OrderPaid:
			return decide.VerdictPaid, "", nil
		case psp.OrderFailed, psp.OrderReturned:
			// Money that came back before the order was seen paid was
			// not paid: failed, the PSP's word kept.
			reason := "PSP status " + res.Order.Status
			if res.Order.Reason != "" {
				reason += ": " + res.Order.Reason
			}
			return decide.VerdictFailed, reason, nil
		}
		return decide.VerdictPending, "", nil
	case psp.AuthFault:
		if verdict, err := w.authFault(ctx, res, "outcome query"); verdict != authRequest {
			return "", "", err
		}
	case psp.RetryLater:
		w.metrics.deferred.WithLabelValues("status_not_processed").Inc()
		return "", "", &deferral{reason: "outcome query not processed: " + res.Message, after: w.cfg.Outcome.interval(1)}
	case psp.NotFound:
		// Right after creation a PSP's status view may lag (the same lag
		// the absence spacing D covers): a 404 then is no news. Later it is.
		created := pay.OutcomeDue.Add(-w.cfg.Outcome.Window)
		if time.Since(created) > w.cfg.Policy.AbsentSpacing {
			log.Error().Str("alert", "psp_order_vanished").Str("order", pay.OrderID).
				Msg("PSP no longer finds an order it created; still waiting for its outcome")
		} else {
			log.Debug().Str("order", pay.OrderID).Msg("PSP does not show the new order yet (status lag)")
		}
	}
	return decide.VerdictNoAnswer, "", nil
}

// enqueueOutcome makes sure outcome check seq of pay is a live task, as
// enqueueStatus does for status checks.
func (w *Worker) enqueueOutcome(ctx context.Context, pay ledger.Payout, seq int, delay time.Duration) error {
	return w.remind(ctx, step(pay, queue.Outcome, seq).In(delay))
}

// Hint moves the next status query of the payout a PSP callback names to
// now: the outcome check of a created payout awaiting its outcome, the
// status check of one whose create answer was unknown, or the watch check
// of a paid payout under watch (watch.go); for a payout a
// person marked rejected it enqueues a status query (HandleVerify). Nothing else
// changes; the query's answer decides (package callback). It reports
// whether such a query was waiting.
func (w *Worker) Hint(ctx context.Context, h callback.Hint) (bool, error) {
	if h.ExternalID == "" {
		return false, nil // the order id alone leads to no payout here
	}
	owners, err := w.ledger.Claims().Owners(ctx, "", []string{h.ExternalID})
	if err != nil {
		return false, err
	}
	batch, ok := owners[h.ExternalID]
	if !ok {
		return false, nil
	}
	pay, err := w.ledger.Get(ctx, batch, h.ExternalID)
	if errors.Is(err, ledger.ErrNotFound) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	var id string
	switch {
	case pay.State == lifecycle.Rejected && pay.ResolvedBy != "":
		// A person decided it will not be paid; the PSP's word about it
		// is asked for, never dropped (HandleVerify).
		return true, w.enqueueVerify(ctx, pay)
	case pay.Awaiting:
		id = jobs.OutcomeTaskID(pay.ExternalID, pay.OutcomeSeq)
	case pay.State == lifecycle.Checking:
		id = jobs.StatusTaskID(pay.ExternalID, pay.Seq)
	case pay.Watch.On:
		// A paid payout under watch: its watch check, now (HandleWatch).
		return true, w.watchNow(ctx, pay)
	default:
		return false, nil
	}
	// Missing: the reconciler restores it; already due or running: nothing to move.
	return w.queue.RunNow(ctx, id)
}
