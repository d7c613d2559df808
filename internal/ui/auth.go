package ui

import (
	"crypto/sha256"
	"crypto/subtle"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"time"

	"github.com/rs/zerolog"

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
	// proxyHeader, when set, names the header in which an authenticating
	// reverse proxy of trusted passes the signed-in person's name.
	proxyHeader string
	trusted     []netip.Prefix
	// logins, with a users file, replaces the single user and password.
	logins *userLogins
	// users maps a signed-in name to its person (nil: the name's
	// canonical form).
	users *Users

	// groupsHeader names the header in which that proxy lists the
	// person's groups; roles maps people and groups to roles.
	groupsHeader string
	roles        roleMap

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
		a.logins = newUserLogins(cfg.Users, cfg.now)
		a.users = cfg.Users
	}
	if cfg.Token != "" {
		a.bearer = true
		a.tokenHash = sha256.Sum256([]byte(cfg.Token))
	}
	a.proxyHeader, a.trusted = http.CanonicalHeaderKey(strings.TrimSpace(cfg.ProxyUserHeader)), cfg.TrustedProxies
	a.groupsHeader = http.CanonicalHeaderKey(strings.TrimSpace(cfg.ProxyGroupsHeader))
	if a.groupsHeader == "" {
		a.groupsHeader = DefaultGroupsHeader
	}
	a.roles = roleMap{m: cfg.Roles, readOnly: cfg.ReadOnly, log: cfg.Logger}
	a.open = !a.basic && !a.bearer && a.proxyHeader == ""
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

// authOutcome is what check found: the result, and what the log and the
// limiter need of it.
type authOutcome struct {
	res    authResult
	scheme string
	user   string // the signed-in name (authOK), or the submitted one
	// logName is the submitted name as logged ("" to log none): with a
	// users file only a name in the file, never a password typed into the
	// name field.
	logName string
	// limited, when positive, refused the attempt before comparing: the
	// IP's attempts in flight and failures reached the limit.
	limited time.Duration
	// atOnce: limited only for the attempts in flight, not for failures.
	atOnce bool
	// counted: the limiter already recorded this failure (failures,
	// lockedNow); otherwise wrap records it.
	counted   bool
	failures  int
	lockedNow bool
}

// check classifies the credentials of r, from the client whose failure
// limit is key (limitKey of its address). The password or token is never
// returned.
func (a *authenticator) check(r *http.Request, key string) authOutcome {
	h := r.Header.Get("Authorization")
	if h == "" {
		return authOutcome{res: authMissing, scheme: "none"}
	}
	kind, rest, _ := strings.Cut(h, " ")
	switch strings.ToLower(kind) {
	case "basic":
		u, p, ok := r.BasicAuth()
		if !ok || !a.basic {
			return authOutcome{res: authBad, scheme: "basic", user: u}
		}
		if a.logins != nil {
			return a.logins.attempt(key, u, p, a.limiter)
		}
		// Both comparisons always run: no early exit on a wrong user.
		userOK := equalHash(u, a.userHash)
		if userOK&equalHash(p, a.passHash) == 1 {
			return authOutcome{res: authOK, scheme: "basic", user: u}
		}
		// The name is logged only when it is the login's: anything else may
		// be a password typed into the name field.
		out := authOutcome{res: authBad, scheme: "basic", user: u}
		if userOK == 1 {
			out.logName = u
		}
		return out
	case "bearer":
		tok := strings.TrimSpace(rest)
		if a.bearer && tok != "" && equalHash(tok, a.tokenHash) == 1 {
			return authOutcome{res: authOK, scheme: "bearer", user: tokenUser}
		}
		return authOutcome{res: authBad, scheme: "bearer"}
	default:
		return authOutcome{res: authBad, scheme: "unsupported"}
	}
}

// wrap puts authentication in front of next.
func (a *authenticator) wrap(next http.Handler) http.Handler {
	if a.open {
		return loopbackHostOnly(withUser(next, localUser, a.roles))
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if user, ok := a.proxyUser(r); ok {
			a.roles.serve(next, w, r, user, a.proxyGroups(r))
			return
		}
		if a.proxyHeader != "" && !a.basic && !a.bearer {
			// Single sign-on only: no password here to guess, so no
			// failure to count.
			http.Error(w, "sign in through the single sign-on proxy in front of this UI", http.StatusUnauthorized)
			return
		}
		ip := clientIP(r)
		key := limitKey(ip)
		if locked, left := a.limiter.locked(key); locked {
			a.tooMany(w, left)
			return
		}
		o := a.check(r, key)
		switch o.res {
		case authOK:
			a.roles.serve(next, w, r, a.person(o.user), nil)
			return
		case authBad:
			if o.limited > 0 {
				a.refuseLimited(w, r, ip, o)
				return
			}
			a.recordFailure(r, ip, key, o)
		case authMissing:
			a.log.Debug().Str("ip", ip).Str("path", r.URL.Path).Msg("ui: no credentials, asking for them")
		}
		a.challenge(w)
	})
}

// refuseLimited answers an attempt the limiter refused before its
// credentials were compared (o.limited): 429, to retry in a second if
// only the attempts in flight were too many, else when the lockout ends.
func (a *authenticator) refuseLimited(w http.ResponseWriter, r *http.Request, ip string, o authOutcome) {
	if o.atOnce {
		a.log.Info().Str("ip", ip).Str("path", r.URL.Path).Str("scheme", o.scheme).
			Msg("ui: login refused before checking: too many logins from this client at once")
		w.Header().Set("Retry-After", "1")
		http.Error(w, "too many logins at once, try again in a second", http.StatusTooManyRequests)
		return
	}
	a.tooMany(w, o.limited)
}

// recordFailure counts the failed login o from ip (limiter key key) with
// the limiter, unless it already did, and in the metrics, and logs it,
// and the lockout it caused if any.
func (a *authenticator) recordFailure(r *http.Request, ip, key string, o authOutcome) {
	if !o.counted {
		o.failures, o.lockedNow = a.limiter.fail(key)
	}
	a.metrics.loginFailures.WithLabelValues(o.scheme).Inc()
	ev := a.log.Warn().Str("ip", ip).Str("method", r.Method).Str("path", r.URL.Path).
		Str("scheme", o.scheme).Int("failures", o.failures)
	switch {
	case o.logName != "":
		ev = ev.Str("user", logUser(o.logName))
	case o.scheme == "basic":
		ev = ev.Bool("user_known", false)
	}
	ev.Msg("ui: failed login")
	if o.lockedNow {
		a.metrics.lockouts.Inc()
		a.log.Warn().Str("ip", ip).Dur("lockout", a.limiter.lockout).Msg("ui: too many failed logins, client locked out")
	}
}

// proxyUser is the signed-in person named by the authenticating proxy:
// the header's value, believed only when the connection comes from a
// trusted proxy (the header of anyone else is ignored, and logged).
func (a *authenticator) proxyUser(r *http.Request) (string, bool) {
	if a.proxyHeader == "" {
		return "", false
	}
	v := r.Header.Values(a.proxyHeader)
	if len(v) == 0 {
		return "", false
	}
	if !isTrusted(remoteHost(r), a.trusted) {
		a.log.Warn().Str("ip", remoteHost(r)).Str("header", a.proxyHeader).Str("path", r.URL.Path).
			Msg("ui: ignored a sign-on header from an address that is not a trusted proxy")
		return "", false
	}
	user := strings.TrimSpace(v[0])
	if len(v) != 1 || !validProxyUser(user) || a.person(user) == "" {
		a.log.Warn().Str("ip", remoteHost(r)).Str("header", a.proxyHeader).Msg("ui: refused a bad sign-on header from the proxy")
		return "", false
	}
	return a.person(user), true
}

// person is the identity a signed-in name acts as: through the users file
// (a login and a single sign-on name of one person are one identity),
// else the name's canonical form (identity.Canonical); "" for a name with
// invisible or format characters. The token and local modes keep their
// reserved names.
func (a *authenticator) person(name string) string {
	if name == tokenUser || name == localUser {
		return name
	}
	return a.users.Identity(name)
}

// validProxyUser accepts a name or e-mail address of 1 to 128 bytes
// without control characters or separators the audit trail would
// mistake.
func validProxyUser(u string) bool {
	if u == "" || len(u) > 128 {
		return false
	}
	for _, c := range u {
		if c < 0x20 || c == 0x7f || c == ',' || c == ';' {
			return false
		}
	}
	return true
}

// limitKey is the key of a client address in the failure limit: an IPv6
// address by its /64 (one subscriber's network, where a client may pick
// any address; so ::1 is ::/64 and link-local addresses share fe80::/64),
// any other as it is.
func limitKey(ip string) string {
	a, err := netip.ParseAddr(ip)
	if err != nil {
		return ip
	}
	a = a.WithZone("").Unmap()
	if a.Is4() {
		return a.String()
	}
	return netip.PrefixFrom(a, 64).Masked().String()
}

// tooMany answers 429 with Retry-After.
func (a *authenticator) tooMany(w http.ResponseWriter, left time.Duration) {
	secs := int(left/time.Second) + 1
	w.Header().Set("Retry-After", strconv.Itoa(secs))
	http.Error(w, "too many failed logins, try again later", http.StatusTooManyRequests)
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
