package redisconn

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"net"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/acme/payout/internal/proof/testenv"
	"github.com/alicebob/miniredis/v2"
	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"
)

// pw is a password used in URLs under test; it must never appear in an
// error or a redacted URL, neither raw nor decoded.
const (
	pwRaw     = "s3cr%2Ft-PW"
	pwDecoded = "s3cr/t-PW"
)

func assertNoSecret(t *testing.T, what, s string, secrets ...string) {
	t.Helper()
	for _, sec := range append([]string{pwRaw, pwDecoded}, secrets...) {
		if strings.Contains(s, sec) {
			t.Fatalf("%s %q shows secret %q", what, s, sec)
		}
	}
}

func TestParseOptions(t *testing.T) {
	type want struct {
		kind       Kind
		addrs      []string
		user, pass string
		db         int
		master     string
		sUser      string
		sPass      string
		tls        bool
		serverName string
		pool       int
		dial       time.Duration
	}
	tests := []struct {
		name string
		opts Options
		want want
	}{
		{"default", Options{}, want{kind: KindSingle, addrs: []string{"127.0.0.1:6379"}}},
		{"plain", Options{URL: "redis://10.0.0.5:6380/2"}, want{kind: KindSingle, addrs: []string{"10.0.0.5:6380"}, db: 2}},
		{"default port", Options{URL: "redis://redis.internal"}, want{kind: KindSingle, addrs: []string{"redis.internal:6379"}}},
		{"password only", Options{URL: "redis://:" + pwRaw + "@h:1/0"}, want{kind: KindSingle, addrs: []string{"h:1"}, pass: pwDecoded}},
		{"user and password", Options{URL: "redis://app:" + pwRaw + "@h:1/3"}, want{kind: KindSingle, addrs: []string{"h:1"}, user: "app", pass: pwDecoded, db: 3}},
		{"go-redis query option", Options{URL: "redis://h:1/0?dial_timeout=2s"}, want{kind: KindSingle, addrs: []string{"h:1"}, dial: 2 * time.Second}},
		{"pool size", Options{URL: "redis://h:1", PoolSize: 42}, want{kind: KindSingle, addrs: []string{"h:1"}, pool: 42}},
		{"ipv6", Options{URL: "redis://[::1]:7000/1"}, want{kind: KindSingle, addrs: []string{"[::1]:7000"}, db: 1}},
		{"upper-case scheme", Options{URL: "REDIS://h:1"}, want{kind: KindSingle, addrs: []string{"h:1"}}},
		{"tls", Options{URL: "rediss://u:" + pwRaw + "@cache.example.com:6380/1"}, want{kind: KindSingle, addrs: []string{"cache.example.com:6380"}, user: "u", pass: pwDecoded, db: 1, tls: true, serverName: "cache.example.com"}},
		{"tls skip verify", Options{URL: "rediss://h:1", InsecureSkipVerify: true}, want{kind: KindSingle, addrs: []string{"h:1"}, tls: true, serverName: "h"}},
		{"sentinel", Options{URL: "redis-sentinel://s1:26379,s2:26380,s3/mymaster"}, want{kind: KindSentinel, addrs: []string{"s1:26379", "s2:26380", "s3:26379"}, master: "mymaster"}},
		{"sentinel full", Options{URL: "redis-sentinel://app:" + pwRaw + "@s1:1,[::1]:2/mymaster?db=4&sentinel_username=sen&sentinel_password=sp%26x&dial_timeout=3&client_name=payout", PoolSize: 7},
			want{kind: KindSentinel, addrs: []string{"s1:1", "[::1]:2"}, user: "app", pass: pwDecoded, db: 4, master: "mymaster", sUser: "sen", sPass: "sp&x", pool: 7, dial: 3 * time.Second}},
		{"sentinel tls", Options{URL: "rediss-sentinel://s1:1/m"}, want{kind: KindSentinel, addrs: []string{"s1:1"}, master: "m", tls: true}},
		{"cluster", Options{URL: "redis-cluster://n1:7000,n2:7001,n3"}, want{kind: KindCluster, addrs: []string{"n1:7000", "n2:7001", "n3:6379"}}},
		{"cluster auth", Options{URL: "redis-cluster://:" + pwRaw + "@n1:7000/0?read_timeout=500ms"}, want{kind: KindCluster, addrs: []string{"n1:7000"}, pass: pwDecoded}},
		{"cluster tls", Options{URL: "rediss-cluster://u:p@n1:7000,n2:7000/", PoolSize: 3}, want{kind: KindCluster, addrs: []string{"n1:7000", "n2:7000"}, user: "u", pass: "p", tls: true, pool: 3}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, err := ParseOptions(tt.opts)
			if err != nil {
				t.Fatalf("ParseOptions: %v", err)
			}
			assertNoSecret(t, "Config.URL", cfg.URL)
			var got want
			var tc *tls.Config
			got.kind = cfg.Kind
			switch cfg.Kind {
			case KindSingle:
				o := cfg.Single
				got.addrs, got.user, got.pass, got.db, got.pool, got.dial, tc = []string{o.Addr}, o.Username, o.Password, o.DB, o.PoolSize, o.DialTimeout, o.TLSConfig
			case KindSentinel:
				o := cfg.Failover
				got.addrs, got.user, got.pass, got.db, got.pool, got.dial, tc = o.SentinelAddrs, o.Username, o.Password, o.DB, o.PoolSize, o.DialTimeout, o.TLSConfig
				got.master, got.sUser, got.sPass = o.MasterName, o.SentinelUsername, o.SentinelPassword
			case KindCluster:
				o := cfg.Cluster
				got.addrs, got.user, got.pass, got.pool, got.dial, tc = o.Addrs, o.Username, o.Password, o.PoolSize, o.DialTimeout, o.TLSConfig
				if o.ReadTimeout == 0 && strings.Contains(tt.opts.URL, "read_timeout") {
					t.Fatal("read_timeout ignored")
				}
			}
			if tc != nil {
				got.tls, got.serverName = true, tc.ServerName
				if tc.InsecureSkipVerify != tt.opts.InsecureSkipVerify {
					t.Fatalf("InsecureSkipVerify = %v", tc.InsecureSkipVerify)
				}
				if tc.MinVersion < tls.VersionTLS12 {
					t.Fatalf("MinVersion %x", tc.MinVersion)
				}
			}
			if !equalWant(got.addrs, tt.want.addrs) {
				t.Fatalf("addrs = %v, want %v", got.addrs, tt.want.addrs)
			}
			got.addrs, tt.want.addrs = nil, nil
			if !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("got  %+v\nwant %+v", got, tt.want)
			}
		})
	}
}

func equalWant(a, b []string) bool {
	return strings.Join(a, "|") == strings.Join(b, "|")
}

func TestParseOptionsErrors(t *testing.T) {
	caDir := t.TempDir()
	notPEM := filepath.Join(caDir, "not.pem")
	if err := os.WriteFile(notPEM, []byte("hello"), 0o600); err != nil {
		t.Fatal(err)
	}
	u := "u:" + pwRaw + "@"
	tests := []struct {
		name string
		opts Options
		want error
	}{
		{"no scheme", Options{URL: u + "host:6379"}, ErrBadURL},
		{"unknown scheme", Options{URL: "http://" + u + "host"}, ErrBadURL},
		{"bad port", Options{URL: "redis://" + u + "host:notaport"}, ErrBadURL},
		{"bad db", Options{URL: "redis://" + u + "host/abc"}, ErrBadURL},
		{"unknown option", Options{URL: "redis://" + u + "host?foo=bar"}, ErrBadURL},
		{"skip_verify in URL", Options{URL: "rediss://" + u + "host?skip_verify=true"}, ErrBadURL},
		{"several hosts single", Options{URL: "redis://" + u + "h1:1,h2:2"}, ErrBadURL},
		{"unescaped # in password", Options{URL: "redis://u:s3cr#t-PW@host"}, ErrBadURL},
		{"unescaped / in password", Options{URL: "redis://u:s3cr/t-PW@host"}, ErrBadURL},
		{"unescaped @ in password", Options{URL: "redis://u:s3cr@t-PW@host"}, ErrBadURL},
		{"bad escape in password", Options{URL: "redis://u:s3cr%zzt-PW@host"}, ErrBadURL},
		{"fragment", Options{URL: "redis://" + u + "host#x"}, ErrBadURL},
		{"sentinel no master", Options{URL: "redis-sentinel://" + u + "s1:26379"}, ErrBadURL},
		{"sentinel no host", Options{URL: "redis-sentinel://" + u + "/m"}, ErrBadURL},
		{"sentinel empty host", Options{URL: "redis-sentinel://" + u + "s1:1,,s2/m"}, ErrBadURL},
		{"sentinel bad port", Options{URL: "redis-sentinel://" + u + "s1:99999/m"}, ErrBadURL},
		{"sentinel bad db", Options{URL: "redis-sentinel://" + u + "s1/m?db=x"}, ErrBadURL},
		{"sentinel unknown option", Options{URL: "redis-sentinel://" + u + "s1/m?password=" + pwRaw}, ErrBadURL},
		{"sentinel bad timeout", Options{URL: "redis-sentinel://" + u + "s1/m?dial_timeout=soon"}, ErrBadURL},
		{"sentinel two path segments", Options{URL: "redis-sentinel://" + u + "s1/m/2"}, ErrBadURL},
		{"cluster db", Options{URL: "redis-cluster://" + u + "n1:7000/2"}, ErrBadURL},
		{"cluster no host", Options{URL: "redis-cluster://" + u}, ErrBadURL},
		{"cluster unknown option", Options{URL: "redis-cluster://" + u + "n1?db=1"}, ErrBadURL},
		{"cluster bad host", Options{URL: "redis-cluster://" + u + "n 1:7000"}, ErrBadURL},
		{"ipv6 without brackets", Options{URL: "redis-cluster://" + u + "::1:7000"}, ErrBadURL},
		{"negative pool", Options{URL: "redis://" + u + "h", PoolSize: -1}, ErrBadConfig},
		{"CA without TLS", Options{URL: "redis://" + u + "h", CAFile: notPEM}, ErrBadConfig},
		{"skip verify without TLS", Options{URL: "redis-cluster://" + u + "h", InsecureSkipVerify: true}, ErrBadConfig},
		{"CA file missing", Options{URL: "rediss://" + u + "h", CAFile: filepath.Join(caDir, "nope.pem")}, ErrBadConfig},
		{"CA file not PEM", Options{URL: "rediss-cluster://" + u + "h", CAFile: notPEM}, ErrBadConfig},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, err := ParseOptions(tt.opts)
			if !errors.Is(err, tt.want) {
				t.Fatalf("ParseOptions = %+v, %v; want %v", cfg, err, tt.want)
			}
			for _, other := range []error{ErrBadURL, ErrBadConfig, ErrUnreachable, ErrAuth} {
				if other != tt.want && errors.Is(err, other) {
					t.Fatalf("error is also %v", other)
				}
			}
			assertNoSecret(t, "error", err.Error(), "s3cr#t-PW", "s3cr@t-PW", "s3cr%zzt", "s3cr")
			if !strings.HasPrefix(err.Error(), "redisconn: ") {
				t.Fatalf("error %q lacks package prefix", err)
			}
		})
	}
}

func TestRedacted(t *testing.T) {
	tests := []struct{ in, want string }{
		{"", ""},
		{"redis://127.0.0.1:6379/0", "redis://127.0.0.1:6379/0"},
		{"redis://app@h:1/0", "redis://app@h:1/0"},
		{"redis://app:" + pwRaw + "@h:1/0", "redis://app:xxxxx@h:1/0"},
		{"redis://:" + pwRaw + "@h", "redis://:xxxxx@h"},
		{"rediss://u:" + pwRaw + "@h:6380/1?dial_timeout=3s", "rediss://u:xxxxx@h:6380/1?dial_timeout=3s"},
		{"redis-sentinel://u:" + pwRaw + "@s1:1,s2:2/m?db=1&sentinel_password=" + pwRaw + "&sentinel_username=x",
			"redis-sentinel://u:xxxxx@s1:1,s2:2/m?db=1&sentinel_password=xxxxx&sentinel_username=x"},
		{"redis-sentinel://s1/m?Sentinel_Password=" + pwRaw, "redis-sentinel://s1/m?Sentinel_Password=xxxxx"},
		{"redis-cluster://u:" + pwRaw + "@n1:7000,n2:7001", "redis-cluster://u:xxxxx@n1:7000,n2:7001"},
		{"redis://h?password=" + pwRaw, "redis://h?password=xxxxx"},
		// Malformed: still hidden.
		{"redis://u:s3cr#t-PW@host", "redis://u:xxxxx@host"},
		{"redis://u:s3cr@t-PW@host", "redis://u:xxxxx@host"},
		{"redis://u:s3cr/t-PW@host/0", "redis://u:xxxxx@host/0"},
		{"u:" + pwRaw + "@host", "u:xxxxx@host"},
		{"redis://s3cr/t-PW@host", "redis://xxxxx@host"},
	}
	for _, tt := range tests {
		got := Redacted(tt.in)
		if got != tt.want {
			t.Errorf("Redacted(%q) = %q, want %q", tt.in, got, tt.want)
		}
		assertNoSecret(t, "Redacted", got, "s3cr")
	}
}

func TestOpenMiniredis(t *testing.T) {
	ctx := context.Background()
	m := miniredis.RunT(t)
	c, err := Open(ctx, Options{URL: "redis://" + m.Addr() + "/0"})
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	defer c.Close()
	if err := c.Set(ctx, "k", "v", 0).Err(); err != nil {
		t.Fatal(err)
	}
	if got, _ := m.Get("k"); got != "v" {
		t.Fatalf("miniredis has %q", got)
	}
	if IsCluster(c) {
		t.Fatal("single client reported as cluster")
	}

	// The db number of the URL is honoured.
	c3, err := Open(ctx, Options{URL: "redis://" + m.Addr() + "/3"})
	if err != nil {
		t.Fatal(err)
	}
	defer c3.Close()
	if err := c3.Set(ctx, "k3", "v", 0).Err(); err != nil {
		t.Fatal(err)
	}
	if !m.DB(3).Exists("k3") || m.DB(0).Exists("k3") {
		t.Fatal("db 3 not selected")
	}
}

func TestOpenAuth(t *testing.T) {
	ctx := context.Background()
	m := miniredis.RunT(t)
	m.RequireAuth(pwDecoded)
	mu := miniredis.RunT(t)
	mu.RequireUserAuth("app", pwDecoded)

	tests := []struct {
		name string
		url  string
		want error // nil: must connect
	}{
		{"right password", "redis://:" + pwRaw + "@" + m.Addr(), nil},
		{"wrong password", "redis://:wrong-" + pwRaw + "@" + m.Addr(), ErrAuth},
		{"no password", "redis://" + m.Addr(), ErrAuth},
		{"right user and password", "redis://app:" + pwRaw + "@" + mu.Addr(), nil},
		{"wrong user", "redis://bob:" + pwRaw + "@" + mu.Addr(), ErrAuth},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := Open(ctx, Options{URL: tt.url})
			if tt.want == nil {
				if err != nil {
					t.Fatalf("Open: %v", err)
				}
				defer c.Close()
				if err := c.Set(ctx, "x", "1", 0).Err(); err != nil {
					t.Fatalf("SET after auth: %v", err)
				}
				return
			}
			if !errors.Is(err, tt.want) || errors.Is(err, ErrUnreachable) {
				t.Fatalf("Open: %v, want %v", err, tt.want)
			}
			if c != nil {
				t.Fatal("client returned with an error")
			}
			assertNoSecret(t, "error", err.Error(), "wrong-")
		})
	}
}

func TestOpenTLS(t *testing.T) {
	ctx := context.Background()
	pki := newTestPKI(t, []net.IP{net.ParseIP("127.0.0.1")}, nil)
	m, err := miniredis.RunTLS(&tls.Config{Certificates: []tls.Certificate{pki.server}, MinVersion: tls.VersionTLS12})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(m.Close)
	m.RequireAuth(pwDecoded)
	url := "rediss://:" + pwRaw + "@" + m.Addr() + "/0"

	t.Run("trusted CA", func(t *testing.T) {
		c, err := Open(ctx, Options{URL: url, CAFile: pki.caFile})
		if err != nil {
			t.Fatalf("Open: %v", err)
		}
		defer c.Close()
		if err := c.Set(ctx, "tls", "yes", 0).Err(); err != nil {
			t.Fatal(err)
		}
		if got, _ := m.Get("tls"); got != "yes" {
			t.Fatalf("miniredis has %q", got)
		}
	})
	t.Run("unknown CA", func(t *testing.T) {
		_, err := Open(ctx, Options{URL: url, PingTimeout: 2 * time.Second})
		if !errors.Is(err, ErrUnreachable) {
			t.Fatalf("Open: %v, want ErrUnreachable", err)
		}
		var uae x509.UnknownAuthorityError
		if !errors.As(err, &uae) {
			t.Fatalf("cause %v is not an unknown-authority error", err)
		}
		assertNoSecret(t, "error", err.Error())
	})
	t.Run("wrong server name", func(t *testing.T) {
		_, port, _ := net.SplitHostPort(m.Addr())
		_, err := Open(ctx, Options{URL: "rediss://:" + pwRaw + "@localhost:" + port, CAFile: pki.caFile, PingTimeout: 2 * time.Second})
		if !errors.Is(err, ErrUnreachable) {
			t.Fatalf("Open: %v, want ErrUnreachable", err)
		}
		var hne x509.HostnameError
		if !errors.As(err, &hne) {
			t.Fatalf("cause %v is not a hostname error", err)
		}
	})
	t.Run("skip verify", func(t *testing.T) {
		c, err := Open(ctx, Options{URL: url, InsecureSkipVerify: true})
		if err != nil {
			t.Fatalf("Open: %v", err)
		}
		_ = c.Close()
	})
	t.Run("plain client to TLS server", func(t *testing.T) {
		_, err := Open(ctx, Options{URL: "redis://:" + pwRaw + "@" + m.Addr(), PingTimeout: 500 * time.Millisecond})
		if !errors.Is(err, ErrUnreachable) {
			t.Fatalf("Open: %v, want ErrUnreachable", err)
		}
	})
}

func TestOpenCluster(t *testing.T) {
	ctx := context.Background()
	m := miniredis.RunT(t)
	m.RequireAuth(pwDecoded)
	c, err := Open(ctx, Options{URL: "redis-cluster://:" + pwRaw + "@" + m.Addr()})
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	defer c.Close()
	if !IsCluster(c) {
		t.Fatalf("IsCluster(%T) = false", c)
	}
	if err := c.Set(ctx, "{b}:k", "v", 0).Err(); err != nil {
		t.Fatal(err)
	}
	if got, _ := m.Get("{b}:k"); got != "v" {
		t.Fatalf("miniredis has %q", got)
	}
}

func TestOpenSentinel(t *testing.T) {
	ctx := context.Background()
	master := miniredis.RunT(t)
	master.RequireAuth(pwDecoded)
	const sentinelPW = "sentinel-" + pwDecoded
	s := startFakeSentinel(t, "mymaster", master.Addr(), sentinelPW)
	dead := testenv.ClosedAddr(t)

	// A dead sentinel first: the client must move on to the live one.
	url := "redis-sentinel://:" + pwRaw + "@" + dead + "," + s.Addr() + "/mymaster?db=2&sentinel_password=sentinel-" + pwRaw
	c, err := Open(ctx, Options{URL: url})
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	defer c.Close()
	if IsCluster(c) {
		t.Fatal("sentinel client reported as cluster")
	}
	if err := c.Set(ctx, "via-sentinel", "1", 0).Err(); err != nil {
		t.Fatal(err)
	}
	if !master.DB(2).Exists("via-sentinel") {
		t.Fatal("key not written to db 2 of the master")
	}
	if ok, fail := s.counts(); ok == 0 || fail != 0 {
		t.Fatalf("sentinel auth ok=%d fail=%d", ok, fail)
	}

	t.Run("unknown master", func(t *testing.T) {
		_, err := Open(ctx, Options{URL: "redis-sentinel://" + s.Addr() + "/other?sentinel_password=sentinel-" + pwRaw, PingTimeout: time.Second})
		if !errors.Is(err, ErrUnreachable) {
			t.Fatalf("Open: %v, want ErrUnreachable", err)
		}
	})
	t.Run("wrong master password", func(t *testing.T) {
		_, err := Open(ctx, Options{URL: "redis-sentinel://:bad@" + s.Addr() + "/mymaster?sentinel_password=sentinel-" + pwRaw, PingTimeout: time.Second})
		if !errors.Is(err, ErrAuth) {
			t.Fatalf("Open: %v, want ErrAuth", err)
		}
		assertNoSecret(t, "error", err.Error(), "sentinel-")
	})
}

func TestOpenUnreachable(t *testing.T) {
	ctx := context.Background()
	dead := testenv.ClosedAddr(t)

	// A server that accepts and never answers: the ping timeout must hold.
	silent, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer silent.Close()
	go func() {
		for {
			c, err := silent.Accept()
			if err != nil {
				return
			}
			defer c.Close()
		}
	}()

	tests := []struct{ name, url string }{
		{"refused", "redis://:" + pwRaw + "@" + dead + "/0"},
		{"silent", "redis://:" + pwRaw + "@" + silent.Addr().String()},
		{"sentinel refused", "redis-sentinel://:" + pwRaw + "@" + dead + "/m"},
		{"cluster refused", "redis-cluster://:" + pwRaw + "@" + dead},
		{"tls refused", "rediss://:" + pwRaw + "@" + dead},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			start := time.Now()
			c, err := Open(ctx, Options{URL: tt.url, PingTimeout: 700 * time.Millisecond})
			if !errors.Is(err, ErrUnreachable) {
				t.Fatalf("Open = %v, %v; want ErrUnreachable", c, err)
			}
			if errors.Is(err, ErrBadURL) || errors.Is(err, ErrAuth) {
				t.Fatalf("misclassified: %v", err)
			}
			if d := time.Since(start); d > 5*time.Second {
				t.Fatalf("Open took %s with a 700ms ping timeout", d)
			}
			assertNoSecret(t, "error", err.Error())
			if !strings.Contains(err.Error(), "xxxxx") {
				t.Fatalf("error %q does not name the (redacted) URL", err)
			}
		})
	}

	t.Run("refused cause", func(t *testing.T) {
		_, err := Open(ctx, Options{URL: "redis://" + dead})
		var op *net.OpError
		if !errors.As(err, &op) {
			t.Fatalf("cause of %v is not a *net.OpError", err)
		}
	})
	t.Run("caller cancelled", func(t *testing.T) {
		cctx, cancel := context.WithCancel(ctx)
		cancel()
		_, err := Open(cctx, Options{URL: "redis://" + dead})
		if !errors.Is(err, context.Canceled) || errors.Is(err, ErrUnreachable) {
			t.Fatalf("Open: %v, want context.Canceled only", err)
		}
	})
}

// Config.NewClient builds the concrete type of each kind, and IsCluster
// tells them apart.
func TestNewClientTypes(t *testing.T) {
	for _, tt := range []struct {
		url  string
		want string
	}{
		{"redis://h:1", "*redis.Client"},
		{"redis-sentinel://s:1/m", "*redis.Client"},
		{"redis-cluster://n:1", "*redis.ClusterClient"},
	} {
		cfg, err := ParseOptions(Options{URL: tt.url})
		if err != nil {
			t.Fatal(err)
		}
		c := cfg.NewClient()
		var got string
		switch c.(type) {
		case *redis.Client:
			got = "*redis.Client"
		case *redis.ClusterClient:
			got = "*redis.ClusterClient"
		}
		_ = c.Close()
		if got != tt.want {
			t.Fatalf("%s: %T, want %s", tt.url, c, tt.want)
		}
		if (got == "*redis.ClusterClient") != IsCluster(c) {
			t.Fatalf("%s: IsCluster wrong", tt.url)
		}
	}
}

// Asynq built on the shared client does not close it (the package doc relies
// on this): Client.Close and Inspector.Close refuse, and the client still
// works afterwards.
func TestSharedWithAsynq(t *testing.T) {
	ctx := context.Background()
	m := miniredis.RunT(t)
	c, err := Open(ctx, Options{URL: "redis://" + m.Addr()})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()

	ac := asynq.NewClientFromRedisClient(c)
	if _, err := ac.EnqueueContext(ctx, asynq.NewTask("probe", nil), asynq.Queue("q")); err != nil {
		t.Fatalf("enqueue through the shared client: %v", err)
	}
	if err := ac.Close(); err == nil {
		t.Fatal("asynq Client.Close on a shared connection returned nil: it may now close our client")
	}
	insp := asynq.NewInspectorFromRedisClient(c)
	if qs, err := insp.Queues(); err != nil || len(qs) != 1 || qs[0] != "q" {
		t.Fatalf("Queues = %v, %v", qs, err)
	}
	if err := insp.Close(); err == nil {
		t.Fatal("asynq Inspector.Close on a shared connection returned nil")
	}
	if err := c.Ping(ctx).Err(); err != nil {
		t.Fatalf("shared client closed by asynq: %v", err)
	}
}

func TestShortPasswordScrub(t *testing.T) {
	// A password that is part of "xxxxx" must not make scrubbing loop.
	for _, pw := range []string{"x", "xx", "xxxxx", "h"} {
		_, err := ParseOptions(Options{URL: "redis://:" + pw + "@h:bad"})
		if !errors.Is(err, ErrBadURL) {
			t.Fatalf("%q: %v", pw, err)
		}
	}
}

// FuzzParseOptions: no panic, and the password never shows, whatever
// follows it.
func FuzzParseOptions(f *testing.F) {
	const secret = "Zq9Secret7"
	for _, s := range []string{"h:1/0", "h:bad", "h/abc", "h?foo=1", "s1:1,s2/m?db=x", "n1:7000/2", "[::1", "h#frag", "%zz", "h:1/0?dial_timeout=x", ""} {
		f.Add("redis", s)
		f.Add("redis-sentinel", s)
		f.Add("redis-cluster", s)
	}
	f.Fuzz(func(t *testing.T, scheme, rest string) {
		if strings.Contains(scheme+rest, secret[:4]) {
			return
		}
		raw := scheme + "://u:" + secret + "@" + rest
		if r := Redacted(raw); strings.Contains(r, secret) {
			t.Fatalf("Redacted(%q) = %q", raw, r)
		}
		cfg, err := ParseOptions(Options{URL: raw})
		if err != nil {
			if strings.Contains(err.Error(), secret) {
				t.Fatalf("error shows the password: %v", err)
			}
			if !errors.Is(err, ErrBadURL) && !errors.Is(err, ErrBadConfig) {
				t.Fatalf("untyped error: %v", err)
			}
			return
		}
		if strings.Contains(cfg.URL, secret) {
			t.Fatalf("Config.URL shows the password: %q", cfg.URL)
		}
	})
}

// TestDescribe: the Redis a command names at start: where it is and which
// database, never a user name or a password.
func TestDescribe(t *testing.T) {
	for _, tc := range []struct{ url, want string }{
		{"", "127.0.0.1:6379, database 0"},
		{"redis://:s3cret-pw@10.1.2.3:6477/5", "10.1.2.3:6477, database 5"},
		{"redis://alice:s3cret-pw@redis.example:6380/2", "redis.example:6380, database 2"},
		{"rediss://:s3cret-pw@redis.example/1", "redis.example:6379, database 1 (TLS)"},
		{"redis-sentinel://s1:26379/m?db=2&sentinel_password=s3cret-pw", `sentinel s1:26379, master "m", database 2`},
		{"redis-sentinel://:s3cret-pw@s1:26379,s2:26379/mymaster?db=3", `sentinel s1:26379,s2:26379, master "mymaster", database 3`},
		{"redis-cluster://:s3cret-pw@c1:7000,c2:7001", "cluster c1:7000,c2:7001"},
	} {
		got := Describe(Options{URL: tc.url})
		if got != tc.want {
			t.Errorf("%q: %q, want %q", tc.url, got, tc.want)
		}
		if strings.Contains(got, "s3cret") || strings.Contains(got, "alice") {
			t.Errorf("%q: the description shows a secret: %q", tc.url, got)
		}
	}
}
