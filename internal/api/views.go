package api

import (
	"encoding/json"
	"net/http"
	"net/url"
	"time"

	"github.com/acme/payout/internal/lifecycle"
	"github.com/acme/payout/internal/ui"
)

// The JSON of the API (openapi.yaml's schemas). Amounts are decimal
// strings with the batch's decimals; times RFC 3339 UTC; card numbers
// masked (the console's views already are).

// StateTotal is a count and an amount.
type StateTotal struct {
	Count  int64  `json:"count"`
	Amount string `json:"amount"`
}

// Approval is a batch's approval.
type Approval struct {
	FourEyes   bool   `json:"fourEyes"`
	WaitReason string `json:"waitReason,omitempty"`
	// Rule is the approval rule the batch was held under, as recorded at
	// load; Progress where its approvals stand ("1 of 2 approvals:
	// alice"); Approvers who approved it so far, in order.
	Rule      string   `json:"rule,omitempty"`
	Progress  string   `json:"progress,omitempty"`
	Approvers []string `json:"approvers,omitempty"`
	DecidedBy string   `json:"decidedBy,omitempty"`
	DecidedAt *string  `json:"decidedAt,omitempty"`
	Note      string   `json:"note,omitempty"`
}

// Control is the control totals a batch was checked against at creation.
type Control struct {
	ExpectRows  int    `json:"expectRows,omitempty"`
	ExpectTotal string `json:"expectTotal,omitempty"`
}

// Batch is a batch.
type Batch struct {
	ID              string                `json:"id"`
	File            string                `json:"file"`
	LoadedAt        string                `json:"loadedAt"`
	LoadedBy        string                `json:"loadedBy,omitempty"`
	Phase           string                `json:"phase"`
	PhaseLabel      string                `json:"phaseLabel,omitempty"`
	PhaseReason     string                `json:"phaseReason,omitempty"`
	LedgerPhase     string                `json:"ledgerPhase,omitempty"`
	Approval        Approval              `json:"approval"`
	Rows            int64                 `json:"rows"`
	Total           string                `json:"total"`
	Totals          map[string]StateTotal `json:"totals"`
	AwaitingOutcome StateTotal            `json:"awaitingOutcome"`
	Control         *Control              `json:"control,omitempty"`
	Warnings        []string              `json:"warnings,omitempty"`
	Links           Links                 `json:"links"`
}

// Links are a batch's URLs.
type Links struct {
	Self    string `json:"self"`
	Payouts string `json:"payouts"`
}

// rfc3339 is t in UTC ("" for the zero time).
func rfc3339(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format(time.RFC3339)
}

func optTime(t time.Time) *string {
	if t.IsZero() {
		return nil
	}
	s := rfc3339(t)
	return &s
}

// batchPath is a batch's URL path.
func batchPath(id string) string { return "/api/v1/batches/" + url.PathEscape(id) }

// batchOf is the API's view of the console's batch detail.
func batchOf(d ui.BatchDetail) Batch {
	b := Batch{ID: d.ID, File: d.File, LoadedAt: rfc3339(d.LoadedAt), LoadedBy: d.LoadedBy, Phase: d.PhaseCode,
		PhaseLabel: d.PhaseLabel, PhaseReason: d.PhaseReason, LedgerPhase: d.Phase, Rows: d.Rows, Total: d.AmountTotal,
		Approval: Approval{FourEyes: d.FourEyes, WaitReason: d.WaitReason, DecidedBy: d.DecidedBy, DecidedAt: optTime(d.DecidedAt), Note: d.Note,
			Rule: d.ApprovalRule, Progress: d.Approvals, Approvers: d.Approvers},
		Totals: map[string]StateTotal{}, AwaitingOutcome: StateTotal{Count: d.Awaiting, Amount: d.AmountAwaiting},
		Links: Links{Self: batchPath(d.ID), Payouts: batchPath(d.ID) + "/payouts"}}
	if b.Phase == "" {
		b.Phase = d.Phase
	}
	for _, st := range lifecycle.States {
		amt := d.Amounts[string(st)]
		if amt == "" {
			amt = "0"
		}
		b.Totals[string(st)] = StateTotal{Count: d.Counts[string(st)], Amount: amt}
	}
	return b
}

// batchOfView is the API's view of a batch in a list (no per-state
// amounts but those the list has).
func batchOfView(v ui.BatchView) Batch {
	d := ui.BatchDetail{BatchView: v, Amounts: map[string]string{
		string(lifecycle.Paid): v.AmountPaid, string(lifecycle.Failed): v.AmountFailed, string(lifecycle.Created): v.AmountCreated}}
	return batchOf(d)
}

// HistoryEntry is one entry of a payout's audit trail.
type HistoryEntry struct {
	Time    string `json:"time"`
	Actor   string `json:"actor"`
	From    string `json:"from,omitempty"`
	To      string `json:"to,omitempty"`
	Note    string `json:"note,omitempty"`
	Details string `json:"details,omitempty"`
}

// Payout is a payout.
type Payout struct {
	BatchID         string            `json:"batchId"`
	File            string            `json:"file,omitempty"`
	Line            int               `json:"line"`
	ExternalID      string            `json:"externalId"`
	Amount          string            `json:"amount"`
	Destination     string            `json:"destination"`
	DestinationType string            `json:"destinationType,omitempty"`
	State           string            `json:"state"`
	AwaitingOutcome bool              `json:"awaitingOutcome"`
	PSPOrderID      string            `json:"pspOrderId,omitempty"`
	PSPStatus       string            `json:"pspStatus,omitempty"`
	Reason          string            `json:"reason,omitempty"`
	Attempts        int               `json:"attempts"`
	ResolvedBy      string            `json:"resolvedBy,omitempty"`
	Resolution      string            `json:"resolution,omitempty"`
	ResolvedAt      *string           `json:"resolvedAt,omitempty"`
	UpdatedAt       *string           `json:"updatedAt,omitempty"`
	Proposal        string            `json:"proposal,omitempty"`
	Info            map[string]string `json:"info,omitempty"`
	History         []HistoryEntry    `json:"history,omitempty"`
}

// payoutOf is the API's view of the console's payout.
func payoutOf(v ui.PayoutView) Payout {
	p := Payout{BatchID: v.Batch, File: v.File, Line: v.Line, ExternalID: v.ExternalID, Amount: v.Amount, Destination: v.Destination,
		DestinationType: v.DestinationType, State: v.State, AwaitingOutcome: v.Awaiting, PSPOrderID: v.OrderID, PSPStatus: v.PSPStatus,
		Reason: v.Reason, Attempts: v.Attempts, ResolvedBy: v.ResolvedBy, Resolution: v.Resolution,
		ResolvedAt: optTime(v.ResolvedAt), UpdatedAt: optTime(v.UpdatedAt), Proposal: v.Proposal}
	for _, iv := range v.Info {
		if iv.Value == "" {
			continue
		}
		if p.Info == nil {
			p.Info = map[string]string{}
		}
		p.Info[iv.Column] = iv.Value
	}
	return p
}

func historyOf(hs []ui.AuditView) []HistoryEntry {
	out := make([]HistoryEntry, 0, len(hs))
	for _, h := range hs {
		out = append(out, HistoryEntry{Time: rfc3339(h.Time), Actor: h.Actor, From: h.From, To: h.To, Note: h.Note, Details: h.Details})
	}
	return out
}

// Done is an action's answer.
type Done struct {
	Message  string `json:"message"`
	Complete bool   `json:"complete"`
}

// writeJSON answers v with status.
func writeJSON(w http.ResponseWriter, status int, v any) error {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	return json.NewEncoder(w).Encode(v)
}
