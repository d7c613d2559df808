package operator

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/acme/payout/internal/card"
	"github.com/acme/payout/internal/ledger"
	"github.com/acme/payout/internal/lifecycle"
	"github.com/acme/payout/internal/scrub"
	"github.com/acme/payout/internal/ui"
)

// proposalText is a pending four-eyes proposal as the console shows it
// ("" for none).
func proposalText(q *ledger.Proposal) string {
	if q == nil {
		return ""
	}
	what := "mark " + label(q.To)
	if q.To == lifecycle.Created {
		what += " (PSP order " + card.Scrub(q.OrderID) + ")"
	}
	return fmt.Sprintf("%s, proposed by %s at %s: %s. Four-eyes: a second person carries it out by taking the same decision.",
		what, card.Scrub(q.By), q.At.UTC().Format("2006-01-02 15:04:05Z"), card.Scrub(q.Note))
}

// DecidePayout takes a decision on one payout, as payout resolve
// (recheck, created, rejected) and payout cancel do: the same ledger
// calls, and after a recheck the same status check enqueued.
func (u UIControls) DecidePayout(ctx context.Context, batch, ext string, d ui.Decision) (string, error) {
	l := u.Actions.Ledger
	who := ledger.Resolution{By: strings.TrimSpace(d.By), Note: strings.TrimSpace(d.Note)}
	if who.By == "" || who.Note == "" {
		return "", ui.Refuse(errors.New("not done: a decision needs a note saying why"))
	}
	if err := typedDecision(who.Note, d.OrderID, d.PSPStatus); err != nil {
		return "", ui.Refuse(fmt.Errorf("not done: %w", err))
	}
	var (
		r   ledger.Resolved
		err error
	)
	switch d.Action {
	case ui.DecideCancel:
		was, err := l.Cancel(ctx, batch, ext, who.By, who.Note)
		switch {
		case errors.Is(err, ledger.ErrNotFound):
			return "", ui.Refuse(fmt.Errorf("batch %s has no payout %s", batch, ext))
		case errors.Is(err, ledger.ErrEverSent):
			return "", ui.Refuse(errors.New(card.Scrub(err.Error())))
		case err != nil:
			return "", err
		case was != lifecycle.Queued:
			return "", ui.Refuse(fmt.Errorf("payout %s is %s, not queued: only a payout not sent yet can be cancelled", ext, strings.ReplaceAll(string(was), "_", " ")))
		}
		u.Actions.Log.Info().Str("batch", batch).Str("externalId", ext).Str("by", who.By).Msg("payout cancelled by an operator")
		return fmt.Sprintf("payout %s cancelled by %s: %s", card.Scrub(ext), who.By, card.Scrub(who.Note)), nil
	case ui.DecideRecheck:
		r, err = u.Actions.Resolve(ctx, u.PSP, batch, ext, Resolution{To: lifecycle.Checking, Who: who, FourEyes: u.FourEyes})
	case ui.DecideCreated:
		if strings.TrimSpace(d.OrderID) == "" {
			return "", ui.Refuse(errors.New("not done: marking a payout created needs the PSP's order id"))
		}
		who.OutcomeWindow = u.OutcomeWindow
		r, err = u.Actions.Resolve(ctx, u.PSP, batch, ext, Resolution{To: lifecycle.Created, OrderID: strings.TrimSpace(d.OrderID), Who: who, FourEyes: u.FourEyes})
	case ui.DecideRejected:
		r, err = u.Actions.Resolve(ctx, u.PSP, batch, ext, Resolution{To: lifecycle.Rejected, Who: who, FourEyes: u.FourEyes})
	default:
		return "", ui.Refuse(fmt.Errorf("unknown decision %q", d.Action))
	}
	if err := resolveRefusal(batch, ext, err); err != nil {
		return "", err
	}
	p := r.Payout
	if r.Proposed && p.Proposal != nil {
		u.Actions.Log.Info().Str("batch", batch).Str("externalId", ext).Str("proposed", string(p.Proposal.To)).
			Str("by", who.By).Msg("payout resolution proposed, awaiting a second person (four-eyes)")
		return fmt.Sprintf("payout %s: %s; nothing changed yet", card.Scrub(ext), proposalText(p.Proposal)), nil
	}
	u.Actions.Log.Info().Str("batch", batch).Str("externalId", ext).Str("from", string(r.From)).Str("to", string(r.To)).
		Str("by", who.By).Str("proposed_by", r.ProposedBy).Msg("payout resolved by an operator")
	msg := fmt.Sprintf("payout %s: %s -> %s by %s: %s", card.Scrub(ext), label(r.From), label(r.To), who.By, card.Scrub(p.ResolutionNote))
	if r.ProposedBy != "" {
		msg += " (proposed by " + card.Scrub(r.ProposedBy) + ": four-eyes)"
	}
	if r.To == lifecycle.Created {
		msg += " (PSP order " + card.Scrub(p.OrderID) + ", PSP status " + card.Scrub(p.PSPStatus) + ")"
	}
	switch {
	case errors.Is(err, ErrNextNotEnqueued):
		// The ledger has the decision; only the reminder is missing: the
		// workers' sweep enqueues it.
		return msg + "; its next check is left to the workers' reconciler", ui.PartlyDone(err)
	case r.To == lifecycle.Checking:
		return msg + "; status check " + strconv.Itoa(r.Seq) + " enqueued", nil
	case r.Awaiting:
		return msg + "; outcome check " + strconv.Itoa(r.Payout.OutcomeSeq) + " enqueued: the workers follow the order to paid or failed", nil
	}
	return msg, nil
}

// resolveRefusal is what the console says of a resolution's error: a
// refusal shown to the operator, a fault, or nil (done; the next check
// may not be enqueued).
func resolveRefusal(batch, ext string, err error) error {
	var (
		conflict *ledger.ConflictError
		refused  *VerifyError
	)
	switch {
	case err == nil || errors.Is(err, ErrNextNotEnqueued):
		return nil
	case errors.As(err, &conflict):
		return ui.Refuse(fmt.Errorf("payout %s is %s, not needs review: nothing changed (only a payout that needs review can be resolved)",
			card.Scrub(ext), strings.ReplaceAll(string(conflict.Found), "_", " ")))
	case errors.As(err, &refused), errors.Is(err, ErrNoPSP), errors.Is(err, ledger.ErrFourEyes):
		return ui.Refuse(fmt.Errorf("not done: %w", err))
	case errors.Is(err, ledger.ErrNotFound):
		return ui.Refuse(fmt.Errorf("batch %s has no payout %s", batch, card.Scrub(ext)))
	case errors.Is(err, ledger.ErrBadResolution):
		return ui.Refuse(errors.New("not done: a decision needs the signed-in person and a note"))
	}
	return err
}

func label(s lifecycle.State) string { return strings.ReplaceAll(string(s), "_", " ") }

// typedDecision checks what a person typed into a decision form as the
// ledger will (internal/scrub): a note of at most scrub.MaxNote characters,
// an order id and a PSP status, none with a control character; the ledger
// stores them scrubbed.
func typedDecision(note, orderID, pspStatus string) error {
	if _, err := scrub.Note(note); err != nil {
		return err
	}
	if _, err := scrub.Field("PSP order id", orderID, scrub.MaxField); err != nil {
		return err
	}
	_, err := scrub.Field("PSP status", pspStatus, scrub.MaxField)
	return err
}
