package worker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/acme/payout/internal/decide"
	"github.com/acme/payout/internal/ledger"
	"github.com/acme/payout/internal/lifecycle"
	"github.com/acme/payout/internal/money"
	"github.com/acme/payout/internal/psp"
	"github.com/acme/payout/internal/queue"
	"github.com/acme/payout/internal/vault"
	"github.com/acme/payout/jobs"
	"github.com/hibiken/asynq"
	"github.com/rs/zerolog"
)

// needsReview archives the task (visible in the web UI's Archived tab with
// the reason) after the ledger moved the payout to needs_review.
func needsReview(ext, reason string) error {
	return &reviewError{ext, reason, fmt.Errorf("payout %s needs review: %s: %w", ext, reason, asynq.SkipRetry)}
}

// HandleCreate processes a withdrawal:create task.
func (w *Worker) HandleCreate(ctx context.Context, t *asynq.Task) error {
	p, err := jobs.DecodeCreate(t.Payload())
	if err != nil {
		w.log.Error().Err(err).Msg("malformed create task archived")
		return fmt.Errorf("%w: %w", err, asynq.SkipRetry)
	}
	log := w.log.With().Str("batch", p.Batch).Str("externalId", p.ExternalID).Int("attempt", p.Attempt).Logger()
	if err := w.gate.hold(ctx); err != nil {
		return err
	}
	if err := w.createsStopped(ctx); err != nil {
		return err
	}
	floor := w.epochs.floor(p.Batch)
	b, acked, err := w.beginCreate(ctx, p)
	if errors.Is(err, ledger.ErrNotFound) {
		log.Error().Msg("create task for a payout the ledger does not know; archived")
		return fmt.Errorf("%w: %w", err, asynq.SkipRetry)
	}
	if err != nil {
		return err
	}
	if w.cfg.Unsafe.skipSubmittingCheck && (b.Action == decide.CheckNow || b.Action == decide.EnsureStatus) {
		b.Action = decide.Proceed // the deliberately broken worker: see unsafe.go
	}
	if handled, err := w.createWithoutSending(ctx, b, log); handled {
		return err
	}

	// The payout is submitting: from here every path records an outcome.
	wctx, cancel := detached(ctx)
	defer cancel()
	if w.epochs.observe(p.Batch, floor, b.Epoch) {
		return w.rolledBack(wctx, p, floor, b.Epoch, log)
	}
	if acked < w.cfg.WaitReplicas {
		return w.holdBackUnreplicated(wctx, p, b.Payout, acked, log)
	}
	return w.sendCreate(ctx, wctx, p, b.Payout)
}

// createWithoutSending does what a begin-create decision other than
// proceed asks for; handled is false when the create is to be sent.
func (w *Worker) createWithoutSending(ctx context.Context, b ledger.Begin, log zerolog.Logger) (handled bool, err error) {
	switch b.Action {
	case decide.Skip:
		if b.Payout.State == lifecycle.Queued {
			// A stale attempt of a payout that waits for a newer one: make
			// sure that one exists (a crash may have lost its enqueue).
			return true, w.enqueueCreate(ctx, b.Payout, b.Payout.Creates+1)
		}
		if b.Payout.State == lifecycle.NeedsReview {
			log.Warn().Msg("create task of a payout that needs review does nothing: use `payout resolve`")
			return true, nil
		}
		log.Debug().Str("state", string(b.Payout.State)).Msg("create task has nothing to do")
		return true, nil
	case decide.CheckNow:
		log.Warn().Msg("create found in submitting (interrupted earlier); checking status instead of sending again")
		w.metrics.ambiguous.WithLabelValues("redelivered").Inc()
		return true, w.enqueueStatus(ctx, b.Payout, b.Seq, w.cfg.StatusDelay)
	case decide.EnsureStatus:
		return true, w.enqueueStatus(ctx, b.Payout, b.Seq, w.cfg.StatusDelay)
	case decide.Hold:
		// A batch not loaded (its load has not completed, or it awaits
		// approval): nothing is sent, and the task comes back later
		// without using its retry budget. An abandoned load's tasks end
		// when `payout discard` cancels its payouts.
		phase := b.Phase
		if phase == "" {
			phase = "unknown"
		}
		w.metrics.deferred.WithLabelValues("batch_not_loaded").Inc()
		log.Debug().Str("phase", phase).Msg("create held: the batch is not loaded")
		return true, &deferral{reason: "batch is " + phase + ", not loaded: no create before its load completes", after: w.cfg.PauseRetry}
	case decide.Foreign:
		// Nothing changed in the ledger: the payout stays queued for a
		// worker that holds the key, and this one stops.
		log.Error().Str("keyId", b.KeyID).Msg("card number sealed with a data key this worker does not hold; payout left as it was")
		return true, w.stopSelf(fmt.Sprintf("the card number of payout %s (batch %s) is sealed with data key %s, which this worker does not hold: give it that key (PAYOUT_DATA_KEY or --data-key-file; old keys in PAYOUT_DATA_KEYS_OLD)",
			b.Payout.ExternalID, b.Payout.Batch, b.KeyID))
	case decide.Proceed:
		return false, nil
	}
	// A decision this worker does not know (a newer script, a reply it
	// misread): fail closed. Nothing is sent; if the payout is submitting,
	// the reconciler turns it into a status check, never a POST.
	log.Error().Str("action", string(b.Action)).Msg("create: unknown begin decision; nothing sent")
	return true, fmt.Errorf("worker: unknown begin-create decision %q, nothing sent: %w", b.Action, asynq.SkipRetry)
}

// holdBackUnreplicated hands a submitting payout back to queued, nothing
// sent, when fewer than WaitReplicas replicas acknowledged its submitting
// mark: a failover now would lose the mark and a redelivery would send
// again. The task is retried later (or the payout needs review once its
// tries are used up).
func (w *Worker) holdBackUnreplicated(ctx context.Context, p jobs.CreatePayload, pay ledger.Payout, acked int, log zerolog.Logger) error {
	reason := fmt.Sprintf("%d of %d replicas acknowledged the submitting mark within %s; nothing sent", acked, w.cfg.WaitReplicas, w.cfg.WaitTimeout)
	w.metrics.deferred.WithLabelValues("replica_ack").Inc()
	log.Warn().Str("reason", reason).Msg("create held back")
	fin, ferr := w.ledger.FinishCreate(ctx, p.Batch, p.ExternalID, p.Attempt,
		decide.CreateResult{To: lifecycle.Queued, Error: reason, MaxTries: w.cfg.MaxCreateRetries, Tries: pay.Tries})
	if ferr != nil {
		return settled(ferr)
	}
	if fin.State == lifecycle.NeedsReview {
		return needsReview(p.ExternalID, reason)
	}
	return &retryAfter{err: errors.New(reason), after: w.cfg.PauseRetry}
}

// sendCreate builds the create request of a submitting payout, sends it
// through the gate on ctx (the task's) and records the answer on wctx
// (detached from the task's cancellation). A request that cannot be built
// or that the gate holds back is not sent.
func (w *Worker) sendCreate(ctx, wctx context.Context, p jobs.CreatePayload, pay ledger.Payout) error {
	req, err := w.request(pay)
	if err != nil {
		return w.unsendable(wctx, p, err)
	}
	done, err := w.gate.allow()
	if err != nil {
		// Nothing was sent: hand the payout back; the task returns later.
		if _, ferr := w.ledger.FinishCreate(wctx, p.Batch, p.ExternalID, p.Attempt, decide.CreateResult{To: lifecycle.Queued, Error: err.Error()}); ferr != nil {
			return settled(ferr)
		}
		return err
	}
	res := w.psp.CreateWithdrawal(ctx, req)
	done(res)
	return w.finishCreate(wctx, p, pay, res)
}

// beginCreate runs the ledger's begin-create transition, with a WAIT for
// replicas when the configuration asks for one. acked is WaitReplicas when
// no wait was asked for.
func (w *Worker) beginCreate(ctx context.Context, p jobs.CreatePayload) (ledger.Begin, int, error) {
	if w.cfg.WaitReplicas <= 0 {
		b, err := w.ledger.BeginCreate(ctx, p.Batch, p.ExternalID, p.Attempt)
		return b, 0, err
	}
	return w.ledger.BeginCreateAcked(ctx, w.rdb, p.Batch, p.ExternalID, p.Attempt, w.cfg.WaitReplicas, w.cfg.WaitTimeout)
}

// unsendable handles a payout whose request cannot be built. A missing or
// unknown data key is a configuration fault of this worker (the ledger
// holds back most of them before the mark: decide.Foreign): the payout
// goes back to queued and this worker stops itself; the queue goes on.
// Anything else (a ciphertext that does not open, damaged ledger fields)
// concerns this payout only: it needs review, and the others go on.
func (w *Worker) unsendable(ctx context.Context, p jobs.CreatePayload, cause error) error {
	if errors.Is(cause, vault.ErrUnknownKey) || errors.Is(cause, vault.ErrNoKey) ||
		errors.Is(cause, vault.ErrBadKey) || errors.Is(cause, vault.ErrPlaintextRefused) {
		if _, err := w.ledger.FinishCreate(ctx, p.Batch, p.ExternalID, p.Attempt, decide.CreateResult{To: lifecycle.Queued, Error: cause.Error()}); err != nil {
			return settled(err)
		}
		return w.stopSelf(fmt.Sprintf("this worker's data key cannot open the card number of payout %s (batch %s): %v", p.ExternalID, p.Batch, cause))
	}
	reason := "cannot build the PSP request (nothing was sent): " + cause.Error()
	if _, err := w.ledger.FinishCreate(ctx, p.Batch, p.ExternalID, p.Attempt, decide.CreateResult{To: lifecycle.NeedsReview, Error: reason}); err != nil {
		return settled(err)
	}
	w.outcome(ctx, p.Batch, lifecycle.NeedsReview)
	w.log.Error().Str("batch", p.Batch).Str("externalId", p.ExternalID).Str("reason", reason).Msg("payout needs review")
	return needsReview(p.ExternalID, reason)
}

// finishCreate records the answer res to the create of pay (as BeginCreate
// read it) and makes sure of the step that follows.
func (w *Worker) finishCreate(ctx context.Context, p jobs.CreatePayload, pay ledger.Payout, res psp.Result) error {
	log := w.log.With().Str("batch", p.Batch).Str("externalId", p.ExternalID).Int("attempt", p.Attempt).
		Int("http", res.HTTPStatus).Str("outcome", res.Outcome.String()).Logger()
	finish := func(r decide.CreateResult) (decide.Finished, error) {
		r.HTTPStatus = res.HTTPStatus
		fin, err := w.ledger.FinishCreate(ctx, p.Batch, p.ExternalID, p.Attempt, r)
		if errors.Is(err, ledger.ErrConflict) {
			log.Warn().Err(err).Msg("another delivery already recorded this create; making sure its next step is queued")
			if err := w.ensureNext(ctx, p.Batch, p.ExternalID); err != nil {
				return fin, err
			}
			return fin, errSettled
		}
		if err == nil {
			w.outcome(ctx, p.Batch, fin.State)
		}
		return fin, err
	}
	switch res.Outcome {
	case psp.Created:
		fin, err := finish(decide.CreateResult{To: lifecycle.Created, OrderID: res.Order.OrderID, PSPStatus: res.Order.Status,
			OutcomeWindow: w.cfg.Outcome.window()})
		if err != nil {
			return settled(err)
		}
		log.Info().Str("order", res.Order.OrderID).Msg("payout created")
		w.lookup.sample(ctx, p.ExternalID)
		return w.followOutcome(ctx, pay, fin.Awaiting)
	case psp.Rejected:
		_, err := finish(decide.CreateResult{To: lifecycle.Rejected, Error: res.Message})
		log.Info().Str("reason", res.Message).Msg("payout rejected by the PSP")
		return settled(err)
	case psp.Ambiguous:
		w.metrics.ambiguous.WithLabelValues(string(psp.OpWithdrawalCreate)).Inc()
		fin, err := finish(decide.CreateResult{To: lifecycle.Checking, Error: "create answer unknown: " + res.Message})
		if err != nil {
			return settled(err)
		}
		log.Warn().Str("reason", res.Message).Int("seq", fin.Seq).Msg("create outcome unknown; status check scheduled")
		return w.enqueueStatus(ctx, pay, fin.Seq, w.cfg.StatusDelay)
	case psp.AuthFault:
		verdict, aerr := w.authFault(ctx, res, "create")
		var cancel context.CancelFunc
		ctx, cancel = detached(ctx) // finish records on a fresh context: the recheck took time
		defer cancel()
		return w.createRefused(p, pay, res, verdict, aerr, finish, log)
	default: // psp.RetryLater: provably not processed
		fin, err := finish(decide.CreateResult{To: lifecycle.Queued, Error: res.Message, MaxTries: w.cfg.MaxCreateRetries, Tries: pay.Tries})
		if err != nil {
			return settled(err)
		}
		if fin.State == lifecycle.NeedsReview {
			log.Error().Str("reason", fin.Error).Msg("payout needs review")
			return needsReview(p.ExternalID, fin.Error)
		}
		log.Warn().Str("reason", res.Message).Dur("retryAfter", res.RetryAfter).Msg("create not processed by the PSP; will retry")
		return &retryAfter{err: fmt.Errorf("create of %s not processed: %s", p.ExternalID, res.Message), after: res.RetryAfter}
	}
}

// createRefused records a create the PSP refused with an AuthFault
// (nothing was created) after its recheck (authfault.go): back to queued,
// with a try counted when the recheck showed the credentials work (then
// retried, or needs review once the tries are used up), else as it was,
// the task held by aerr (a deferral, a pause or this worker's stop).
func (w *Worker) createRefused(p jobs.CreatePayload, pay ledger.Payout, res psp.Result, verdict authVerdict, aerr error,
	finish func(decide.CreateResult) (decide.Finished, error), log zerolog.Logger) error {
	r := decide.CreateResult{To: lifecycle.Queued, Error: res.Message}
	if verdict == authRequest {
		r.MaxTries, r.Tries = w.cfg.MaxCreateRetries, pay.Tries
	}
	fin, err := finish(r)
	if err != nil {
		return settled(err)
	}
	if verdict != authRequest {
		return aerr
	}
	if fin.State == lifecycle.NeedsReview {
		log.Error().Str("reason", fin.Error).Msg("payout needs review")
		return needsReview(p.ExternalID, fin.Error)
	}
	return &retryAfter{err: fmt.Errorf("create of %s refused by the PSP: %s", p.ExternalID, res.Message), after: w.cfg.PauseRetry}
}

// errSettled marks a ledger conflict: another delivery decided already, and
// the next step it decided has been made sure of (ensureNext).
var errSettled = errors.New("settled by another delivery")

func settled(err error) error {
	if errors.Is(err, errSettled) {
		return nil
	}
	return err
}

// snapshotOf reads the payout a status or outcome task is about, with
// Redis's clock (decide.Snapshot); a task for a payout the ledger does not
// know is archived.
func (w *Worker) snapshotOf(ctx context.Context, kind, batch, ext string, log zerolog.Logger) (ledger.Payout, decide.Snapshot, error) {
	pay, s, err := w.ledger.Snapshot(ctx, batch, ext)
	if errors.Is(err, ledger.ErrNotFound) {
		log.Error().Msg(kind + " task for a payout the ledger does not know; archived")
		return pay, s, fmt.Errorf("%w: %w", err, asynq.SkipRetry)
	}
	return pay, s, err
}

// HandleStatus processes a withdrawal:status task: after checking the task
// is current and due, it asks the PSP about the order, records the answer
// in the ledger and makes sure of the step the ledger decided.
func (w *Worker) HandleStatus(ctx context.Context, t *asynq.Task) error {
	p, err := jobs.DecodeStatus(t.Payload())
	if err != nil {
		w.log.Error().Err(err).Msg("malformed status task archived")
		return fmt.Errorf("%w: %w", err, asynq.SkipRetry)
	}
	log := w.log.With().Str("batch", p.Batch).Str("externalId", p.ExternalID).Int("seq", p.Seq).Logger()
	pay, snap, err := w.snapshotOf(ctx, "status", p.Batch, p.ExternalID, log)
	if err != nil {
		return err
	}
	if handled, err := w.statusNotCurrent(ctx, pay, snap, p.Seq, log); handled {
		return err
	}
	res, err := w.queryStatus(ctx, pay, log)
	if err != nil {
		return err
	}
	ctx, cancel := detached(ctx)
	defer cancel()
	answer, err := w.checkAnswer(ctx, res)
	if err != nil {
		return err
	}
	w.metrics.checks.WithLabelValues(string(answer.Outcome)).Inc()
	step, err := w.ledger.RecordCheck(ctx, snap, p.Seq, answer, w.cfg.Policy)
	if err != nil {
		return err
	}
	return w.afterCheck(ctx, pay, p.Seq, step, answer, res, log)
}

// statusNotCurrent handles a status task that is not the payout's current,
// due check (handled true; decide.Snapshot.PreCheck): it makes sure of the
// payout's actual next step, or defers the task until the check is due on
// Redis's clock, as after a recorded check (afterCheck).
func (w *Worker) statusNotCurrent(ctx context.Context, pay ledger.Payout, snap decide.Snapshot, seq int, log zerolog.Logger) (handled bool, err error) {
	step, ask := snap.PreCheck(seq)
	switch {
	case ask:
		return false, nil
	case step.Action != decide.CheckSkip:
		// Another check is current, or this one is not due: the PSP is
		// not asked, and no miss or fault is counted.
		return true, w.afterCheck(ctx, pay, seq, step, decide.CheckAnswer{}, psp.Result{}, log)
	case pay.State == lifecycle.Queued:
		// Absence was confirmed and a create is due: make sure it exists
		// (a crash right after the decision may have lost its enqueue).
		return true, w.enqueueCreate(ctx, pay, pay.Creates+1)
	case pay.State == lifecycle.NeedsReview:
		log.Warn().Msg("status task of a payout that needs review does nothing: use `payout resolve`")
	}
	return true, nil
}

// queryStatus asks the PSP about pay's order, through the gate, by order
// id or by externalId (psp.Client.CheckWithdrawal: --status-by-external-id).
// A 200 is proof only when it is about our order (psp.Expect): another
// externalId, order id or amount, or no order id, is Ambiguous, and a
// person is alerted.
func (w *Worker) queryStatus(ctx context.Context, pay ledger.Payout, log zerolog.Logger) (psp.Result, error) {
	if err := w.gate.hold(ctx); err != nil {
		return psp.Result{}, err
	}
	done, err := w.gate.allow()
	if err != nil {
		return psp.Result{}, err
	}
	res := w.psp.CheckWithdrawal(ctx, w.expect(pay))
	done(res)
	if res.Mismatch != nil {
		w.metrics.mismatch.WithLabelValues(string(res.Mismatch.Reasons[0])).Inc()
		log.Error().Str("alert", "psp_status_mismatch").Str("reason", res.Message).
			Msg("PSP status answer does not match our payout; not taken as proof")
	}
	return res, nil
}

// checkAnswer turns the PSP's answer into what the ledger records. A 404
// to a query by externalId counts as a miss only once such lookups are
// trusted (lookupCheck). A refused credential is rechecked (authfault.go),
// a request not processed defers the task: neither is recorded unless the
// recheck shows the credentials work.
func (w *Worker) checkAnswer(ctx context.Context, res psp.Result) (decide.CheckAnswer, error) {
	answer := decide.CheckAnswer{Outcome: decide.NoAnswer, Message: res.Message, HTTPStatus: res.HTTPStatus}
	switch res.Outcome {
	case psp.Created:
		answer = decide.CheckAnswer{Outcome: decide.Found, OrderID: res.Order.OrderID, PSPStatus: res.Order.Status, HTTPStatus: res.HTTPStatus}
	case psp.NotFound:
		if !res.ByExternalID || w.lookup.trusted(ctx) {
			answer.Outcome = decide.Missing
		} else {
			answer.Message = "404 by externalId not trusted yet: no order known to exist has been found by its externalId (see --trust-status-by-external-id)"
		}
	case psp.AuthFault:
		// Counted as a check without an answer when a recheck shows the
		// credentials work; else held (authfault.go).
		if verdict, err := w.authFault(ctx, res, "status query"); verdict != authRequest {
			return answer, err
		}
	case psp.RetryLater:
		// Not processed (429, nothing sent): no information, and no reason
		// to spend the payout's budget of unanswered checks.
		w.metrics.deferred.WithLabelValues("status_not_processed").Inc()
		after := res.RetryAfter
		if after <= 0 {
			after = w.cfg.StatusDelay
		}
		return answer, &deferral{reason: "status query not processed: " + res.Message, after: after}
	}
	return answer, nil
}

// afterCheck makes sure of the step the ledger decided after recording
// status check seq of pay, or of the step Snapshot.PreCheck found before
// asking (stale, early: answer and res are then empty).
func (w *Worker) afterCheck(ctx context.Context, pay ledger.Payout, seq int, step decide.CheckStep, answer decide.CheckAnswer, res psp.Result, log zerolog.Logger) error {
	switch step.Action {
	case decide.CheckDone:
		w.outcome(ctx, pay.Batch, lifecycle.Created)
		log.Info().Str("order", res.Order.OrderID).Msg("status check found the order: created")
		return w.followOutcome(ctx, pay, step.Awaiting)
	case decide.CheckAgain:
		// Due after Wait on Redis's clock; a little jitter on top spreads
		// the checks of payouts that failed together.
		delay := step.Wait + jitterUpTo(step.Wait/5)
		log.Debug().Str("answer", string(answer.Outcome)).Dur("next", delay).Msg("status still unknown")
		pay.Seq = step.Seq
		return w.enqueueStatus(ctx, pay, step.Seq, delay)
	case decide.CheckEarly:
		w.metrics.deferred.WithLabelValues("status_not_due").Inc()
		return &deferral{reason: fmt.Sprintf("status check %d not due for %s (Redis time)", seq, step.Wait), after: step.Wait}
	case decide.CheckRecreate:
		log.Warn().Int("attempt", step.Attempt).Msg("PSP confirmed the order is absent; creating again")
		return w.enqueueCreate(ctx, pay, step.Attempt)
	case decide.CheckReview:
		w.outcome(ctx, pay.Batch, lifecycle.NeedsReview)
		log.Error().Str("reason", step.Error).Msg("payout needs review")
		return needsReview(pay.ExternalID, step.Error)
	case decide.CheckStale:
		pay.Seq = step.Seq
		return w.enqueueStatus(ctx, pay, step.Seq, w.cfg.StatusDelay)
	}
	return nil
}

// step is the step of kind k numbered n of pay, as a ledger decision
// names it (a status check's Seq, a create's attempt).
func step(pay ledger.Payout, k queue.Kind, n int) queue.Step {
	return queue.Step{Kind: k, Batch: pay.Batch, ExternalID: pay.ExternalID, N: n, Amount: pay.Amount, Destination: pay.Destination}
}

// enqueueStatus makes sure status check seq of pay is a live task, due
// after delay (see remind).
func (w *Worker) enqueueStatus(ctx context.Context, pay ledger.Payout, seq int, delay time.Duration) error {
	return w.remind(ctx, step(pay, queue.Status, seq).In(delay))
}

// enqueueCreate makes sure create attempt of pay is a live task, as
// enqueueStatus does for status checks.
func (w *Worker) enqueueCreate(ctx context.Context, pay ledger.Payout, attempt int) error {
	return w.remind(ctx, step(pay, queue.Create, attempt))
}

// remind makes sure s's task is live (queue.Remind: a completed or
// archived one is replaced). When that task is the one running now, it
// must not complete: remind returns a deferral, so Asynq runs it again
// after about s.After (StatusDelay for a step without one).
func (w *Worker) remind(ctx context.Context, s queue.Step) error {
	id := s.ID()
	if running(ctx, id) {
		after := s.After
		if after <= 0 {
			after = w.cfg.StatusDelay
		}
		return &deferral{reason: "task " + id + " is due again", after: after}
	}
	got, err := w.queue.Remind(ctx, s)
	if got == queue.RemindedReplaced {
		w.metrics.repairs.WithLabelValues("handler").Inc()
		w.log.Warn().Str("task", id).Msg("a completed or archived task was due again; restored it")
	}
	return err
}

// running tells whether the task being handled has this ID.
func running(ctx context.Context, id string) bool {
	cur, ok := asynq.GetTaskID(ctx)
	return ok && cur == id
}

// ensureNext restores the reminder of whatever step the ledger says is due
// for a payout, after a transition that found the payout moved on (another
// delivery, or a replay whose first run is no longer the last write): the
// one that moved it may have lost its own follow-up.
func (w *Worker) ensureNext(ctx context.Context, batch, ext string) error {
	pay, err := w.ledger.Get(ctx, batch, ext)
	if err != nil {
		return err
	}
	s, ok := queue.NextStep(pay)
	switch {
	case !ok && pay.State == lifecycle.NeedsReview:
		w.log.Warn().Str("batch", batch).Str("externalId", ext).
			Msg("payout needs review; a task does not change that: use `payout resolve`")
		return nil
	case !ok || s.InFlight || s.Scheduler():
		return nil // done, a create in flight (its own handler acts), or scheduled (the releaser's)
	}
	return w.remind(ctx, s.In(w.firstDelay(s.Kind)))
}

// firstDelay is how long after it is enqueued a restored step of kind k
// is due: a status check after StatusDelay, an outcome check after the
// first outcome interval, a create at once.
func (w *Worker) firstDelay(k queue.Kind) time.Duration {
	switch k {
	case queue.Status:
		return w.cfg.StatusDelay
	case queue.Outcome:
		return w.cfg.Outcome.interval(1)
	}
	return 0
}

// jitterUpTo returns a random duration in [0, d].
func jitterUpTo(d time.Duration) time.Duration {
	if d <= 0 {
		return 0
	}
	return time.Duration(rand.Int64N(int64(d) + 1))
}

// expect is what a status answer must show to be about pay.
func (w *Worker) expect(pay ledger.Payout) psp.Expect {
	want := psp.Expect{ExternalID: pay.ExternalID, OrderID: pay.OrderID}
	if a, err := money.Parse(pay.Amount, 18); err == nil {
		want.Amount = a
	}
	return want
}

// request rebuilds the PSP request from the ledger entry.
func (w *Worker) request(pay ledger.Payout) (psp.WithdrawalRequest, error) {
	amount, err := money.Parse(pay.Amount, 18)
	if err != nil {
		return psp.WithdrawalRequest{}, fmt.Errorf("ledger amount of %s: %w", pay.ExternalID, err)
	}
	req := psp.WithdrawalRequest{ExternalID: pay.ExternalID, Amount: amount}
	if pay.Sealed != "" {
		pan, err := w.opener.Open(pay.Sealed, ledger.SealAD(pay.Batch, pay.ExternalID))
		if err != nil {
			return psp.WithdrawalRequest{}, err
		}
		req.Properties = append(req.Properties, psp.Property{Key: psp.KeyCardNumber, Value: pan})
	}
	if pay.Telecom != "" {
		req.Properties = append(req.Properties, psp.Property{Key: psp.KeyTelecomOperator, Value: pay.Telecom})
	}
	if pay.Extra != "" {
		var extra []psp.Property
		if err := json.Unmarshal([]byte(pay.Extra), &extra); err != nil {
			return psp.WithdrawalRequest{}, fmt.Errorf("ledger properties of %s: %w", pay.ExternalID, err)
		}
		req.Properties = append(req.Properties, extra...)
	}
	return req, nil
}

// pause stops the whole payout queue after a configuration fault and logs
// one alert; the task comes back after an operator resumes the queue,
// without using up its retry budget.
func (w *Worker) pause(ctx context.Context, reason string) error {
	err := w.queue.Pause(ctx)
	switch {
	case err == nil:
		w.metrics.pauses.Inc()
		w.notifyPause(ctx, reason)
		if aerr := w.ledger.Audit().Queue(ctx, w.ledger.Actor(), "paused", reason); aerr != nil {
			w.log.Warn().Err(aerr).Msg("queue paused, but the audit trail could not record it")
		}
		w.log.Error().Str("alert", "psp_configuration").Str("queue", jobs.Queue).Str("reason", reason).
			Msg("PAYOUT QUEUE PAUSED: fix the PSP token, URL or data key, then resume it (web UI or `payout resume`)")
	case w.queuePaused(ctx):
	default:
		w.log.Error().Err(err).Str("reason", reason).Msg("could not pause the payout queue")
	}
	return &deferral{reason: reason, after: w.cfg.PauseRetry}
}

// queuePaused tells whether the payout queue is paused (asynq reports a
// second pause only as an untyped error, so ask instead of matching text).
func (w *Worker) queuePaused(ctx context.Context) bool {
	paused, err := w.queue.Paused(ctx)
	return err == nil && paused
}
