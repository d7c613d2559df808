package worker

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/acme/payout/internal/card"
	"github.com/acme/payout/internal/ledger"
	"github.com/acme/payout/internal/lifecycle"
	"github.com/acme/payout/internal/psp"
	"github.com/acme/payout/internal/queue"
	"github.com/acme/payout/jobs"
	"github.com/hibiken/asynq"
	"github.com/rs/zerolog"
)

// enqueueVerify queues the verification of a payout a person marked
// rejected, after a PSP callback named it: the callbacks of one second
// share one task.
func (w *Worker) enqueueVerify(ctx context.Context, pay ledger.Payout) error {
	at := time.Now().Unix()
	_, err := w.queue.Add(ctx, queue.VerifyStep(pay, at))
	return err
}

// HandleVerify processes a withdrawal:verify task: it asks the PSP about
// a payout a person marked rejected. An order found contradicts the
// person: the payout moves to needs_review (ledger.ContradictRejected),
// with an alert, payout_manual_contradictions_total and the
// payout_needs_review notification. A 404 leaves it rejected; no answer
// retries the task, so the callback's question is never dropped.
func (w *Worker) HandleVerify(ctx context.Context, t *asynq.Task) error {
	p, err := jobs.DecodeVerify(t.Payload())
	if err != nil {
		w.log.Error().Err(err).Msg("malformed verify task archived")
		return fmt.Errorf("%w: %w", err, asynq.SkipRetry)
	}
	log := w.log.With().Str("batch", p.Batch).Str("externalId", p.ExternalID).Logger()
	pay, err := w.ledger.Get(ctx, p.Batch, p.ExternalID)
	if errors.Is(err, ledger.ErrNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	if pay.State != lifecycle.Rejected || pay.ResolvedBy == "" {
		return nil // nothing a person decided stands to be contradicted
	}
	res, err := w.queryStatus(ctx, pay, log)
	if err != nil {
		return err
	}
	switch res.Outcome {
	case psp.Created:
		ctx, cancel := detached(ctx)
		defer cancel()
		return w.contradicted(ctx, pay, res, log)
	case psp.NotFound:
		log.Info().Msg("PSP has no order for a payout marked rejected: the rejection stands")
		return nil
	case psp.AuthFault:
		return w.pause(ctx, fmt.Sprintf("PSP refused our credentials on a status query (HTTP %d): %s", res.HTTPStatus, res.Message))
	}
	return fmt.Errorf("verify %s, marked rejected by %s: no usable PSP answer: %s", p.ExternalID, pay.ResolvedBy, res.Message)
}

// contradicted records that the PSP holds an order for pay, which a person
// marked rejected: needs_review, with the alert and the notification.
func (w *Worker) contradicted(ctx context.Context, pay ledger.Payout, res psp.Result, log zerolog.Logger) error {
	note := fmt.Sprintf("marked rejected by %s, but the PSP holds order %s with status %s: check whether it was paid",
		pay.ResolvedBy, card.Scrub(res.Order.OrderID), card.Scrub(res.Order.Status))
	err := w.ledger.ContradictRejected(ctx, pay.Batch, pay.ExternalID,
		ledger.Contradiction{OrderID: res.Order.OrderID, PSPStatus: res.Order.Status, Note: note})
	if errors.Is(err, ledger.ErrConflict) {
		return nil // moved on meanwhile (resolved again, or already contradicted)
	}
	if err != nil {
		return err
	}
	w.metrics.contradictions.Inc()
	w.outcome(ctx, pay.Batch, lifecycle.NeedsReview)
	log.Error().Str("alert", "manual_resolution_contradicted").Str("order", res.Order.OrderID).
		Str("psp_status", res.Order.Status).Str("resolved_by", pay.ResolvedBy).
		Msg("PSP contradicts a manual rejection: the payout needs review")
	return needsReview(pay.ExternalID, note)
}
