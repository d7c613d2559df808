package chaos

import (
	"bytes"
	"context"
	mrand "math/rand/v2"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/acme/payout/internal/callback"
	"github.com/acme/payout/internal/proof/testenv"
	"github.com/rs/zerolog"
)

// hints records the hints a callback server passes on.
type hints struct {
	mu  sync.Mutex
	ids []string
}

func (h *hints) Hint(_ context.Context, x callback.Hint) (bool, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.ids = append(h.ids, x.ExternalID)
	return true, nil
}

func (h *hints) count() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.ids)
}

// startListener serves the workers' callback endpoint (package callback)
// on a free port and returns its address.
func startListener(t *testing.T, ctx context.Context, secret string, h callback.Hinter) string {
	t.Helper()
	srv, err := callback.New(callback.Config{Secret: secret, Rate: 10000}, h, zerolog.Nop(), nil)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = srv.Serve(ctx, ln) }()
	return ln.Addr().String()
}

func TestForwarder(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	secret := strings.Repeat("s", 32)
	var h hints
	live := startListener(t, ctx, secret, &h)
	// A worker just killed: nothing listens there any more.
	dead := testenv.ClosedAddr(t)

	f, err := NewForwarder(1)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	post := func(secret string) int {
		req, _ := http.NewRequest(http.MethodPost, f.URL(), bytes.NewReader([]byte(`{"externalId":"E1","status":"Paid"}`)))
		req.Header.Set(callbackHeader, secret)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if got := post(secret); got != http.StatusServiceUnavailable {
		t.Errorf("no worker: %d, want 503 (the sandbox retries)", got)
	}
	f.SetTargets([]string{dead, live})
	for i := 0; i < 5; i++ {
		if got := post(secret); got != http.StatusOK {
			t.Fatalf("to a live worker: %d, want 200", got)
		}
	}
	if got := post("wrong-secret-wrong-secret"); got != http.StatusUnauthorized {
		t.Errorf("wrong secret passed on: %d, want the worker's 401", got)
	}
	deadline := time.Now().Add(5 * time.Second)
	for h.count() < 5 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if h.count() != 5 {
		t.Errorf("hints %d, want 5", h.count())
	}
	recv, answers, failed := f.Stats()
	if recv != 7 || answers["200"] != 5 || answers["401"] != 1 || failed != 1 {
		t.Errorf("stats: received %d, answers %v, failed %d", recv, answers, failed)
	}
}

func TestForger(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	secret := strings.Repeat("k", 40)
	var h hints
	addr := startListener(t, ctx, secret, &h)
	g := newForger(secret)
	rng := mrand.New(mrand.NewPCG(1, 2))
	for i := 0; i < 200; i++ {
		g.send(ctx, rng, addr, "REAL-1")
	}
	g.wait()
	if g.total() != 200 {
		t.Fatalf("answered %d of 200", g.total())
	}
	if b := g.breaches(); len(b) != 0 {
		t.Fatalf("forged callbacks not refused: %q", b)
	}
	for _, k := range forgeKinds {
		if g.sent[k] == 0 {
			t.Errorf("no %s callback among 200", k)
		}
	}
	// Only the callbacks with the right secret reach the hinter.
	deadline := time.Now().Add(5 * time.Second)
	want := g.sent[forgeUnknownOrder] + g.sent[forgeFalseStatus]
	for h.count() < want && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if h.count() != want {
		t.Errorf("hints %d, want %d", h.count(), want)
	}
	if s := g.summary(); !strings.Contains(s, "(0 not refused 401)") {
		t.Errorf("summary: %s", s)
	}

	// A worker that takes any secret is caught.
	lax := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {})}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = lax.Serve(ln) }()
	defer lax.Close()
	g2 := newForger(secret)
	for i := 0; i < 50; i++ {
		g2.send(ctx, rng, ln.Addr().String(), "REAL-1")
	}
	g2.wait()
	if len(g2.breaches()) == 0 {
		t.Errorf("a worker answering 200 to every secret went unnoticed: %s", g2.summary())
	}
}
