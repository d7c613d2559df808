package card

import (
	"iter"
	"strings"
	"unicode"
	"unicode/utf8"
)

// How a card number may be written inside free text, as Runs reads it
// (docs/file-formats.md, "A card number only in cardNumber"):
//
//   - its digits are any Unicode decimal digits: ASCII, full-width
//     ("４１１１"), Arabic-Indic, Devanagari...; they are folded to ASCII;
//   - its digits may come in groups joined by one or two separators: a
//     space (any Unicode space, category Zs: no-break, narrow no-break,
//     ideographic...),
//     '.', '-' (or any Unicode dash, '−'), '/', '_', or the full-width
//     '．', '／', '＿'. Invisible format characters (zero-width space, soft
//     hyphen, bidi marks) may also stand between groups and are not counted.
//
// Three or more separators, or any other character, end a run. So do a tab
// and a line break: they part the fields and lines of a text (a listing, a
// pasted row), and Scrub, which drops a run's separators, would join them.

// maxSeparators is how many visible separators may stand between two
// groups of a run.
const maxSeparators = 2

// A Run is a stretch of digit groups joined by separators in a text.
type Run struct {
	// Start and End are the byte offsets in the text of the run's first
	// digit and just past its last.
	Start, End int
	// Groups are the digits of each group, folded to ASCII '0'-'9'.
	Groups []string
}

// Digits is every digit of the run, folded to ASCII.
func (r Run) Digits() string { return strings.Join(r.Groups, "") }

// Runs yields the runs of digits of s, left to right. Each is as long as
// it can be: the text before and after it is no digit and no separator
// followed by a digit.
func Runs(s string) iter.Seq[Run] {
	return func(yield func(Run) bool) {
		for i := 0; i < len(s); {
			r, w := utf8.DecodeRuneInString(s[i:])
			if DigitValue(r) < 0 {
				i += w
				continue
			}
			run := Run{Start: i}
			j := i
			for {
				var g []byte
				for j < len(s) {
					r, w := utf8.DecodeRuneInString(s[j:])
					v := DigitValue(r)
					if v < 0 {
						break
					}
					g = append(g, byte('0'+v))
					j += w
				}
				run.Groups = append(run.Groups, string(g))
				run.End = j
				k, ok := skipSeparators(s, j)
				if !ok {
					break
				}
				j = k
			}
			if !yield(run) {
				return
			}
			i = run.End
		}
	}
}

// skipSeparators returns the offset of the digit after the separators at
// s[i:], and whether there is one: at least one and at most maxSeparators
// visible separators (and any invisible ones) followed by a digit.
func skipSeparators(s string, i int) (int, bool) {
	visible, seen := 0, false
	for i < len(s) {
		r, w := utf8.DecodeRuneInString(s[i:])
		if DigitValue(r) >= 0 {
			return i, seen
		}
		sep, invisible := separator(r)
		if !sep {
			return i, false
		}
		seen = true
		if !invisible {
			if visible++; visible > maxSeparators {
				return i, false
			}
		}
		i += w
	}
	return i, false
}

// separator reports whether r may stand between two digit groups of a
// card number, and whether it is invisible (not counted).
func separator(r rune) (sep, invisible bool) {
	switch r {
	case ' ', '.', '-', '/', '_', '\u2212', '\uff0e', '\uff0f', '\uff3f':
		return true, false
	}
	if r < utf8.RuneSelf {
		return false, false
	}
	if unicode.Is(unicode.Zs, r) || unicode.Is(unicode.Pd, r) {
		return true, false
	}
	if unicode.Is(unicode.Cf, r) {
		return true, true
	}
	return false, false
}

// DigitValue is the value of r if it is a Unicode decimal digit (category
// Nd: ASCII, full-width, Arabic-Indic...), else -1. Unicode places every
// decimal digit in a block of ten consecutive code points from zero to nine,
// so its value is its distance from the start of its range of unicode.Nd,
// modulo 10.
func DigitValue(r rune) int {
	if '0' <= r && r <= '9' {
		return int(r - '0')
	}
	if r < utf8.RuneSelf || !unicode.Is(unicode.Nd, r) {
		return -1
	}
	for _, rg := range unicode.Nd.R16 {
		if rune(rg.Lo) <= r && r <= rune(rg.Hi) {
			return int(r-rune(rg.Lo)) % 10
		}
	}
	for _, rg := range unicode.Nd.R32 {
		if rune(rg.Lo) <= r && r <= rune(rg.Hi) {
			return int(r-rune(rg.Lo)) % 10
		}
	}
	return -1
}
