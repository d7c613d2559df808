// Package operator is what people decide and read, shared by the CLI and
// the web UI: the one implementation of every person's command (approve
// or discard a batch awaiting approval, cancel a payout, resolve a payout
// as recheck, created or rejected, pause or resume the payout queue,
// redeliver webhook events: commands.go, resolve.go, redeliver.go), each
// with a typed result and typed refusals
// (*Refusal) that carry the words people read, and the web UI's adapter
// over the ledger (Console: the batches, a batch's payouts, a payout's
// history, the search, the work queue, the webhooks' delivery log and the
// downloads in the types of package ui; UIControls: the console's forms as
// the commands).
//
// The payout commands (approve, discard, cancel, resolve, pause, resume)
// and the web UI all go through it, so that the ledger checks (four-eyes,
// the daily limit), the enqueues, the audit trail, the notifications and
// the sentences are the same whoever acts and from where.
package operator

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/acme/payout/internal/access"
	"github.com/acme/payout/internal/ledger"
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

	// who is the principal the commands act as (As; roles.go), when bound.
	who   access.Principal
	bound bool
}

// New returns the Actions of rdb, notifying em (which may be nil).
func New(rdb redis.UniversalClient, em *notify.Emitter, log zerolog.Logger) *Actions {
	return &Actions{Ledger: ledger.New(rdb), Queue: queue.New(rdb), Notify: em, Log: log}
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
