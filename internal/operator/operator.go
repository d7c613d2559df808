// Package operator is what people decide and read, shared by the CLI and
// the web UI: the decisions (approve or discard a batch awaiting approval,
// resolve a payout, pause or resume the payout queue) and, for the most
// part, the web UI's adapter over the ledger (Console: the batches, a
// batch's payouts, a payout's history, the search, the work queue and the
// downloads in the types of package ui; UIControls: the console's
// actions).
//
// `payout approve`, `payout discard`, `payout pause`/`resume` and the web
// UI all go through it, so that the ledger checks (four-eyes, the daily
// limit), the enqueues, the audit trail and the notifications are the same
// whoever acts and from where.
package operator

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/acme/payout/internal/ledger"
	"github.com/acme/payout/internal/loader"
	"github.com/acme/payout/internal/notify"
	"github.com/acme/payout/internal/queue"
	"github.com/redis/go-redis/v9"
	"github.com/rs/zerolog"
)

// ErrNotEnqueued wraps the error of an approval that was recorded but
// whose creates were not all enqueued (the workers' reconciler enqueues
// the rest).
var ErrNotEnqueued = errors.New("approved, but the creates were not all enqueued (the workers' reconciler will)")

// LeftToReconciler is what an operator is told after ErrNotEnqueued: the
// approval stands (the ledger is the truth) and nothing is to be done.
const LeftToReconciler = "the reconciler will enqueue the remaining payouts"

// ErrMissingOperator refuses an action without the name of who takes it, or a
// discard without a note.
var ErrMissingOperator = errors.New("every operator action records who took it and, for a discard, why")

// Actions takes operator decisions against one Redis.
type Actions struct {
	Ledger *ledger.Ledger
	Queue  *queue.Queue // where the steps a decision makes due are enqueued
	// Notify receives the queue paused/resumed events (nil: none).
	Notify *notify.Emitter
	Log    zerolog.Logger
}

// New returns the Actions of rdb, notifying em (which may be nil).
func New(rdb redis.UniversalClient, em *notify.Emitter, log zerolog.Logger) *Actions {
	return &Actions{Ledger: ledger.New(rdb), Queue: queue.New(rdb), Notify: em, Log: log}
}

// Approve lets a batch awaiting approval go to the workers: the ledger
// moves it (refusing with ledger.ErrNotAwaiting, ErrFourEyes or
// ErrDailyLimit), then every queued payout's create is enqueued, once
// whatever the number of calls. It returns the batch and the number of
// payouts handed to the workers.
func (a *Actions) Approve(ctx context.Context, batch string, ap ledger.Approval) (ledger.Batch, int, error) {
	if ap.By == "" {
		return ledger.Batch{}, 0, ErrMissingOperator
	}
	b, err := a.Ledger.Controls().Approve(ctx, batch, ap)
	if err != nil {
		return b, 0, err
	}
	ld := loader.New(a.Ledger, a.Queue, nil, a.Log)
	n, err := ld.EnqueueApproved(ctx, batch)
	if err != nil {
		return b, n, fmt.Errorf("%w: %w", ErrNotEnqueued, err)
	}
	a.Log.Info().Str("batch", batch).Str("by", ap.By).Int("payouts", n).Msg("batch approved")
	return b, n, nil
}

// Approved says what Approve did, as payout approve prints it and the web
// UI shows it; after ErrNotEnqueued (err), that the approval stands and
// the reconciler enqueues the rest.
func Approved(b ledger.Batch, by string, n int, err error) string {
	if errors.Is(err, ErrNotEnqueued) {
		return fmt.Sprintf("batch %s (%s) approved by %s: total %s; %s", b.ID, b.File, by, b.Total.StringFixed(b.Scale), LeftToReconciler)
	}
	return fmt.Sprintf("batch %s (%s) approved by %s: %d payouts, total %s, handed to the workers", b.ID, b.File, by, n, b.Total.StringFixed(b.Scale))
}

// Discard refuses a batch awaiting approval: every payout is cancelled
// (ledger.Discard). It returns the number cancelled by this call.
func (a *Actions) Discard(ctx context.Context, batch, by, note string) (ledger.Discarded, error) {
	if by == "" || note == "" {
		return ledger.Discarded{}, ErrMissingOperator
	}
	d, err := a.Ledger.DiscardBatch(ctx, batch, by, note)
	if err != nil {
		return d, err
	}
	a.Log.Info().Str("batch", batch).Str("by", by).Str("phase", d.Phase).Int("cancelled", d.Cancelled).
		Int("released", d.Released).Msg("batch discarded")
	return d, nil
}

// DiscardedText says what a discard did, for a person.
func DiscardedText(batch, by string, d ledger.Discarded) string {
	if d.Phase == ledger.PhaseLoading {
		return fmt.Sprintf("interrupted load of batch %s discarded by %s: %d payouts cancelled, %d externalId claims released (a corrected file with those ids can be loaded)",
			batch, by, d.Cancelled, d.Released)
	}
	return fmt.Sprintf("batch %s discarded by %s: %d payouts cancelled", batch, by, d.Cancelled)
}

// QueueChanged records that queue was paused (or resumed) by by, after
// the fact: an entry "paused"/"resumed" in the global audit trail and the
// queue_paused/queue_resumed notification. how says through what
// ("payout pause", "the web UI"). Both are tried; the first failure is
// returned (the queue's state stands either way).
func (a *Actions) QueueChanged(ctx context.Context, queue, by, note, how string, paused bool) error {
	verb := map[bool]string{true: "paused", false: "resumed"}[paused]
	auditErr := a.Ledger.Audit().Queue(ctx, by, verb, note)
	if auditErr != nil {
		auditErr = fmt.Errorf("queue %s %s, but the audit trail could not record it: %w", queue, verb, auditErr)
	}
	reason, episode := verb+" with "+how, strconv.FormatInt(time.Now().UnixNano(), 10)
	ev := notify.Resumed(queue, reason, episode)
	if paused {
		ev = notify.Paused(queue, reason, episode)
	}
	notifyErr := a.Notify.Emit(ctx, ev)
	if notifyErr != nil {
		notifyErr = fmt.Errorf("queue %s %s, but its notification could not be queued: %w", queue, verb, notifyErr)
	}
	return errors.Join(auditErr, notifyErr)
}
