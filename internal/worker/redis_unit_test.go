//go:build !integration

package worker

import (
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
)

// testRedisURL gives each test its own embedded Redis in unit runs; the
// integration build uses a real redis-server instead.
func testRedisURL(t *testing.T) string {
	m := miniredis.RunT(t)
	followWallClock(t, m)
	return "redis://" + m.Addr()
}

// followWallClock makes keys expire as time passes, as they do on a real
// Redis: miniredis expires them only on FastForward. Without it the
// reconciler's lease, taken for one interval by the first sweep, is held
// for ever, and a sweep that came before a task was removed is the last.
func followWallClock(t *testing.T, m *miniredis.Miniredis) {
	done, stopped := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(stopped)
		tick := time.NewTicker(10 * time.Millisecond)
		defer tick.Stop()
		last := time.Now()
		for {
			select {
			case <-done:
				return
			case now := <-tick.C:
				m.FastForward(now.Sub(last))
				last = now
			}
		}
	}()
	t.Cleanup(func() { close(done); <-stopped }) // before RunT's Close
}
