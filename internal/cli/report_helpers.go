package cli

import (
	"io"

	"github.com/acme/payout/internal/ledger"
	"github.com/acme/payout/internal/report"
)

func reportSummary(w io.Writer, s report.Summary) error { return report.WriteSummaryText(w, s) }

func hasProblems(states []report.StateTotal) bool {
	for _, s := range states {
		if (s.State == string(ledger.Rejected) || s.State == string(ledger.NeedsReview)) && s.Rows > 0 {
			return true
		}
	}
	return false
}

// summaryExit: 1 when the batch is not final, does not reconcile, or has
// rejected or needs_review rows.
func summaryExit(final, reconciled, problems bool) error {
	if !final || !reconciled || problems {
		return errRejected
	}
	return nil
}
