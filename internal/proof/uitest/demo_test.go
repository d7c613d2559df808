package uitest

import (
	"testing"

	"github.com/acme/payout/internal/lifecycle"
	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
)

// TestEveryStateHasPayouts: the fixture of the pages' width rules holds
// payouts in every state of the machine, each checked in the ledger by
// LoadEveryState itself, three of each.
func TestEveryStateHasPayouts(t *testing.T) {
	mr := miniredis.RunT(t)
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	t.Cleanup(func() { _ = rdb.Close() })
	LoadDemo(t, rdb)
	e := LoadEveryState(t, rdb)
	for _, s := range lifecycle.Machine {
		if n := len(e.ByState[s.State]); n != 3 {
			t.Errorf("%s: %d payouts, want 3", s.State, n)
		}
	}
	if e.Rows != 3*len(lifecycle.Machine) {
		t.Errorf("rows %d, want %d", e.Rows, 3*len(lifecycle.Machine))
	}
}
