package ui

import (
	"strconv"
	"testing"
	"time"
)

func TestLimiterForgetsStaleClients(t *testing.T) {
	now := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	l := newFailureLimiter(5, time.Minute, 5*time.Minute, func() time.Time { return now })
	for i := 0; i < sweepAbove+10; i++ {
		l.fail("10.0.0." + strconv.Itoa(i))
	}
	// One IP is locked out: it must survive the sweep.
	for i := 0; i < 5; i++ {
		l.fail("192.0.2.1")
	}
	now = now.Add(2 * time.Minute)
	l.fail("198.51.100.1")
	if n := len(l.clients); n != 2 {
		t.Fatalf("after sweep %d clients tracked, want 2 (the locked one and the new one)", n)
	}
	if locked, left := l.locked("192.0.2.1"); !locked || left != 3*time.Minute {
		t.Fatalf("locked IP: %v %v, want locked for 3m", locked, left)
	}
}
