package chaos

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/acme/payout/internal/psp"
)

// h2Client trusts the gateway's CA and speaks HTTP/2 as the worker's
// client does.
func h2Client(t *testing.T, ca []byte) *http.Client {
	t.Helper()
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(ca) {
		t.Fatal("the gateway's CA does not parse")
	}
	tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}, ForceAttemptHTTP2: true}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr, Timeout: 10 * time.Second}
}

func startH2Gateway(t *testing.T, resetP float64) (*upstream, *Gateway, *http.Client) {
	t.Helper()
	u, srv := newUpstream(t)
	g, err := NewGateway(srv.URL, "sandbox-token", "tok")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(g.Close)
	ca, err := g.StartH2(H2Config{ResetP: resetP, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(g.URL(), "https://127.0.0.1:") {
		t.Fatalf("URL %s after StartH2", g.URL())
	}
	return u, g, h2Client(t, ca)
}

func post(ctx context.Context, c *http.Client, url string, replayable bool) (*http.Response, error) {
	body := []byte(`{"externalId":"X-1"}`)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, io.NopCloser(bytes.NewReader(body)))
	if err != nil {
		return nil, err
	}
	req.ContentLength = int64(len(body))
	req.GetBody = nil
	if replayable {
		req.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(body)), nil }
	}
	req.Header.Set("Authorization", "Bearer tok")
	return c.Do(req)
}

func TestGatewayH2Forwards(t *testing.T) {
	u, g, c := startH2Gateway(t, 0)
	resp, err := post(context.Background(), c, g.URL()+psp.PathWithdrawalCreate, false)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || resp.ProtoMajor != 2 || !strings.Contains(string(b), "Created") {
		t.Fatalf("got %s %d %q, want HTTP/2 200", resp.Proto, resp.StatusCode, b)
	}
	if auth, bodies := u.seen(); len(bodies) != 1 || auth[0] != "Bearer sandbox-token" {
		t.Fatalf("upstream saw %q %q", auth, bodies)
	}
	if g.H2Resets() != 0 {
		t.Fatalf("%d resets without a reset probability", g.H2Resets())
	}
}

// TestGatewayH2ResetsAfterTheUpstreamAnswered: every create is reset once
// the upstream answered 200; a client without GetBody sends it once and
// gets an error, a client with GetBody replays it (the broken build).
func TestGatewayH2ResetsAfterTheUpstreamAnswered(t *testing.T) {
	u, g, c := startH2Gateway(t, 1)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for i := 0; i < 4; i++ {
		resp, err := post(ctx, c, g.URL()+psp.PathWithdrawalCreate, false)
		if err == nil {
			resp.Body.Close()
			t.Fatalf("create %d: answered %d, want a reset stream", i, resp.StatusCode)
		}
		if !strings.Contains(err.Error(), "REFUSED_STREAM") && !strings.Contains(err.Error(), "PROTOCOL_ERROR") {
			t.Fatalf("create %d: %v, want REFUSED_STREAM or PROTOCOL_ERROR", i, err)
		}
	}
	if _, bodies := u.seen(); len(bodies) != 4 || g.H2Resets() != 4 {
		t.Fatalf("upstream saw %d creates, %d resets; want 4 and 4", len(bodies), g.H2Resets())
	}
	// A GET is never reset.
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, g.URL()+"/status", nil)
	req.Header.Set("Authorization", "Bearer tok")
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()

	rctx, rcancel := context.WithTimeout(ctx, 2*time.Second)
	defer rcancel()
	if resp, err := post(rctx, c, g.URL()+psp.PathWithdrawalCreate, true); err == nil {
		resp.Body.Close()
	}
	if _, bodies := u.seen(); len(bodies) < 4+1+2 {
		t.Fatalf("a replayable create reached the upstream %d times; want a replay", len(bodies)-5)
	}
}
