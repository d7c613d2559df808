package operator

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/acme/payout/internal/decide"
	"github.com/acme/payout/internal/ledger"
	"github.com/acme/payout/internal/lifecycle"
	"github.com/acme/payout/internal/money"
	"github.com/acme/payout/internal/psp"
	"github.com/acme/payout/internal/ui"
	"github.com/acme/payout/jobs"
	"github.com/hibiken/asynq"
)

// backOffice answers status queries from orders, keyed by the id asked
// (the order id when known, else the externalId); anything else is 404.
type backOffice map[string]psp.Order

func (b backOffice) CheckWithdrawal(_ context.Context, want psp.Expect) psp.Result {
	id, byExt := want.OrderID, false
	if id == "" {
		id, byExt = want.ExternalID, true
	}
	o, ok := b[id]
	if !ok {
		return psp.Result{Op: psp.OpWithdrawalStatus, Outcome: psp.NotFound, HTTPStatus: 404, ByExternalID: byExt}
	}
	return want.Check(psp.Result{Op: psp.OpWithdrawalStatus, Outcome: psp.Created, HTTPStatus: 200, Order: o, ByExternalID: byExt})
}

// reviewBatch is batch b with payouts R1 and R2 in needs_review.
func reviewBatch(t *testing.T, a *Actions) {
	t.Helper()
	reviewBatchOf(t, a, ledger.Batch{})
}

// reviewBatchOf is reviewBatch, loaded with the controls of c (FourEyes,
// LoadedBy).
func reviewBatchOf(t *testing.T, a *Actions, c ledger.Batch) {
	t.Helper()
	seedReview(t, a.Ledger, c)
}

// seedReview loads batch b (four-eyes and loader from c) with R1 and R2,
// both in needs_review after a create that got no answer.
func seedReview(t *testing.T, l *ledger.Ledger, c ledger.Batch) {
	t.Helper()
	ctx := context.Background()
	if _, _, err := l.BeginBatch(ctx, ledger.Batch{ID: "b", File: "f.csv", LoadedAt: time.Now(), Rows: 2, Total: money.MustParse("20.50"), Scale: 2,
		FourEyes: c.FourEyes, LoadedBy: c.LoadedBy}); err != nil {
		t.Fatal(err)
	}
	ps := []ledger.NewPayout{{Line: 2, ExternalID: "R1", Amount: money.MustParse("10.25"), Destination: "card 411111******1111"},
		{Line: 3, ExternalID: "R2", Amount: money.MustParse("10.25"), Destination: "card 411111******1111"}}
	if _, err := l.Register(ctx, "b", ps, 2); err != nil {
		t.Fatal(err)
	}
	if err := l.FinishBatch(ctx, "b"); err != nil {
		t.Fatal(err)
	}
	for _, ext := range []string{"R1", "R2"} {
		if _, err := l.BeginCreate(ctx, "b", ext, 1); err != nil {
			t.Fatal(err)
		}
		if _, err := l.FinishCreate(ctx, "b", ext, 1, decide.CreateResult{To: lifecycle.NeedsReview, Error: "PSP unreachable"}); err != nil {
			t.Fatal(err)
		}
	}
}

// The console's "mark created" and "mark rejected" ask the PSP first and
// refuse what it contradicts; a payout marked created gets its outcome
// check, so the workers follow it to paid or failed.
func TestDecidePayoutAsksThePSPFirst(t *testing.T) {
	office := backOffice{
		"WD-1": {OrderID: "WD-1", ExternalID: "R1", Amount: "10.25", Status: "Processing"},
		"R2":   {OrderID: "WD-2", ExternalID: "R2", Amount: "10.25", Status: "Paid"},
		// a PSP that numbers its orders: Luhn-valid, read like a card
		"4111111111111111": {OrderID: "4111111111111111", ExternalID: "R1", Amount: "10.25", Status: "Processing"},
	}
	tests := []struct {
		name    string
		psp     StatusChecker
		d       ui.Decision
		ext     string
		want    lifecycle.State
		msg     string // part of the message, or of the refusal
		outcome bool   // outcome check 1 enqueued
	}{
		{"created, the PSP holds the order", office, ui.Decision{Action: ui.DecideCreated, OrderID: "WD-1"}, "R1", lifecycle.Created,
			"(PSP order WD-1, PSP status Processing); outcome check 1 enqueued", true},
		{"created, a numeric order id the PSP confirms", office, ui.Decision{Action: ui.DecideCreated, OrderID: "4111111111111111"}, "R1", lifecycle.Created,
			"outcome check 1 enqueued", true},
		{"created, a card number the PSP does not hold as an order", office, ui.Decision{Action: ui.DecideCreated, OrderID: "5555555555554444"}, "R1", lifecycle.NeedsReview,
			"the PSP has no order under order 555555******4444", false},
		{"created, an order the PSP does not have", office, ui.Decision{Action: ui.DecideCreated, OrderID: "WD-9"}, "R1", lifecycle.NeedsReview,
			"the PSP has no order under order WD-9", false},
		{"created, another payout's order", office, ui.Decision{Action: ui.DecideCreated, OrderID: "WD-1"}, "R2", lifecycle.NeedsReview,
			"is not about payout R2", false},
		{"rejected, the PSP holds an order", office, ui.Decision{Action: ui.DecideRejected}, "R2", lifecycle.NeedsReview,
			"the PSP holds order WD-2 (status Paid)", false},
		{"rejected, the PSP has none", office, ui.Decision{Action: ui.DecideRejected}, "R1", lifecycle.Rejected, "needs review -> rejected", false},
		{"no PSP configured", nil, ui.Decision{Action: ui.DecideRejected}, "R1", lifecycle.NeedsReview, "no PSP to ask", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := context.Background()
			a, rdb := newActions(t)
			reviewBatch(t, a)
			u := UIControls{Actions: a, PSP: tt.psp, OutcomeWindow: time.Hour}
			tt.d.By, tt.d.Note = "alice", "checked in the back office"
			msg, err := u.DecidePayout(asPerson(ctx, "alice"), "b", tt.ext, tt.d)
			if got := msg + errText(err); !strings.Contains(got, tt.msg) {
				t.Errorf("got %q, want %q in it", got, tt.msg)
			}
			p, gerr := a.Ledger.Get(ctx, "b", tt.ext)
			if gerr != nil || p.State != tt.want {
				t.Fatalf("%s is %s (%v), want %s", tt.ext, p.State, gerr, tt.want)
			}
			// The order id recorded is the PSP's, exactly as confirmed.
			if tt.want == lifecycle.Created && p.OrderID != tt.d.OrderID {
				t.Errorf("order id stored as %q, want %q exactly", p.OrderID, tt.d.OrderID)
			}
			_, terr := asynq.NewInspectorFromRedisClient(rdb).GetTaskInfo(jobs.Queue, jobs.OutcomeTaskID(tt.ext, 1))
			if (terr == nil) != tt.outcome || p.Awaiting != tt.outcome {
				t.Errorf("outcome check enqueued: %v, awaiting %v; want %v", terr == nil, p.Awaiting, tt.outcome)
			}
		})
	}
}

func errText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// Issue 38, item 5: under four-eyes, "mark created" and "mark rejected"
// in the console need a second person, whether the batch records
// four-eyes or the console was started with it; the payout view shows the
// pending proposal; a recheck needs nobody else.
func TestDecidePayoutFourEyes(t *testing.T) {
	office := backOffice{"WD-1": {OrderID: "WD-1", ExternalID: "R1", Amount: "10.25", Status: "Processing"}}
	for _, tt := range []struct {
		name     string
		batch    ledger.Batch
		policy   bool
		fourEyes bool
	}{
		{"the batch records four-eyes", ledger.Batch{FourEyes: true, LoadedBy: "carol"}, false, true},
		{"the console's policy", ledger.Batch{}, true, true},
		{"no four-eyes", ledger.Batch{}, false, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			ctx := context.Background()
			a, _ := newActions(t)
			reviewBatchOf(t, a, tt.batch)
			u := UIControls{Actions: a, PSP: office, OutcomeWindow: time.Hour, FourEyes: tt.policy}
			decide := func(by string, d ui.Decision) (string, error) {
				d.By, d.Note = by, "checked in the back office"
				return u.DecidePayout(asPerson(ctx, by), "b", "R1", d)
			}
			created := ui.Decision{Action: ui.DecideCreated, OrderID: "WD-1"}
			msg, err := decide("alice", created)
			if err != nil {
				t.Fatal(err)
			}
			p, _ := a.Ledger.Get(ctx, "b", "R1")
			if !tt.fourEyes {
				if p.State != lifecycle.Created {
					t.Fatalf("R1 is %s after one person: %s", p.State, msg)
				}
				return
			}
			if p.State != lifecycle.NeedsReview || !strings.Contains(msg, "proposed by alice") {
				t.Fatalf("R1 is %s: %q", p.State, msg)
			}
			if v := payoutView(ledger.Batch{ID: "b"}, p); !strings.Contains(v.Proposal, "mark created (PSP order WD-1), proposed by alice") {
				t.Errorf("payout view's proposal %q", v.Proposal)
			}
			if _, err := decide("alice", created); err == nil || !errors.Is(err, ui.ErrRefused) || !strings.Contains(err.Error(), "second person") {
				t.Fatalf("the same person again: %v", err)
			}
			msg, err = decide("bob", created)
			p, _ = a.Ledger.Get(ctx, "b", "R1")
			if err != nil || p.State != lifecycle.Created || p.ResolvedBy != "bob" || !strings.Contains(msg, "proposed by alice") {
				t.Fatalf("second person: R1 is %s by %s: %q %v", p.State, p.ResolvedBy, msg, err)
			}
			if _, err := u.DecidePayout(asPerson(ctx, "alice"), "b", "R2", ui.Decision{Action: ui.DecideRecheck, By: "alice", Note: "PSP back"}); err != nil {
				t.Fatalf("recheck: %v", err)
			}
			if p, _ := a.Ledger.Get(ctx, "b", "R2"); p.State != lifecycle.Checking {
				t.Fatalf("R2 is %s after a recheck", p.State)
			}
		})
	}
}
