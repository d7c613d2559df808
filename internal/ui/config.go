package ui

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strings"
	"time"

	"github.com/acme/payout/internal/access"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
	"github.com/rs/zerolog"
)

// DefaultGroupsHeader is the groups header of oauth2-proxy with
// --pass-user-headers (Config.ProxyGroupsHeader).
const DefaultGroupsHeader = "X-Forwarded-Groups"

// DefaultAddr is the listen address used when Config.Addr is empty: loopback
// only, so that an unconfigured UI is never reachable from the network.
const DefaultAddr = "127.0.0.1:8080"

// Config configures the operator web UI.
type Config struct {
	// Redis is the connection asynqmon inspects. It is owned by the caller:
	// the UI never closes it.
	Redis redis.UniversalClient

	// User and Password enable HTTP basic auth (PAYOUT_UI_USER,
	// PAYOUT_UI_PASSWORD); Token enables `Authorization: Bearer <Token>`
	// (PAYOUT_UI_TOKEN). At least one of the two is required unless
	// InsecureLocal is set and Addr is a loopback address.
	User, Password, Token string

	// Users, from a users file (payout ui --users, LoadUsers), are named
	// basic-auth logins, one per person, instead of User and Password
	// (both together are refused). Token may be set alongside.
	Users *Users

	// ReadOnly turns on asynqmon's view-only mode and, independently of it,
	// rejects every request under /monitoring/ that is not GET or HEAD.
	ReadOnly bool

	// InsecureLocal allows running without credentials, on a loopback
	// address only.
	InsecureLocal bool

	// Addr is the listen address of Serve (DefaultAddr when empty).
	Addr string

	// PrometheusAddr, when set, is passed to asynqmon, which then queries
	// that Prometheus server (from the UI process) to draw queue graphs.
	PrometheusAddr string

	// Batches feeds the /batches page and /api/batches. Optional: without
	// it those answer 503.
	Batches BatchSource

	// Console, when set, adds the batch pages (/batches/{id}: header,
	// payouts paged on the server, downloads), each payout's history, the
	// work queue (/queue) and the search of an externalId (/search). With
	// Controls that implement PayoutControls (not read-only), a payout
	// that needs review can be resolved and a queued one cancelled there.
	Console Console

	// FourEyes says the Controls refuse an approver who loaded the batch
	// (payout ui --four-eyes), a check by name: the UI must then tell
	// people apart, and CheckConfig accepts only basic auth (Users, or
	// User and Password in a UI per person), no Token (shared: every holder is
	// "ui-token") and no InsecureLocal (everyone is "ui-local"). Not
	// checked in read-only mode, which approves nothing.
	FourEyes bool

	// Controls, when set, adds Approve and Discard to the batches awaiting
	// approval on /batches, and records the pauses and resumes made in
	// asynqmon in the audit trail (not in read-only mode).
	Controls Controls

	// Uploads, when set, adds the upload form with its preview to
	// /batches (not in read-only mode); UploadLimit bounds a file
	// (DefaultUploadLimit when 0, checked while the file streams to its
	// staging directory); MaxUploads bounds the uploads handled at once
	// (DefaultMaxUploads when 0): one more is answered 503 with
	// Retry-After.
	Uploads     Uploads
	UploadLimit int64
	MaxUploads  int

	// TrustedProxies are the reverse proxies in front of the UI whose
	// X-Forwarded-For is believed for the client address the failed-login
	// limit and the logs use (ParseTrustedProxies). Without them every
	// client behind a proxy shares its address, and its lockout.
	TrustedProxies []netip.Prefix

	// ProxyUserHeader, when set, is the request header in which an
	// authenticating reverse proxy (oauth2-proxy: X-Forwarded-User with
	// --pass-user-headers, X-Auth-Request-User with --set-xauthrequest)
	// names the signed-in person: single sign-on. It is believed only on
	// connections from TrustedProxies (required with it); basic auth and
	// the token, if configured, still sign in anyone else.
	ProxyUserHeader string

	// ProxyGroupsHeader is the header in which that proxy lists the
	// signed-in person's groups, comma-separated (oauth2-proxy:
	// X-Forwarded-Groups with --pass-user-headers, X-Auth-Request-Groups
	// with --set-xauthrequest; DefaultGroupsHeader when empty). It is read
	// only with a sign-on through ProxyUserHeader from a trusted proxy;
	// the groups map to roles through Roles ("group NAME: roles").
	ProxyGroupsHeader string

	// Roles maps each signed-in person (and their single sign-on groups)
	// to the roles they hold (payout ui --roles-file): the console shows
	// only what they may do, and the commands refuse the rest (403).
	// Without it everyone signed in holds access.Everyone (everything but
	// administer). ReadOnly makes every person a viewer.
	Roles *access.Map

	// Logger receives access logs (debug), failed logins (warn) and server
	// events.
	Logger zerolog.Logger

	// Registry, when set, is served on /metrics and receives the UI's own
	// metrics; otherwise the default Prometheus registry is used.
	Registry *prometheus.Registry

	// MaxFailures failed logins from one client IP within FailureWindow
	// lock that IP out for Lockout (defaults 5, 1 minute, 5 minutes).
	MaxFailures   int
	FailureWindow time.Duration
	Lockout       time.Duration

	// clock replaces time.Now in tests.
	clock func() time.Time
	// csrf, when set by a test, is the CSRF key of the UI (several UIs
	// then share it, as one process would).
	csrf *csrfTokens
}

// ErrConfig is matched (errors.Is) by every configuration error returned by
// CheckConfig, New and Serve, so the CLI can exit with status 2.
var ErrConfig = errors.New("ui: invalid configuration")

// Specific configuration errors; each is also matched by ErrConfig.
var (
	// ErrNoCredentials: neither user+password nor a token was given and
	// the insecure local mode was not (validly) requested.
	ErrNoCredentials = errors.New("no UI credentials: set --users FILE (PAYOUT_USERS), " +
		"or PAYOUT_UI_USER and PAYOUT_UI_PASSWORD, or PAYOUT_UI_TOKEN")
	// ErrIncompleteCredentials: a user without a password or the reverse.
	ErrIncompleteCredentials = errors.New("UI user and password must be set together")
	// ErrUsersAndUser: a users file and the single user and password.
	ErrUsersAndUser = errors.New("--users (PAYOUT_USERS) and PAYOUT_UI_USER/PAYOUT_UI_PASSWORD " +
		"cannot be used together: put every login in the users file")
	// ErrNotLoopback: the insecure local mode was requested on an address
	// that is not loopback.
	ErrNotLoopback = errors.New("running the UI without credentials is allowed on a loopback address only")
	// ErrFourEyesLogin: four-eyes with a login that cannot tell two
	// people apart (a bearer token, the insecure local mode).
	ErrFourEyesLogin = errors.New("--four-eyes needs one login per person: sign in with basic auth only " +
		"(--users FILE with each person's own login, or PAYOUT_UI_USER and PAYOUT_UI_PASSWORD in a UI per person), " +
		"without PAYOUT_UI_TOKEN or --insecure-local")
	// ErrBadTrustedProxy: an entry of --trusted-proxies is not an address
	// or a CIDR prefix.
	ErrBadTrustedProxy = errors.New("bad trusted proxy")
	// ErrProxyAuth: single sign-on through a proxy header without the
	// trusted proxies that may set it.
	ErrProxyAuth = errors.New("--proxy-user-header needs --trusted-proxies: the header is believed only from the proxy")
	// ErrBadAddr: the listen address cannot be parsed.
	ErrBadAddr = errors.New("bad UI listen address")
	// ErrNoRedis: Config.Redis is nil.
	ErrNoRedis = errors.New("no Redis connection for the UI")
	// ErrBadLimits: negative rate-limit settings.
	ErrBadLimits = errors.New("bad login rate-limit settings")
)

// ErrRedisUnavailable is returned by Serve when Redis does not answer at
// start (exit status 3 in the CLI). It is not a configuration error.
var ErrRedisUnavailable = errors.New("ui: redis unreachable")

// ConfigError is a configuration error: Err is one of the specific errors
// above, Detail says which value was wrong (never a secret).
type ConfigError struct {
	Err    error
	Detail string
}

func (e *ConfigError) Error() string {
	if e.Detail == "" {
		return "ui: " + e.Err.Error()
	}
	return fmt.Sprintf("ui: %s (%s)", e.Err, e.Detail)
}

// Unwrap lets errors.Is match both the specific error and ErrConfig.
func (e *ConfigError) Unwrap() []error { return []error{e.Err, ErrConfig} }

// CheckConfig refuses a configuration the UI must not start with: no Redis,
// a user without a password (or the reverse), no credentials at all unless
// InsecureLocal is set and the address is loopback (127.0.0.0/8, ::1 or
// localhost), FourEyes without a login per person, an unparsable address,
// negative limits.
func CheckConfig(cfg Config) error {
	if err := checkAccess(cfg); err != nil {
		return err
	}
	if cfg.Redis == nil {
		return &ConfigError{Err: ErrNoRedis}
	}
	return nil
}

// checkAccess checks credentials, limits and address: everything that can
// be refused before a connection is made.
func checkAccess(cfg Config) error {
	if cfg.Users != nil && (cfg.User != "" || cfg.Password != "") {
		return &ConfigError{Err: ErrUsersAndUser}
	}
	if cfg.Users != nil && cfg.Users.Len() == 0 {
		return &ConfigError{Err: ErrUsersFile, Detail: "no users"}
	}
	if (cfg.User == "") != (cfg.Password == "") {
		return &ConfigError{Err: ErrIncompleteCredentials}
	}
	if cfg.MaxFailures < 0 || cfg.FailureWindow < 0 || cfg.Lockout < 0 {
		return &ConfigError{Err: ErrBadLimits}
	}
	if strings.TrimSpace(cfg.ProxyUserHeader) != "" && len(cfg.TrustedProxies) == 0 {
		return &ConfigError{Err: ErrProxyAuth}
	}
	addr := cfg.addr()
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return &ConfigError{Err: ErrBadAddr, Detail: fmt.Sprintf("%q: %v", addr, err)}
	}
	if err := checkFourEyes(cfg); err != nil {
		return err
	}
	if cfg.hasCredentials() {
		return nil
	}
	if !cfg.InsecureLocal {
		return &ConfigError{Err: ErrNoCredentials}
	}
	if !isLoopbackHost(host) {
		return &ConfigError{Err: ErrNotLoopback, Detail: fmt.Sprintf("address %q", addr)}
	}
	return nil
}

// checkFourEyes refuses FourEyes (outside read-only mode) unless every
// signed-in request names a person: basic auth (a users file, or the one
// user of a UI per person), and nothing else that
// could sign in (a token or the local mode is one name for everyone, so
// the same person could load under it and approve under their own).
func checkFourEyes(cfg Config) error {
	if !cfg.FourEyes || cfg.ReadOnly {
		return nil
	}
	var why string
	switch {
	case cfg.Token != "":
		why = "PAYOUT_UI_TOKEN is set: every holder of the token signs in as " + tokenUser
	case cfg.InsecureLocal:
		why = "--insecure-local: everyone is " + localUser
	case cfg.Users == nil && (cfg.User == "" || cfg.Password == "") && cfg.ProxyUserHeader == "":
		why = "no --users file, no PAYOUT_UI_USER and PAYOUT_UI_PASSWORD and no --proxy-user-header"
	default:
		return nil
	}
	return &ConfigError{Err: ErrFourEyesLogin, Detail: why}
}

func (cfg Config) hasCredentials() bool {
	return (cfg.User != "" && cfg.Password != "") || cfg.Users != nil || cfg.Token != "" || strings.TrimSpace(cfg.ProxyUserHeader) != ""
}

func (cfg Config) addr() string {
	if cfg.Addr == "" {
		return DefaultAddr
	}
	return cfg.Addr
}

func (cfg Config) uploadLimit() int64 {
	if cfg.UploadLimit <= 0 {
		return DefaultUploadLimit
	}
	return cfg.UploadLimit
}

func (cfg Config) maxUploads() int {
	if cfg.MaxUploads <= 0 {
		return DefaultMaxUploads
	}
	return cfg.MaxUploads
}

func (cfg Config) csrfTokens() *csrfTokens {
	if cfg.csrf != nil {
		return cfg.csrf.withClock(cfg.now)
	}
	return newCSRFTokens().withClock(cfg.now)
}

func (cfg Config) now() time.Time {
	if cfg.clock != nil {
		return cfg.clock()
	}
	return time.Now()
}

// isLoopbackHost reports whether a listen host binds loopback only. An empty
// host (":8080") binds every interface. Names other than "localhost" are not
// resolved: they are refused.
func isLoopbackHost(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// pingRedis checks that Redis answers within d.
func pingRedis(ctx context.Context, c redis.UniversalClient, d time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	if err := c.Ping(ctx).Err(); err != nil {
		return fmt.Errorf("%w: %v", ErrRedisUnavailable, err)
	}
	return nil
}
