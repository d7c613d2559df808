package ui

import (
	"context"
	"fmt"
	"net/http"
	"strings"
)

// The review before an approval: GET /batches/{id}/approve shows what a
// person is about to let go (the rule that holds the batch, its totals,
// per destination type when the Console can say, its largest rows and the
// first rows as read, destinations masked) with a note field and a
// confirm button; only that form's POST (confirm=yes) approves. A POST
// without it, the one-click Approve of old pages included, is refused and
// points to the review.

// reviewLargest and reviewSample are how many rows the review shows: the
// largest amounts, and the first rows of the file.
const (
	reviewLargest = 5
	reviewSample  = 10
)

// confirmField is the approve form's confirmation: only the review page
// sends it.
const confirmField = "confirm"

// DestinationTotals is implemented by a Console that can total a batch's
// payouts per destination type ("card", "telecom"): the approval review
// shows them.
type DestinationTotals interface {
	DestinationTotals(ctx context.Context, batch string) ([]TypeTotal, error)
}

// TypeTotal is the count and sum of a batch's payouts of one destination
// type.
type TypeTotal struct {
	Type   string
	N      int
	Amount string // with the batch's decimals
}

// ApprovalRules is implemented by Controls that check more than the
// four-eyes rule on an approval (a daily limit): each line says one rule
// for a person.
type ApprovalRules interface {
	ApprovalRules() []string
}

type approvePage struct {
	consolePage
	Batch   BatchDetail
	Approve approveOffer
	Rules   []string
	ByType  []TypeTotal
	Largest []PayoutView
	Sample  []PayoutView
	// Info names the file's informational columns (notes, recipient...),
	// shown with the rows.
	Info []string
}

// approveReview is the page a person reads before approving a batch.
func (h *consoleHandlers) approveReview(w http.ResponseWriter, r *http.Request) {
	id, b, ok := h.consoleBatch(w, r)
	if !ok {
		return
	}
	p := approvePage{consolePage: h.base(r, "Approve "+b.File), Batch: b, Approve: h.approveOffer(r, b.BatchView),
		Rules: h.rules(b), Info: b.InfoColumns}
	largest, err := h.console.Payouts(r.Context(), id, PayoutQuery{Sort: SortAmountDesc, Limit: reviewLargest})
	if err != nil {
		h.consoleErr(w, r, err)
		return
	}
	sample, err := h.console.Payouts(r.Context(), id, PayoutQuery{Sort: SortLine, Limit: reviewSample})
	if err != nil {
		h.consoleErr(w, r, err)
		return
	}
	p.Largest, p.Sample = largest.Rows, sample.Rows
	if dt, ok := h.console.(DestinationTotals); ok {
		if p.ByType, err = dt.DestinationTotals(r.Context(), id); err != nil {
			h.consoleErr(w, r, err)
			return
		}
	}
	w.Header().Set("Cache-Control", "no-store")
	h.renderConsole(w, r, "approve", p)
}

// rules says, for a person, the approval rules that apply to b.
func (h *consoleHandlers) rules(b BatchDetail) []string {
	var out []string
	if b.WaitReason != "" {
		out = append(out, "Why it waits for approval: "+b.WaitReason+".")
	} else {
		out = append(out, "It waits for a person's approval.")
	}
	if h.fourEyes || b.FourEyes {
		who := "the person who loaded it"
		if b.LoadedBy != "" {
			who += " (" + b.LoadedBy + ")"
		}
		out = append(out, "Four-eyes: a second person must approve it; "+who+" may not.")
	}
	if ar, ok := h.controls.(ApprovalRules); ok {
		out = append(out, ar.ApprovalRules()...)
	}
	return out
}

// approve approves after the review: the form's confirmation and its
// optional note (checked by the command, package operator).
func (h *batchHandlers) approve(r *http.Request, id, by string) (string, error) {
	if r.PostFormValue(confirmField) != "yes" {
		return "", Refuse(fmt.Errorf("not approved: review the batch first, then confirm on its approval page (/batches/%s/approve)", id))
	}
	return h.controls.Approve(r.Context(), id, by, strings.TrimSpace(r.PostFormValue("note")))
}
