package operator

import (
	"context"

	"github.com/acme/payout/internal/ledger"
	"github.com/acme/payout/internal/lifecycle"
	"github.com/acme/payout/internal/money"
	"github.com/acme/payout/internal/queue"
	"github.com/acme/payout/internal/results"
	"github.com/acme/payout/internal/ui"
	"github.com/acme/payout/internal/view"
	"github.com/redis/go-redis/v9"
)

// BatchViews turns ledger statuses into the figures shown by `payout
// status`, the UI's batches page and its JSON API; paused: the payout
// queue is paused (queue.QueuePaused), which a working batch's phase says.
func BatchViews(sts []view.BatchStatus, paused bool) []ui.BatchView {
	out := make([]ui.BatchView, 0, len(sts))
	for _, s := range sts {
		ph := results.StatusPhase(s, paused)
		counts := map[string]int64{}
		for _, st := range lifecycle.States {
			counts[string(st)] = s.Counts.Rows[st]
		}
		out = append(out, ui.BatchView{
			ID: s.ID, File: s.File, LoadedAt: s.LoadedAt, Counts: counts, Rows: s.Counts.Total(),
			Awaiting:       s.Counts.Awaiting,
			AmountCreated:  s.Counts.Amount(lifecycle.Created, s.Scale).StringFixed(s.Scale),
			AmountPaid:     s.Counts.Amount(lifecycle.Paid, s.Scale).StringFixed(s.Scale),
			AmountFailed:   s.Counts.Amount(lifecycle.Failed, s.Scale).StringFixed(s.Scale),
			AmountAwaiting: money.FromMinor(s.Counts.AwaitingUnits, s.Scale).StringFixed(s.Scale),
			AmountTotal:    s.Total.StringFixed(s.Scale),
			Phase:          s.Phase, WaitReason: s.WaitReason, LoadedBy: s.LoadedBy,
			Interrupted: s.Interrupted, State: s.State(),
			PhaseCode: ph.Code, PhaseLabel: ph.Label, PhaseReason: ph.Reason, FourEyes: s.FourEyes,
			ApprovalRule: s.Rule, Approvals: s.ApprovalProgress(), Approvers: approverNames(s.Approvers),
		})
	}
	return out
}

// Batches feeds the web UI (ui.BatchSource) from the ledger; Queue is the
// Redis of the payout queue, whose pause the phases say (nil: not
// looked at).
type Batches struct {
	Ledger *ledger.Ledger
	Queue  redis.UniversalClient
}

// Batches lists every batch with its figures.
func (b Batches) Batches(ctx context.Context) ([]ui.BatchView, error) {
	sts, err := view.New(b.Ledger.Redis()).Statuses(ctx)
	if err != nil {
		return nil, err
	}
	paused, err := QueuePaused(ctx, b.Queue)
	if err != nil {
		return nil, err
	}
	return BatchViews(sts, paused), nil
}

// QueuePaused is queue.QueuePaused, false without a client.
func QueuePaused(ctx context.Context, rdb redis.UniversalClient) (bool, error) {
	if rdb == nil {
		return false, nil
	}
	return queue.QueuePaused(ctx, rdb)
}

// approverNames are the names of a batch's approvals, in order.
func approverNames(as []ledger.Approver) []string {
	out := make([]string, len(as))
	for i, a := range as {
		out[i] = a.By
	}
	return out
}
