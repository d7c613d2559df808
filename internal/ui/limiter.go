package ui

import (
	"sync"
	"time"
)

// failureLimiter counts failed logins per client IP: max failures within
// window lock the IP out for lockout. An attempt is reserved before the
// credentials are compared (begin) and counted when the comparison ends
// (end), so attempts in flight at once count too: parallel guesses cannot
// all pass the check before the first of them fails. A success clears
// nothing: a person signed in from the same IP (or behind the same proxy)
// must not wipe the failures another name's guesses left.
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
	count       int // failed in the window
	inflight    int // attempts begun and not yet ended
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

// begin reserves a login attempt from ip before its credentials are
// compared. It refuses (false, and how long until the IP may try again)
// when the IP is locked out, or when its failures in the window and its
// attempts in flight already reach max. Every begin that returns true must
// be followed by one end.
func (l *failureLimiter) begin(ip string) (bool, time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.now()
	l.sweep(now)
	f := l.clients[ip]
	if f == nil {
		f = &failures{windowStart: now}
		l.clients[ip] = f
	}
	if now.Before(f.lockedUntil) {
		return false, f.lockedUntil.Sub(now)
	}
	if now.Sub(f.windowStart) >= l.window {
		f.count, f.windowStart = 0, now
	}
	if f.count+f.inflight >= l.max {
		return false, max(f.windowStart.Add(l.window).Sub(now), time.Second)
	}
	f.inflight++
	return true, 0
}

// end closes an attempt begun from ip; failed records it as a failed
// login. It returns the failures in the current window and whether this
// one locked the IP out.
func (l *failureLimiter) end(ip string, failed bool) (int, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	f := l.clients[ip]
	if f == nil { // begin always leaves an entry while an attempt is in flight
		return 0, false
	}
	f.inflight = max(f.inflight-1, 0)
	if !failed {
		return f.count, false
	}
	now := l.now()
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

// fail records a failed login from ip (an attempt begun and ended at
// once).
func (l *failureLimiter) fail(ip string) (int, bool) {
	if ok, _ := l.begin(ip); !ok {
		return l.max, false
	}
	return l.end(ip, true)
}

func (l *failureLimiter) sweep(now time.Time) {
	if len(l.clients) < sweepAbove || now.Sub(l.lastSweep) < l.window {
		return
	}
	l.lastSweep = now
	for ip, f := range l.clients {
		if f.inflight == 0 && now.Sub(f.windowStart) >= l.window && !now.Before(f.lockedUntil) {
			delete(l.clients, ip)
		}
	}
}
