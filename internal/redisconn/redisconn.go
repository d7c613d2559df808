// Package redisconn is the one way every payout command reaches Redis: it
// turns the --redis URL (env PAYOUT_REDIS) into a redis.UniversalClient,
// pings it, and classifies failures. The same client is handed to the ledger
// and to Asynq, so both always use the same server, credentials and TLS
// settings.
//
// # URL forms
//
//	redis://[user:password@]host[:6379][/db]                 single server
//	rediss://[user:password@]host[:6379][/db]                single server, TLS
//	redis-sentinel://[user:password@]h1[:26379],h2[:26379]/mastername[?db=N&sentinel_username=U&sentinel_password=P]
//	rediss-sentinel://...                                    the same, TLS to sentinels and master
//	redis-cluster://[user:password@]h1[:6379],h2[:6379]       Redis Cluster (database 0 only)
//	rediss-cluster://...                                     the same, TLS
//
// redis:// and rediss:// are parsed by redis.ParseURL and accept its query
// options (dial_timeout, pool_size, ...), except skip_verify, which is
// refused: certificate checks are switched off only by
// Options.InsecureSkipVerify. The sentinel and cluster forms accept
// dial_timeout, read_timeout, write_timeout (a Go duration, or seconds) and
// client_name; sentinel also db, sentinel_username and sentinel_password. In
// the sentinel form the user and password of the URL authenticate to the
// master; sentinels get sentinel_username/sentinel_password, none if absent.
// Unknown options are refused. User and password must be percent-encoded
// (RFC 3986): characters like '/', '?', '#' or '@' in them are refused, not
// guessed; an '@' in a query value must be percent-encoded too.
//
// With TLS, the server certificate is checked against the system roots, or
// against Options.CAFile when given; the expected name is the host of the
// URL (for sentinel and cluster, the host of each address dialled).
//
// # Errors and exit codes
//
// ErrBadURL and ErrBadConfig are configuration errors (exit 2);
// ErrUnreachable means Redis could not be reached in time (exit 3); ErrAuth
// means Redis answered but refused the credentials (a configuration error,
// exit 2). No error and no output of Redacted shows a password.
//
// # Sharing the client with Asynq
//
// asynq v0.26 NewClientFromRedisClient, NewServerFromRedisClient and
// NewInspectorFromRedisClient mark the connection as shared: Client.Close and
// Inspector.Close then return an error without closing anything, and
// Server.Shutdown leaves the client open. The caller of Open owns the client
// and closes it once, after the Asynq server has shut down and every other
// user is done. An Asynq server with concurrency N holds up to about N+5
// connections: size Options.PoolSize accordingly (0 keeps go-redis's default
// of 10 per CPU).
package redisconn

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// DefaultURL is used when Options.URL is empty.
const DefaultURL = "redis://127.0.0.1:6379/0"

// DefaultPingTimeout bounds the ping of Open when Options.PingTimeout is 0.
const DefaultPingTimeout = 3 * time.Second

// Errors, to be tested with errors.Is.
var (
	// ErrBadURL: the URL is malformed or uses an unknown scheme or option.
	ErrBadURL = errors.New("invalid Redis URL")
	// ErrBadConfig: the other options are unusable (CA file unreadable or
	// without certificates, TLS options with a non-TLS URL, negative pool).
	ErrBadConfig = errors.New("invalid Redis configuration")
	// ErrUnreachable: Redis could not be reached or did not answer the ping
	// in time. The cause is wrapped too.
	ErrUnreachable = errors.New("redis unreachable")
	// ErrAuth: Redis answered but refused the user or password.
	ErrAuth = errors.New("redis refused authentication")
)

// Options says how to reach Redis.
type Options struct {
	// URL in one of the forms of the package doc; DefaultURL when empty.
	URL string
	// CAFile is a PEM file of CA certificates trusted for rediss:// (and the
	// TLS sentinel and cluster forms) instead of the system roots.
	CAFile string
	// InsecureSkipVerify switches off certificate verification. For tests
	// only: it makes TLS useless against an active attacker.
	InsecureSkipVerify bool
	// PoolSize overrides the connection pool size (per node) when > 0.
	PoolSize int
	// PingTimeout bounds the ping of Open; DefaultPingTimeout when 0.
	PingTimeout time.Duration
}

// Kind is the kind of deployment a URL names.
type Kind int

// Kinds of deployment.
const (
	KindSingle Kind = iota + 1
	KindSentinel
	KindCluster
)

func (k Kind) String() string {
	switch k {
	case KindSingle:
		return "single"
	case KindSentinel:
		return "sentinel"
	case KindCluster:
		return "cluster"
	}
	return fmt.Sprintf("Kind(%d)", int(k))
}

// Config is a parsed Options: exactly one of Single, Failover and Cluster is
// set, according to Kind.
type Config struct {
	Kind     Kind
	Single   *redis.Options
	Failover *redis.FailoverOptions
	Cluster  *redis.ClusterOptions
	// URL is the URL with its passwords redacted, fit for logs.
	URL string
}

// NewClient builds the client without connecting.
func (c *Config) NewClient() redis.UniversalClient {
	switch c.Kind {
	case KindSentinel:
		return redis.NewFailoverClient(c.Failover)
	case KindCluster:
		return redis.NewClusterClient(c.Cluster)
	default:
		return redis.NewClient(c.Single)
	}
}

// ParseOptions checks opts and turns them into client options, without
// connecting. It reads Options.CAFile when given.
func ParseOptions(opts Options) (*Config, error) {
	raw := strings.TrimSpace(opts.URL)
	if raw == "" {
		raw = DefaultURL
	}
	cfg, err := parseURL(raw)
	if err != nil {
		return nil, err
	}
	if opts.PoolSize < 0 {
		return nil, newError(ErrBadConfig, raw, "pool size must not be negative", nil)
	}
	var tlsCfg **tls.Config
	switch cfg.Kind {
	case KindSingle:
		tlsCfg = &cfg.Single.TLSConfig
		if opts.PoolSize > 0 {
			cfg.Single.PoolSize = opts.PoolSize
		}
	case KindSentinel:
		tlsCfg = &cfg.Failover.TLSConfig
		if opts.PoolSize > 0 {
			cfg.Failover.PoolSize = opts.PoolSize
		}
	case KindCluster:
		tlsCfg = &cfg.Cluster.TLSConfig
		if opts.PoolSize > 0 {
			cfg.Cluster.PoolSize = opts.PoolSize
		}
	}
	if *tlsCfg == nil {
		if opts.CAFile != "" || opts.InsecureSkipVerify {
			return nil, newError(ErrBadConfig, raw, "a CA file or skip-verify was given but the URL does not use TLS (use rediss://, rediss-sentinel:// or rediss-cluster://)", nil)
		}
		return cfg, nil
	}
	if opts.InsecureSkipVerify {
		(*tlsCfg).InsecureSkipVerify = true
	}
	if opts.CAFile != "" {
		pem, err := os.ReadFile(opts.CAFile)
		if err != nil {
			return nil, newError(ErrBadConfig, raw, "read CA file", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, newError(ErrBadConfig, raw, fmt.Sprintf("CA file %s holds no PEM certificate", opts.CAFile), nil)
		}
		(*tlsCfg).RootCAs = pool
	}
	return cfg, nil
}

// Open parses opts, connects and pings Redis within Options.PingTimeout.
// The caller owns the returned client and must Close it.
func Open(ctx context.Context, opts Options) (redis.UniversalClient, error) {
	cfg, err := ParseOptions(opts)
	if err != nil {
		return nil, err
	}
	timeout := opts.PingTimeout
	if timeout <= 0 {
		timeout = DefaultPingTimeout
	}
	c := cfg.NewClient()
	if err := ping(ctx, c, timeout); err != nil {
		_ = c.Close()
		raw := strings.TrimSpace(opts.URL)
		if raw == "" {
			raw = DefaultURL
		}
		switch {
		case ctx.Err() != nil: // the caller gave up (signal): not Redis's fault
			return nil, newError(nil, raw, "connect", ctx.Err())
		case isAuthError(err):
			return nil, newError(ErrAuth, raw, "ping", err)
		default:
			if errors.Is(err, context.DeadlineExceeded) {
				err = probe(ctx, cfg, err)
			}
			return nil, newError(ErrUnreachable, raw, fmt.Sprintf("ping (timeout %s)", timeout), err)
		}
	}
	return c, nil
}

// ping pings c and gives up after timeout even when the server accepts the
// connection and never answers (go-redis's own read timeout is longer, and
// it ignores context deadlines unless ContextTimeoutEnabled is set).
func ping(ctx context.Context, c redis.UniversalClient, timeout time.Duration) error {
	pctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- c.Ping(pctx).Err() }()
	select {
	case err := <-done:
		return err
	case <-pctx.Done():
	}
	// The ping in flight sees the same deadline and usually returns at once
	// with the more telling error (connection refused, TLS, ...): prefer it.
	grace := time.NewTimer(250 * time.Millisecond)
	defer grace.Stop()
	select {
	case err := <-done:
		return err
	case <-grace.C:
		// The caller closes c, which ends the ping in flight.
		return fmt.Errorf("no answer: %w", pctx.Err())
	}
}

// probe explains a ping timeout: go-redis reports only the deadline when it
// kept retrying a dial that failed, so dial the first address once more
// (with the TLS handshake when TLS is on) and add its error (connection
// refused, unknown certificate authority, ...) to the cause.
func probe(ctx context.Context, cfg *Config, pingErr error) error {
	var addr string
	var tc *tls.Config
	switch cfg.Kind {
	case KindSingle:
		addr, tc = cfg.Single.Addr, cfg.Single.TLSConfig
	case KindSentinel:
		addr, tc = cfg.Failover.SentinelAddrs[0], cfg.Failover.TLSConfig
	case KindCluster:
		addr, tc = cfg.Cluster.Addrs[0], cfg.Cluster.TLSConfig
	}
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	var conn net.Conn
	var err error
	if tc != nil {
		conn, err = (&tls.Dialer{Config: tc}).DialContext(ctx, "tcp", addr)
	} else {
		conn, err = (&net.Dialer{}).DialContext(ctx, "tcp", addr)
	}
	if err != nil {
		return fmt.Errorf("%w (%w)", pingErr, err)
	}
	_ = conn.Close()
	return fmt.Errorf("%w (%s accepts connections but did not answer)", pingErr, addr)
}

// IsCluster reports whether c talks to a Redis Cluster.
func IsCluster(c redis.UniversalClient) bool {
	_, ok := c.(*redis.ClusterClient)
	return ok
}

func isAuthError(err error) bool {
	if redis.IsAuthError(err) {
		return true
	}
	var re redis.Error
	if errors.As(err, &re) {
		s := re.Error()
		// "ERR AUTH <password> called without any password configured ..."
		// (Redis 6+ when a password is sent to a server without one) and
		// "ERR invalid password" (Redis < 6).
		return strings.HasPrefix(s, "ERR AUTH") || strings.HasPrefix(s, "ERR invalid password") ||
			strings.HasPrefix(s, "ERR invalid username-password")
	}
	return false
}

// connError carries a redacted URL and a message scrubbed of the URL's
// secrets. It unwraps to its kind (ErrBadURL, ...) and to its cause, if any.
type connError struct {
	kind  error
	url   string // redacted
	msg   string // scrubbed
	cause error
}

func newError(kind error, rawURL, what string, cause error) error {
	e := &connError{kind: kind, url: Redacted(rawURL), cause: cause}
	msg := what
	if cause != nil {
		msg += ": " + cause.Error()
	}
	e.msg = scrub(msg, rawURL)
	return e
}

func (e *connError) Error() string {
	var b strings.Builder
	b.WriteString("redisconn: ")
	if e.kind != nil {
		b.WriteString(e.kind.Error())
		b.WriteString(": ")
	}
	b.WriteString(e.url)
	b.WriteString(": ")
	b.WriteString(e.msg)
	return b.String()
}

func (e *connError) Unwrap() []error {
	var out []error
	if e.kind != nil {
		out = append(out, e.kind)
	}
	if e.cause != nil {
		out = append(out, e.cause)
	}
	return out
}

// Describe says which Redis c reaches, for the line every command prints
// at start: host:port and database; a sentinel's addresses and master
// name; a cluster's seed addresses; "TLS" when it is used. It never holds a
// user name, a password or the URL itself.
func (c *Config) Describe() string {
	var s string
	tlsOn := false
	switch c.Kind {
	case KindSentinel:
		f := c.Failover
		s = fmt.Sprintf("sentinel %s, master %q, database %d", strings.Join(f.SentinelAddrs, ","), f.MasterName, f.DB)
		tlsOn = f.TLSConfig != nil
	case KindCluster:
		s = "cluster " + strings.Join(c.Cluster.Addrs, ",")
		tlsOn = c.Cluster.TLSConfig != nil
	default:
		s = fmt.Sprintf("%s, database %d", c.Single.Addr, c.Single.DB)
		tlsOn = c.Single.TLSConfig != nil
	}
	if tlsOn {
		s += " (TLS)"
	}
	return s
}

// Describe parses opts like ParseOptions and describes the Redis they
// name (Config.Describe); "" when they do not parse (Open says why).
func Describe(opts Options) string {
	cfg, err := ParseOptions(opts)
	if err != nil {
		return ""
	}
	return cfg.Describe()
}
