package ui

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/rs/zerolog"
	"golang.org/x/crypto/bcrypt"

	"github.com/acme/payout/internal/card"
)

// authenticator checks basic or bearer credentials in constant time (a
// users file: with bcrypt) and locks out client IPs after repeated
// failures.
type authenticator struct {
	basic     bool
	userHash  [sha256.Size]byte
	passHash  [sha256.Size]byte
	bearer    bool
	tokenHash [sha256.Size]byte
	open      bool // InsecureLocal without credentials
	// logins, with a users file, replaces the single user and password.
	logins *userLogins

	limiter *failureLimiter
	log     zerolog.Logger
	metrics *metrics
}

type authResult int

const (
	authOK authResult = iota
	authMissing
	authBad
)

func newAuthenticator(cfg Config, m *metrics) *authenticator {
	a := &authenticator{log: cfg.Logger, metrics: m}
	if cfg.User != "" && cfg.Password != "" {
		a.basic = true
		a.userHash = sha256.Sum256([]byte(cfg.User))
		a.passHash = sha256.Sum256([]byte(cfg.Password))
	}
	if cfg.Users != nil {
		a.basic = true
		a.logins = &userLogins{users: cfg.Users, cache: newLoginCache(maxCachedLogins, cfg.now),
			compare: bcrypt.CompareHashAndPassword}
	}
	if cfg.Token != "" {
		a.bearer = true
		a.tokenHash = sha256.Sum256([]byte(cfg.Token))
	}
	a.open = !a.basic && !a.bearer
	maxF, window, lockout := cfg.MaxFailures, cfg.FailureWindow, cfg.Lockout
	if maxF == 0 {
		maxF = 5
	}
	if window == 0 {
		window = time.Minute
	}
	if lockout == 0 {
		lockout = 5 * time.Minute
	}
	a.limiter = newFailureLimiter(maxF, window, lockout, cfg.now)
	return a
}

// equalHash compares the SHA-256 of got with want in constant time; hashing
// first makes the comparison independent of the lengths.
func equalHash(got string, want [sha256.Size]byte) int {
	h := sha256.Sum256([]byte(got))
	return subtle.ConstantTimeCompare(h[:], want[:])
}

// check classifies the credentials of r. scheme and user describe the
// attempt for the log (user is the submitted basic-auth user name; the
// password or token is never returned).
func (a *authenticator) check(r *http.Request) (res authResult, scheme, user string) {
	h := r.Header.Get("Authorization")
	if h == "" {
		return authMissing, "none", ""
	}
	kind, rest, _ := strings.Cut(h, " ")
	switch strings.ToLower(kind) {
	case "basic":
		u, p, ok := r.BasicAuth()
		if !ok || !a.basic {
			return authBad, "basic", u
		}
		if a.logins != nil {
			if a.logins.verify(u, p) {
				return authOK, "basic", u
			}
			return authBad, "basic", u
		}
		// Both comparisons always run: no early exit on a wrong user.
		if equalHash(u, a.userHash)&equalHash(p, a.passHash) == 1 {
			return authOK, "basic", u
		}
		return authBad, "basic", u
	case "bearer":
		tok := strings.TrimSpace(rest)
		if a.bearer && tok != "" && equalHash(tok, a.tokenHash) == 1 {
			return authOK, "bearer", ""
		}
		return authBad, "bearer", ""
	default:
		return authBad, "unsupported", ""
	}
}

// wrap puts authentication in front of next.
func (a *authenticator) wrap(next http.Handler) http.Handler {
	if a.open {
		return loopbackHostOnly(withUser(next, localUser))
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ip := clientIP(r)
		if locked, left := a.limiter.locked(ip); locked {
			secs := int(left/time.Second) + 1
			w.Header().Set("Retry-After", strconv.Itoa(secs))
			http.Error(w, "too many failed logins, try again later", http.StatusTooManyRequests)
			return
		}
		res, scheme, user := a.check(r)
		switch res {
		case authOK:
			a.limiter.succeed(ip)
			if user == "" {
				user = tokenUser
			}
			next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), userKey{}, user)))
			return
		case authBad:
			n, lockedNow := a.limiter.fail(ip)
			a.metrics.loginFailures.WithLabelValues(scheme).Inc()
			ev := a.log.Warn().Str("ip", ip).Str("method", r.Method).Str("path", r.URL.Path).
				Str("scheme", scheme).Int("failures", n)
			if user != "" {
				ev = ev.Str("user", logUser(user))
			}
			ev.Msg("ui: failed login")
			if lockedNow {
				a.metrics.lockouts.Inc()
				a.log.Warn().Str("ip", ip).Dur("lockout", a.limiter.lockout).Msg("ui: too many failed logins, client locked out")
			}
		case authMissing:
			a.log.Debug().Str("ip", ip).Str("path", r.URL.Path).Msg("ui: no credentials, asking for them")
		}
		a.challenge(w)
	})
}

func (a *authenticator) challenge(w http.ResponseWriter) {
	if a.basic {
		w.Header().Set("WWW-Authenticate", `Basic realm="payout"`)
	} else {
		w.Header().Set("WWW-Authenticate", `Bearer realm="payout"`)
	}
	http.Error(w, "authentication required", http.StatusUnauthorized)
}

// loopbackHostOnly guards the credential-less local mode against DNS
// rebinding: a page from another site whose name was re-pointed at 127.0.0.1
// would otherwise reach the UI as "same origin". Only requests that name a
// loopback host are served.
func loopbackHostOnly(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		host := r.Host
		if h, _, err := net.SplitHostPort(host); err == nil {
			host = h
		}
		host = strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
		if !isLoopbackHost(host) {
			http.Error(w, "this UI runs without credentials and answers only to localhost", http.StatusMisdirectedRequest)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// logUser is the submitted user name as logged: card-like digit runs masked,
// at most 64 bytes.
func logUser(u string) string {
	u = card.Scrub(u)
	if len(u) > 64 {
		u = u[:64] + "..."
	}
	return u
}

// clientIP is the host part of the connection's remote address. Forwarding
// headers are not trusted: behind a reverse proxy every client shares the
// proxy's address (and its lockout).
func clientIP(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	return host
}
