// Package card normalises, validates and masks payment card numbers (PANs).
//
// A full card number is needed in exactly two places: the encrypted ledger
// entry and the body of the PSP create request. Everywhere else (logs,
// errors, task payloads, reports, the web UI) only Mask's output may appear.
package card

import (
	"errors"
	"fmt"
	"strings"
)

// Length bounds of a PAN (ISO/IEC 7812).
const (
	MinDigits = 12
	MaxDigits = 19
)

// ErrInvalid is matched by every validation error of this package.
var ErrInvalid = errors.New("invalid card number")

// Error tells why a card number was refused. It never holds the number
// itself, only its masked form.
type Error struct {
	Masked string
	Reason string
}

func (e *Error) Error() string {
	if e.Masked == "" {
		return "card number " + e.Reason
	}
	return fmt.Sprintf("card number %s %s", e.Masked, e.Reason)
}

// Is lets errors.Is(err, ErrInvalid) match.
func (e *Error) Is(target error) bool { return target == ErrInvalid }

// Normalize removes spaces and dashes and checks length and the Luhn digit.
// It returns the bare digits.
func Normalize(s string) (string, error) {
	var b strings.Builder
	b.Grow(len(s))
	for _, r := range s {
		switch {
		case r == ' ' || r == '-':
			continue
		case r >= '0' && r <= '9':
			b.WriteRune(r)
		default:
			return "", &Error{Mask(s), "must contain only digits, spaces or dashes"}
		}
	}
	digits := b.String()
	if n := len(digits); n < MinDigits || n > MaxDigits {
		return "", &Error{Mask(digits), fmt.Sprintf("must have %d to %d digits, has %d", MinDigits, MaxDigits, n)}
	}
	if !Luhn(digits) {
		return "", &Error{Mask(digits), "fails the Luhn check (mistyped digit?)"}
	}
	return digits, nil
}

// Luhn reports whether a string of digits passes the Luhn (mod 10) check.
func Luhn(digits string) bool {
	sum, ok := luhnSum(digits, false)
	return ok && sum%10 == 0
}

// CheckDigit returns the digit that, appended to body (a string of
// digits), makes a number that passes the Luhn check.
func CheckDigit(body string) int {
	sum, _ := luhnSum(body, true) // the check digit to come is not doubled: body's last digit is
	return (10 - sum%10) % 10
}

// luhnSum adds the digits of s from the right, doubling every other one,
// the rightmost first when double; false when s is empty or holds a
// non-digit.
func luhnSum(s string, double bool) (int, bool) {
	if s == "" {
		return 0, false
	}
	sum := 0
	for i := len(s) - 1; i >= 0; i-- {
		c := s[i]
		if c < '0' || c > '9' {
			return 0, false
		}
		d := int(c - '0')
		if double {
			d *= 2
			if d > 9 {
				d -= 9
			}
		}
		sum += d
		double = !double
	}
	return sum, true
}

// Mask shows at most the first 6 and last 4 digits of a card number and
// replaces every other character with '*'. Non-digit separators are dropped.
// Numbers shorter than 15 digits keep fewer visible (a third at the head, a
// quarter at the tail), so that a short or malformed value never shows
// most of its digits.
func Mask(s string) string {
	digits := make([]byte, 0, len(s))
	for i := 0; i < len(s); i++ {
		if s[i] >= '0' && s[i] <= '9' {
			digits = append(digits, s[i])
		}
	}
	n := len(digits)
	if n == 0 {
		if s == "" {
			return ""
		}
		return "****"
	}
	head, tail := 6, 4
	if n < 15 { // 15 (Amex) and longer: the usual first 6 / last 4
		head, tail = n/3, n/4
		if head > 6 {
			head = 6
		}
		if tail > 4 {
			tail = 4
		}
	}
	out := make([]byte, n)
	for i := range digits {
		if i < head || i >= n-tail {
			out[i] = digits[i]
		} else {
			out[i] = '*'
		}
	}
	return string(out)
}

// Scrub masks every run of digits (a Run: groups joined by separators, in
// any Unicode decimal digits) that may hold a card number: a run of 12 to
// 19 digits that passes the Luhn check, a run holding consecutive groups
// of 12 to 19 digits that pass it (a card written next to other numbers),
// a group of more than 19 digits, which may hide one, and a mistyped card
// number (Luhn or not): 12 to 19 digits written in groups of four, or
// right after the word "card" or "PAN". Any other run of 12 or more digits
// that fails Luhn is no card number (a numeric order id, an externalId)
// and stays as it is.
// It is the last line of defence for text that comes from outside (PSP
// messages, what operators type) and for every output. Its result holds no
// Luhn-valid run of 12 to 19 digits.
func Scrub(s string) string {
	var out strings.Builder
	prev := 0
	for run := range Runs(s) {
		if !MayHoldCard(run) && !writtenAsCard(s, run) {
			continue
		}
		out.WriteString(s[prev:run.Start])
		out.WriteString(Mask(run.Digits()))
		prev = run.End
	}
	if prev == 0 {
		return s
	}
	out.WriteString(s[prev:])
	return out.String()
}

// writtenAsCard reports whether run, of 12 to 19 digits, is written as a
// card number is, whatever its check digit: in groups of four (the last
// one shorter) or right after the word "card" or "PAN".
func writtenAsCard(s string, run Run) bool {
	n := len(run.Digits())
	if n < MinDigits || n > MaxDigits {
		return false
	}
	fours := len(run.Groups) >= 3
	for i, g := range run.Groups {
		if len(g) != 4 && (i < len(run.Groups)-1 || len(g) > 4) {
			fours = false
		}
	}
	if fours {
		return true
	}
	before := strings.ToLower(s[max(0, run.Start-24):run.Start])
	before = strings.TrimRight(before, " :#.-=\t\u00a0")
	for _, w := range []string{"card", "card number", "card no", "card nr", "pan", "cardnumber"} {
		if strings.HasSuffix(before, w) {
			return true
		}
	}
	return false
}

// MayHoldCard reports whether run may be or hold a card number (see Scrub).
func MayHoldCard(run Run) bool {
	for i := range run.Groups {
		n := 0
		for j := i; j < len(run.Groups); j++ {
			n += len(run.Groups[j])
			if n > MaxDigits {
				if j == i {
					return true // one group too long to be a card: it may hide one
				}
				break
			}
			if n >= MinDigits && Luhn(strings.Join(run.Groups[i:j+1], "")) {
				return true
			}
		}
	}
	return false
}
