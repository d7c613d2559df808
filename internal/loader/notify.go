package loader

import (
	"context"

	"github.com/acme/payout/internal/notify"
	"github.com/acme/payout/internal/report"
	"github.com/rs/zerolog"
)

// notifyHeld emits batch_awaiting_approval after the ledger held the
// batch. A failed enqueue is logged: the hold stands either way.
func (ld *Loader) notifyHeld(ctx context.Context, res Result, log zerolog.Logger) {
	if err := ld.Notify.Emit(ctx, notify.AwaitingApproval(res.Batch, res.Held)); err != nil {
		log.Error().Err(err).Msg("notification of the batch awaiting approval not queued")
	}
}

// notifyFinal emits batch_final with the summary of the result file just
// written, before the batch is marked reported: a run that dies in between
// writes the file again and emits the same event (same id) again.
func (ld *Loader) notifyFinal(ctx context.Context, batch string, sum report.Summary) {
	if err := ld.Notify.Emit(ctx, notify.Final(batch, sum)); err != nil {
		ld.log.Error().Err(err).Str("batch", batch).Msg("notification of the final batch not queued")
	}
}
