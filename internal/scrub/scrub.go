// Package scrub cleans the text that people and PSPs type before the
// product stores it: an operator's note, order id, PSP status or name, a
// PSP's error message. It runs once, on the way in, before any cut, so
// that every later writer (result and audit files, reports, history, the
// console, logs, webhooks, metrics) only ever sees clean text:
//
//   - valid UTF-8, no control characters (they become spaces), runs of
//     white space collapsed;
//   - card numbers masked (card.Scrub: first 6 / last 4 at most);
//   - cut to a bound only then, so that a cut never shortens a card number
//     or a secret below the length that is recognised.
//
// Secret finds a secret (the PSP token) in a text in its plain and escaped
// forms (JSON, HTML, URL percent-encoding); WithoutSecret replaces a text
// that held it by Withheld.
package scrub

import (
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/acme/payout/internal/card"
)

// MaxNote is the longest note, reason or resolution text a person may
// type, in characters.
const MaxNote = 1000

// MaxField bounds the other short fields a person types (an order id, a
// PSP status word, a name), in bytes.
const MaxField = 200

// ErrRefused is matched by every error of Note.
var ErrRefused = errors.New("text refused")

// Error tells why a typed text was refused; it never holds the text.
type Error struct {
	Field  string // "note", "order id"...
	Reason string
}

func (e *Error) Error() string { return e.Field + ": " + e.Reason }

// Is lets errors.Is(err, ErrRefused) match.
func (e *Error) Is(target error) bool { return target == ErrRefused }

// Text is s made safe to store and show, cut to at most max bytes (no cut
// when max <= 0): valid UTF-8, control characters turned into spaces,
// white space collapsed, card numbers masked, and only then cut at a
// character boundary, with "..." marking the cut.
func Text(s string, max int) string {
	s = strings.ToValidUTF8(s, "?")
	s = strings.Map(func(r rune) rune {
		if Control(r) {
			return ' '
		}
		return r
	}, s)
	s = strings.Join(strings.Fields(s), " ")
	s = card.Scrub(s)
	return Cut(s, max)
}

// Cut cuts s to at most max bytes at a character boundary, ending in
// "..." when it cut; s unchanged when max <= 0 or s is short enough.
func Cut(s string, max int) string {
	if max <= 0 || len(s) <= max {
		return s
	}
	cut := max - len("...")
	if cut < 0 {
		cut = 0
	}
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "..."
}

// Control reports whether r is a control character: C0, DEL, C1, or a
// Unicode line or paragraph separator.
func Control(r rune) bool {
	return r < ' ' || r == 0x7f || (r >= 0x80 && r < 0xa0) || r == '\u2028' || r == '\u2029'
}

// Note checks a note (a reason, a resolution text) a person typed and
// returns it scrubbed (Text): it must be valid UTF-8 of at most MaxNote
// characters without control characters (a line break or a carriage
// return in a note would forge lines in a terminal or a log). Empty is
// allowed here; whether a note is required is the caller's rule.
func Note(s string) (string, error) {
	return Field("note", s, MaxNote)
}

// Field checks a one-line text a person typed, of at most max characters
// (runes), as Note does, and returns it scrubbed.
func Field(name, s string, max int) (string, error) {
	if !utf8.ValidString(s) {
		return "", &Error{name, "is not valid UTF-8"}
	}
	if n := utf8.RuneCountInString(s); n > max {
		return "", &Error{name, fmt.Sprintf("is %d characters long, at most %d are allowed", n, max)}
	}
	for i, r := range s {
		if Control(r) {
			return "", &Error{name, fmt.Sprintf("holds a control character (U+%04X) at byte %d: type it on one line", r, i)}
		}
	}
	return Text(s, 0), nil
}
