package operator

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/acme/payout/internal/ledger"
	"github.com/acme/payout/internal/lifecycle"
	"github.com/acme/payout/internal/queue"
	"github.com/acme/payout/internal/scrub"
)

// Resolution is a person's decision on a payout in needs_review: To is
// checking (a recheck), created (with the PSP's OrderID) or rejected.
type Resolution struct {
	To      lifecycle.State
	OrderID string
	// PSPStatus is the order status the person read at the PSP (checked
	// as typed; the status the PSP answers is recorded).
	PSPStatus string
	Who       ledger.Resolution
	// FourEyes is the deployment's policy as the resolving program knows
	// it (payout resolve --four-eyes, payout ui --four-eyes: the variable
	// PAYOUT_FOUR_EYES), as for an approval: with it, or on a batch that
	// records four-eyes (ledger.Batch.FourEyes), marking created or
	// rejected needs a second person (ledger.Resolution.FourEyes).
	FourEyes bool
}

// ErrNextNotEnqueued wraps the error of a resolution that was recorded but
// whose next task (the status check of a recheck, the outcome check of a
// payout marked created) could not be enqueued: the workers' reconciler
// enqueues it.
var ErrNextNotEnqueued = errors.New("resolved, but its next check was not enqueued (the workers' reconciler will)")

// Resolve carries out d on payout ext of batch, as `payout resolve` and the
// console do. Marking created or rejected asks the PSP first (Verify,
// through c) and is refused with a *VerifyError when the PSP contradicts
// it or cannot confirm; a payout not in needs_review is refused before the
// PSP is asked (*ledger.ConflictError). After the ledger moved the payout,
// its next task is enqueued: the status check of a recheck, or outcome
// check 1 of a payout marked created, so that the workers follow its order
// to paid or failed (Resolved.Awaiting). The order id and PSP status word
// recorded are the ones the PSP gave: the id exactly as the PSP answered
// it (a numeric id that passes the Luhn check is not masked), while the
// name and note are scrubbed as everything a person types.
//
// Under four-eyes (d.FourEyes, or the batch records it) marking created
// or rejected needs two people: the first one's decision, once the PSP
// confirmed it, is recorded as the payout's proposal and nothing moves
// (Resolved.Proposed); a second person taking the same decision (the PSP
// asked again) carries it out; the same person is refused
// (ledger.ErrSamePerson, matching ledger.ErrFourEyes).
//
// A refusal is a *Refusal (ErrNotFound, ErrWrongState, ErrUnconfirmed,
// ErrNeedsSecondPerson, ErrIncomplete); a decision recorded whose next
// check was not enqueued returns its result and an error matching
// ErrNextNotEnqueued.
func (a *Actions) Resolve(ctx context.Context, c StatusChecker, batch, ext string, d Resolution) (ResolvedPayout, error) {
	out := ResolvedPayout{Batch: batch, ExternalID: ext}
	d.Who.By, d.Who.Note, d.OrderID = strings.TrimSpace(d.Who.By), strings.TrimSpace(d.Who.Note), strings.TrimSpace(d.OrderID)
	ctx, err := a.allow(ctx, "resolve", resolveAction(d), d.Who.By)
	if err != nil {
		return out, err
	}
	if err := who("resolve", d.Who.By, d.Who.Note); err != nil {
		return out, err
	}
	if err := typedDecision(d.Who.Note, d.OrderID, d.PSPStatus); err != nil {
		return out, refuse("resolve", ErrIncomplete, err, typedWords(err))
	}
	switch {
	case d.To == lifecycle.Created && d.OrderID == "":
		return out, refuse("resolve", ErrIncomplete, nil, missingOrderWords())
	case d.To != lifecycle.Checking && d.To != lifecycle.Created && d.To != lifecycle.Rejected:
		return out, refuse("resolve", ErrIncomplete, nil, unknownDecisionWords(string(d.To)))
	}
	r, err := a.resolve(ctx, c, batch, ext, d)
	out.Resolved = r
	if err == nil || errors.Is(err, ErrNextNotEnqueued) {
		a.logResolved(out)
	}
	if errors.Is(err, ErrNextNotEnqueued) {
		out.Partly = err
		return out, err
	}
	return out, classify("resolve", batch, ext, err)
}

// logResolved logs a resolution carried out, or proposed.
func (a *Actions) logResolved(r ResolvedPayout) {
	if p := r.Payout.Proposal; r.Proposed && p != nil {
		a.Log.Info().Str("batch", r.Batch).Str("externalId", r.ExternalID).Str("proposed", string(p.To)).
			Str("by", p.By).Msg("payout resolution proposed, awaiting a second person (four-eyes)")
		return
	}
	a.Log.Info().Str("batch", r.Batch).Str("externalId", r.ExternalID).Str("from", string(r.From)).Str("to", string(r.To)).
		Str("by", r.Payout.ResolvedBy).Str("proposed_by", r.ProposedBy).Msg("payout resolved by an operator")
}

// resolve is Resolve once the decision is complete.
func (a *Actions) resolve(ctx context.Context, c StatusChecker, batch, ext string, d Resolution) (ledger.Resolved, error) {
	l := a.Ledger.As(d.Who.By)
	if d.To == lifecycle.Checking {
		r, err := l.Recheck(ctx, batch, ext, d.Who)
		return a.enqueueNext(ctx, r, err)
	}
	pay, err := l.Get(ctx, batch, ext)
	if err != nil {
		return ledger.Resolved{}, err
	}
	if pay.State != lifecycle.NeedsReview {
		return ledger.Resolved{}, fmt.Errorf("resolve %s: %w", ext, &ledger.ConflictError{ExternalID: ext, Found: pay.State})
	}
	if !d.FourEyes {
		b, err := l.Batch(ctx, batch)
		if err != nil {
			return ledger.Resolved{}, err
		}
		d.FourEyes = b.FourEyes
	}
	d.Who.FourEyes = d.FourEyes
	order, err := Verify(ctx, c, pay, d.To, d.OrderID)
	if err != nil {
		return ledger.Resolved{}, err
	}
	if d.To == lifecycle.Created {
		// The order id recorded is the PSP's, as it confirmed it: the
		// workers ask the PSP for that id (never a masked copy of it).
		r, err := l.ResolveAsConfirmed(ctx, batch, ext, order, d.Who)
		return a.enqueueNext(ctx, r, err)
	}
	return l.ResolveAsRejected(ctx, batch, ext, d.Who)
}

// enqueueNext enqueues the task a resolution r makes due, if any.
func (a *Actions) enqueueNext(ctx context.Context, r ledger.Resolved, err error) (ledger.Resolved, error) {
	if err != nil {
		return r, err
	}
	s, ok := nextStep(r)
	if !ok {
		return r, nil
	}
	if _, err := a.Queue.Add(ctx, s); err != nil {
		return r, fmt.Errorf("%w: %w", ErrNextNotEnqueued, err)
	}
	return r, nil
}

// NextTask is the id of the task a resolution made due ("" if none).
func NextTask(r ledger.Resolved) string {
	if s, ok := nextStep(r); ok {
		return s.ID()
	}
	return ""
}

// nextStep is the step a resolution made due (queue.NextStep of the
// payout as it stands after it).
func nextStep(r ledger.Resolved) (queue.Step, bool) {
	p := r.Payout
	if r.To == lifecycle.Checking {
		p.Seq = r.Seq // the check the resolution scheduled
	}
	return queue.NextStep(p)
}

// typedDecision checks what a person typed into a decision as the ledger
// will (internal/scrub): a note of at most scrub.MaxNote characters, an
// order id and a PSP status, none with a control character; the ledger
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
