package money

import (
	"errors"
	"fmt"

	"github.com/shopspring/decimal"
)

// MaxUnits is the largest count of minor units that any amount or sum of
// amounts may reach anywhere: 2^53-1. Below it a count is exact in every
// form it takes: an int64 in Go and in Redis (HINCRBY, INCRBY), and a
// double in the ledger's Lua scripts, whose arithmetic is floating point.
const MaxUnits int64 = 1<<53 - 1

// SumScale is the fewest decimals sums are counted at: the day's approved
// sum (the daily limit) is kept in 10^-4 units whatever a batch's scale.
const SumScale = 4

// DefaultMaxAmount is the default ceiling of one amount (payout load
// --max-amount): one billion, lowered to Ceiling(scale) where that is
// smaller (7 or 8 decimals).
const DefaultMaxAmount = 1_000_000_000

// ErrCeiling is matched by the error of an amount or a sum above the
// ceiling (Ceiling, MaxUnits).
var ErrCeiling = errors.New("money: above the ceiling")

// countScale is the scale an amount of scale decimals is counted at: its
// own, or SumScale when that is more.
func countScale(scale int) int {
	return max(scale, SumScale)
}

// Ceiling is the largest amount with scale decimals that can be counted
// exactly: its count of minor units at max(scale, SumScale) is at most
// MaxUnits. It bounds every amount, a batch's total and a day's approved
// sum: 900,719,925,474.09 with 2 decimals, 90,071,992.54740991 with 8.
func Ceiling(scale int) Amount {
	if scale < 0 {
		scale = 0
	}
	d := decimal.New(MaxUnits, -int32(countScale(scale))).Truncate(int32(scale))
	return Amount{d}
}

// DefaultMax is the default ceiling of one amount with scale decimals:
// DefaultMaxAmount, or Ceiling(scale) when that is smaller.
func DefaultMax(scale int) Amount {
	def := Amount{decimal.NewFromInt(DefaultMaxAmount)}
	if c := Ceiling(scale); c.Cmp(def) < 0 {
		return c
	}
	return def
}

// Units is a as a count of 10^-scale units, rounded up (a is never
// under-counted), or an error matching ErrCeiling when that count is
// above MaxUnits: the checked form of Minor for every sum kept as an
// integer.
func (a Amount) Units(scale int) (int64, error) {
	d := a.d.Shift(int32(scale)).Ceil()
	if d.Cmp(decimal.NewFromInt(MaxUnits)) > 0 || d.Sign() < 0 {
		return 0, fmt.Errorf("%s is more than %d units of 10^-%d, the most the ledger counts exactly: %w", a.d.String(), MaxUnits, scale, ErrCeiling)
	}
	return d.IntPart(), nil
}

// AddChecked is a+b, or a and an error matching ErrCeiling when the sum
// is above limit (usually Ceiling of the amounts' scale).
func (a Amount) AddChecked(b, limit Amount) (Amount, error) {
	s := a.Add(b)
	if s.Cmp(limit) > 0 {
		return a, fmt.Errorf("%s + %s = %s is above %s: %w", a.d.String(), b.d.String(), s.d.String(), limit.d.String(), ErrCeiling)
	}
	return s, nil
}

// ParseStored reads an amount as the ledger stores it (String's form: a
// plain non-negative decimal), without the integer-digit bound of Parse:
// a sum may have more digits than any one amount. Zero is accepted.
func ParseStored(s string) (Amount, error) {
	for i := 0; i < len(s); i++ {
		if c := s[i]; (c < '0' || c > '9') && c != '.' {
			return Amount{}, &ParseError{s, "is not a plain decimal number (digits and one '.')"}
		}
	}
	d, err := decimal.NewFromString(s)
	if err != nil || s == "" {
		return Amount{}, &ParseError{s, "is not a decimal number"}
	}
	return Amount{d}, nil
}
