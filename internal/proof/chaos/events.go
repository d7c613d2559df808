package chaos

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	mrand "math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/acme/payout/internal/ledger"
	"github.com/acme/payout/internal/notify"
	"github.com/acme/payout/internal/proof/testenv"
	"github.com/acme/payout/internal/proof/testenv/proc"
)

// The faults of the event receiver (Config.Events), shares of the
// deliveries it receives: answered 500, its connection dropped without
// an answer, answered 204 slowly (within the workers' notify.Timeout),
// answered 204 after notify.Timeout (the worker gave up: it sends the
// event again, which the receiver sees as a duplicate).
const (
	pEvent500  = 0.05
	pEventDrop = 0.03
	pEventSlow = 0.02
	pEventLate = 0.002
)

// Delivery is one POST the event receiver received.
type Delivery struct {
	ID       string // webhook-id
	Body     []byte
	Verified bool // the Standard Webhooks verifier accepted it
	Answer   int  // the status it was answered (0: connection dropped)
	Late     bool // answered after notify.Timeout: the sender gave up on it
}

// accepted tells whether the sender saw the delivery succeed.
func (d Delivery) accepted() bool { return d.Answer/100 == 2 && !d.Late }

// verifyFunc verifies one delivery's Standard Webhooks headers and body.
type verifyFunc func(ctx context.Context, h http.Header, body []byte) (bool, error)

// EventReceiver is the webhook receiver of the run: every worker's
// --notify-url (every event type). It verifies each delivery (the
// independent node verifier, see startVerifier), records it, and answers
// with faults so that the workers retry.
type EventReceiver struct {
	srv    *http.Server
	ln     net.Listener
	verify verifyFunc

	mu         sync.Mutex
	rng        *mrand.Rand
	deliveries []Delivery
	faults     map[string]int
	verifyErrs int // deliveries the verifier could not be asked about
}

// NewEventReceiver starts a receiver on a free loopback port.
func NewEventReceiver(seed int64, verify verifyFunc) (*EventReceiver, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	r := &EventReceiver{ln: ln, verify: verify, rng: mrand.New(mrand.NewPCG(uint64(seed), 0xe7e47)), faults: map[string]int{}}
	r.srv = &http.Server{Handler: r, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = r.srv.Serve(ln) }()
	return r, nil
}

// URL is the workers' --notify-url.
func (r *EventReceiver) URL() string { return "http://" + r.ln.Addr().String() + "/events" }

// ServeHTTP receives one delivery.
func (r *EventReceiver) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	body, err := io.ReadAll(io.LimitReader(req.Body, 1<<20))
	if err != nil {
		http.Error(w, "bad body", http.StatusBadRequest)
		return
	}
	ok, verr := r.verify(req.Context(), req.Header, body)
	d := Delivery{ID: req.Header.Get(notify.HeaderID), Body: body, Verified: ok}
	r.mu.Lock()
	x := r.rng.Float64()
	slow := time.Duration(200+r.rng.IntN(1300)) * time.Millisecond
	if verr != nil {
		r.verifyErrs++
	}
	r.mu.Unlock()
	fault := ""
	switch {
	case verr != nil:
		d.Answer, fault = http.StatusServiceUnavailable, "verifier unavailable"
	case !ok:
		d.Answer, fault = http.StatusUnauthorized, "not verified"
	case x < pEvent500:
		d.Answer, fault = http.StatusInternalServerError, "500"
	case x < pEvent500+pEventDrop:
		fault = "dropped"
	case x < pEvent500+pEventDrop+pEventSlow:
		d.Answer, fault = http.StatusNoContent, "slow"
		time.Sleep(slow)
	case x < pEvent500+pEventDrop+pEventSlow+pEventLate:
		d.Answer, d.Late, fault = http.StatusNoContent, true, "late"
		time.Sleep(notify.Timeout + time.Second)
	default:
		d.Answer = http.StatusNoContent
	}
	r.mu.Lock()
	r.deliveries = append(r.deliveries, d)
	if fault != "" {
		r.faults[fault]++
	}
	r.mu.Unlock()
	if fault == "dropped" {
		if hj, ok := w.(http.Hijacker); ok {
			if c, _, err := hj.Hijack(); err == nil {
				_ = c.Close()
				return
			}
		}
		d.Answer = http.StatusBadGateway
	}
	w.WriteHeader(d.Answer)
}

// Deliveries returns what the receiver received so far, and its faults
// by kind.
func (r *EventReceiver) Deliveries() ([]Delivery, map[string]int, int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	f := make(map[string]int, len(r.faults))
	for k, v := range r.faults {
		f[k] = v
	}
	return append([]Delivery(nil), r.deliveries...), f, r.verifyErrs
}

// Close stops the receiver.
func (r *EventReceiver) Close() {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	_ = r.srv.Shutdown(ctx)
}

// newWebhookSecret makes a Standard Webhooks secret: whsec_ and the
// base64 of 32 random bytes.
func newWebhookSecret() string {
	b := make([]byte, 32)
	_, _ = rand.Read(b)
	return notify.SecretPrefix + base64.StdEncoding.EncodeToString(b)
}

// verifierDir is the independent Standard Webhooks receiver of package
// notify's tests: node and the standardwebhooks npm package.
func verifierDir(moduleDir string) string {
	return filepath.Join(moduleDir, "internal", "notify", "testdata", "verifier")
}

// errNoVerifier is the error of a run whose node verifier cannot start.
var errNoVerifier = errors.New("the independent webhook verifier needs node and its npm package (npm ci --prefix internal/notify/testdata/verifier)")

// startVerifier starts the node receiver (receiver.js) with secret and
// returns a verifyFunc that passes each delivery to it unchanged: 204 is
// verified, 401 refused. Without node or its package it returns
// errNoVerifier (the caller decides: CI=true fails).
func startVerifier(ctx context.Context, moduleDir, secret string, env []string, logPath string) (*proc.Proc, verifyFunc, error) {
	node, err := exec.LookPath("node")
	dir := verifierDir(moduleDir)
	if err != nil {
		return nil, nil, fmt.Errorf("%w: %w", errNoVerifier, err)
	}
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "standardwebhooks")); err != nil {
		return nil, nil, fmt.Errorf("%w: %w", errNoVerifier, err)
	}
	port, err := testenv.FreePort()
	if err != nil {
		return nil, nil, err
	}
	p, err := proc.Start(proc.Spec{Name: "verifier", Bin: node, Args: []string{"receiver.js", strconv.Itoa(port)}, Dir: dir,
		Env: append(append([]string(nil), env...), "VERIFIER_SECRET="+secret), Log: logPath})
	if err != nil {
		return nil, nil, err
	}
	url := "http://127.0.0.1:" + strconv.Itoa(port) + "/verify"
	client := &http.Client{Timeout: 5 * time.Second}
	verify := func(ctx context.Context, h http.Header, body []byte) (bool, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
		if err != nil {
			return false, err
		}
		for _, k := range []string{notify.HeaderID, notify.HeaderTimestamp, notify.HeaderSignature, "Content-Type"} {
			req.Header.Set(k, h.Get(k))
		}
		resp, err := client.Do(req)
		if err != nil {
			return false, err
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		switch resp.StatusCode {
		case http.StatusNoContent:
			return true, nil
		case http.StatusUnauthorized:
			return false, nil
		}
		return false, fmt.Errorf("verifier answered %d", resp.StatusCode)
	}
	err = testenv.Poll(ctx, 20*time.Second, 50*time.Millisecond, func() (bool, error) {
		if p.Exited() {
			return false, fmt.Errorf("the node verifier exited (code %d)", p.ExitCode())
		}
		c, err := net.DialTimeout("tcp", "127.0.0.1:"+strconv.Itoa(port), time.Second)
		if err != nil {
			return false, nil
		}
		_ = c.Close()
		return true, nil
	})
	if err != nil {
		p.Kill()
		return nil, nil, err
	}
	return p, verify, nil
}

// goVerifier verifies with the Go standardwebhooks library
// (notify.VerifyStandard): the fallback outside CI when node is missing.
func goVerifier(secret string) verifyFunc {
	return func(_ context.Context, h http.Header, body []byte) (bool, error) {
		return notify.VerifyStandard(secret, body, h) == nil, nil
	}
}

// EventCheck is what the deliveries prove about the payout events.
type EventCheck struct {
	Events     int // distinct events verified and received
	Deliveries int // POSTs received
	// Duplicates counts deliveries of an event the receiver had already
	// answered 2xx (a late answer the sender gave up on included);
	// Retries deliveries of an event the sender had not yet seen
	// succeed (after a 500, a dropped connection, a late answer).
	Duplicates int
	Retries    int
	// Missing counts, per payout of the ledger, every sequence number
	// below its last one never delivered, and a last delivered event
	// that is not its end state (the final event missing).
	Missing int
	// Mismatches counts events that disagree with the ledger or with
	// each other: another amount or batch, a previousState that is not
	// the previous event's state, one id with two bodies, an event of an
	// unknown payout.
	Mismatches int
	// Rejected counts real deliveries the verifier refused.
	Rejected int
	Findings []string
}

// CheckEvents checks the deliveries against the payouts of the ledger:
// every payout's events 1..n delivered, the last one its end state.
func CheckEvents(ds []Delivery, payouts map[string]ledger.Payout) EventCheck {
	var c EventCheck
	f := &findings{}
	c.Deliveries = len(ds)
	type seen struct {
		body      []byte
		taken     bool // the receiver answered 2xx (late or not)
		delivered bool // the sender saw a 2xx
	}
	byID := map[string]*seen{}
	byPayout := map[string]map[int64]notify.Event{}
	for _, d := range ds {
		if !d.Verified {
			c.Rejected++
			f.add("event", "delivery %s refused by the Standard Webhooks verifier", d.ID)
			continue
		}
		s := byID[d.ID]
		switch {
		case s == nil:
			s = &seen{body: d.Body}
			byID[d.ID] = s
			var ev notify.Event
			if err := json.Unmarshal(d.Body, &ev); err != nil || ev.ID != d.ID {
				c.Mismatches++
				f.add("event", "delivery %s: body not an event of that id (%v)", d.ID, err)
				break
			}
			if strings.HasPrefix(string(ev.Type), "payout.") && ev.ExternalID != "" {
				if byPayout[ev.ExternalID] == nil {
					byPayout[ev.ExternalID] = map[int64]notify.Event{}
				}
				byPayout[ev.ExternalID][ev.Sequence] = ev
			}
		default:
			if s.taken {
				c.Duplicates++
			}
			if !s.delivered {
				c.Retries++
			}
		}
		if !bytes.Equal(s.body, d.Body) {
			c.Mismatches++
			f.add("event", "event %s delivered with two different bodies", d.ID)
		}
		s.taken = s.taken || d.Answer/100 == 2
		s.delivered = s.delivered || d.accepted()
	}
	c.Events = len(byID)
	exts := make([]string, 0, len(payouts))
	for ext := range payouts {
		exts = append(exts, ext)
	}
	sort.Strings(exts)
	for _, ext := range exts {
		p := payouts[ext]
		evs := byPayout[ext]
		delete(byPayout, ext)
		if len(evs) == 0 {
			c.Missing++
			f.add("event", "%s (%s): no event delivered", ext, p.State)
			continue
		}
		var last int64
		for s := range evs {
			last = max(last, s)
		}
		for s := int64(1); s <= last; s++ {
			ev, ok := evs[s]
			if !ok {
				c.Missing++
				f.add("event", "%s: event %d of %d never delivered", ext, s, last)
				continue
			}
			if ev.Batch != p.Batch || ev.Payout == nil || ev.Payout.Amount != p.Amount {
				c.Mismatches++
				f.add("event", "%s: event %d says batch %s, %+v; the ledger batch %s, amount %s", ext, s, ev.Batch, ev.Payout, p.Batch, p.Amount)
				continue
			}
			if prev, ok := evs[s-1]; ok && prev.Payout != nil && ev.Payout.PreviousState != prev.Payout.State {
				c.Mismatches++
				f.add("event", "%s: event %d comes from %s, but event %d went to %s", ext, s, ev.Payout.PreviousState, s-1, prev.Payout.State)
			}
		}
		if ev, ok := evs[last]; ok && ev.Payout != nil && ev.Payout.State != string(p.State) {
			c.Missing++
			f.add("event", "%s is %s in the ledger, but its last event (%d) went to %s: its final event is missing", ext, p.State, last, ev.Payout.State)
		}
	}
	for ext := range byPayout {
		c.Mismatches++
		f.add("event", "events of %s, a payout the ledger does not have", ext)
	}
	c.Findings = f.result()
	return c
}
