package worker

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/acme/payout/internal/access"
	"github.com/acme/payout/internal/callback"
	"github.com/acme/payout/internal/card"
	"github.com/acme/payout/internal/decide"
	"github.com/acme/payout/internal/ledger"
	"github.com/acme/payout/internal/lifecycle"
	"github.com/acme/payout/internal/money"
	"github.com/acme/payout/internal/notify"
	"github.com/acme/payout/internal/operator"
	"github.com/acme/payout/internal/psp"
	"github.com/acme/payout/internal/sandbox"
	"github.com/acme/payout/internal/view"
	"github.com/rs/zerolog"
)

// reviewWithOrder adds one payout that the PSP holds an order for (sent
// directly, as a create whose answer was lost) and that the ledger has in
// needs_review, claimed as the loader does. It returns its externalId and
// the PSP's order id.
func reviewWithOrder(t *testing.T, h *harness) (ext, order string) {
	t.Helper()
	ctx := context.Background()
	ids := h.add(visa)
	if _, err := h.ledger.Claims().Claim(ctx, h.batch, ids); err != nil {
		t.Fatal(err)
	}
	if _, err := h.ledger.BeginCreate(ctx, h.batch, ids[0], 1); err != nil {
		t.Fatal(err)
	}
	res := h.psp.CreateWithdrawal(ctx, psp.WithdrawalRequest{ExternalID: ids[0], Amount: money.MustParse("10.50"),
		Properties: []psp.Property{{Key: psp.KeyCardNumber, Value: visa}}})
	if res.Outcome != psp.Created {
		t.Fatalf("create at the PSP: %+v", res)
	}
	if _, err := h.ledger.FinishCreate(ctx, h.batch, ids[0], 1, decide.CreateResult{To: lifecycle.NeedsReview, Error: "PSP unreachable"}); err != nil {
		t.Fatal(err)
	}
	return ids[0], res.Order.OrderID
}

// markCreated resolves ext as created with order, as payout resolve and
// the console do (the PSP asked first, outcome check 1 enqueued).
func markCreated(t *testing.T, h *harness, ext, order string) {
	t.Helper()
	acts := operator.New(h.rdb, nil, zerolog.Nop()).As(access.Principal{Name: "alice", Roles: access.Everyone})
	r, err := acts.Resolve(context.Background(), h.psp, h.batch, ext, operator.Resolution{To: lifecycle.Created, OrderID: order,
		Who: ledger.Resolution{By: "alice", Note: "seen in the back office", OutcomeWindow: h.cfg.Outcome.Window}})
	if err != nil || r.To != lifecycle.Created || !r.Awaiting {
		t.Fatalf("mark created: %+v %v", r, err)
	}
}

// Issue 43, defect 1: a payout marked created is followed to paid by the
// outcome status checks.
func TestMarkedCreatedIsPaidByPolling(t *testing.T) {
	t.Parallel()
	h := newHarness(t, trackingConfig(100*time.Millisecond, time.Hour), sandbox.Config{SettleAfter: 500 * time.Millisecond})
	ext, order := reviewWithOrder(t, h)
	h.start()
	markCreated(t, h, ext, order)
	h.waitFor("the payout marked created paid", 20*time.Second, func() bool { return h.payout(ext).State == lifecycle.Paid })
	if p := h.payout(ext); p.OrderID != order || p.ResolvedBy != "alice" || p.Awaiting {
		t.Fatalf("payout %+v", p)
	}
	if c, _ := view.New(h.ledger.Redis()).Counts(context.Background(), h.batch); c.Awaiting != 0 || c.Open() != 0 {
		t.Fatalf("counts %+v", c)
	}
	h.assertOrders(ext, 1, 1)
}

// Issue 38: a PSP whose order ids are Luhn-valid 16-digit numbers. The
// order id a person marks created with, once the PSP confirmed it, is
// stored exactly as the PSP gave it (not masked as a card number): the
// outcome checks ask for that order and follow the payout to paid.
func TestMarkedCreatedWithANumericOrderIDIsPaid(t *testing.T) {
	t.Parallel()
	h := newHarness(t, trackingConfig(100*time.Millisecond, time.Hour), sandbox.Config{SettleAfter: 500 * time.Millisecond, NumericOrderIDs: true})
	ext, order := reviewWithOrder(t, h)
	if len(order) != 16 || !card.Luhn(order) {
		t.Fatalf("the sandbox's order id %q is not a Luhn-valid 16-digit number", order)
	}
	h.start()
	markCreated(t, h, ext, order)
	if p := h.payout(ext); p.OrderID != order {
		t.Fatalf("order id stored as %q, want %q exactly", p.OrderID, order)
	}
	h.waitFor("the payout marked created paid", 20*time.Second, func() bool { return h.payout(ext).State == lifecycle.Paid })
	if p := h.payout(ext); p.OrderID != order || p.ResolvedBy != "alice" {
		t.Fatalf("payout %+v", p)
	}
	h.assertOrders(ext, 1, 1)
}

// Issue 43, defect 1: a payout marked created is followed to paid by a
// PSP callback: its outcome checks are an hour apart, so only the hint
// can bring check 2 forward.
func TestMarkedCreatedIsPaidByCallback(t *testing.T) {
	t.Parallel()
	cfg := trackingConfig(time.Hour, 2*time.Hour)
	h := newHarness(t, cfg, sandbox.Config{SettleAfter: 2 * time.Second})
	ext, order := reviewWithOrder(t, h)
	h.start()
	markCreated(t, h, ext, order)
	h.waitFor("outcome check 1 answered", 10*time.Second, func() bool { return h.payout(ext).OutcomeSeq == 2 })
	if p := h.payout(ext); p.State != lifecycle.Created {
		t.Skipf("the order settled before outcome check 1 (%s): a machine too slow for this test", p.State)
	}
	h.waitFor("the order paid at the PSP", 10*time.Second, func() bool {
		for _, o := range h.sbx.Orders() {
			if o.PSPOrderID == order {
				return o.Status == sandbox.DefaultPaidStatus
			}
		}
		return false
	})
	hinter := h.worker(h.rdb, h.ledger, cfg, zerolog.Nop())
	if ok, err := hinter.Hint(context.Background(), callback.Hint{ExternalID: ext, OrderID: order, Status: "Paid"}); !ok || err != nil {
		t.Fatalf("hint: %v %v", ok, err)
	}
	h.waitFor("the payout marked created paid", 10*time.Second, func() bool { return h.payout(ext).State == lifecycle.Paid })
}

// Issue 38.5: a payout a person marked rejected, that the PSP holds an
// order for, is moved to needs_review by the PSP's callback (through a
// status query), with an alert and the payout_needs_review notification;
// the callback is not dropped.
func TestMarkedRejectedContradictedByCallback(t *testing.T) {
	t.Parallel()
	h := newHarness(t, trackingConfig(100*time.Millisecond, time.Hour), sandbox.Config{SettleAfter: 100 * time.Millisecond})
	h.cfg.Notify = NotifyConfig{Emitter: notify.NewEmitter(h.rdb, []string{"https://hooks.example/payout"})}
	ext, order := reviewWithOrder(t, h)
	ctx := context.Background()
	// As if the PSP had answered 404 when asked (its status view lagging).
	if _, err := h.ledger.ResolveAsRejected(ctx, h.batch, ext, ledger.Resolution{By: "alice", Note: "never sent"}); err != nil {
		t.Fatal(err)
	}
	hinter := h.worker(h.rdb, h.ledger, h.cfg, zerolog.Nop())
	if ok, err := hinter.Hint(ctx, callback.Hint{ExternalID: ext, OrderID: order, Status: "Paid"}); !ok || err != nil {
		t.Fatalf("hint for a payout marked rejected: %v %v", ok, err)
	}
	h.start()
	h.waitFor("the rejection contradicted", 20*time.Second, func() bool { return h.payout(ext).State == lifecycle.NeedsReview })
	p := h.payout(ext)
	if p.OrderID != order || !strings.Contains(p.Error, "marked rejected by alice, but the PSP holds order "+order) {
		t.Fatalf("payout %+v", p)
	}
	// The alert is logged just after the ledger moved the payout.
	h.waitFor("the alert logged", 10*time.Second, func() bool {
		return strings.Contains(h.logs.String(), "manual_resolution_contradicted")
	})
	h.waitFor("the needs_review notification", 10*time.Second, func() bool {
		tasks, _ := h.insp.ListPendingTasks(notify.Queue)
		for _, task := range tasks {
			if s := string(task.Payload); strings.Contains(s, string(notify.PayoutNeedsReview)) && strings.Contains(s, ext) {
				return true
			}
		}
		return false
	})
}

// A callback about a payout the PSP itself rejected, or one a person
// marked rejected that the PSP has no order for, leaves it rejected.
func TestMarkedRejectedStandsWithoutAnOrder(t *testing.T) {
	t.Parallel()
	h := newHarness(t, trackingConfig(100*time.Millisecond, time.Hour), sandbox.Config{})
	ids := h.add(visa)
	ctx := context.Background()
	if _, err := h.ledger.Claims().Claim(ctx, h.batch, ids); err != nil {
		t.Fatal(err)
	}
	if _, err := h.ledger.BeginCreate(ctx, h.batch, ids[0], 1); err != nil {
		t.Fatal(err)
	}
	if _, err := h.ledger.FinishCreate(ctx, h.batch, ids[0], 1, decide.CreateResult{To: lifecycle.NeedsReview, Error: "x"}); err != nil {
		t.Fatal(err)
	}
	if _, err := h.ledger.ResolveAsRejected(ctx, h.batch, ids[0], ledger.Resolution{By: "alice", Note: "never sent"}); err != nil {
		t.Fatal(err)
	}
	hinter := h.worker(h.rdb, h.ledger, h.cfg, zerolog.Nop())
	if ok, err := hinter.Hint(ctx, callback.Hint{ExternalID: ids[0], Status: "Paid"}); !ok || err != nil {
		t.Fatalf("hint: %v %v", ok, err)
	}
	h.start()
	h.waitFor("the verification answered", 20*time.Second, func() bool {
		return strings.Contains(h.logs.String(), "the rejection stands")
	})
	if p := h.payout(ids[0]); p.State != lifecycle.Rejected {
		t.Fatalf("payout is %s", p.State)
	}
}
