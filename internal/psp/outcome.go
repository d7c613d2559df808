package psp

import "strings"

// OrderOutcome is what an order's status word says of the money.
type OrderOutcome int

// The outcomes of a status word.
const (
	OrderPending OrderOutcome = iota // not final yet (Created, Processing, anything unknown)
	OrderPaid                        // the money was sent
	OrderFailed                      // it will not be paid
)

// Default status words. The reference shows only "Created"; these cover
// the words payment services commonly use (PayPal, Wise, Adyen and others)
// and are an assumption, configurable with --psp-paid-statuses and
// --psp-failed-statuses. A word in neither list keeps the order pending.
var (
	DefaultPaidStatuses   = []string{"paid", "success", "successful", "succeeded", "completed", "complete", "done", "sent", "settled", "executed", "confirmed"}
	DefaultFailedStatuses = []string{"failed", "failure", "declined", "rejected", "refused", "cancelled", "canceled", "error", "expired", "returned", "reversed", "blocked", "bounced"}
)

// StatusWords classifies order status words, case-insensitively and
// ignoring surrounding space ("PAID" is "paid"; "paid_out" is not).
type StatusWords struct {
	paid, failed map[string]bool
}

// NewStatusWords builds the classifier; a word in both lists is refused.
func NewStatusWords(paid, failed []string) (StatusWords, error) {
	w := StatusWords{paid: map[string]bool{}, failed: map[string]bool{}}
	for _, p := range paid {
		if k := normWord(p); k != "" {
			w.paid[k] = true
		}
	}
	for _, f := range failed {
		k := normWord(f)
		if k == "" {
			continue
		}
		if w.paid[k] {
			return StatusWords{}, &ConfigError{Msg: "status word " + f + " is both paid and failed"}
		}
		w.failed[k] = true
	}
	return w, nil
}

// Outcome classifies one status word.
func (w StatusWords) Outcome(status string) OrderOutcome {
	k := normWord(status)
	switch {
	case w.paid[k]:
		return OrderPaid
	case w.failed[k]:
		return OrderFailed
	}
	return OrderPending
}

func normWord(s string) string { return strings.ToLower(strings.TrimSpace(s)) }

// ConfigError is a configuration mistake of this package.
type ConfigError struct{ Msg string }

func (e *ConfigError) Error() string { return "psp: " + e.Msg }

// Is makes errors.Is(err, ErrConfig) match.
func (e *ConfigError) Is(target error) bool { return target == ErrConfig }
