//go:build !payout_test_clock

package jobs

import "time"

// now is the clock the task constructors schedule by. Every real build
// uses the machine's clock; the chaos suite builds a worker whose clock is
// off with the tag payout_test_clock (see clock_testclock.go).
func now() time.Time { return time.Now() }
