package ui

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strconv"
	"testing"
)

func TestClientAddr(t *testing.T) {
	trusted, err := ParseTrustedProxies(" 10.0.0.0/24, 192.0.2.7 ,::1")
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name   string
		remote string
		xff    []string
		want   string
	}{
		{"no proxy: the connection", "198.51.100.1:5000", nil, "198.51.100.1"},
		{"untrusted sender: its header is ignored", "198.51.100.1:5000", []string{"203.0.113.9"}, "198.51.100.1"},
		{"trusted proxy: the address it forwarded for", "10.0.0.5:5000", []string{"203.0.113.9"}, "203.0.113.9"},
		{"a single trusted address", "192.0.2.7:5000", []string{"203.0.113.9"}, "203.0.113.9"},
		{"a chain of trusted proxies", "10.0.0.5:5000", []string{"203.0.113.9, 192.0.2.7", "10.0.0.9"}, "203.0.113.9"},
		{"what the client wrote on the left is not believed", "10.0.0.5:5000", []string{"1.2.3.4, 203.0.113.9"}, "203.0.113.9"},
		{"trusted proxy without the header: the proxy", "10.0.0.5:5000", nil, "10.0.0.5"},
		{"all hops trusted: the left-most", "10.0.0.5:5000", []string{"10.0.0.8"}, "10.0.0.8"},
		{"garbage: the last trusted hop", "10.0.0.5:5000", []string{"203.0.113.9, evil, 10.0.0.8"}, "10.0.0.8"},
		{"IPv6 loopback proxy, IPv4-mapped client", "[::1]:5000", []string{"::ffff:203.0.113.9"}, "203.0.113.9"},
		{"IP:PORT as some proxies write it", "10.0.0.5:5000", []string{"203.0.113.9:5678"}, "203.0.113.9"},
		{"[IPv6]:PORT", "10.0.0.5:5000", []string{"[2001:db8::1]:443"}, "2001:db8::1"},
		{"[IPv6]", "10.0.0.5:5000", []string{"[2001:db8::1]"}, "2001:db8::1"},
		{"a zone is dropped", "10.0.0.5:5000", []string{"fe80::9%eth0"}, "fe80::9"},
		{"an empty entry stops the walk", "10.0.0.5:5000", []string{"203.0.113.9,,10.0.0.8"}, "10.0.0.8"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := httptest.NewRequest("GET", "/", nil)
			r.RemoteAddr = tc.remote
			for _, v := range tc.xff {
				r.Header.Add("X-Forwarded-For", v)
			}
			if got := clientAddr(r, trusted); got != tc.want {
				t.Fatalf("client %q, want %q", got, tc.want)
			}
		})
	}
	if got, _ := ParseTrustedProxies(""); len(got) != 0 {
		t.Fatalf("empty list: %v", got)
	}
	for _, bad := range []string{"10.0.0.0/33", "proxy.example", "10.0.0.1:80", "0.0.0.0/0", "::/0", "::ffff:10.0.0.0/104",
		"0.0.0.0/1,128.0.0.0/1", "10.0.0.1,0.0.0.0/1", "10.0.0.0/7", "2001:db8::/31", "::/1,8000::/1"} {
		if _, err := ParseTrustedProxies(bad); !errors.Is(err, ErrBadTrustedProxy) || !errors.Is(err, ErrConfig) {
			t.Errorf("%q: %v, want ErrBadTrustedProxy", bad, err)
		}
	}
	if p, err := ParseTrustedProxies("10.0.0.0/8,2001:db8::/32"); err != nil || len(p) != 2 {
		t.Errorf("a /8 and a /32 are the widest taken: %v %v", p, err)
	}
	if p, _ := ParseTrustedProxies("10.0.0.7/24"); p[0] != netip.MustParsePrefix("10.0.0.0/24") {
		t.Errorf("prefix not masked: %v", p)
	}
}

// Behind a trusted proxy one client's failed logins lock out that client,
// not every client of the proxy.
func TestLockoutBehindTrustedProxy(t *testing.T) {
	f := newFixture(t, func(c *Config) { c.TrustedProxies = []netip.Prefix{netip.MustParsePrefix("10.0.0.1/32")} })
	via := func(client string) reqOpt {
		return func(r *http.Request) {
			r.RemoteAddr = "10.0.0.1:40000"
			r.Header.Set("X-Forwarded-For", client)
		}
	}
	for i := 0; i < 5; i++ {
		if w := f.do(t, "GET", "/batches", via("203.0.113.1"), basic(testUser, "wrong")); w.Code != 401 {
			t.Fatalf("failure %d: %d", i+1, w.Code)
		}
	}
	if w := f.do(t, "GET", "/batches", via("203.0.113.1"), basic(testUser, testPass)); w.Code != http.StatusTooManyRequests {
		t.Fatalf("the guessing client after 5 failures: %d, want 429", w.Code)
	}
	if w := f.do(t, "GET", "/batches", via("203.0.113.2"), basic(testUser, testPass)); w.Code != 200 {
		t.Fatalf("another client of the same proxy: %d, want 200", w.Code)
	}
	if w := f.do(t, "GET", "/batches", fromIP("10.0.0.1"), basic(testUser, testPass)); w.Code != 200 {
		t.Fatalf("the proxy itself, no header: %d, want 200", w.Code)
	}
}

// An IPv6 client is held by its /64: one network, where it may pick any
// address, is one client.
func TestLockoutIPv6ByNetwork(t *testing.T) {
	f := newFixture(t, nil)
	for i := 1; i <= 5; i++ {
		if w := f.do(t, "GET", "/batches", fromIP("[2001:db8:0:7::"+strconv.Itoa(i)+"]"), basic(testUser, "wrong")); w.Code != 401 {
			t.Fatalf("failure %d: %d", i, w.Code)
		}
	}
	if w := f.do(t, "GET", "/batches", fromIP("[2001:db8:0:7::99]"), basic(testUser, testPass)); w.Code != http.StatusTooManyRequests {
		t.Fatalf("another address of the same /64 after 5 failures: %d, want 429", w.Code)
	}
	if w := f.do(t, "GET", "/batches", fromIP("[2001:db8:0:8::1]"), basic(testUser, testPass)); w.Code != 200 {
		t.Fatalf("another /64: %d, want 200", w.Code)
	}
}

func TestLimitKey(t *testing.T) {
	for in, want := range map[string]string{
		"203.0.113.9":          "203.0.113.9",
		"::ffff:203.0.113.9":   "203.0.113.9",
		"2001:db8:0:7::1":      "2001:db8:0:7::/64",
		"2001:db8:0:7:a:b:c:d": "2001:db8:0:7::/64",
		"fe80::1%eth0":         "fe80::/64",
		"not-an-address":       "not-an-address",
	} {
		if got := limitKey(in); got != want {
			t.Errorf("limitKey(%q) = %q, want %q", in, got, want)
		}
	}
}
