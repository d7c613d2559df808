package api

import (
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"strings"

	"github.com/acme/payout/internal/card"
	"github.com/acme/payout/internal/operator"
)

// TypeBase begins the type URI of every problem: the kinds are the
// anchors of docs/api.md's "Errors" section, stable once published.
const TypeBase = "https://github.com/acme/payout/blob/main/docs/api.md#problem-"

// The kinds of problem, each with one type URI (TypeBase + kind) and one
// HTTP status.
const (
	KindBadRequest       = "bad-request"            // 400: the request is not what the spec says
	KindIncomplete       = "incomplete"             // 400: who, why or what is missing (operator.ErrIncomplete)
	KindUnauthorized     = "unauthorized"           // 401: no token, or an unknown or revoked one
	KindForbidden        = "forbidden"              // 403: the token's role may not take this action
	KindFourEyes         = "four-eyes"              // 403: needs a second identity (operator.ErrNeedsSecondPerson)
	KindNotFound         = "not-found"              // 404
	KindWrongState       = "wrong-state"            // 409: not in a state the command acts on
	KindInProgress       = "in-progress"            // 409: the first request with this Idempotency-Key still runs
	KindBusy             = "busy"                   // 409: another loader loads the same content right now
	KindUnconfirmed      = "psp-unconfirmed"        // 409: the PSP contradicts the decision or cannot confirm it
	KindRolledBack       = "ledger-rolled-back"     // 409: the ledger went back in time
	KindTooLarge         = "too-large"              // 413: the body is over the limit
	KindUnsupportedMedia = "unsupported-media"      // 415: not application/json (a create: nor text/csv, nor XLSX)
	KindRefusedItems     = "refused-items"          // 422: the batch's items break the intake rules; nothing loaded
	KindKeyReused        = "idempotency-key-reused" // 422: the key was used with another body
	KindOverLimit        = "over-limit"             // 422: daily limit or amount ceiling
	KindRateLimited      = "rate-limited"           // 429: the token's request rate
	KindInternal         = "internal"               // 500: a fault; the log has it
)

// statusOf is the HTTP status of each kind.
var statusOf = map[string]int{
	KindBadRequest: 400, KindIncomplete: 400, KindUnauthorized: 401, KindForbidden: 403, KindFourEyes: 403,
	KindNotFound: 404, KindWrongState: 409, KindInProgress: 409, KindBusy: 409, KindUnconfirmed: 409,
	KindRolledBack: 409, KindTooLarge: 413, KindUnsupportedMedia: 415, KindRefusedItems: 422, KindKeyReused: 422,
	KindOverLimit: 422, KindRateLimited: 429, KindInternal: 500,
}

// Problem is an RFC 9457 problem details object.
type Problem struct {
	Type     string      `json:"type"`
	Title    string      `json:"title"`
	Status   int         `json:"status"`
	Detail   string      `json:"detail,omitempty"`
	Instance string      `json:"instance,omitempty"`
	Errors   []ItemError `json:"errors,omitempty"`
	More     int         `json:"more,omitempty"`
	// retryAfter, on a 429, is the Retry-After header in seconds.
	retryAfter int
}

// ItemError is one problem of a batch's items: the item's index (nil for
// the request as a whole) and the field; or, for an uploaded file, the
// line (a workbook's row), the column (a canonical column name, or
// header, row, file) and in a workbook the sheet and the cell.
type ItemError struct {
	Index  *int   `json:"index,omitempty"`
	Field  string `json:"field,omitempty"`
	Line   int    `json:"line,omitempty"`
	Column string `json:"column,omitempty"`
	Sheet  string `json:"sheet,omitempty"`
	Cell   string `json:"cell,omitempty"`
	Detail string `json:"detail"`
}

// titles are the problem titles, one per kind.
var titles = map[string]string{
	KindBadRequest: "Bad request", KindIncomplete: "Incomplete command", KindUnauthorized: "Unauthorized",
	KindForbidden: "Forbidden", KindFourEyes: "Needs a second identity", KindNotFound: "Not found",
	KindWrongState: "Not in a state the command acts on", KindInProgress: "Request in progress",
	KindBusy: "Being loaded", KindUnconfirmed: "Not confirmed by the PSP", KindRolledBack: "Ledger went back in time",
	KindTooLarge: "Request body too large", KindUnsupportedMedia: "Unsupported media type",
	KindRefusedItems: "Items refused", KindKeyReused: "Idempotency-Key reused with another body",
	KindOverLimit: "Over a limit", KindRateLimited: "Too many requests", KindInternal: "Internal error",
}

// newProblem is a problem of kind with detail, card-like numbers masked.
func newProblem(kind, detail string) *Problem {
	return &Problem{Type: TypeBase + kind, Title: titles[kind], Status: statusOf[kind], Detail: card.Scrub(detail)}
}

// Error makes a *Problem an error.
func (p *Problem) Error() string { return p.Title + ": " + p.Detail }

// write sends p as application/problem+json.
func (p *Problem) write(w http.ResponseWriter) {
	h := w.Header()
	h.Set("Content-Type", "application/problem+json")
	h.Set("Cache-Control", "no-store")
	if p.retryAfter > 0 {
		h.Set("Retry-After", strconv.Itoa(p.retryAfter))
	}
	if rec, ok := w.(*recorder); ok {
		rec.kind = strings.TrimPrefix(p.Type, TypeBase)
	}
	w.WriteHeader(p.Status)
	_ = json.NewEncoder(w).Encode(p)
}

// refusalKinds maps the operator's refusal kinds to problem kinds.
var refusalKinds = []struct {
	err  error
	kind string
}{
	{operator.ErrForbidden, KindForbidden},
	{operator.ErrNotFound, KindNotFound},
	{operator.ErrWrongState, KindWrongState},
	{operator.ErrNeedsSecondPerson, KindFourEyes},
	{operator.ErrOverLimit, KindOverLimit},
	{operator.ErrUnconfirmed, KindUnconfirmed},
	{operator.ErrIncomplete, KindIncomplete},
	{operator.ErrRolledBack, KindRolledBack},
}

// refusalProblem is the problem of an operator refusal (a *Refusal), its
// words as the detail; ok is false for any other error.
func refusalProblem(err error) (*Problem, bool) {
	if !errors.Is(err, operator.ErrRefused) {
		return nil, false
	}
	for _, k := range refusalKinds {
		if errors.Is(err, k.err) {
			return newProblem(k.kind, err.Error()), true
		}
	}
	return newProblem(KindWrongState, err.Error()), true
}
