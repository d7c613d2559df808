//go:build payout_test_clock

package jobs

import (
	"fmt"
	"os"
	"time"
)

// TestClockEnv is the duration ("-5m", "90s") the clock of a
// payout_test_clock build is off by. Only the chaos suite builds this, to
// run one worker whose clock is wrong: decisions in the ledger use Redis
// TIME, so a wrong clock may only move when a task is scheduled. Never
// ship.
const TestClockEnv = "PAYOUT_TEST_CLOCK_OFFSET"

// clockOffset is read once, at start. A value that does not parse stops
// the process: a test that meant to shift the clock must not run with the
// right one.
var clockOffset = func() time.Duration {
	v := os.Getenv(TestClockEnv)
	if v == "" {
		return 0
	}
	d, err := time.ParseDuration(v)
	if err != nil {
		panic(fmt.Sprintf("jobs: %s=%q: %v", TestClockEnv, v, err))
	}
	return d
}()

// now is the machine's clock shifted by clockOffset.
func now() time.Time { return time.Now().Add(clockOffset) }
