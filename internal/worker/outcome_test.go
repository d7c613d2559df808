package worker

import (
	"context"
	"fmt"
	"net"
	nethttp "net/http"
	"strings"
	"testing"
	"time"

	"github.com/acme/payout/internal/callback"
	"github.com/acme/payout/internal/card"
	"github.com/acme/payout/internal/decide"
	"github.com/acme/payout/internal/lifecycle"
	"github.com/acme/payout/internal/psp"
	"github.com/acme/payout/internal/sandbox"
	"github.com/acme/payout/internal/view"
	"github.com/rs/zerolog"
)

// cards returns n Luhn-valid card numbers.
func cards(n int) []string {
	out := make([]string, 0, n)
	for i := 0; len(out) < n; i++ {
		base := fmt.Sprintf("411111%09d", i)
		for d := 0; d <= 9; d++ {
			if c := base + fmt.Sprint(d); card.Luhn(c) {
				out = append(out, c)
				break
			}
		}
	}
	return out
}

// trackingConfig follows outcomes, polling every interval.
func trackingConfig(interval, window time.Duration) Config {
	c := fastConfig()
	words, _ := psp.NewStatusWords(psp.DefaultPaidStatuses, psp.DefaultFailedStatuses)
	c.Outcome = OutcomePolicy{Track: true, Window: window, Intervals: []time.Duration{interval}, Words: words}
	return c
}

// assertMatchesTruth compares every payout's end with the simulator's
// truth: paid for its paid orders, failed (with the reason) for the others.
func assertMatchesTruth(t *testing.T, h *harness, ids []string) (paid, failed int) {
	t.Helper()
	truth := map[string]sandbox.Order{}
	for _, o := range h.sbx.Orders() {
		truth[o.ExternalID] = o
	}
	for _, id := range ids {
		p, o := h.payout(id), truth[id]
		want := lifecycle.Paid
		if o.FinalStatus == sandbox.DefaultFailedStatus {
			want = lifecycle.Failed
			failed++
		} else {
			paid++
		}
		if p.State != want {
			t.Errorf("%s is %s, the PSP says %s", id, p.State, o.FinalStatus)
		}
		if want == lifecycle.Failed && !strings.Contains(p.Error, o.FinalReason) {
			t.Errorf("%s failed with %q, the PSP's reason is %q", id, p.Error, o.FinalReason)
		}
		if p.PSPStatus != o.FinalStatus {
			t.Errorf("%s keeps PSP status %q, want %q", id, p.PSPStatus, o.FinalStatus)
		}
	}
	return paid, failed
}

// TestOutcomeByPolling: created orders are followed to paid or failed by
// status queries alone, and match the simulator's truth.
func TestOutcomeByPolling(t *testing.T) {
	t.Parallel()
	h := newHarness(t, trackingConfig(100*time.Millisecond, time.Hour),
		sandbox.Config{Seed: 7, SettleAfter: 300 * time.Millisecond, PFail: 0.4})
	ids := h.add(cards(20)...)
	h.start()
	c := h.waitFinal(20 * time.Second)
	paid, failed := assertMatchesTruth(t, h, ids)
	if paid == 0 || failed == 0 {
		t.Fatalf("paid %d failed %d: the seed should give both", paid, failed)
	}
	if c.Rows[lifecycle.Paid] != int64(paid) || c.Rows[lifecycle.Failed] != int64(failed) || c.Awaiting != 0 || c.Rows[lifecycle.Created] != 0 {
		t.Fatalf("counts %+v", c)
	}
}

// TestOutcomeWindowEndsInReview: an order that never reaches a final
// status needs review once the window is over.
func TestOutcomeWindowEndsInReview(t *testing.T) {
	t.Parallel()
	h := newHarness(t, trackingConfig(100*time.Millisecond, 700*time.Millisecond), sandbox.Config{})
	ids := h.add(visa)
	h.start()
	h.waitFinal(20 * time.Second)
	if p := h.payout(ids[0]); p.State != lifecycle.NeedsReview || !strings.Contains(p.Error, "outcome window") || p.OrderID == "" {
		t.Fatalf("state %s (%q), order %q", p.State, p.Error, p.OrderID)
	}
}

// TestTrackOutcomeOff keeps created final, whatever the PSP reports later.
func TestTrackOutcomeOff(t *testing.T) {
	t.Parallel()
	h := newHarness(t, fastConfig(), sandbox.Config{SettleAfter: 50 * time.Millisecond})
	ids := h.add(visa)
	h.start()
	c := h.waitFinal(10 * time.Second)
	if p := h.payout(ids[0]); p.State != lifecycle.Created || p.Awaiting || c.Awaiting != 0 {
		t.Fatalf("state %s awaiting %v", p.State, p.Awaiting)
	}
}

const cbSecret = "callback-secret-0123456789"

// TestOutcomeByCallbacks: outcome checks are an hour apart, so only the
// simulator's callbacks (duplicated, delayed, reordered) can bring the
// payouts to their end within the test: each moves a status query to now,
// and the status answer decides. Forged callbacks and callbacks for
// unknown orders change nothing.
func TestOutcomeByCallbacks(t *testing.T) {
	t.Parallel()
	cfg := trackingConfig(time.Hour, 2*time.Hour)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	cbURL := "http://" + ln.Addr().String() + "/callbacks"
	h := newHarness(t, cfg, sandbox.Config{Seed: 9, SettleAfter: 300 * time.Millisecond, PFail: 0.3,
		CallbackURL: cbURL, CallbackSecret: cbSecret, PCallbackDup: 0.5, CallbackDelay: 200 * time.Millisecond})
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	go h.sbx.RunCallbacks(ctx)
	hinter := h.worker(h.rdb, h.ledger, cfg, zerolog.Nop())
	results := map[callback.Result]int{}
	var mu = make(chan struct{}, 1)
	srv, err := callback.New(callback.Config{Secret: cbSecret}, hinter, zerolog.Nop(), func(r callback.Result) {
		mu <- struct{}{}
		results[r]++
		<-mu
	})
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(ctx, ln)

	ids := h.add(cards(10)...)
	if _, err := h.ledger.Claims().Claim(ctx, h.batch, ids); err != nil { // as the loader does
		t.Fatal(err)
	}
	h.start()
	h.waitFor("every order created", 10*time.Second, func() bool {
		c, _ := view.New(h.ledger.Redis()).Counts(ctx, h.batch)
		return c.Rows[lifecycle.Created]+c.Rows[lifecycle.Paid]+c.Rows[lifecycle.Failed] == 10
	})
	// Forged (wrong secret) and unknown-order callbacks, before any real one
	// has moved a payout: nothing changes but the counters.
	for _, body := range []string{`{"externalId":"` + ids[0] + `","status":"Paid"}`, `{"externalId":"nobody","status":"Paid"}`} {
		for _, secret := range []string{"wrong-secret-0123456789", cbSecret} {
			req, _ := nethttp.NewRequest(nethttp.MethodPost, cbURL, strings.NewReader(body))
			req.Header.Set(callback.DefaultHeader, secret)
			if resp, err := nethttp.DefaultClient.Do(req); err == nil {
				resp.Body.Close()
			}
		}
	}
	h.waitFinal(20 * time.Second)
	paid, failed := assertMatchesTruth(t, h, ids)
	if paid == 0 || failed == 0 {
		t.Fatalf("paid %d failed %d", paid, failed)
	}
	mu <- struct{}{}
	defer func() { <-mu }()
	if results[callback.Unauthorized] != 2 || results[callback.Hinted] == 0 {
		t.Fatalf("callback results %v", results)
	}
}

// TestCallbackBeforeTheCreateIsRecorded: a callback that arrives while the
// create's answer is not recorded yet (queued, submitting) does nothing;
// the payout goes on as it would have.
func TestCallbackBeforeTheCreateIsRecorded(t *testing.T) {
	t.Parallel()
	cfg := trackingConfig(100*time.Millisecond, time.Hour)
	h := newHarness(t, cfg, sandbox.Config{SettleAfter: 200 * time.Millisecond})
	ids := h.add(visa)
	w := h.worker(h.rdb, h.ledger, cfg, zerolog.Nop())
	ctx := context.Background()
	if _, err := h.ledger.Claims().Claim(ctx, h.batch, ids); err != nil {
		t.Fatal(err)
	}
	if ok, err := w.Hint(ctx, callback.Hint{ExternalID: ids[0], Status: "Paid"}); ok || err != nil {
		t.Fatalf("hint for a queued payout: %v %v", ok, err)
	}
	if _, err := h.ledger.BeginCreate(ctx, h.batch, ids[0], 1); err != nil {
		t.Fatal(err)
	}
	if ok, err := w.Hint(ctx, callback.Hint{ExternalID: ids[0], Status: "Paid"}); ok || err != nil {
		t.Fatalf("hint for a submitting payout: %v %v", ok, err)
	}
	if p := h.payout(ids[0]); p.State != lifecycle.Submitting {
		t.Fatalf("the hint moved the payout to %s", p.State)
	}
	// Once created and awaiting its outcome, the same callback is a hint.
	if _, err := h.ledger.FinishCreate(ctx, h.batch, ids[0], 1, decide.CreateResult{To: lifecycle.Created, OrderID: "WD-1", OutcomeWindow: time.Hour}); err != nil {
		t.Fatal(err)
	}
	p := h.payout(ids[0])
	if err := w.enqueueOutcome(ctx, p, p.OutcomeSeq, time.Hour); err != nil {
		t.Fatal(err)
	}
	if ok, err := w.Hint(ctx, callback.Hint{ExternalID: ids[0], Status: "Paid"}); !ok || err != nil {
		t.Fatalf("hint for a payout awaiting its outcome: %v %v", ok, err)
	}
	if p := h.payout(ids[0]); p.State != lifecycle.Created || !p.Awaiting {
		t.Fatalf("a hint changed the ledger: %s", p.State)
	}
}
