package cli

import (
	"context"
	"io"

	"github.com/acme/payout/internal/ledger"
	"github.com/acme/payout/internal/lifecycle"
	"github.com/acme/payout/internal/money"
	"github.com/acme/payout/internal/report"
)

func reportSummary(w io.Writer, s report.Summary) error { return report.WriteSummaryText(w, s) }

func hasProblems(states []report.StateTotal) bool {
	for _, s := range states {
		switch lifecycle.State(s.State) {
		case lifecycle.Rejected, lifecycle.NeedsReview, lifecycle.Failed:
			if s.Rows > 0 {
				return true
			}
		}
	}
	return false
}

// summaryExit: 1 when the batch is not final (rows in progress or awaiting
// their outcome), does not reconcile, or has rejected, failed or
// needs_review rows.
func summaryExit(final, reconciled, problems bool) error {
	if !final || !reconciled || problems {
		return errRejected
	}
	return nil
}

// batchScale is the number of decimals the amounts of a batch are shown
// with (its file's); money.DefaultScale when the batch cannot be read.
func batchScale(ctx context.Context, l *ledger.Ledger, batch string) int {
	b, err := l.Batch(ctx, batch)
	if err != nil {
		return money.DefaultScale
	}
	return b.Scale
}
