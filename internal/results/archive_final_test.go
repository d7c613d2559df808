package results

import (
	"testing"

	"github.com/acme/payout/internal/ledger"
	"github.com/acme/payout/internal/lifecycle"
)

// TestArchivable: a batch with a payout waiting for a person is not archived:
// once archived, it could never be resolved.
func TestArchivable(t *testing.T) {
	counts := func(st lifecycle.State) ledger.Counts {
		return ledger.Counts{Rows: map[lifecycle.State]int64{st: 1}, Units: map[lifecycle.State]int64{st: 100}}
	}
	loaded := ledger.Batch{Phase: lifecycle.PhaseLoaded}
	for _, tt := range []struct {
		b    ledger.Batch
		c    ledger.Counts
		want bool
	}{
		{loaded, counts(lifecycle.Paid), true},
		{ledger.Batch{Phase: lifecycle.PhaseDiscarded}, counts(lifecycle.Cancelled), true},
		{loaded, counts(lifecycle.NeedsReview), false},
		{loaded, counts(lifecycle.Checking), false},
		{ledger.Batch{Phase: lifecycle.PhaseAwaiting}, counts(lifecycle.Queued), false},
		{loaded, ledger.Counts{Rows: map[lifecycle.State]int64{lifecycle.Created: 1}, Awaiting: 1}, false},
	} {
		if got := Archivable(tt.b, tt.c); got != tt.want {
			t.Errorf("Archivable(%s, %v awaiting %d) = %v, want %v", tt.b.Phase, tt.c.Rows, tt.c.Awaiting, got, tt.want)
		}
	}
}
