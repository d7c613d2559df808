package cli

import (
	"fmt"
	"strings"
	"testing"

	"github.com/acme/payout/internal/ledger"
	"github.com/acme/payout/internal/lifecycle"
)

// TestProgressLineNamesEveryState: the progress line of payout run counts
// every state of the ledger's machine, in report order, with the created
// payouts awaiting their outcome after created.
func TestProgressLineNamesEveryState(t *testing.T) {
	c := ledger.Counts{Rows: map[lifecycle.State]int64{}, Awaiting: 1}
	for i, s := range lifecycle.States {
		c.Rows[s] = int64(i + 10)
	}
	line := progressLine(c)
	at := 0
	for i, s := range lifecycle.States {
		want := fmt.Sprintf("  %s %d", s.Label(), i+10)
		j := strings.Index(line[at:], want)
		if j < 0 {
			t.Fatalf("progress line %q lacks %q after column %d", line, want, at)
		}
		at += j + len(want)
		if s == lifecycle.Created && !strings.HasPrefix(line[at:], "  awaiting outcome 1") {
			t.Errorf("progress line %q: no awaiting outcome after created", line)
		}
	}
}
