package psp

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/shopspring/decimal"

	"github.com/acme/payout/internal/extid"
	"github.com/acme/payout/internal/money"
	"github.com/acme/payout/internal/scrub"
)

// MaxMessageLen bounds Result.Message (in bytes, cut on a rune boundary).
const MaxMessageLen = 300

// flexString decodes a JSON string or number as its text; any other JSON
// value decodes as "". The PSP documents its amounts and identifiers as
// strings but one sample sends numbers: accept both.
type flexString string

func (f *flexString) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	switch {
	case len(b) >= 2 && b[0] == '"' && bytes.IndexByte(b, '\\') < 0 && utf8.Valid(b[1:len(b)-1]):
		// The common case, without escapes: the decoder that called us has
		// already checked the literal, and valid UTF-8 decodes as itself.
		*f = flexString(b[1 : len(b)-1])
	case len(b) > 0 && b[0] == '"':
		var s string
		if err := json.Unmarshal(b, &s); err != nil {
			return err
		}
		*f = flexString(s)
	case len(b) > 0 && (b[0] == '-' || (b[0] >= '0' && b[0] <= '9')):
		*f = flexString(b)
	default:
		*f = ""
	}
	return nil
}

// withdrawalBody is the 200 body of a withdrawal create or status query.
// encoding/json matches field names case-insensitively and ignores unknown
// fields.
type withdrawalBody struct {
	Amount     flexString `json:"amount"`
	Status     flexString `json:"status"`
	ExternalID flexString `json:"externalId"`
	OrderID    flexString `json:"pspDepositOrderID"`
	// Not in the reference: where a PSP explains a failure. Read when
	// present, for the result file; never decisive.
	StatusReason  flexString `json:"statusReason"`
	FailureReason flexString `json:"failureReason"`
	Reason        flexString `json:"reason"`
	// Not in the reference either: when the status last changed (a
	// return's time). Kept as the PSP's text, scrubbed; never decisive.
	ReturnedAt      flexString `json:"returnedAt"`
	StatusChangedAt flexString `json:"statusChangedAt"`
	UpdatedAt       flexString `json:"updatedAt"`
}

// depositBody is the 200 body of a deposit create.
type depositBody struct {
	ExternalID     flexString `json:"externalId"`
	OrderStatus    flexString `json:"orderStatus"`
	PaymentDetails struct {
		Amount  flexString `json:"amount"`
		FormURL flexString `json:"formUrl"`
	} `json:"paymentDetails"`
}

// Classify turns one exchange with the PSP into a Result. It is the only
// place where answers are interpreted. status is 0 when no response was
// read; header and body are those of the response (either may be nil);
// transportErr is the error of the round trip or of reading the body; sent
// tells whether the request headers were written to a connection.
//
// For an op other than the three known ones, every answer is Ambiguous.
func Classify(op Operation, status int, header http.Header, body []byte, transportErr error, sent bool) Result {
	r, _ := classify(op, status, header, body, transportErr, sent)
	return r
}

// classify is Classify that also returns the decoded deposit body, for
// CreateDeposit.
func classify(op Operation, status int, header http.Header, body []byte, transportErr error, sent bool) (Result, *depositBody) {
	res := Result{Op: op, HTTPStatus: status, Sent: sent || status > 0}

	if status == 0 {
		// No response at all: only whether the request left decides.
		if transportErr == nil {
			transportErr = errors.New("no response")
		}
		if alert, ok := handshakeRefusal(transportErr); ok {
			// The PSP's TLS layer refused the handshake: nothing reached
			// its HTTP server, whether or not our client believed the
			// handshake done and wrote the request (TLS 1.3 clients
			// learn of a refused client certificate only then).
			res.Outcome = AuthFault
			res.Message = finish("TLS handshake refused by the PSP (client certificate, CA or TLS version?): " + alert)
			return res, nil
		}
		if res.Sent {
			res.Outcome = Ambiguous
			res.Message = finish("no answer after the request was sent: " + transportMessage(transportErr))
		} else {
			res.Outcome = RetryLater
			res.Message = finish("request not sent: " + transportMessage(transportErr))
		}
		return res, nil
	}

	prefix := "HTTP " + strconv.Itoa(status)
	if transportErr != nil {
		prefix += " (body unreadable: " + transportMessage(transportErr) + ")"
	}

	if status == http.StatusOK {
		if transportErr != nil {
			res.Outcome = Ambiguous
			res.Message = finish(prefix)
			return res, nil
		}
		return classifyOK(op, res, body)
	}

	res.Outcome = Ambiguous // 3xx, 423, >= 499 and anything the table does not name
	if status >= 300 && status < 400 {
		// Not followed (the client's CheckRedirect): an answer about
		// another path than the one asked, so nothing about our order.
		prefix += " (a redirect, not followed: the answer is about another path)"
	}
	if a, ok := lookupAnswer(op, status); ok {
		res.Outcome = a.Outcome
		prefix += a.Note
		if a.RetryAfter {
			res.RetryAfter = parseRetryAfter(header.Get("Retry-After"), time.Now())
		}
	}
	res.Message = finish(prefix + ": " + bodyMessage(status, body))
	return res, nil
}

// An Answer is one row of the PSP answer table: what an HTTP status other
// than 200 means for one kind of request (docs/design.md, "Outcome of a
// create" and "Outcome of a status check"). A 200 is read by classifyOK,
// no response at all by whether the request left.
type Answer struct {
	Ops        []Operation
	Statuses   []int
	Outcome    Outcome
	Note       string // added to the message after "HTTP <status>"
	RetryAfter bool   // the answer's Retry-After header is honoured
}

var creates = []Operation{OpWithdrawalCreate, OpDepositCreate}

// Answers is the PSP answer table. A status it does not name (423, 499
// and above, anything unexpected) is Ambiguous: it does not tell whether
// the order exists, so it is followed by status checks, never by a
// second create. A new row here is a new answer; TestAnswersTable checks
// that no status is named twice for one request.
var Answers = []Answer{
	{Ops: creates, Statuses: []int{http.StatusBadRequest, http.StatusUnprocessableEntity}, Outcome: Rejected},
	{Ops: creates, Statuses: []int{http.StatusUnauthorized, http.StatusForbidden}, Outcome: AuthFault},
	{Ops: creates, Statuses: []int{http.StatusNotFound, http.StatusMethodNotAllowed}, Outcome: AuthFault,
		Note: " on create (wrong base URL?)"},
	{Ops: creates, Statuses: []int{http.StatusTooManyRequests}, Outcome: RetryLater, RetryAfter: true},
	{Ops: []Operation{OpWithdrawalStatus}, Statuses: []int{http.StatusNotFound}, Outcome: NotFound},
	{Ops: []Operation{OpWithdrawalStatus}, Statuses: []int{http.StatusUnauthorized, http.StatusForbidden}, Outcome: AuthFault},
	{Ops: []Operation{OpWithdrawalStatus}, Statuses: []int{http.StatusTooManyRequests}, Outcome: RetryLater, RetryAfter: true},
}

// lookupAnswer is the row of Answers for op and status.
func lookupAnswer(op Operation, status int) (Answer, bool) {
	for _, a := range Answers {
		if slices.Contains(a.Ops, op) && slices.Contains(a.Statuses, status) {
			return a, true
		}
	}
	return Answer{}, false
}

// classifyOK handles a complete 200 answer.
func classifyOK(op Operation, res Result, body []byte) (Result, *depositBody) {
	switch op {
	case OpWithdrawalCreate, OpWithdrawalStatus:
		var b withdrawalBody
		if err := json.Unmarshal(body, &b); err != nil {
			res.Outcome = Ambiguous
			res.Message = finish("HTTP 200 with an unparsable body: " + bodyMessage(200, body))
			return res, nil
		}
		id, idOK := cleanID(string(b.OrderID))
		ext, _ := cleanID(string(b.ExternalID))
		amount, _ := cleanID(string(b.Amount))
		// A create must name the new order and a status answer the order
		// it describes: a 200 without the PSP's order id proves nothing.
		if !idOK || id == "" {
			res.Outcome = Ambiguous
			res.Mismatch = &Mismatch{Reasons: []MismatchReason{MismatchNoOrderID}, FoundExternalID: display(ext), FoundAmount: display(amount)}
			res.Message = finish("HTTP 200 without a usable order id (pspDepositOrderID), not proof that the order exists: " + bodyMessage(200, body))
			return res, nil
		}
		res.Outcome = Created
		reason := b.StatusReason
		if reason == "" {
			reason = b.FailureReason
		}
		if reason == "" {
			reason = b.Reason
		}
		res.Order = Order{OrderID: id, ExternalID: ext, Amount: amount, Status: finish(string(b.Status)), Reason: finish(string(reason)),
			ChangedAt: finish(string(firstOf(b.ReturnedAt, b.StatusChangedAt, b.UpdatedAt)))}
		return res, nil
	case OpDepositCreate:
		var b depositBody
		if err := json.Unmarshal(body, &b); err != nil {
			res.Outcome = Ambiguous
			res.Message = finish("HTTP 200 with an unparsable body: " + bodyMessage(200, body))
			return res, nil
		}
		ext, ok := cleanID(string(b.ExternalID))
		if !ok || ext == "" {
			res.Outcome = Ambiguous
			res.Message = finish("HTTP 200 without a usable order id: " + bodyMessage(200, body))
			return res, nil
		}
		amount, _ := cleanID(string(b.PaymentDetails.Amount))
		res.Outcome = Created
		res.Order = Order{OrderID: ext, ExternalID: ext, Amount: amount, Status: finish(string(b.OrderStatus))}
		return res, &b
	}
	res.Outcome = Ambiguous
	res.Message = finish("HTTP 200 to an unknown operation")
	return res, nil
}

// Expect is what a 200 answer about a withdrawal must show to prove that
// it describes our order. Empty fields (zero Amount) are not checked; the
// answer's fields are only compared when it gives them, except the order
// id, which every 200 must carry.
type Expect struct {
	ExternalID string       // ours; the answer's externalId, when given, must be the same text
	OrderID    string       // the PSP order id when known; the answer's must be the same text
	Amount     money.Amount // the answer's amount, when given, must be the same number ("10.5" == "10.50")
}

// MismatchReason names one way a 200 answer contradicts the Expect.
type MismatchReason string

// The reasons of a Mismatch.
const (
	MismatchNoOrderID  MismatchReason = "no_order_id" // the 200 carries no usable pspDepositOrderID
	MismatchExternalID MismatchReason = "external_id" // the answer names another externalId
	MismatchOrderID    MismatchReason = "order_id"    // the answer names another PSP order id
	MismatchAmount     MismatchReason = "amount"      // the amount differs numerically or does not parse
	MismatchAsked      MismatchReason = "asked"       // neither the answer's order id nor its externalId is the id asked
)

// Mismatch says why a 200 answer was not taken as proof of our order. The
// worker should raise an alert: the PSP may hold another order under our
// externalId, or answered about another order. The texts are for display:
// card numbers in them are masked and they are bounded, so an id that
// holds a long run of digits may appear masked.
type Mismatch struct {
	Reasons            []MismatchReason
	ExpectedExternalID string
	FoundExternalID    string
	ExpectedOrderID    string
	FoundOrderID       string
	ExpectedAmount     string
	FoundAmount        string
}

// Has reports whether r is among the reasons.
func (m *Mismatch) Has(r MismatchReason) bool {
	return m != nil && slices.Contains(m.Reasons, r)
}

// Check applies the expectation to a classified withdrawal answer: a
// Created Result that contradicts it becomes Ambiguous, with Mismatch set
// and a Message naming the expected and found values, and its Order is
// cleared (Order is only set on Created). A 200 without an order id is
// already Ambiguous; Check fills in the expected values of its Mismatch.
// Other Results are returned unchanged.
func (want Expect) Check(res Result) Result {
	if res.Outcome != Created {
		if res.Mismatch != nil && res.Mismatch.Has(MismatchNoOrderID) {
			m := *res.Mismatch
			want.fill(&m)
			res.Mismatch = &m
		}
		return res
	}
	o := res.Order
	var (
		reasons []MismatchReason
		parts   []string
	)
	if want.ExternalID != "" && o.ExternalID != "" && o.ExternalID != want.ExternalID {
		reasons = append(reasons, MismatchExternalID)
		parts = append(parts, fmt.Sprintf("externalId expected %q, found %q", display(want.ExternalID), display(o.ExternalID)))
	}
	if want.OrderID != "" && o.OrderID != want.OrderID {
		reasons = append(reasons, MismatchOrderID)
		parts = append(parts, fmt.Sprintf("order id expected %q, found %q", display(want.OrderID), display(o.OrderID)))
	}
	if !want.Amount.IsZero() && o.Amount != "" {
		if got, err := decimal.NewFromString(o.Amount); err != nil || !got.Equal(want.Amount.Decimal()) {
			reasons = append(reasons, MismatchAmount)
			parts = append(parts, fmt.Sprintf("amount expected %s, found %q", amountText(want.Amount), display(o.Amount)))
		}
	}
	if len(reasons) == 0 {
		return res
	}
	m := &Mismatch{Reasons: reasons, FoundExternalID: display(o.ExternalID), FoundOrderID: display(o.OrderID), FoundAmount: display(o.Amount)}
	want.fill(m)
	res.Outcome = Ambiguous
	res.Mismatch = m
	res.Order = Order{}
	res.Message = finish("HTTP 200 does not match our order: " + strings.Join(parts, "; "))
	return res
}

func (want Expect) fill(m *Mismatch) {
	m.ExpectedExternalID = display(want.ExternalID)
	m.ExpectedOrderID = display(want.OrderID)
	if !want.Amount.IsZero() {
		m.ExpectedAmount = amountText(want.Amount)
	}
}

// display makes an identifier safe to show in a Mismatch: card numbers
// masked, bounded.
func display(s string) string { return finish(s) }

// MaxIDLen bounds the identifiers and amounts taken from the PSP's answers.
const MaxIDLen = 200

// cleanID checks an identifier (or amount) taken from the PSP's body. It is
// kept exactly, NOT scrubbed: a UUID-like order id can hold a run of 12 or
// more digits, and a masked id would later look up nothing and let the
// payout be created twice. An id that is too long, not UTF-8 or holds
// control characters is refused ("", false); an absent one is ("", true).
func cleanID(s string) (string, bool) { return cleanText(s, MaxIDLen) }

func cleanText(s string, maxLen int) (string, bool) {
	s = strings.TrimSpace(s)
	if len(s) > maxLen || !utf8.ValidString(s) {
		return "", false
	}
	for _, r := range s {
		if r < ' ' || r == 0x7f || (r >= 0x80 && r < 0xa0) {
			return "", false
		}
	}
	return s, true
}

// parseRetryAfter reads a Retry-After header: delay-seconds or an HTTP date.
// Missing, malformed or past values give 0.
func parseRetryAfter(v string, now time.Time) time.Duration {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0
	}
	if n, err := strconv.ParseInt(v, 10, 64); err == nil {
		if n <= 0 {
			return 0
		}
		const maxSeconds = int64(24 * time.Hour / time.Second)
		if n > maxSeconds {
			n = maxSeconds
		}
		return time.Duration(n) * time.Second
	}
	if t, err := http.ParseTime(v); err == nil {
		if d := t.Sub(now); d > 0 {
			return d.Round(time.Second)
		}
	}
	return 0
}

// messageKeys are the fields of a JSON error body that usually hold the
// human-readable reason; the PSP's error body shape is not documented.
var messageKeys = []string{"message", "error", "detail", "title", "description", "errors"}

// bodyMessage extracts the PSP's reason from an error body.
func bodyMessage(status int, body []byte) string {
	body = bytes.TrimSpace(body)
	if len(body) == 0 {
		return http.StatusText(status)
	}
	if body[0] == '{' {
		var m map[string]json.RawMessage
		if json.Unmarshal(body, &m) == nil {
			for _, k := range messageKeys {
				for mk, raw := range m {
					if !strings.EqualFold(mk, k) {
						continue
					}
					var s string
					if json.Unmarshal(raw, &s) == nil {
						if s != "" {
							return s
						}
						continue
					}
					var buf bytes.Buffer
					if json.Compact(&buf, raw) == nil {
						return buf.String()
					}
				}
			}
		}
	}
	if len(body) > 4*MaxMessageLen {
		body = body[:4*MaxMessageLen]
	}
	return string(body)
}

// finish makes a text safe to show: valid UTF-8, no control characters, card
// numbers masked, bounded length (scrub.Text: whitespace collapsed before
// scrubbing, so that it cannot join digit groups afterwards, and scrubbing
// before cutting, so that a cut cannot shorten a card number below the
// length Scrub recognises). The token is taken out before: see
// Client.withhold and Client.redact.
func finish(s string) string { return scrub.Text(s, MaxMessageLen) }

// firstOf is the first of vs that is not empty.
func firstOf(vs ...flexString) flexString {
	for _, v := range vs {
		if v != "" {
			return v
		}
	}
	return ""
}

// handshakeAlerts are the TLS alerts (RFC 8446 section 6.2, RFC 5246
// section 7.2.2) a server sends while it refuses a handshake, before it
// has read any application data.
var handshakeAlerts = map[uint64]bool{
	40:  true, // handshake_failure
	42:  true, // bad_certificate
	43:  true, // unsupported_certificate
	44:  true, // certificate_revoked
	45:  true, // certificate_expired
	46:  true, // certificate_unknown
	48:  true, // unknown_ca
	49:  true, // access_denied
	70:  true, // protocol_version
	71:  true, // insufficient_security
	116: true, // certificate_required
}

// handshakeRefusal reports whether err is a handshake-refusing alert sent
// by the server, and its text. crypto/tls reports a received alert as a
// *net.OpError with Op "remote error" around its unexported alert type (a
// uint8).
func handshakeRefusal(err error) (string, bool) {
	var opErr *net.OpError
	if !errors.As(err, &opErr) || opErr.Op != "remote error" || opErr.Err == nil {
		return "", false
	}
	v := reflect.ValueOf(opErr.Err)
	if v.Kind() != reflect.Uint8 || !handshakeAlerts[v.Uint()] {
		return "", false
	}
	return opErr.Err.Error(), true
}

// transportMessage describes a transport error without the request URL.
// The kinds are told apart with errors.Is/As; only the text of the innermost
// error (from the net package, naming addresses, never headers) is kept.
func transportMessage(err error) string {
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err
	}
	var (
		dnsErr *net.DNSError
		opErr  *net.OpError
		tlsErr *tls.RecordHeaderError
		netErr net.Error
		certEr *tls.CertificateVerificationError
	)
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		return "timeout"
	case errors.Is(err, context.Canceled):
		return "canceled"
	case errors.As(err, &dnsErr):
		return "dns: " + dnsErr.Error()
	case errors.As(err, &certEr), errors.As(err, &tlsErr):
		if msg := err.Error(); !strings.HasPrefix(msg, "tls: ") {
			return "tls: " + msg
		}
		return err.Error()
	case errors.As(err, &opErr) && opErr.Op == "dial":
		return "dial: " + opErr.Error()
	case errors.As(err, &netErr) && netErr.Timeout():
		return "timeout: " + err.Error()
	}
	return fmt.Sprint(err)
}

// answerFor holds a classified status answer to the path that was asked:
// a 404 for an id that a front end in front of the PSP may route to
// another path (extid.PathProblem: "..", "a/b", ...) says nothing about
// our order: Ambiguous, never NotFound (issue 38: "..", asked through
// nginx, reached the path above it and its 404 let the payout be created
// twice). A redirect (3xx, never followed) is Ambiguous already in
// classify; a 200 about another order is caught by Expect.Check, or by
// namesAsked.
func answerFor(id string, res Result) Result {
	if res.Outcome == NotFound {
		if why := extid.PathProblem(id); why != "" {
			res.Outcome = Ambiguous
			res.Message = finish("HTTP 404 for an id a web server may route to another path (the id " + why + "): not proof that the order is absent")
		}
	}
	return res
}

// namesAsked makes a 200 whose order id and externalId are both other
// than the id asked (an answer about another order, or about no order the
// body names) Ambiguous, with a Mismatch.
func namesAsked(id string, res Result) Result {
	o := res.Order
	if res.Outcome != Created || o.OrderID == id || o.ExternalID == id {
		return res
	}
	res.Outcome = Ambiguous
	res.Order = Order{}
	res.Mismatch = &Mismatch{Reasons: []MismatchReason{MismatchAsked}, ExpectedExternalID: display(id),
		FoundExternalID: display(o.ExternalID), FoundOrderID: display(o.OrderID), FoundAmount: display(o.Amount)}
	res.Message = finish(fmt.Sprintf("HTTP 200 that does not name the id asked: asked for %q, found order id %q, externalId %q",
		display(id), display(o.OrderID), display(o.ExternalID)))
	return res
}
