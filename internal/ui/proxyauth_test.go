package ui

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
	"github.com/rs/zerolog"
)

// whoAmI answers the signed-in user of the request.
var whoAmI = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = w.Write([]byte(userFrom(r.Context()))) })

func proxyConfig(mutate func(*Config)) Config {
	cfg := Config{ProxyUserHeader: "X-Forwarded-User", TrustedProxies: []netip.Prefix{netip.MustParsePrefix("10.0.0.5/32")},
		Logger: zerolog.Nop()}
	if mutate != nil {
		mutate(&cfg)
	}
	return cfg
}

// TestProxyUser: the sign-on header names the person only on a
// connection from a trusted proxy; from anyone else it is ignored, and
// basic auth (when configured) still signs in; a bad header is refused.
func TestProxyUser(t *testing.T) {
	for _, tc := range []struct {
		name   string
		cfg    Config
		remote string
		hdr    []string
		basic  bool
		code   int
		user   string
	}{
		{"from the proxy", proxyConfig(nil), "10.0.0.5", []string{"alice@acme.example"}, false, 200, "alice@acme.example"},
		{"from the proxy, trimmed", proxyConfig(nil), "10.0.0.5", []string{" bob "}, false, 200, "bob"},
		{"from a client", proxyConfig(nil), "192.0.2.9", []string{"alice@acme.example"}, false, 401, ""},
		{"proxy without header", proxyConfig(nil), "10.0.0.5", nil, false, 401, ""},
		{"two headers", proxyConfig(nil), "10.0.0.5", []string{"alice", "bob"}, false, 401, ""},
		{"control character", proxyConfig(nil), "10.0.0.5", []string{"alice\x01"}, false, 401, ""},
		{"too long", proxyConfig(nil), "10.0.0.5", []string{strings.Repeat("a", 129)}, false, 401, ""},
		{"client with basic auth beside", proxyConfig(func(c *Config) { c.User, c.Password = "ops", "ops-Pa55" }), "192.0.2.9",
			[]string{"alice@acme.example"}, true, 200, "ops"},
		{"proxy header wins over basic", proxyConfig(func(c *Config) { c.User, c.Password = "ops", "ops-Pa55" }), "10.0.0.5",
			[]string{"carol"}, true, 200, "carol"},
		{"header not configured", proxyConfig(func(c *Config) { c.ProxyUserHeader, c.User, c.Password = "", "ops", "ops-Pa55" }), "10.0.0.5",
			[]string{"carol"}, true, 200, "ops"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := newAuthenticator(tc.cfg, newMetrics(prometheus.NewRegistry()))
			h := realClient(a.wrap(whoAmI), tc.cfg.TrustedProxies)
			r := httptest.NewRequest("GET", "/batches", nil)
			r.RemoteAddr = tc.remote + ":5000"
			for _, v := range tc.hdr {
				r.Header.Add("X-Forwarded-User", v)
			}
			if tc.basic {
				r.SetBasicAuth("ops", "ops-Pa55")
			}
			w := httptest.NewRecorder()
			h.ServeHTTP(w, r)
			if w.Code != tc.code || (tc.code == 200 && w.Body.String() != tc.user) {
				t.Fatalf("%d %q, want %d %q", w.Code, w.Body.String(), tc.code, tc.user)
			}
		})
	}
}

// TestProxyUserConfig: the header needs trusted proxies; it is a login
// per person, so four-eyes accepts it.
func TestProxyUserConfig(t *testing.T) {
	rc := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})
	defer rc.Close()
	if err := CheckConfig(Config{Redis: rc, ProxyUserHeader: "X-Forwarded-User"}); !errors.Is(err, ErrProxyAuth) || !errors.Is(err, ErrConfig) {
		t.Errorf("header without trusted proxies: %v", err)
	}
	if err := CheckConfig(proxyConfig(func(c *Config) { c.Redis, c.FourEyes = rc, true })); err != nil {
		t.Errorf("four-eyes with single sign-on: %v", err)
	}
}

// TestPlainMessage: a refusal shown to people loses the packages'
// prefixes.
func TestPlainMessage(t *testing.T) {
	for in, want := range map[string]string{
		"not approved: batch b was loaded by alice: ledger: four-eyes rule: the approver loaded the batch": "not approved: batch b was loaded by alice: four-eyes rule: the approver loaded the batch",
		"ui: loader: file too large": "file too large",
		"bulk-ledger: kept":          "bulk-ledger: kept",
	} {
		if got := plainMessage(in); got != want {
			t.Errorf("plainMessage(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestGroupDigits: thousands separators on the ledger's text, never a
// float.
func TestGroupDigits(t *testing.T) {
	for in, want := range map[string]string{
		"0.00": "0.00", "999.99": "999.99", "1000.00": "1,000.00", "1234567.89": "1,234,567.89",
		"-5097353.73": "-5,097,353.73", "100000": "100,000", "12345678901234567890.12": "12,345,678,901,234,567,890.12",
		"": "", "abc": "abc", "1e5": "1e5",
	} {
		if got := groupDigits(in); got != want {
			t.Errorf("groupDigits(%q) = %q, want %q", in, got, want)
		}
	}
}
