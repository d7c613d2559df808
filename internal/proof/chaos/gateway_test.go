package chaos

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

// upstream stands in for the sandbox: it records what it received.
type upstream struct {
	mu       sync.Mutex
	auth     []string
	bodies   []string
	canceled chan struct{}
}

func newUpstream(t *testing.T) (*upstream, *httptest.Server) {
	u := &upstream{canceled: make(chan struct{}, 8)}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		u.mu.Lock()
		u.auth = append(u.auth, r.Header.Get("Authorization"))
		u.bodies = append(u.bodies, string(b))
		u.mu.Unlock()
		switch r.URL.Path {
		case "/drop":
			conn, _, err := http.NewResponseController(w).Hijack()
			if err == nil {
				conn.Close()
			}
		case "/hang":
			<-r.Context().Done()
			u.canceled <- struct{}{}
		case "/locked":
			w.WriteHeader(http.StatusLocked)
			_, _ = io.WriteString(w, `{"status":423}`)
		default:
			_, _ = io.WriteString(w, `{"status":"Created"}`)
		}
	}))
	t.Cleanup(srv.Close)
	return u, srv
}

func (u *upstream) seen() ([]string, []string) {
	u.mu.Lock()
	defer u.mu.Unlock()
	return append([]string(nil), u.auth...), append([]string(nil), u.bodies...)
}

func send(t *testing.T, g *Gateway, path, token string, timeout time.Duration) (int, string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, g.URL()+path, strings.NewReader(`{"externalId":"X"}`))
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), nil
}

func TestGatewayChecksAndRotatesTokens(t *testing.T) {
	up, srv := newUpstream(t)
	g, err := NewGateway(srv.URL, "upstream-token", "old")
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	steps := []struct {
		accept []string // nil: keep
		token  string
		want   int
	}{
		{nil, "", http.StatusUnauthorized},
		{nil, "wrong", http.StatusUnauthorized},
		{nil, "old", http.StatusOK},
		{nil, "new", http.StatusUnauthorized},
		{[]string{"old", "new"}, "old", http.StatusOK},
		{nil, "new", http.StatusOK},
		{[]string{"new"}, "old", http.StatusUnauthorized},
		{nil, "new", http.StatusOK},
	}
	forwarded := 0
	for i, s := range steps {
		if s.accept != nil {
			g.Accept(s.accept...)
		}
		code, body, err := send(t, g, "/api", s.token, 5*time.Second)
		if err != nil || code != s.want {
			t.Fatalf("step %d (token %q): got %d %v, want %d", i, s.token, code, err, s.want)
		}
		if code == http.StatusUnauthorized && !strings.Contains(body, "invalid bearer token") {
			t.Errorf("step %d: 401 body %q", i, body)
		}
		if code == http.StatusOK {
			forwarded++
		}
	}
	auth, bodies := up.seen()
	if len(auth) != forwarded {
		t.Fatalf("upstream got %d requests, want %d", len(auth), forwarded)
	}
	for i := range auth {
		if auth[i] != "Bearer upstream-token" || bodies[i] != `{"externalId":"X"}` {
			t.Errorf("upstream request %d: auth %q body %q", i, auth[i], bodies[i])
		}
	}
	if n, _ := g.Used("old"); n != 2 {
		t.Errorf("old token used %d times, want 2", n)
	}
	if n, _ := g.Used("new"); n != 2 {
		t.Errorf("new token used %d times, want 2", n)
	}
	if g.Refused() != 4 {
		t.Errorf("refused %d, want 4", g.Refused())
	}
}

func TestGatewayPassesFaultsThrough(t *testing.T) {
	up, srv := newUpstream(t)
	g, err := NewGateway(srv.URL, "upstream-token", "tok")
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()

	if code, body, err := send(t, g, "/locked", "tok", 5*time.Second); err != nil || code != http.StatusLocked || body != `{"status":423}` {
		t.Errorf("423 passed as %d %q %v", code, body, err)
	}

	// A dropped connection stays a dropped connection (no made-up 502),
	// and the POST reached the sandbox exactly once.
	before, _ := up.seen()
	code, _, err := send(t, g, "/drop", "tok", 5*time.Second)
	if err == nil {
		t.Errorf("drop answered HTTP %d, want the connection closed", code)
	}
	after, _ := up.seen()
	if len(after)-len(before) != 1 {
		t.Errorf("the dropped POST reached the upstream %d times, want 1", len(after)-len(before))
	}

	// A client that gives up cancels the request upstream.
	_, _, err = send(t, g, "/hang", "tok", 200*time.Millisecond)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("hang: got %v, want the client's timeout", err)
	}
	select {
	case <-up.canceled:
	case <-time.After(5 * time.Second):
		t.Error("the upstream request was not cancelled when the client went away")
	}
}
