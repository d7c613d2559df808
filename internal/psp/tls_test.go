package psp_test

import (
	"context"
	"crypto/tls"
	"errors"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/acme/payout/internal/psp"
)

// tlsPSP is an HTTPS test server (HTTP/2 enabled) that records the common
// name of the client certificate of every request it handles and answers
// every request with a complete order.
type tlsPSP struct {
	*httptest.Server
	mu    sync.Mutex
	seen  []string // client certificate CN per handled request ("" none)
	proto []string
}

func startTLSPSP(t *testing.T, serverCA *testPKI, cfg *tls.Config) *tlsPSP {
	t.Helper()
	s := &tlsPSP{}
	s.Server = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		cn := ""
		if len(r.TLS.PeerCertificates) > 0 {
			cn = r.TLS.PeerCertificates[0].Subject.CommonName
		}
		s.mu.Lock()
		s.seen = append(s.seen, cn)
		s.proto = append(s.proto, r.Proto)
		s.mu.Unlock()
		_, _ = io.WriteString(w, `{"pspDepositOrderID":"WD-T","externalId":"EXT-T","amount":"1.00","status":"Paid"}`)
	}))
	cert, _, _ := serverCA.issue(t, "psp-server", false)
	cfg.Certificates = []tls.Certificate{cert}
	s.EnableHTTP2 = true
	s.TLS = cfg
	s.Config.ErrorLog = log.New(io.Discard, "", 0) // refused handshakes are expected
	s.StartTLS()
	t.Cleanup(s.Close)
	return s
}

func (s *tlsPSP) handled() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.seen...)
}

// writeFile writes b to dir/name with the given modification time.
func writeFile(t testing.TB, dir, name string, b []byte, mtime time.Time) string {
	t.Helper()
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(path, mtime, mtime); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestMutualTLS: the right client certificate is accepted, none or a
// foreign one is refused and no request reaches the PSP's handler.
//
// Under TLS 1.2 the server refuses within the handshake: AuthFault,
// nothing sent. Under TLS 1.3 the client's handshake is over before the
// server has checked the client certificate, so the client may write the
// request before the server's alert arrives: it then sees the alert
// (AuthFault) or only a broken connection, after sending (Ambiguous: safe,
// the status path decides and the status queries meet the same refusal)
// or before (RetryLater: "http2: client conn could not be established").
func TestMutualTLS(t *testing.T) {
	for _, maxVersion := range []uint16{tls.VersionTLS12, tls.VersionTLS13} {
		t.Run(tls.VersionName(maxVersion), func(t *testing.T) { testMutualTLS(t, maxVersion) })
	}
}

func testMutualTLS(t *testing.T, maxVersion uint16) {
	ca := newPKI(t, "psp-ca")
	clientCA := newPKI(t, "client-ca")
	otherCA := newPKI(t, "other-ca")
	srv := startTLSPSP(t, ca, &tls.Config{ClientAuth: tls.RequireAndVerifyClientCert, ClientCAs: clientCA.pool, MaxVersion: maxVersion})
	dir := t.TempDir()
	t0 := time.Now().Add(-time.Hour)
	_, goodCert, goodKey := clientCA.issue(t, "client-good", true)
	_, badCert, badKey := otherCA.issue(t, "client-other-ca", true)
	caFile := writeFile(t, dir, "ca.pem", ca.pem, t0)
	for _, tc := range []struct {
		name     string
		cert     []byte
		key      []byte
		ca       string
		outcome  psp.Outcome
		accepted string // CN the server saw, "" when refused
	}{
		{"right client certificate", goodCert, goodKey, caFile, psp.Created, "client-good"},
		{"no client certificate", nil, nil, caFile, psp.AuthFault, ""},
		{"certificate of another CA", badCert, badKey, caFile, psp.AuthFault, ""},
		{"server CA not trusted", goodCert, goodKey, "", psp.RetryLater, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := len(srv.handled())
			c := newClient(t, srv.URL, func(c *psp.Config) {
				c.CAFile = tc.ca
				if tc.cert != nil {
					c.ClientCertFile = writeFile(t, t.TempDir(), "client.pem", tc.cert, t0)
					c.ClientKeyFile = writeFile(t, t.TempDir(), "client.key", tc.key, t0)
				}
			})
			for _, call := range []func() psp.Result{
				func() psp.Result { return c.CreateWithdrawal(context.Background(), withdrawal("EXT-T", "1", testCard)) },
				func() psp.Result { return c.WithdrawalStatus(context.Background(), "WD-T") },
			} {
				res := call()
				switch {
				case tc.outcome == psp.AuthFault && maxVersion == tls.VersionTLS13 && (res.Outcome == psp.Ambiguous || res.Outcome == psp.RetryLater):
					t.Logf("%s: TLS 1.3 refusal seen as %v: %q", res.Op, res.Outcome, res.Message)
				case res.Outcome != tc.outcome:
					t.Errorf("%s: outcome %v (%q), want %v", res.Op, res.Outcome, res.Message, tc.outcome)
				case tc.outcome == psp.AuthFault && !strings.Contains(res.Message, "TLS handshake refused"):
					t.Errorf("%s: message %q", res.Op, res.Message)
				case tc.outcome == psp.AuthFault && maxVersion == tls.VersionTLS12 && res.Sent:
					t.Errorf("%s: TLS 1.2 refusal after sending", res.Op)
				}
			}
			seen := srv.handled()[before:]
			if tc.accepted == "" && len(seen) != 0 {
				t.Errorf("refused client reached the handler: %v", seen)
			}
			if tc.accepted != "" && (len(seen) != 2 || seen[0] != tc.accepted || seen[1] != tc.accepted) {
				t.Errorf("server saw %v, want 2x %s", seen, tc.accepted)
			}
		})
	}
	srv.mu.Lock()
	defer srv.mu.Unlock()
	for _, p := range srv.proto {
		if p != "HTTP/2.0" {
			t.Errorf("proto %s, want HTTP/2.0 (the client's own transport speaks h2)", p)
		}
	}
}

// TestClientCertRotation: a rotated client certificate is used from the
// next connection on; a half-written rotation (new certificate, old key)
// keeps the previous pair; a rotated CA file is picked up too.
func TestClientCertRotation(t *testing.T) {
	ca := newPKI(t, "psp-ca")
	clientCA := newPKI(t, "client-ca")
	srv := startTLSPSP(t, ca, &tls.Config{ClientAuth: tls.RequireAndVerifyClientCert, ClientCAs: clientCA.pool})
	dir := t.TempDir()
	t0 := time.Now().Add(-time.Hour)
	_, certA, keyA := clientCA.issue(t, "client-a", true)
	_, certB, keyB := clientCA.issue(t, "client-b", true)
	_, certC, keyC := clientCA.issue(t, "client-c", true)
	certFile := writeFile(t, dir, "client.pem", certA, t0)
	keyFile := writeFile(t, dir, "client.key", keyA, t0)
	c := newClient(t, srv.URL, func(c *psp.Config) {
		c.CAFile = writeFile(t, dir, "ca.pem", ca.pem, t0)
		c.ClientCertFile, c.ClientKeyFile = certFile, keyFile
	})
	ask := func(want string) {
		t.Helper()
		c.Close() // drop the idle connection: the next request handshakes again
		res := c.WithdrawalStatus(context.Background(), "WD-T")
		seen := srv.handled()
		if res.Outcome != psp.Created || len(seen) == 0 || seen[len(seen)-1] != want {
			t.Fatalf("outcome %v (%q), server saw %v, want last %s", res.Outcome, res.Message, seen, want)
		}
	}
	ask("client-a")
	// Keep-alive: without a new connection the old certificate stays.
	writeFile(t, dir, "client.pem", certB, t0.Add(time.Second))
	writeFile(t, dir, "client.key", keyB, t0.Add(time.Second))
	ask("client-b")
	writeFile(t, dir, "client.pem", certC, t0.Add(2*time.Second)) // key not yet rotated
	ask("client-b")
	writeFile(t, dir, "client.key", keyC, t0.Add(2*time.Second))
	ask("client-c")

	// CA rotation: the server moves to a certificate of a new CA.
	newCA := newPKI(t, "psp-ca-2")
	srv2 := startTLSPSP(t, newCA, &tls.Config{})
	c2 := newClient(t, srv2.URL, func(c *psp.Config) { c.CAFile = writeFile(t, dir, "ca2.pem", ca.pem, t0) })
	if res := c2.WithdrawalStatus(context.Background(), "WD-T"); res.Outcome != psp.RetryLater || res.Sent {
		t.Fatalf("old CA: %v sent=%v %q", res.Outcome, res.Sent, res.Message)
	}
	writeFile(t, dir, "ca2.pem", newCA.pem, t0.Add(time.Second))
	if res := c2.WithdrawalStatus(context.Background(), "WD-T"); res.Outcome != psp.Created {
		t.Fatalf("rotated CA: %v %q", res.Outcome, res.Message)
	}
}

// TestTLS11Refused: a server that speaks TLS 1.1 at most gets no request.
func TestTLS11Refused(t *testing.T) {
	ca := newPKI(t, "psp-ca")
	srv := startTLSPSP(t, ca, &tls.Config{MinVersion: tls.VersionTLS10, MaxVersion: tls.VersionTLS11})
	for _, mut := range []func(*psp.Config){
		func(c *psp.Config) { c.CAFile = ca.caFile(t) },
		// The minimum holds with the system roots too (the handshake
		// fails on the version before the certificate is looked at).
		nil,
	} {
		c := newClient(t, srv.URL, mut)
		res := c.CreateWithdrawal(context.Background(), withdrawal("EXT-T", "1", testCard))
		if res.Outcome == psp.Created || res.Outcome == psp.Ambiguous || res.Sent {
			t.Errorf("TLS 1.1 server: %v sent=%v %q", res.Outcome, res.Sent, res.Message)
		}
		t.Logf("TLS 1.1 server: %v: %s", res.Outcome, res.Message)
	}
	if seen := srv.handled(); len(seen) != 0 {
		t.Errorf("requests reached a TLS 1.1 server: %v", seen)
	}
}

func TestNewRefusesBadTLSConfig(t *testing.T) {
	ca := newPKI(t, "psp-ca")
	dir := t.TempDir()
	t0 := time.Now()
	_, cert, key := ca.issue(t, "client", true)
	_, _, otherKey := ca.issue(t, "other", true)
	certFile := writeFile(t, dir, "c.pem", cert, t0)
	keyFile := writeFile(t, dir, "c.key", key, t0)
	otherKeyFile := writeFile(t, dir, "o.key", otherKey, t0)
	notPEM := writeFile(t, dir, "x.pem", []byte("not a certificate"), t0)
	missing := filepath.Join(dir, "missing.pem")
	tok := psp.StaticToken("t")
	for name, cfg := range map[string]psp.Config{
		"cert without key":      {BaseURL: "https://h", Token: tok, ClientCertFile: certFile},
		"key without cert":      {BaseURL: "https://h", Token: tok, ClientKeyFile: keyFile},
		"http base URL":         {BaseURL: "http://h", Token: tok, CAFile: ca.caFile(t)},
		"transport given":       {BaseURL: "https://h", Token: tok, CAFile: ca.caFile(t), Transport: http.DefaultTransport},
		"missing CA file":       {BaseURL: "https://h", Token: tok, CAFile: missing},
		"CA file without PEM":   {BaseURL: "https://h", Token: tok, CAFile: notPEM},
		"key of another cert":   {BaseURL: "https://h", Token: tok, ClientCertFile: certFile, ClientKeyFile: otherKeyFile},
		"missing client cert":   {BaseURL: "https://h", Token: tok, ClientCertFile: missing, ClientKeyFile: keyFile},
		"key given as the cert": {BaseURL: "https://h", Token: tok, ClientCertFile: keyFile, ClientKeyFile: keyFile},
	} {
		_, err := psp.New(cfg)
		if !errors.Is(err, psp.ErrConfig) {
			t.Errorf("%s: err = %v", name, err)
			continue
		}
		if strings.Contains(err.Error(), "PRIVATE KEY") || strings.Contains(err.Error(), string(key[40:80])) {
			t.Errorf("%s: error shows the key: %v", name, err)
		}
	}
	if _, err := psp.New(psp.Config{BaseURL: "https://h", Token: tok, CAFile: ca.caFile(t), ClientCertFile: certFile, ClientKeyFile: keyFile}); err != nil {
		t.Errorf("good files: %v", err)
	}
}
