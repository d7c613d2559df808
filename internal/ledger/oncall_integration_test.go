//go:build integration

package ledger

import (
	"context"
	"testing"
	"time"

	"github.com/acme/payout/internal/proof/testenv/redistest"
)

// TestOldestOnRealRedis runs checkOldest's scripts on a real redis-server:
// Redis's own clock, stepped by short real waits (a minute of the unit
// test is 50 ms here, so a reading delayed by a busy machine stays inside
// the tolerance of half a minute), the times read back from Redis.
func TestOldestOnRealRedis(t *testing.T) {
	rdb := redistest.Start(t).ClientT(t)
	l := New(rdb)
	now := func() time.Time {
		tm, err := rdb.Time(context.Background()).Result()
		if err != nil {
			t.Fatal(err)
		}
		return tm
	}
	advance := func(d time.Duration) { time.Sleep(d / time.Minute * 50 * time.Millisecond) }
	// Registration is stamped with this process's clock, the transitions
	// with Redis's (the same machine); a reading after a script may be a
	// millisecond later than its stamp.
	checkOldest(t, l, advance, now, 25*time.Millisecond)
}
