// Package psp is the typed HTTP client of the payment service (PSP): creating
// withdrawal orders, querying their status and creating deposit orders, and
// the one place where every PSP answer is classified into an Outcome.
//
// The classification follows the outcome tables of docs/design.md. Its central
// distinction is between answers that say what happened (Created, Rejected,
// NotFound), faults where provably nothing reached the PSP (RetryLater), and
// answers that do not tell whether the order exists (Ambiguous): after an
// Ambiguous create the caller must check the status, never create again.
//
// The bearer token and full card numbers never appear in an error, a log
// line or a Result's Message.
package psp

import (
	"time"

	"github.com/acme/payout/internal/money"
)

// Operation names a PSP call, for classification, logs and metrics.
type Operation string

// The operations of the PSP API this client speaks.
const (
	OpWithdrawalCreate Operation = "withdrawal_create"
	OpWithdrawalStatus Operation = "withdrawal_status"
	OpDepositCreate    Operation = "deposit_create"
)

// API paths, relative to the base URL.
const (
	PathWithdrawalCreate = "/api/v1/integration/bridge/withdrawal-order"
	PathWithdrawalStatus = "/api/v1/integration/bridge/withdrawal-order/" // + {id}
	PathDepositCreate    = "/api/v1/integration/deposit-order/"
)

// Outcome is what an answer of the PSP means for the payout.
type Outcome int

const (
	// Created: the order exists (create: 200 with a parsable body; status:
	// 200).
	Created Outcome = iota + 1
	// Rejected: the PSP refused the request (400, 422 on create). Final.
	Rejected
	// AuthFault: the token or the base URL is wrong (401, 403; 404 and 405 on
	// create). Nothing was created; the queue must be paused until an
	// operator acts.
	AuthFault
	// RetryLater: the PSP provably did not process the request (429, or the
	// request never left this process: dial, DNS or TLS error). The same
	// request may be sent again after a backoff.
	RetryLater
	// Ambiguous: the request may or may not have created an order (423, 499
	// and above, any other unexpected status, a timeout or a dropped
	// connection after the request was written, an unparsable 200). After a
	// create, check the status; after a status query, query again later.
	Ambiguous
	// NotFound: a status query answered 404.
	NotFound
)

func (o Outcome) String() string {
	switch o {
	case Created:
		return "created"
	case Rejected:
		return "rejected"
	case AuthFault:
		return "auth_fault"
	case RetryLater:
		return "retry_later"
	case Ambiguous:
		return "ambiguous"
	case NotFound:
		return "not_found"
	}
	return "unknown"
}

// Property is one entry of the "properties" array of a withdrawal order.
type Property struct {
	Key   string `json:"key"`
	Value string `json:"value"`
}

// Property keys of a withdrawal destination.
const (
	KeyCardNumber      = "cardNumber"
	KeyTelecomOperator = "telecomOperator"
)

// WithdrawalRequest is a withdrawal order to create.
type WithdrawalRequest struct {
	ExternalID string
	Amount     money.Amount
	Properties []Property
}

// Order is what the PSP says about an order. OrderID, ExternalID and Amount
// are kept exactly as the PSP sent them (checked for length and control
// characters, never masked: an altered id would look up nothing); Status is
// display text, scrubbed like Message.
type Order struct {
	OrderID    string // pspDepositOrderID in the PSP's body
	ExternalID string
	Amount     string
	Status     string
	// Reason is why an order failed, when the answer says (statusReason,
	// failureReason or reason: the reference shows no such field).
	Reason string
	// ChangedAt is when the PSP says the status last changed, as it wrote
	// it (returnedAt, statusChangedAt or updatedAt: not in the reference),
	// scrubbed like Status; "" when it does not say.
	ChangedAt string
}

// Result is the classified answer to one PSP call.
type Result struct {
	Op         Operation
	Outcome    Outcome
	HTTPStatus int           // 0 when no response was read
	Order      Order         // set when Outcome is Created
	Message    string        // human-readable reason; card numbers scrubbed, never the token
	RetryAfter time.Duration // from a Retry-After header, if any
	Sent       bool          // the request headers were written to the connection
	Duration   time.Duration
	// Mismatch is set when a 200 answer was not taken as proof of our
	// order (no order id, or another externalId, order id or amount than
	// expected): Outcome is then Ambiguous, and the worker should alert.
	Mismatch *Mismatch
	// ByExternalID: the status query named the order by our externalId,
	// not by the PSP's order id (CheckWithdrawal). A 404 to such a query
	// may only mean the PSP does not look orders up that way.
	ByExternalID bool
}
