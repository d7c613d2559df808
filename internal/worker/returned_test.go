package worker

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"html"
	"io"
	"net"
	nethttp "net/http"
	"net/http/httptest"
	"regexp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/acme/payout/internal/callback"
	"github.com/acme/payout/internal/decide"
	"github.com/acme/payout/internal/ledger"
	"github.com/acme/payout/internal/lifecycle"
	"github.com/acme/payout/internal/money"
	"github.com/acme/payout/internal/notify"
	"github.com/acme/payout/internal/proof/uitest"
	"github.com/acme/payout/internal/psp"
	"github.com/acme/payout/internal/queue"
	"github.com/acme/payout/internal/reconcile"
	"github.com/acme/payout/internal/results"
	"github.com/acme/payout/internal/sandbox"
	"github.com/acme/payout/internal/ui"
	"github.com/rs/zerolog"
)

// watchingConfig follows outcomes every 100ms and watches paid payouts
// for window, checking every interval; the sweep looks every 50ms.
func watchingConfig(interval, window time.Duration) Config {
	c := trackingConfig(100*time.Millisecond, time.Hour)
	words, _ := c.Outcome.Words.WithReturned(psp.DefaultReturnedStatuses)
	c.Outcome.Words = words
	c.Watch = decide.WatchPolicy{Window: window, Intervals: []time.Duration{interval}}
	c.WatchSweep = 50 * time.Millisecond
	return c
}

// addReconciled registers payouts of the given amounts in a batch whose
// file total is their sum (as the loader does), claims their ids and
// enqueues their creates.
func (h *harness) addReconciled(amounts ...string) []string {
	h.t.Helper()
	ctx := context.Background()
	total := money.Zero
	var ids []string
	var ps []ledger.NewPayout
	for i, a := range amounts {
		ext := fmt.Sprintf("RT-%d", i+1)
		sealed, err := h.ring.Seal(visa, ledger.SealAD(h.batch, ext))
		if err != nil {
			h.t.Fatal(err)
		}
		p := ledger.NewPayout{Line: i + 2, ExternalID: ext, Amount: money.MustParse(a), Sealed: sealed, Destination: "card 411111******1111"}
		total = total.Add(p.Amount)
		ids, ps = append(ids, ext), append(ps, p)
	}
	if _, _, err := h.ledger.BeginBatch(ctx, ledger.Batch{ID: h.batch, File: "returns.csv", LoadedAt: time.Now(), Rows: int64(len(ps)), Total: total, Scale: 2}); err != nil {
		h.t.Fatal(err)
	}
	if _, err := h.ledger.Register(ctx, h.batch, ps, 2); err != nil {
		h.t.Fatal(err)
	}
	if err := h.ledger.FinishBatch(ctx, h.batch); err != nil {
		h.t.Fatal(err)
	}
	if _, err := h.ledger.Claims().Claim(ctx, h.batch, ids); err != nil {
		h.t.Fatal(err)
	}
	for _, p := range ps {
		if _, err := h.queue.Add(ctx, queue.Step{Kind: queue.Create, Batch: h.batch, ExternalID: p.ExternalID, N: 1, Amount: p.Amount.String(), Destination: p.Destination}); err != nil {
			h.t.Fatal(err)
		}
	}
	return ids
}

// TestReturned: payouts are paid through the worker and the PSP sandbox,
// which then reports some of them returned under each of the default
// returned words (and variants of case, width and separators), found by
// the watch's own status poll or brought forward by the sandbox's
// callback. Each returned payout ends returned with the PSP's word, reason
// and time, unwatched; the others stay paid; the result file, the
// summary's reconciliation (left for good = paid - returned), the
// reconciler's sweep, the console and a signed payout.returned event
// (sequence: paid's + 1) all show it.
func TestReturned(t *testing.T) {
	t.Parallel()
	words := []struct{ name, status string }{
		{"returned", "Returned"},
		{"reversed", "reversed"},
		{"refunded", "REFUNDED"},
		{"chargeback", "Chargeback"},
		{"case_width_variant", "Ｃｈａｒｇｅ-ＢＡＣＫ"}, // full-width, mixed case, hyphen: chargeback
	}
	for _, w := range words {
		for _, by := range []string{"polling", "callback"} {
			t.Run(w.name+"/"+by, func(t *testing.T) {
				t.Parallel()
				testReturned(t, w.status, by == "callback")
			})
		}
	}
}

// returnSeed is the sandbox seed of TestReturned: with PReturn 0.5 its
// draws return two of the four orders and keep two paid (which ones
// depends on the order of creation: the test reads each order's fate from
// the sandbox, and fails should a seed return all or none).
const returnSeed = 3

func testReturned(t *testing.T, status string, byCallback bool) {
	ctx := context.Background()
	secret := "whsec_" + base64.StdEncoding.EncodeToString([]byte("returned-events-test-key-32byte!"))
	rc := newEventRecorder(t, secret)
	recv := httptest.NewServer(rc)
	t.Cleanup(recv.Close)

	// Polling: a watch check every 200ms finds the return. Callback: the
	// checks are an hour apart, so only the callback brings it within
	// the test.
	cfg := watchingConfig(200*time.Millisecond, time.Minute)
	sc := sandbox.Config{Seed: returnSeed, SettleAfter: 200 * time.Millisecond, PReturn: 0.5, ReturnAfter: 2 * time.Second, ReturnedStatus: status}
	var ln net.Listener
	if byCallback {
		cfg = watchingConfig(time.Hour, 2*time.Hour)
		var err error
		if ln, err = net.Listen("tcp", "127.0.0.1:0"); err != nil {
			t.Fatal(err)
		}
		sc.CallbackURL, sc.CallbackSecret, sc.PCallbackDup = "http://"+ln.Addr().String()+"/callbacks", cbSecret, 0.5
	}
	h := newHarness(t, cfg, sc)
	d, err := notify.NewDeliverer(secret, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	h.cfg.Notify = NotifyConfig{Emitter: notify.NewEmitter(h.rdb, []string{recv.URL}), Deliverer: d.Logging(h.rdb)}
	var hinted atomic.Int32
	if byCallback {
		cctx, cancel := context.WithCancel(ctx)
		t.Cleanup(cancel)
		go h.sbx.RunCallbacks(cctx)
		srv, err := callback.New(callback.Config{Secret: cbSecret}, h.worker(h.rdb, h.ledger, cfg, zerolog.Nop()), zerolog.Nop(), func(r callback.Result) {
			if r == callback.Hinted {
				hinted.Add(1)
			}
		})
		if err != nil {
			t.Fatal(err)
		}
		go srv.Serve(cctx, ln)
	}
	ids := h.addReconciled("10.10", "0.20", "99.99", "1234.56")
	h.start()

	h.waitFor("every payout paid", 20*time.Second, func() bool {
		return len(h.sbx.Orders()) == len(ids) && h.sbx.Stats().Paid+h.sbx.Stats().Returned == len(ids)
	})
	truth := map[string]sandbox.Order{}
	for _, o := range h.sbx.Orders() {
		truth[o.ExternalID] = o
	}
	var back, kept []string
	sent, returned, left := money.Zero, money.Zero, money.Zero
	for _, id := range ids {
		amt := money.MustParse(truth[id].Amount)
		sent = sent.Add(amt)
		if truth[id].ReturnAt.IsZero() {
			kept = append(kept, id)
			left = left.Add(amt)
			continue
		}
		back = append(back, id)
		returned = returned.Add(amt)
	}
	t.Logf("returned %v, kept paid %v", back, kept)
	if len(back) == 0 || len(kept) == 0 {
		t.Fatalf("seed %d returned %d of %d orders: the test needs both returned and kept", returnSeed, len(back), len(ids))
	}

	h.waitFor("the returned payouts returned", 30*time.Second, func() bool {
		for _, id := range back {
			if h.payout(id).State != lifecycle.Returned {
				return false
			}
		}
		return true
	})
	if byCallback && hinted.Load() == 0 {
		t.Error("no callback hinted a payout, yet they were returned with checks an hour apart")
	}
	for _, id := range back {
		p, o := h.payout(id), truth[id]
		if p.PSPStatus != status || p.Return.Reason != o.ReturnReason || !slices.Contains(sandbox.ReturnReasons, p.Return.Reason) ||
			p.Return.At != o.ReturnAt.UTC().Format(time.RFC3339) || p.Watch.On || p.Watch.End.IsZero() || !strings.Contains(p.Error, o.ReturnReason) {
			t.Errorf("%s: %+v; the PSP returned it with %q %q at %s", id, p, status, o.ReturnReason, o.ReturnAt)
		}
	}
	for _, id := range kept {
		if p := h.payout(id); p.State != lifecycle.Paid || !p.Watch.On {
			t.Errorf("%s: %s (watched %v), want paid and watched", id, p.State, p.Watch.On)
		}
	}
	if n, err := h.ledger.Watched(ctx); err != nil || n != int64(len(kept)) {
		t.Errorf("%d payouts watched (%v), want the %d kept", n, err, len(kept))
	}

	// The result file and its reconciliation: paid - returned is left.
	var csv, summary bytes.Buffer
	if _, err := results.WriteCSV(ctx, h.ledger, h.batch, &csv); err != nil {
		t.Fatal(err)
	}
	s, err := results.WriteSummary(ctx, h.ledger, h.batch, &summary)
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range back {
		if !strings.Contains(csv.String(), ","+id+",") || !regexp.MustCompile(`(?m)^\d+,`+id+`,[^\n]*,returned,`).MatchString(csv.String()) {
			t.Errorf("result file has no returned row %s:\n%s", id, csv.String())
		}
	}
	if got := strings.Count(csv.String(), ",returned,"); got != len(back) {
		t.Errorf("result file has %d returned rows, want %d:\n%s", got, len(back), csv.String())
	}
	l, ok := s.LeftForGood()
	if !s.Reconciled || !ok || l.Returned.Cmp(returned) != 0 || l.Sent.Cmp(sent) != 0 || l.Paid.Cmp(left) != 0 ||
		!strings.Contains(summary.String(), fmt.Sprintf("left for good: %s paid (sent %s, of which %s came back: returned)",
			left.StringFixed(2), sent.StringFixed(2), returned.StringFixed(2))) {
		t.Errorf("reconciliation: left %+v, want sent %s returned %s:\n%s", l, sent, returned, summary.String())
	}
	// The reconciler's sweep holds nothing of them open to restore.
	rep, err := reconcile.New(h.rdb, h.ledger, reconcile.Config{}, zerolog.Nop()).Sweep(ctx, true)
	if err != nil || rep.Open != 0 || len(rep.Repairs) != 0 {
		t.Errorf("reconciler sweep %+v (%v): want nothing open", rep, err)
	}

	// The console shows the returned payouts with the PSP's reason.
	ui := consoleGet(t, h)
	page := ui("/batches/" + h.batch)
	for _, id := range back {
		p := ui("/batches/" + h.batch + "/payouts/" + id)
		if !strings.Contains(p, ">returned<") || !strings.Contains(p, html.EscapeString(truth[id].ReturnReason)) {
			t.Errorf("console payout page of %s shows no returned state with %q:\n%s", id, truth[id].ReturnReason, p)
		}
	}
	if !strings.Contains(page, "returned") {
		t.Errorf("console batch page shows no returned payout:\n%s", page)
	}

	// A signed payout.returned event, next after payout.paid.
	for _, id := range back {
		var paid, ret notify.Event
		h.waitFor("payout.returned of "+id, 15*time.Second, func() bool {
			var ok1, ok2 bool
			paid, ok1 = rc.of(id, "payout.paid")
			ret, ok2 = rc.of(id, "payout.returned")
			return ok1 && ok2
		})
		if ret.Sequence != paid.Sequence+1 || ret.Payout.State != "returned" || ret.Payout.PreviousState != "paid" || ret.Payout.Amount != truth[id].Amount {
			t.Errorf("%s: payout.returned %+v %+v after payout.paid sequence %d", id, ret, *ret.Payout, paid.Sequence)
		}
	}
	if n := rc.unsigned.Load(); n != 0 {
		t.Errorf("%d deliveries failed the signature check", n)
	}
}

// eventRecorder keeps the payout events delivered to it whose Standard
// Webhooks signature verifies, by externalId and type.
type eventRecorder struct {
	t        *testing.T
	secret   string
	unsigned atomic.Int32
	mu       sync.Mutex
	events   map[string]map[string]notify.Event
}

func newEventRecorder(t *testing.T, secret string) *eventRecorder {
	return &eventRecorder{t: t, secret: secret, events: map[string]map[string]notify.Event{}}
}

func (rc *eventRecorder) ServeHTTP(w nethttp.ResponseWriter, r *nethttp.Request) {
	body, _ := io.ReadAll(r.Body)
	var ev notify.Event
	if notify.VerifyStandard(rc.secret, body, r.Header) != nil || json.Unmarshal(body, &ev) != nil {
		rc.unsigned.Add(1)
		w.WriteHeader(nethttp.StatusUnauthorized)
		return
	}
	if ev.Payout == nil {
		return
	}
	rc.mu.Lock()
	defer rc.mu.Unlock()
	if rc.events[ev.ExternalID] == nil {
		rc.events[ev.ExternalID] = map[string]notify.Event{}
	}
	rc.events[ev.ExternalID][string(ev.Type)] = ev
}

func (rc *eventRecorder) of(ext, typ string) (notify.Event, bool) {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	ev, ok := rc.events[ext][typ]
	return ev, ok
}

// consoleGet serves the console (ui.New, as payout ui does) on h's Redis
// and returns a func that GETs a page of it, signed in.
func consoleGet(t *testing.T, h *harness) func(path string) string {
	t.Helper()
	const user, pass = "alice", "alice-Pa55word-returned"
	hd, err := ui.New(uitest.Config(t, h.rdb, uitest.Options{User: user, Password: pass}))
	if err != nil {
		t.Fatal(err)
	}
	return func(path string) string {
		t.Helper()
		r := httptest.NewRequest("GET", path, nil)
		r.SetBasicAuth(user, pass)
		r.Header.Set("Sec-Fetch-Site", "same-origin")
		r.RemoteAddr = "192.0.2.1:40000"
		w := httptest.NewRecorder()
		hd.ServeHTTP(w, r)
		if w.Code != nethttp.StatusOK {
			t.Fatalf("GET %s: %d %s", path, w.Code, w.Body.String())
		}
		return w.Body.String()
	}
}
