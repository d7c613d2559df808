package ui

import (
	"sync"
	"time"
)

// failureLimiter counts failed logins per client IP: max failures within
// window lock the IP out for lockout. A success clears the IP's count.
type failureLimiter struct {
	max     int
	window  time.Duration
	lockout time.Duration
	now     func() time.Time

	mu        sync.Mutex
	clients   map[string]*failures
	lastSweep time.Time
}

type failures struct {
	count       int
	windowStart time.Time
	lockedUntil time.Time
}

// sweepAbove is the number of tracked IPs above which stale entries are
// dropped (at most once per window), so the map cannot grow without bound
// under a spray of addresses.
const sweepAbove = 1024

func newFailureLimiter(max int, window, lockout time.Duration, now func() time.Time) *failureLimiter {
	return &failureLimiter{max: max, window: window, lockout: lockout, now: now, clients: map[string]*failures{}}
}

// locked reports whether ip is locked out and for how long still.
func (l *failureLimiter) locked(ip string) (bool, time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	f := l.clients[ip]
	if f == nil {
		return false, 0
	}
	now := l.now()
	if now.Before(f.lockedUntil) {
		return true, f.lockedUntil.Sub(now)
	}
	return false, 0
}

// fail records a failed login from ip. It returns the number of failures in
// the current window and whether this one locked the IP out.
func (l *failureLimiter) fail(ip string) (int, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.now()
	l.sweep(now)
	f := l.clients[ip]
	if f == nil {
		f = &failures{}
		l.clients[ip] = f
	}
	if now.Sub(f.windowStart) >= l.window {
		f.count, f.windowStart = 0, now
	}
	f.count++
	if f.count >= l.max {
		f.lockedUntil = now.Add(l.lockout)
		f.count, f.windowStart = 0, now
		return l.max, true
	}
	return f.count, false
}

// succeed clears the failures of ip.
func (l *failureLimiter) succeed(ip string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if f := l.clients[ip]; f != nil && !l.now().Before(f.lockedUntil) {
		delete(l.clients, ip)
	}
}

func (l *failureLimiter) sweep(now time.Time) {
	if len(l.clients) < sweepAbove || now.Sub(l.lastSweep) < l.window {
		return
	}
	l.lastSweep = now
	for ip, f := range l.clients {
		if now.Sub(f.windowStart) >= l.window && !now.Before(f.lockedUntil) {
			delete(l.clients, ip)
		}
	}
}
