package chaos

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	mrand "math/rand/v2"
	"net"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
)

// callbackHeader is the header the sandbox sends the callback secret in and
// the workers read it from (their default --callback-header).
const callbackHeader = "X-Callback-Secret"

// Forwarder receives the sandbox's callbacks and passes each one on,
// unchanged (path, body, secret header), to the callback listener of a live
// worker, trying them in random order. Workers are SIGKILLed and replaced
// all the time: the sandbox is told one stable address, and a callback
// finds whichever workers live at that moment. When none answers, the
// forwarder answers 503 and the sandbox retries.
type Forwarder struct {
	srv    *http.Server
	ln     net.Listener
	client *http.Client

	mu       sync.Mutex
	rng      *mrand.Rand
	targets  []string       // host:port of the live workers' listeners
	answers  map[string]int // worker answers passed back, by HTTP status
	received int
	failed   int // callbacks no worker answered (503 to the sandbox)
}

// NewForwarder starts a forwarder on a free loopback port.
func NewForwarder(seed int64) (*Forwarder, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	f := &Forwarder{
		ln: ln, client: &http.Client{Timeout: 3 * time.Second},
		rng: mrand.New(mrand.NewPCG(uint64(seed), 0xf0a4d)), answers: map[string]int{},
	}
	f.srv = &http.Server{Handler: f, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = f.srv.Serve(ln) }()
	return f, nil
}

// URL is where the sandbox sends its callbacks.
func (f *Forwarder) URL() string { return "http://" + f.ln.Addr().String() + "/callbacks" }

// SetTargets replaces the list of live workers' callback addresses.
func (f *Forwarder) SetTargets(addrs []string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.targets = append(f.targets[:0:0], addrs...)
}

// ServeHTTP forwards one callback.
func (f *Forwarder) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	if err != nil {
		http.Error(w, "bad body", http.StatusBadRequest)
		return
	}
	f.mu.Lock()
	f.received++
	targets := append([]string(nil), f.targets...)
	f.rng.Shuffle(len(targets), func(i, j int) { targets[i], targets[j] = targets[j], targets[i] })
	f.mu.Unlock()
	for _, t := range targets {
		req, err := http.NewRequestWithContext(r.Context(), http.MethodPost, "http://"+t+r.URL.Path, bytes.NewReader(body))
		if err != nil {
			continue
		}
		req.Header.Set("Content-Type", r.Header.Get("Content-Type"))
		if s := r.Header.Get(callbackHeader); s != "" {
			req.Header.Set(callbackHeader, s)
		}
		resp, err := f.client.Do(req)
		if err != nil {
			continue // killed, or not listening yet: the next one
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		f.mu.Lock()
		f.answers[strconv.Itoa(resp.StatusCode)]++
		f.mu.Unlock()
		w.WriteHeader(resp.StatusCode)
		return
	}
	f.mu.Lock()
	f.failed++
	f.mu.Unlock()
	http.Error(w, "no worker listening", http.StatusServiceUnavailable)
}

// Stats returns the callbacks received, the worker answers passed back
// (by status) and the callbacks no worker took.
func (f *Forwarder) Stats() (received int, answers map[string]int, failed int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	a := make(map[string]int, len(f.answers))
	for k, v := range f.answers {
		a[k] = v
	}
	return f.received, a, f.failed
}

// Close stops the forwarder.
func (f *Forwarder) Close() {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	_ = f.srv.Shutdown(ctx)
}

// Kinds of forged callback.
const (
	forgeWrongSecret   = "wrong_secret"  // a wrong secret in the header
	forgeNoSecret      = "no_secret"     // none at all
	forgePathSecret    = "path_secret"   // a wrong secret as the last path segment
	forgePrefixSecret  = "prefix_secret" // the real secret minus its last character
	forgeUnknownOrder  = "unknown_order" // the right secret, an order nobody has
	forgeFalseStatus   = "false_status"  // the right secret, a real payout, a status it may not have
	forgeWantAccepted  = http.StatusOK   // what an authentic callback gets
	forgeWantForbidden = http.StatusUnauthorized
)

var forgeKinds = []string{forgeWrongSecret, forgeNoSecret, forgePathSecret, forgePrefixSecret, forgeUnknownOrder, forgeFalseStatus}

// forger sends forged callbacks straight to the workers' listeners and
// counts what they answered.
type forger struct {
	secret string
	client *http.Client
	wg     sync.WaitGroup

	mu       sync.Mutex
	sent     map[string]int // answered, by kind
	accepted []string       // wrong-secret callbacks a worker did not refuse 401 (must stay empty)
	odd      map[string]int // authentic forged callbacks answered other than 200, by kind:status
}

func newForger(secret string) *forger {
	return &forger{secret: secret, client: &http.Client{Timeout: 3 * time.Second},
		sent: map[string]int{}, odd: map[string]int{}}
}

// send forges one callback of a random kind to target (host:port) about
// externalID (a real payout's, for the false status) in the background.
func (g *forger) send(ctx context.Context, rng *mrand.Rand, target, externalID string) {
	kind := forgeKinds[rng.IntN(len(forgeKinds))]
	path, secret := "/callbacks", g.secret
	body := map[string]string{"externalId": externalID, "pspDepositOrderID": "WD-forged-" + randomHex(8)}
	switch kind {
	case forgeWrongSecret:
		secret = randomHex(len(g.secret) / 2)
	case forgeNoSecret:
		secret = ""
	case forgePathSecret:
		path, secret = "/callbacks/"+randomHex(20), ""
	case forgePrefixSecret:
		secret = g.secret[:len(g.secret)-1]
	case forgeUnknownOrder:
		body["externalId"] = "FORGED-" + randomHex(6)
	}
	body["status"] = []string{"Paid", "Failed", "Processing", "Created"}[rng.IntN(4)]
	if body["status"] == "Failed" {
		body["statusReason"] = "forged by the chaos suite"
	}
	b, _ := json.Marshal(body)
	g.wg.Add(1)
	go func() {
		defer g.wg.Done()
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+target+path, bytes.NewReader(b))
		if err != nil {
			return
		}
		req.Header.Set("Content-Type", "application/json")
		if secret != "" {
			req.Header.Set(callbackHeader, secret)
		}
		resp, err := g.client.Do(req)
		if err != nil {
			return // a worker just killed: not sent
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode == http.StatusTooManyRequests {
			return // rate-limited before the secret was looked at: not counted
		}
		g.mu.Lock()
		defer g.mu.Unlock()
		g.sent[kind]++
		authentic := kind == forgeUnknownOrder || kind == forgeFalseStatus
		switch {
		case !authentic && resp.StatusCode != forgeWantForbidden:
			g.accepted = append(g.accepted, fmt.Sprintf("%s callback to %s answered %d, want %d", kind, target, resp.StatusCode, forgeWantForbidden))
		case authentic && resp.StatusCode != forgeWantAccepted:
			g.odd[kind+":"+strconv.Itoa(resp.StatusCode)]++
		}
	}()
}

// wait waits for the callbacks in flight.
func (g *forger) wait() { g.wg.Wait() }

// total is the number of forged callbacks a worker answered.
func (g *forger) total() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	n := 0
	for _, v := range g.sent {
		n += v
	}
	return n
}

// summary describes the forged callbacks by kind.
func (g *forger) summary() string {
	g.mu.Lock()
	defer g.mu.Unlock()
	unauthorized := g.sent[forgeWrongSecret] + g.sent[forgeNoSecret] + g.sent[forgePathSecret] + g.sent[forgePrefixSecret]
	s := fmt.Sprintf("%d with a wrong or missing secret (%d not refused 401), %d about unknown orders, %d with a false status for a real payout",
		unauthorized, len(g.accepted), g.sent[forgeUnknownOrder], g.sent[forgeFalseStatus])
	if len(g.odd) > 0 {
		keys := make([]string, 0, len(g.odd))
		for k := range g.odd {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		var parts []string
		for _, k := range keys {
			parts = append(parts, fmt.Sprintf("%s=%d", k, g.odd[k]))
		}
		s += "; authentic ones answered other than 200: " + strings.Join(parts, " ")
	}
	return s
}

// breaches returns the wrong-secret callbacks that were not refused.
func (g *forger) breaches() []string {
	g.mu.Lock()
	defer g.mu.Unlock()
	return append([]string(nil), g.accepted...)
}
