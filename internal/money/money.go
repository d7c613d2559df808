// Package money parses and formats payout amounts as exact decimals.
//
// Amounts travel from the payout file to the PSP request without ever being a
// float64: they are parsed from their text form with a strict grammar (plain
// positive decimal, no exponent, no grouping, bounded scale) into a
// decimal.Decimal and written back in canonical form.
package money

import (
	"errors"
	"fmt"
	"strings"

	"github.com/shopspring/decimal"
)

// DefaultScale is the number of decimal places accepted when none is configured.
const DefaultScale = 2

// maxDigits bounds the integer part of the text Parse reads. It is not the
// ceiling of an amount: that is Ceiling (ceiling.go), which callers
// check so that no count of minor units and no sum can wrap.
const maxDigits = 15

// Amount is an exact, positive decimal amount.
type Amount struct{ d decimal.Decimal }

// ParseError tells why a text is not an acceptable amount.
type ParseError struct {
	Input  string
	Reason string
}

func (e *ParseError) Error() string { return fmt.Sprintf("amount %q: %s", e.Input, e.Reason) }

// ErrInvalid is matched by every ParseError via errors.Is.
var ErrInvalid = errors.New("invalid amount")

// Is lets errors.Is(err, ErrInvalid) match.
func (e *ParseError) Is(target error) bool { return target == ErrInvalid }

// Parse reads a plain positive decimal with at most scale fractional digits:
// digits, optionally a '.' and 1..scale digits. Exponents, signs, grouping
// separators, spaces, NaN and zero are refused.
func Parse(s string, scale int) (Amount, error) {
	if s == "" {
		return Amount{}, &ParseError{s, "is empty"}
	}
	intDigits, fracDigits, dot := 0, 0, false
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= '0' && c <= '9':
			if dot {
				fracDigits++
			} else {
				intDigits++
			}
		case c == '.' && !dot:
			dot = true
		case c == ',':
			return Amount{}, &ParseError{s, "use '.' as the decimal separator and no thousands separator"}
		case c == '-':
			return Amount{}, &ParseError{s, "must be positive"}
		default:
			return Amount{}, &ParseError{s, "is not a plain decimal number (digits and one '.')"}
		}
	}
	switch {
	case intDigits == 0:
		return Amount{}, &ParseError{s, "needs digits before the '.'"}
	case dot && fracDigits == 0:
		return Amount{}, &ParseError{s, "needs digits after the '.'"}
	case fracDigits > scale:
		return Amount{}, &ParseError{s, fmt.Sprintf("has more than %d decimal places", scale)}
	case intDigits > maxDigits:
		return Amount{}, &ParseError{s, fmt.Sprintf("has more than %d integer digits", maxDigits)}
	}
	d, err := decimal.NewFromString(s)
	if err != nil {
		return Amount{}, &ParseError{s, "is not a decimal number"}
	}
	if !d.IsPositive() {
		return Amount{}, &ParseError{s, "must be greater than zero"}
	}
	return Amount{d}, nil
}

// MustParse is Parse for constants in tests and examples; it panics on error.
func MustParse(s string) Amount {
	a, err := Parse(s, 8)
	if err != nil {
		panic(err)
	}
	return a
}

// FromMinor builds an amount from an integer count of 10^-scale units.
func FromMinor(units int64, scale int) Amount {
	return Amount{decimal.New(units, int32(-scale))}
}

// Minor returns the amount as an integer count of 10^-scale units. The
// amount must have at most scale decimals (Parse guarantees it).
func (a Amount) Minor(scale int) int64 {
	return a.d.Shift(int32(scale)).IntPart()
}

// String is the shortest exact form: no exponent, trailing fractional zeros
// dropped ("10.50" gives "10.5"). Use StringFixed to show a fixed scale.
func (a Amount) String() string { return a.d.String() }

// StringFixed formats with exactly scale decimals ("10.5" -> "10.50").
func (a Amount) StringFixed(scale int) string { return a.d.StringFixed(int32(scale)) }

// Decimal exposes the underlying exact value.
func (a Amount) Decimal() decimal.Decimal { return a.d }

// IsZero reports whether the amount is the zero value.
func (a Amount) IsZero() bool { return a.d.IsZero() }

// Cmp compares a and b: -1, 0 or +1.
func (a Amount) Cmp(b Amount) int { return a.d.Cmp(b.d) }

// Add returns a+b exactly.
func (a Amount) Add(b Amount) Amount { return Amount{a.d.Add(b.d)} }

// Zero is the additive identity, for sums.
var Zero = Amount{decimal.Zero}

// Fixed writes a for a person with scale decimal places ("10.5" with
// scale 2 gives "10.50"), exactly: an amount with more decimals than scale
// keeps them all, never rounded. A negative scale is 0.
func (a Amount) Fixed(scale int) string {
	if scale < 0 {
		scale = 0
	}
	if a.d.Exponent() >= -int32(scale) || a.d.Equal(a.d.Truncate(int32(scale))) {
		return a.d.StringFixed(int32(scale))
	}
	return a.d.String()
}

// FixedText is Fixed for an amount kept as text (the ledger's form, "10.5");
// text that is not an amount is returned unchanged.
func FixedText(s string, scale int) string {
	d, err := decimal.NewFromString(s)
	if err != nil || strings.ContainsAny(s, "eE") {
		return s
	}
	return Amount{d}.Fixed(scale)
}
