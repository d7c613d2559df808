package worker

import (
	"context"
	"encoding/json"
	"errors"
	"strconv"
	"sync"
	"time"

	"github.com/acme/payout/internal/lifecycle"
	"github.com/acme/payout/internal/notify"
	"github.com/acme/payout/jobs"
	"github.com/hibiken/asynq"
)

// NotifyConfig says what the worker emits and whether it delivers.
type NotifyConfig struct {
	// Emitter receives the events this worker sees: payouts that need
	// review, the queue paused on a configuration fault. nil: none.
	Emitter *notify.Emitter
	// Deliverer, when set, makes the worker deliver the notifications
	// every process enqueued (queue notify.Queue), on a server of its own.
	Deliverer *notify.Deliverer
	// Concurrency of the delivery server; default 2.
	Concurrency int
}

// The deliveries run on their own small Asynq server rather than as a
// second queue of the payout server. Asynq's concurrency is one pool per
// server and queue weights are only probabilities: with an empty payout
// queue for a moment (checks scheduled for later), deliveries to a
// receiver that hangs could take every slot for up to notify.Timeout, and
// a payout due then would wait. On a separate server they never take a
// payout's slot, and the payout server's concurrency keeps meaning PSP
// requests in flight.

// serveNotifications starts the delivery server when a Deliverer is set.
// It shuts down when ctx is done, alongside the payout server; the
// returned func waits for that.
func (w *Worker) serveNotifications(ctx context.Context) (wait func()) {
	d := w.cfg.Notify.Deliverer
	if d == nil {
		return func() {}
	}
	n := w.cfg.Notify.Concurrency
	srv := asynq.NewServerFromRedisClient(w.rdb, asynq.Config{
		Concurrency:              n,
		Queues:                   map[string]int{notify.Queue: 1},
		RetryDelayFunc:           notify.RetryDelay,
		ShutdownTimeout:          min(w.cfg.ShutdownTimeout, notify.Timeout+time.Second),
		DelayedTaskCheckInterval: w.cfg.PollInterval,
		TaskCheckInterval:        w.cfg.PollInterval,
		Logger:                   newAsynqLogger(w.log.With().Str("component", "asynq-notify").Logger()),
		LogLevel:                 asynq.WarnLevel,
	})
	mux := asynq.NewServeMux()
	mux.Handle(notify.TypeDeliver, d)
	if err := srv.Start(mux); err != nil {
		// Notifications wait in Redis for a worker that serves them;
		// payouts go on.
		w.log.Error().Err(err).Msg("notification delivery not started")
		return func() {}
	}
	w.log.Info().Int("concurrency", n).Str("queue", notify.Queue).Msg("delivering notifications")
	var wg sync.WaitGroup
	wg.Go(func() {
		<-ctx.Done()
		srv.Shutdown()
	})
	return wg.Wait
}

// reviewError is the error of a task whose payout the ledger moved to
// needs_review (needsReview): it archives the task and, through
// notifyReview, emits the event.
type reviewError struct {
	ext, reason string
	err         error
}

func (e *reviewError) Error() string { return e.err.Error() }
func (e *reviewError) Unwrap() error { return e.err }

// notifyReview is the middleware that emits payout_needs_review after a
// handler returned a reviewError. The event id is derived from the
// ledger's time of the transition: the same move reported twice is one
// event, a second review after a resolution another.
func (w *Worker) notifyReview(next asynq.Handler) asynq.Handler {
	return asynq.HandlerFunc(func(ctx context.Context, t *asynq.Task) error {
		err := next.ProcessTask(ctx, t)
		var r *reviewError
		if w.cfg.Notify.Emitter == nil || !errors.As(err, &r) {
			return err
		}
		var ref struct {
			Batch string `json:"batch"`
		}
		_ = json.Unmarshal(t.Payload(), &ref)
		ctx, cancel := detached(ctx)
		defer cancel()
		episode := r.reason
		if p, gerr := w.ledger.Get(ctx, ref.Batch, r.ext); gerr == nil && p.State == lifecycle.NeedsReview {
			episode = strconv.FormatInt(p.UpdatedAt.UnixMilli(), 10)
		}
		w.emit(ctx, notify.NeedsReview(ref.Batch, r.ext, r.reason, episode))
		return err
	})
}

// notifyPause emits queue_paused after this worker paused the queue.
func (w *Worker) notifyPause(ctx context.Context, reason string) {
	ctx, cancel := detached(ctx)
	defer cancel()
	w.emit(ctx, notify.Paused(jobs.Queue, reason, strconv.FormatInt(time.Now().UnixNano(), 10)))
}

// emit logs what could not be enqueued; the fact stays recorded.
func (w *Worker) emit(ctx context.Context, ev notify.Event) {
	if err := w.cfg.Notify.Emitter.Emit(ctx, ev); err != nil {
		w.log.Error().Err(err).Str("event", ev.ID).Msg("notification not queued")
	}
}
