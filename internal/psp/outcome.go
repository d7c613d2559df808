package psp

import (
	"strings"
	"unicode"

	"golang.org/x/text/cases"
	"golang.org/x/text/unicode/norm"
)

// OrderOutcome is what an order's status word says of the money.
type OrderOutcome int

// The outcomes of a status word.
const (
	OrderPending OrderOutcome = iota // not final yet (Created, Processing, anything unknown)
	OrderPaid                        // the money was sent
	OrderFailed                      // it will not be paid
	// OrderReturned: the money came back after it was sent (returned,
	// reversed, refunded, chargeback: --psp-returned-statuses). Of an
	// order not yet seen paid it means it will not be paid, as OrderFailed.
	OrderReturned
)

// Default status words. The reference shows only "Created"; these cover
// the words payment services commonly use (PayPal, Wise, Adyen and others)
// and are an assumption, configurable with --psp-paid-statuses and
// --psp-failed-statuses. A word in neither list keeps the order pending.
var (
	DefaultPaidStatuses   = []string{"paid", "success", "successful", "succeeded", "completed", "complete", "done", "sent", "settled", "executed", "confirmed"}
	DefaultFailedStatuses = []string{"failed", "failure", "declined", "rejected", "refused", "cancelled", "canceled", "error", "expired", "returned", "reversed", "blocked", "bounced"}
)

// DefaultReturnedStatuses are the status words that mean the money came
// back after the order was paid: an assumption (the reference shows only
// "Created"), after the words PayPal (RETURNED, REFUNDED, REVERSED),
// Modern Treasury (returned, reversed), Stripe (reversed) and card
// schemes (chargeback) use; configurable with --psp-returned-statuses.
// "returned" and "reversed" are failed words too: of an order not yet
// seen paid they mean it will not be paid.
var DefaultReturnedStatuses = []string{"returned", "reversed", "refunded", "chargeback"}

// StatusWords classifies order status words: the one classifier of the
// PSP's status words. It compares them normalized once (normWord): case
// folded under every locale's rules, compatibility forms and spaces,
// hyphens and underscores inside a word dropped ("PAID", "Ｐａｉｄ" and
// "PAİD" are "paid"; "Charge-Back" is "chargeback"; "paid_out" is not
// "paid").
type StatusWords struct {
	paid, failed, returned map[string]bool
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

// WithReturned returns w classifying the words returned as OrderReturned
// (DefaultReturnedStatuses, --psp-returned-statuses); a word that is also
// a paid word is refused. A returned word may be a failed word too.
func (w StatusWords) WithReturned(returned []string) (StatusWords, error) {
	c := StatusWords{paid: w.paid, failed: w.failed, returned: map[string]bool{}}
	for _, r := range returned {
		k := normWord(r)
		if k == "" {
			continue
		}
		if c.paid[k] {
			return StatusWords{}, &ConfigError{Msg: "status word " + r + " is both paid and returned"}
		}
		c.returned[k] = true
	}
	return c, nil
}

// Outcome classifies one status word. A word that is both returned and
// failed is OrderReturned.
func (w StatusWords) Outcome(status string) OrderOutcome {
	k := normWord(status)
	switch {
	case w.paid[k]:
		return OrderPaid
	case w.returned[k]:
		return OrderReturned
	case w.failed[k]:
		return OrderFailed
	}
	return OrderPending
}

// fold is full Unicode case folding, the same under every locale.
var fold = cases.Fold()

// normWord is the form status words are compared in: NFKC (full-width and
// other compatibility forms), case folded, the dot of a Turkish capital
// İ and the dotless ı read as i, without space, hyphens or underscores.
func normWord(s string) string {
	s = fold.String(norm.NFKC.String(s))
	return strings.Map(func(r rune) rune {
		switch {
		case r == '\u0307' || r == '-' || r == '_' || unicode.IsSpace(r):
			return -1
		case r == 'ı':
			return 'i'
		}
		return r
	}, s)
}

// ConfigError is a configuration mistake of this package.
type ConfigError struct{ Msg string }

func (e *ConfigError) Error() string { return "psp: " + e.Msg }

// Is makes errors.Is(err, ErrConfig) match.
func (e *ConfigError) Is(target error) bool { return target == ErrConfig }
