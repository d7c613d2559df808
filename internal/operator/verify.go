package operator

import (
	"context"
	"errors"
	"fmt"

	"github.com/acme/payout/internal/card"
	"github.com/acme/payout/internal/ledger"
	"github.com/acme/payout/internal/lifecycle"
	"github.com/acme/payout/internal/money"
	"github.com/acme/payout/internal/psp"
)

// StatusChecker asks the PSP about a withdrawal order, by order id or by
// externalId as the client is configured (psp.Client.CheckWithdrawal and
// --status-by-external-id: the configured meaning of the status path's
// {id}), and checks that the answer is about that order.
type StatusChecker interface {
	CheckWithdrawal(ctx context.Context, want psp.Expect) psp.Result
}

// ErrNoPSP refuses a manual resolution that decides money ("mark created",
// "mark rejected") where no PSP is configured to ask first.
var ErrNoPSP = errors.New("no PSP to ask: marking a payout created or rejected asks the PSP first (give --psp-url and the token); a recheck needs no PSP")

// VerifyError refuses a manual resolution after asking the PSP.
// Contradicted: the PSP's answer says otherwise; else the PSP gave no
// usable answer and nothing is known.
type VerifyError struct {
	Contradicted bool
	Msg          string
}

func (e *VerifyError) Error() string { return e.Msg }

// Verify asks the PSP about pay before a person marks it to (created, with
// the order id they typed, or rejected) and refuses what the PSP
// contradicts, or cannot confirm, with a *VerifyError. Nothing is written.
// For created it returns the order as the PSP confirmed it: its order id
// and status word as the PSP gave them, which are recorded instead of the
// text a person typed (ledger.ResolveAsConfirmed: the id exactly, even
// when it reads like a card number).
//
//	created   the PSP must find the order, for this externalId and amount
//	          (when it shows them) and under the order id typed
//	rejected  the PSP must not find an order for the payout (by its order
//	          id when one is recorded, else by externalId): a 404
func Verify(ctx context.Context, c StatusChecker, pay ledger.Payout, to lifecycle.State, orderID string) (ledger.PSPOrder, error) {
	if c == nil {
		return ledger.PSPOrder{}, ErrNoPSP
	}
	want := psp.Expect{ExternalID: pay.ExternalID, OrderID: pay.OrderID}
	if to == lifecycle.Created {
		want.OrderID = orderID
	}
	if a, err := money.Parse(pay.Amount, 18); err == nil {
		want.Amount = a
	}
	res := c.CheckWithdrawal(ctx, want)
	asked := "order " + card.Scrub(want.OrderID)
	if res.ByExternalID {
		asked = "externalId " + card.Scrub(want.ExternalID)
	}
	switch {
	case res.Outcome == psp.Created && to == lifecycle.Created:
		return ledger.PSPOrder{OrderID: res.Order.OrderID, Status: res.Order.Status}, nil
	case res.Outcome == psp.Created:
		return ledger.PSPOrder{}, &VerifyError{Contradicted: true, Msg: fmt.Sprintf(
			"the PSP holds order %s (status %s) for payout %s: it may be paid, so it is not marked rejected; mark it created with that order id",
			card.Scrub(res.Order.OrderID), card.Scrub(res.Order.Status), card.Scrub(pay.ExternalID))}
	case res.Outcome == psp.NotFound && to == lifecycle.Rejected:
		return ledger.PSPOrder{}, nil
	case res.Outcome == psp.NotFound:
		return ledger.PSPOrder{}, &VerifyError{Contradicted: true, Msg: fmt.Sprintf(
			"the PSP has no order under %s (HTTP 404): payout %s is not marked created; check the order id",
			asked, card.Scrub(pay.ExternalID))}
	case res.Mismatch != nil:
		return ledger.PSPOrder{}, &VerifyError{Contradicted: true, Msg: fmt.Sprintf(
			"the PSP's answer about %s is not about payout %s: %s; nothing changed", asked, card.Scrub(pay.ExternalID), res.Message)}
	}
	return ledger.PSPOrder{}, &VerifyError{Msg: fmt.Sprintf(
		"the PSP could not confirm (asked about %s): %s; nothing changed, try again later", asked, res.Message)}
}
