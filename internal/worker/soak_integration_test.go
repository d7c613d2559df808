//go:build integration

package worker

import (
	"context"
	"testing"
	"time"

	"github.com/acme/payout/internal/lifecycle"
	"github.com/acme/payout/internal/sandbox"
)

// checkAgainstPSP asserts the promise: exactly one stored order per
// created payout, none for any other, nothing open.
func (h *harness) checkAgainstPSP(ids []string) map[lifecycle.State]int {
	h.t.Helper()
	orders := map[string]int{}
	for _, o := range h.sbx.Orders() {
		orders[o.ExternalID]++
	}
	states := map[lifecycle.State]int{}
	for _, ext := range ids {
		p := h.payout(ext)
		states[p.State]++
		want := 0
		if p.State == lifecycle.Created {
			want = 1
		}
		if p.State == lifecycle.NeedsReview {
			want = orders[ext] // a person decides; at most one is still required
			if want > 1 {
				h.t.Errorf("%s needs review with %d orders at the PSP", ext, want)
			}
		}
		if orders[ext] != want {
			h.t.Errorf("%s is %s with %d orders at the PSP, want %d", ext, p.State, orders[ext], want)
		}
		if !p.State.Final() {
			h.t.Errorf("%s left %s", ext, p.State)
		}
	}
	return states
}

// TestFaultySandbox2000: 2,000 payouts against a PSP that answers
// ambiguously 30% of the time, refuses 10% and lags its status by 2s. Every
// payout ends final with exactly one order per created payout.
func TestFaultySandbox2000(t *testing.T) {
	cfg := fastConfig()
	cfg.Concurrency = 20
	cfg.StatusDelay = time.Second
	cfg.Policy.AbsentSpacing = 2500 * time.Millisecond // (K-1)*D must exceed the PSP status lag (2s)
	h := newHarness(t, cfg, sandbox.Config{Seed: 2026, Faults: sandbox.Faults{
		PAmbiguous: 0.3, PRefuse: 0.1, StatusLag: 2 * time.Second, HangFor: 2 * time.Second}})
	h.psp = h.newClient(h.url, time.Second)
	ids := h.add(cards(2000)...)
	start := time.Now()
	h.start()
	h.waitFinal(5 * time.Minute)
	states := h.checkAgainstPSP(ids)
	st := h.sbx.Stats()
	t.Logf("2000 payouts in %s: %v; PSP creates received %d, orders stored %d, status queries %d, answers %v",
		time.Since(start).Round(time.Millisecond), states, st.CreatesReceived, st.OrdersStored, st.StatusQueries, st.Answers)
	if states[lifecycle.Created] < 1900 {
		t.Errorf("only %d created", states[lifecycle.Created])
	}
}

// TestOutageEndsWithoutNeedsReview: a 30s PSP outage in the middle of a
// run; the breaker holds requests back, nothing burns its budget, and when
// the PSP is back every payout resolves: zero needs_review.
func TestOutageEndsWithoutNeedsReview(t *testing.T) {
	cfg := fastConfig()
	cfg.Concurrency = 10
	cfg.StatusDelay = time.Second
	cfg.Policy.AbsentSpacing = 2 * time.Second
	cfg.Policy.MaxFaults = 20
	cfg.BreakerCooldown = 2 * time.Second
	h := newHarness(t, cfg, sandbox.Config{Seed: 7, Faults: sandbox.Faults{
		Latency: 20 * time.Millisecond, Outage: sandbox.Window{From: 3 * time.Second, For: 30 * time.Second}}})
	h.psp = h.newClient(h.url, time.Second)
	ids := h.add(cards(1500)...)
	h.start()
	h.waitFinal(4 * time.Minute)
	states := h.checkAgainstPSP(ids)
	st := h.sbx.Stats()
	t.Logf("outage run: %v; answers %v", states, st.Answers)
	if states[lifecycle.NeedsReview] != 0 {
		t.Fatalf("%d payouts need review after a 30s outage", states[lifecycle.NeedsReview])
	}
	if st.Answers["503"] == 0 {
		t.Fatal("the outage window was never hit: the test proves nothing")
	}
	_ = context.Background()
}
