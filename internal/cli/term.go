package cli

import (
	"fmt"
	"strings"
	"unicode"

	"github.com/acme/payout/internal/card"
)

// term is the one way a text that came from outside (a note, a name, a
// spool file's name, a PSP message, an audit entry) is printed on a
// terminal: every control character (line breaks and tabs included, so
// that a field cannot start a line of its own), DEL, the C1 controls and
// the invisible format characters that reorder or hide text (bidi
// controls, zero-width spaces) are shown escaped, as \r, \x1b or \u202e,
// and card numbers are masked. A carriage return in a note cannot
// overwrite the line with a forged "bob approved" any more.
func term(s string) string {
	if !needsEscape(s) {
		return card.Scrub(s)
	}
	var b strings.Builder
	for _, r := range s {
		switch {
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\r':
			b.WriteString(`\r`)
		case r == '\t':
			b.WriteString(`\t`)
		case r == unicode.ReplacementChar:
			b.WriteRune(r)
		case r < 0x80 && escaped(r):
			fmt.Fprintf(&b, `\x%02x`, r)
		case escaped(r):
			fmt.Fprintf(&b, `\u%04x`, r)
		default:
			b.WriteRune(r)
		}
	}
	return card.Scrub(b.String())
}

func needsEscape(s string) bool {
	for _, r := range s {
		if escaped(r) {
			return true
		}
	}
	return false
}

// escaped reports whether term shows r escaped.
func escaped(r rune) bool {
	return r < ' ' || r == 0x7f || (r >= 0x80 && r < 0xa0) || r == '\u2028' || r == '\u2029' ||
		(r > 0x7f && unicode.Is(unicode.Cf, r))
}
