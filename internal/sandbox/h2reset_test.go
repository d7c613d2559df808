package sandbox_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/acme/payout/internal/money"
	"github.com/acme/payout/internal/psp"
	"github.com/acme/payout/internal/sandbox"
)

// serveTLS runs a simulator with TLS on a loopback port until the test
// ends; it returns the server, its base URL and the CA file to trust.
func serveTLS(t *testing.T, mutate func(*sandbox.Config)) (*sandbox.Server, string, string) {
	t.Helper()
	dir := t.TempDir()
	cfg := sandbox.DefaultConfig()
	cfg.Token = token
	cfg.Seed = 11
	cfg.TLSCertFile, cfg.TLSKeyFile = filepath.Join(dir, "sandbox.pem"), filepath.Join(dir, "sandbox.key")
	if mutate != nil {
		mutate(&cfg)
	}
	if !cfg.TLSGenerate {
		if err := sandbox.WriteSelfSigned(cfg.TLSCertFile, cfg.TLSKeyFile); err != nil {
			t.Fatal(err)
		}
	}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	sb := sandbox.New(cfg, zerolog.Nop())
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- sb.Serve(ctx, ln) }()
	t.Cleanup(func() {
		cancel()
		if err := <-errc; err != nil {
			t.Errorf("serve: %v", err)
		}
	})
	// With TLSGenerate the certificate is written by Serve: wait for it.
	deadline := time.Now().Add(5 * time.Second)
	for {
		if _, err := os.Stat(cfg.TLSCertFile); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no certificate at %s", cfg.TLSCertFile)
		}
		time.Sleep(5 * time.Millisecond)
	}
	return sb, "https://" + ln.Addr().String(), cfg.TLSCertFile
}

func tlsClient(t *testing.T, base, caFile string, mutate func(*psp.Config)) *psp.Client {
	t.Helper()
	cfg := psp.Config{BaseURL: base, Token: psp.StaticToken(token), CAFile: caFile, Timeout: 5 * time.Second, Logger: zerolog.Nop()}
	if mutate != nil {
		mutate(&cfg)
	}
	c, err := psp.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

// TestH2ResetStoresOnce: with p-h2-reset=1 over HTTP/2 every create is
// stored and its stream reset with PROTOCOL_ERROR; the payout client sends
// each create once, learns nothing (Ambiguous), and the status query finds
// the one order.
func TestH2ResetStoresOnce(t *testing.T) {
	sb, base, ca := serveTLS(t, func(c *sandbox.Config) { c.PH2Reset = 1 })
	c := tlsClient(t, base, ca, nil)
	ctx := context.Background()
	const n = 8
	for i := range n {
		ext := fmt.Sprintf("EXT-R%d", i)
		res := c.CreateWithdrawal(ctx, psp.WithdrawalRequest{ExternalID: ext, Amount: money.MustParse("10.50"),
			Properties: []psp.Property{{Key: psp.KeyCardNumber, Value: goodCard}}})
		if res.Outcome != psp.Ambiguous || !res.Sent || !strings.Contains(res.Message, "PROTOCOL_ERROR") {
			t.Fatalf("%s: %v sent=%v %q, want ambiguous after a PROTOCOL_ERROR reset", ext, res.Outcome, res.Sent, res.Message)
		}
	}
	_, dep := c.CreateDeposit(ctx, psp.DepositRequest{ExternalTransactionID: "DEP-R", Amount: money.MustParse("3"), Currency: "EUR"})
	if dep.Outcome != psp.Ambiguous {
		t.Fatalf("deposit: %v %q", dep.Outcome, dep.Message)
	}
	st := sb.Stats()
	if st.CreatesReceived != n || st.OrdersStored != n || st.H2Resets != n+1 || st.Answers["h2reset"] != n+1 || st.DepositsStored != 1 {
		t.Errorf("stats %+v", st)
	}
	for ext, k := range st.CreatesByExternalID {
		if k != 1 {
			t.Errorf("%s: %d creates received", ext, k)
		}
	}
	for i := range n {
		ext := fmt.Sprintf("EXT-R%d", i)
		if res := c.CheckWithdrawal(ctx, psp.Expect{ExternalID: ext, Amount: money.MustParse("10.5")}); res.Outcome != psp.Created {
			t.Errorf("%s status: %v %q", ext, res.Outcome, res.Message)
		}
	}
	if st := sb.Stats(); st.OrdersStored != n || st.StatusQueries != n {
		t.Errorf("after the status queries: %+v", st)
	}
}

// TestH2ResetReproducesReplay: the fault is the one that made Go's HTTP/2
// client replay a rewindable POST: a plain http.Client with a
// *bytes.Reader body sends the same create again and again.
func TestH2ResetReproducesReplay(t *testing.T) {
	sb, base, ca := serveTLS(t, func(c *sandbox.Config) { c.PH2Reset = 1 })
	pem, err := os.ReadFile(ca)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(pem)
	hc := &http.Client{Transport: &http.Transport{ForceAttemptHTTP2: true, TLSClientConfig: &tls.Config{RootCAs: pool}}}
	defer hc.CloseIdleConnections()
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	body := []byte(`{"externalId":"EXT-REPLAY","amount":"1","properties":[{"key":"cardNumber","value":"` + goodCard + `"}]}`)
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, base+"/api/v1/integration/bridge/withdrawal-order", bytes.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+token)
	_, err = hc.Do(req)
	if err == nil {
		t.Fatal("an answer despite the reset")
	}
	if got := sb.Stats().CreatesByExternalID["EXT-REPLAY"]; got < 2 {
		t.Errorf("the rewindable POST reached the simulator %d times; the reset should make Go's client replay it (err %v)", got, err)
	} else {
		t.Logf("a rewindable POST was sent %d times in 300ms (%v)", got, errors.Unwrap(err))
	}
}

// TestTLSServing: the simulator writes its certificate (TLSGenerate),
// speaks HTTP/2 and HTTP/1.1 over TLS, and over HTTP/1.1 the reset fault is
// a dropped connection.
func TestTLSServing(t *testing.T) {
	sb, base, ca := serveTLS(t, func(c *sandbox.Config) { c.TLSGenerate = true })
	c := tlsClient(t, base, ca, nil)
	ctx := context.Background()
	res := c.CreateWithdrawal(ctx, psp.WithdrawalRequest{ExternalID: "EXT-T", Amount: money.MustParse("1"),
		Properties: []psp.Property{{Key: psp.KeyCardNumber, Value: goodCard}}})
	if res.Outcome != psp.Created {
		t.Fatalf("create over TLS: %v %q", res.Outcome, res.Message)
	}
	dep, dres := c.CreateDeposit(ctx, psp.DepositRequest{ExternalTransactionID: "DEP-T", Amount: money.MustParse("1"), Currency: "EUR"})
	if dres.Outcome != psp.Created || !strings.HasPrefix(dep.FormURL, base+"/sandbox/pay/") {
		t.Errorf("deposit over TLS: %v %q %q", dres.Outcome, dres.Message, dep.FormURL)
	}

	pem, err := os.ReadFile(ca)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(pem)
	for _, tc := range []struct {
		forceH2 bool
		proto   string
	}{{true, "HTTP/2.0"}, {false, "HTTP/1.1"}} {
		hc := &http.Client{Transport: &http.Transport{ForceAttemptHTTP2: tc.forceH2, TLSClientConfig: &tls.Config{RootCAs: pool}}}
		resp, err := hc.Get(base + "/sandbox/health")
		if err != nil {
			t.Fatal(err)
		}
		_ = resp.Body.Close()
		if resp.Proto != tc.proto || resp.TLS == nil {
			t.Errorf("proto %s tls=%v, want %s", resp.Proto, resp.TLS != nil, tc.proto)
		}
		hc.CloseIdleConnections()
	}

	// HTTP/1.1 over TLS: no stream to reset, the connection is dropped.
	if err := sb.Force(sandbox.Force{Fault: sandbox.FaultH2Reset, Store: true}); err != nil {
		t.Fatal(err)
	}
	h1 := tlsClient(t, base, "", func(c *psp.Config) {
		c.CAFile = ""
		c.Transport = &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}}
	})
	res = h1.CreateWithdrawal(ctx, psp.WithdrawalRequest{ExternalID: "EXT-H1", Amount: money.MustParse("1"),
		Properties: []psp.Property{{Key: psp.KeyCardNumber, Value: goodCard}}})
	// The client sees the connection close before the handler has
	// counted its answer: wait until no request is in flight.
	st := sb.Stats()
	for deadline := time.Now().Add(5 * time.Second); st.InFlight > 0 && time.Now().Before(deadline); st = sb.Stats() {
		time.Sleep(time.Millisecond)
	}
	if res.Outcome != psp.Ambiguous || st.H2Resets != 0 || st.Answers["drop"] != 1 || st.CreatesByExternalID["EXT-H1"] != 1 {
		t.Errorf("h2reset over HTTP/1.1: %v %q, stats %+v", res.Outcome, res.Message, st)
	}
}

func TestTLSConfigValidate(t *testing.T) {
	for _, mut := range []func(*sandbox.Config){
		func(c *sandbox.Config) { c.TLSCertFile = "x.pem" },
		func(c *sandbox.Config) { c.TLSKeyFile = "x.key" },
		func(c *sandbox.Config) { c.TLSGenerate = true },
		func(c *sandbox.Config) { c.PH2Reset = 1.5 },
	} {
		cfg := sandbox.DefaultConfig()
		mut(&cfg)
		if cfg.Validate() == nil {
			t.Errorf("accepted %+v", cfg)
		}
	}
	// A certificate that does not load: Serve fails at once.
	cfg := sandbox.DefaultConfig()
	cfg.TLSCertFile, cfg.TLSKeyFile = filepath.Join(t.TempDir(), "missing.pem"), filepath.Join(t.TempDir(), "missing.key")
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	if err := sandbox.New(cfg, zerolog.Nop()).Serve(context.Background(), ln); err == nil || !strings.Contains(err.Error(), "missing.pem") {
		t.Errorf("serve with a missing certificate: %v", err)
	}
}
