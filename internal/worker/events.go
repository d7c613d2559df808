package worker

import (
	"context"
	"sync"
	"time"

	"github.com/acme/payout/internal/ledger"
	"github.com/acme/payout/internal/notify"
	"github.com/rs/zerolog"
)

// The payout events: every transition script writes the event of its
// move into the batch's outbox (ledger.EventTypes, in the same call), and
// one worker at a time (the lease "events") drains the outboxes into
// deliveries: one notify task per subscribed endpoint, whose task id is
// derived from the event id, then deletes the entries. A worker that dies
// between the two leaves the entries for the next drain, whose enqueues
// are refused as duplicates (notify.Retention): the events are at least
// once, never lost. A worker without --notify-url drains and drops them:
// give every worker the same URLs.

// pumpBatch is how many outbox entries one drain reads of a batch.
const pumpBatch = 256

// pumpEvents drains the outboxes every interval until ctx is done; the
// returned func waits for that. While Redis is away every round fails:
// the pump says so at most once every pumpLogPeriod (the events wait in
// their outboxes, none is lost).
func (w *Worker) pumpEvents(ctx context.Context) (wait func()) {
	interval := max(w.cfg.PollInterval, 200*time.Millisecond)
	log := w.log.Sample(&zerolog.BurstSampler{Burst: 1, Period: pumpLogPeriod})
	var wg sync.WaitGroup
	wg.Go(func() {
		w.ledger.Locks().Leased(ctx, "events", interval, func(err error) {
			if ctx.Err() == nil {
				log.Warn().Err(err).Msg("payout events: could not take the events lease; they wait in their outboxes; next round")
			}
		}, func(ctx context.Context) {
			if _, err := PumpEvents(ctx, w.ledger, w.cfg.Notify.Emitter); err != nil && ctx.Err() == nil {
				log.Warn().Err(err).Msg("payout events not drained; next round")
			}
		})
	})
	return wg.Wait
}

// pumpLogPeriod: the events pump logs its failures at most once in it.
const pumpLogPeriod = time.Minute

// PumpEvents drains every outbox once through em (nil: the events are
// dropped) and returns how many events it handled.
func PumpEvents(ctx context.Context, l *ledger.Ledger, em *notify.Emitter) (int, error) {
	batches, err := l.OutboxBatches(ctx)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, b := range batches {
		for {
			evs, err := l.Outbox(ctx, b, pumpBatch)
			if err != nil {
				return n, err
			}
			if len(evs) == 0 {
				break
			}
			ids := make([]string, 0, len(evs))
			for _, e := range evs {
				if err := em.Emit(ctx, notify.PayoutEvent(change(e))); err != nil {
					return n, err
				}
				ids = append(ids, e.StreamID)
			}
			if err := l.AckOutbox(ctx, b, ids...); err != nil {
				return n, err
			}
			n += len(ids)
			if len(evs) < pumpBatch {
				break
			}
		}
	}
	return n, nil
}

// change is the notify side of an outbox entry.
func change(e ledger.OutboxEvent) notify.PayoutChange {
	return notify.PayoutChange{
		Batch: e.Batch, ExternalID: e.ExternalID, Seq: e.Seq, Type: e.Type,
		From: string(e.From), To: string(e.To), At: time.UnixMilli(e.AtMillis).UTC(),
		Amount: e.Amount, Dest: e.Destination,
	}
}
