package payfile

import (
	"fmt"
	"strings"

	"github.com/acme/payout/internal/card"
)

// A card number belongs only in the cardNumber column. Every other field of
// a row (externalId, amount, telecomOperator, the extra and informational
// columns) is searched for one, so that a card typed in the wrong column
// is refused instead of being stored, logged, written to the result file
// and sent to the PSP in full.
//
// What counts as a card number in another field (docs/file-formats.md):
//
//   - a run of 12 to 19 digits, possibly in groups joined by one or two
//     separators (card.Runs: a space, including the Unicode ones, '.', '-'
//     or any dash, '/', '_', their full-width forms, and invisible format
//     characters uncounted: "4111 1111 1111 1111", "4111.1111.1111.1111",
//     "4111/1111/1111/1111"), its digits in any Unicode script
//     ("４１１１…" is folded to 4111…), found anywhere in the field
//     ("PO-4111111111111111", "card 4111111111111111 of Ivanov"); when a run has more groups, every stretch of whole groups
//     of 12 to 19 digits is tried ("PO-2026-4111111111111111");
//   - that passes the Luhn check;
//   - and whose first digits are those of a card scheme (CardPrefixesIIN):
//     Mir 2200-2204, Mastercard 2221-2720 and 51-55, Amex, Diners and JCB
//     (3 but 31-33), Visa 4, Maestro 50 and 56-69, Discover, UnionPay and
//     RuPay (6), Troy 9792. With Options.CardPrefixes CardPrefixesAny every
//     first digit counts.
//
// One random run of digits in ten passes Luhn; with the scheme prefixes
// about 42% of random runs remain candidates, so about 4% of random 12 to
// 19 digit runs are refused (10% with CardPrefixesAny). Ids built on dates
// (20261126...) or zero-padded sequences (000123...) never are. A digit
// group longer than 19 digits is not searched inside: a 20-digit reference
// is no card, and every one of its windows would pass Luhn one time in ten.
//
// In phoneNumber a run written right after '+' with at most 15 digits (the
// E.164 maximum) is a phone number, whatever Luhn says: a phone number
// written with its country code is never refused.

// CardPrefixes chooses which runs of digits that pass Luhn are taken for a
// card number outside the cardNumber column.
type CardPrefixes int

const (
	// CardPrefixesIIN: only runs beginning like a card scheme's numbers
	// (the default).
	CardPrefixesIIN CardPrefixes = iota
	// CardPrefixesAny: every run of 12 to 19 digits that passes Luhn.
	CardPrefixesAny
)

// String is the name of the choice, as --card-prefixes takes it.
func (p CardPrefixes) String() string {
	if p == CardPrefixesAny {
		return "any"
	}
	return "schemes"
}

// ParseCardPrefixes reads "schemes" or "any".
func ParseCardPrefixes(s string) (CardPrefixes, error) {
	switch s {
	case "schemes", "":
		return CardPrefixesIIN, nil
	case "any":
		return CardPrefixesAny, nil
	}
	return 0, fmt.Errorf("%w: card prefixes %q: want schemes or any", ErrBadOptions, s)
}

// maxE164 is the longest phone number, in digits.
const maxE164 = 15

// schemePrefix reports whether digits begin like the number of a payment
// card scheme.
func schemePrefix(d string) bool {
	p4 := 0
	for i := 0; i < 4 && i < len(d); i++ {
		p4 = p4*10 + int(d[i]-'0')
	}
	switch d[0] {
	case '2':
		return (p4 >= 2200 && p4 <= 2204) || (p4 >= 2221 && p4 <= 2720)
	case '3':
		return d[1] != '1' && d[1] != '2' && d[1] != '3'
	case '4', '5', '6':
		return true
	case '9':
		return p4 == 9792
	}
	return false
}

// cardIn returns the masked form of the first card number in s, or "".
// phone applies the phoneNumber rule (a '+' run of up to 15 digits is a
// phone number). The runs of digits are card.Runs': any Unicode decimal
// digits, groups joined by one or two separators.
func cardIn(s string, prefixes CardPrefixes, phone bool) string {
	for run := range card.Runs(s) {
		if phone && run.Start > 0 && s[run.Start-1] == '+' && len(run.Digits()) <= maxE164 {
			continue
		}
		if m := cardInRun(run.Groups, prefixes); m != "" {
			return m
		}
	}
	return ""
}

// cardInRun tries every stretch of whole groups of a run.
func cardInRun(groups []string, prefixes CardPrefixes) string {
	for a := range groups {
		n := 0
		for b := a; b < len(groups); b++ {
			n += len(groups[b])
			if n > card.MaxDigits {
				break
			}
			if n < card.MinDigits {
				continue
			}
			d := strings.Join(groups[a:b+1], "")
			if card.Luhn(d) && (prefixes == CardPrefixesAny || schemePrefix(d)) {
				return card.Mask(d)
			}
		}
	}
	return ""
}

// cardProblem is the refusal of a field of column col holding a card
// number, or "".
func (c *config) cardProblem(col, s string) string {
	phone := fold(col) == fold(ColPhoneNumber)
	m := cardIn(s, c.cardPref, phone)
	if m == "" {
		return ""
	}
	msg := fmt.Sprintf("holds a card number (%s): a card number belongs only in the %s column; nothing of this row is loaded", m, ColCardNumber)
	if phone {
		msg += " (a phone number is written with its country code after '+')"
	}
	return msg
}
