package chaos

import (
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"time"
)

// Gateway is the PSP's front door as the workers see it. The sandbox
// accepts one fixed bearer token, so token rotation is played here: the
// gateway checks the workers' token against the set it currently accepts
// (401 otherwise, like the PSP) and forwards accepted requests unchanged to
// the sandbox, with the sandbox's own token. Faults pass through as they
// are: an answer the sandbox never gives (dropped connection) becomes a
// connection the gateway closes without an answer, and a client that goes
// away cancels the request to the sandbox. A POST is sent upstream at most
// once per request received (net/http never replays a request body it
// cannot rewind).
type Gateway struct {
	upstreamToken string
	proxy         *httputil.ReverseProxy
	srv           *http.Server
	ln            net.Listener

	mu       sync.Mutex
	h2       *h2Front // the HTTP/2-over-TLS front, once started
	accepted []string
	used     map[string]int       // requests per token (in memory only)
	lastUse  map[string]time.Time // latest request per token
	refused  int
}

// NewGateway listens on a free loopback port and forwards to upstream (the
// sandbox's base URL).
func NewGateway(upstream, upstreamToken string, accepted ...string) (*Gateway, error) {
	u, err := url.Parse(upstream)
	if err != nil {
		return nil, fmt.Errorf("gateway upstream: %w", err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("gateway listen: %w", err)
	}
	g := &Gateway{
		upstreamToken: upstreamToken, ln: ln,
		accepted: append([]string(nil), accepted...),
		used:     map[string]int{}, lastUse: map[string]time.Time{},
	}
	quiet := log.New(io.Discard, "", 0)
	g.proxy = &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(u)
			pr.Out.Header.Set("Authorization", "Bearer "+g.upstreamToken)
		},
		Transport: &http.Transport{
			Proxy: nil, MaxIdleConnsPerHost: 256, IdleConnTimeout: 30 * time.Second,
			DisableCompression: true,
		},
		ErrorLog:     quiet,
		ErrorHandler: abortConn,
	}
	g.srv = &http.Server{Handler: g, ReadHeaderTimeout: 10 * time.Second, ErrorLog: quiet}
	go func() { _ = g.srv.Serve(ln) }()
	return g, nil
}

// abortConn answers an upstream failure (the sandbox dropped the
// connection, or the client went away) by closing the client's connection
// without a word, as the sandbox did.
func abortConn(w http.ResponseWriter, _ *http.Request, _ error) {
	conn, _, err := http.NewResponseController(w).Hijack()
	if err != nil {
		panic(http.ErrAbortHandler)
	}
	_ = conn.Close()
}

// URL is the base URL the workers use: the HTTP/2-over-TLS front once
// started (StartH2), else the plain HTTP listener.
func (g *Gateway) URL() string {
	g.mu.Lock()
	f := g.h2
	g.mu.Unlock()
	if f != nil {
		return f.url()
	}
	return "http://" + g.ln.Addr().String()
}

// Close stops the gateway.
func (g *Gateway) Close() {
	g.mu.Lock()
	f := g.h2
	g.mu.Unlock()
	if f != nil {
		f.close()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if err := g.srv.Shutdown(ctx); err != nil {
		_ = g.srv.Close()
	}
}

// Accept replaces the set of accepted tokens.
func (g *Gateway) Accept(tokens ...string) {
	g.mu.Lock()
	g.accepted = append([]string(nil), tokens...)
	g.mu.Unlock()
}

// Used returns how many requests carried tok, and when the latest came.
func (g *Gateway) Used(tok string) (int, time.Time) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.used[tok], g.lastUse[tok]
}

// Refused returns how many requests were answered 401.
func (g *Gateway) Refused() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.refused
}

// ServeHTTP checks the bearer token and forwards.
func (g *Gateway) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	tok, _ := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	tok = strings.TrimSpace(tok)
	g.mu.Lock()
	ok := false
	for _, a := range g.accepted {
		if subtle.ConstantTimeCompare([]byte(tok), []byte(a)) == 1 {
			ok = true
		}
	}
	if ok {
		g.used[tok]++
		g.lastUse[tok] = time.Now()
	} else {
		g.refused++
	}
	g.mu.Unlock()
	if !ok {
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("WWW-Authenticate", `Bearer realm="psp"`)
		w.WriteHeader(http.StatusUnauthorized)
		_ = json.NewEncoder(w).Encode(map[string]any{
			"status": http.StatusUnauthorized, "title": "Unauthorized", "message": "missing or invalid bearer token",
		})
		return
	}
	g.proxy.ServeHTTP(w, r)
}

// errRotation is returned when the workers never picked up the new token.
var errRotation = errors.New("token rotation: workers did not switch to the new token")
