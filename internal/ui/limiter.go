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
// attempts in flight already reach max; atOnce says the refusal is only
// for the attempts in flight (they end within a second or so). Every
// begin that returns true must be followed by one end.
func (l *failureLimiter) begin(ip string) (ok bool, left time.Duration, atOnce bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.now()
	l.sweep(now)
	f := l.entry(ip, now)
	if now.Before(f.lockedUntil) {
		return false, f.lockedUntil.Sub(now), false
	}
	if f.count+f.inflight >= l.max {
		return false, time.Second, true
	}
	f.inflight++
	return true, 0, false
}

// end closes an attempt begun from ip; failed records it as a failed
// login. It returns the failures in the current window and whether this
// one locked the IP out.
func (l *failureLimiter) end(ip string, failed bool) (int, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.now()
	f := l.entry(ip, now)
	f.inflight = max(f.inflight-1, 0)
	if !failed {
		return f.count, false
	}
	return l.record(f, now)
}

// fail records a failed login from ip whose credentials were compared
// without a reservation (one login or a token: a comparison of
// microseconds).
func (l *failureLimiter) fail(ip string) (int, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.now()
	l.sweep(now)
	return l.record(l.entry(ip, now), now)
}

// entry is ip's entry, made if missing, its window restarted if over.
// Called with mu held.
func (l *failureLimiter) entry(ip string, now time.Time) *failures {
	f := l.clients[ip]
	if f == nil {
		f = &failures{windowStart: now}
		l.clients[ip] = f
	}
	if now.Sub(f.windowStart) >= l.window {
		f.count, f.windowStart = 0, now
	}
	return f
}

// record counts a failure on f, locking it out at max. Called with mu
// held.
func (l *failureLimiter) record(f *failures, now time.Time) (int, bool) {
	f.count++
	if f.count >= l.max {
		f.lockedUntil = now.Add(l.lockout)
		f.count, f.windowStart = 0, now
		return l.max, true
	}
	return f.count, false
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
