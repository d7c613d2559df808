package money

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// Format is the way a file writes its amounts: which character separates
// the decimals and which, if any, groups the thousands. A file's format is
// declared, never guessed: "1,500" is 1500 in one format and 1.5 in
// another.
type Format int

// The formats.
const (
	// Plain: digits and an optional '.' before the decimals, no grouping
	// (1500.50). The default, and the form amounts are written back in.
	Plain Format = iota
	// Comma: ',' before the decimals; thousands optionally grouped with a
	// space, a no-break space (U+00A0) or a narrow no-break space (U+202F),
	// as spreadsheets of such locales write them (1500,50 and 1 500,50).
	Comma
	// CommaDot: ',' before the decimals, thousands optionally grouped with
	// '.' (1500,50 and 1.500,50).
	CommaDot
	// DotComma: '.' before the decimals, thousands optionally grouped with
	// ',' (1500.50 and 1,500.50).
	DotComma
)

// Formats lists every format, in the order they are documented.
var Formats = []Format{Plain, Comma, CommaDot, DotComma}

var formatNames = map[Format]string{Plain: "plain", Comma: "comma", CommaDot: "comma-dot", DotComma: "dot-comma"}

var formatExamples = map[Format]string{Plain: "1500.50", Comma: "1 500,50", CommaDot: "1.500,50", DotComma: "1,500.50"}

// String is the format's name, as ParseFormat reads it.
func (f Format) String() string {
	if n, ok := formatNames[f]; ok {
		return n
	}
	return fmt.Sprintf("Format(%d)", int(f))
}

// Example is how the format writes one thousand five hundred and a half.
func (f Format) Example() string { return formatExamples[f] }

// ParseFormat reads a format's name: plain, comma, comma-dot or dot-comma.
func ParseFormat(name string) (Format, error) {
	for _, f := range Formats {
		if formatNames[f] == name {
			return f, nil
		}
	}
	names := make([]string, len(Formats))
	for i, f := range Formats {
		names[i] = formatNames[f] + " (" + formatExamples[f] + ")"
	}
	return Plain, fmt.Errorf("unknown amount format %q: want one of %s", name, strings.Join(names, ", "))
}

// decimalSep is the character before the decimals.
func (f Format) decimalSep() rune {
	if f == Comma || f == CommaDot {
		return ','
	}
	return '.'
}

// isGroupSep reports whether r groups thousands in f.
func (f Format) isGroupSep(r rune) bool {
	switch f {
	case Comma:
		return r == ' ' || r == '\u00A0' || r == '\u202F'
	case CommaDot:
		return r == '.'
	case DotComma:
		return r == ','
	}
	return false
}

// ParseIn reads an amount written in format f: Parse's grammar, with f's
// decimal separator and, optionally, its thousands grouping (groups of
// exactly three digits after the first, one separator character throughout
// the amount). The amount is exact: the separators are only removed, the
// digits are never converted through a float. Errors quote s as given.
func ParseIn(s string, scale int, f Format) (Amount, error) {
	if f == Plain {
		return Parse(s, scale)
	}
	if _, ok := formatNames[f]; !ok {
		return Amount{}, &ParseError{s, fmt.Sprintf("unknown amount format %d", int(f))}
	}
	if s == "" {
		return Amount{}, &ParseError{s, "is empty"}
	}
	sc := localeScan{f: f, s: s, dec: f.decimalSep(), groupLen: -1, frac: -1}
	sc.b.Grow(len(s))
	for i, r := range s {
		if err := sc.next(i, r); err != nil {
			return Amount{}, err
		}
	}
	if err := sc.end(); err != nil {
		return Amount{}, err
	}
	a, err := Parse(sc.b.String(), scale)
	if err != nil {
		pe := err.(*ParseError)
		return Amount{}, &ParseError{s, pe.Reason}
	}
	return a, nil
}

// localeScan reads an amount written in a locale Format character by
// character into its plain form (digits and '.'), checking the grouping.
type localeScan struct {
	f         Format
	s         string // the amount as written, for errors
	dec       rune   // the format's decimal separator
	b         strings.Builder
	group     rune // the grouping character seen, 0 before the first
	groupLen  int  // digits since the last group separator; -1 before the first
	leadLen   int  // digits before the first group separator
	intDigits int
	frac      int // digits after the decimal separator; -1 before it
}

// next takes rune r at byte offset i.
func (sc *localeScan) next(i int, r rune) error {
	f, s, dec := sc.f, sc.s, sc.dec
	switch {
	case r >= '0' && r <= '9':
		sc.b.WriteRune(r)
		switch {
		case sc.frac >= 0:
			sc.frac++
		case sc.groupLen >= 0:
			sc.groupLen++
			sc.intDigits++
		default:
			sc.leadLen++
			sc.intDigits++
		}
	case r == dec && sc.frac < 0:
		if sc.groupLen >= 0 && sc.groupLen != 3 {
			return f.groupError(s)
		}
		if sc.intDigits == 0 {
			return &ParseError{s, fmt.Sprintf("needs digits before the %q", dec)}
		}
		sc.frac = 0
		sc.b.WriteByte('.')
	case f.isGroupSep(r) && sc.frac < 0:
		switch {
		case sc.group != 0 && r != sc.group:
			return &ParseError{s, fmt.Sprintf("mixes %s and %s as thousands separators", runeName(sc.group), runeName(r))}
		case sc.groupLen < 0 && (sc.leadLen == 0 || sc.leadLen > 3), sc.groupLen >= 0 && sc.groupLen != 3:
			return f.groupError(s)
		}
		sc.group, sc.groupLen = r, 0
	case r == '-' && i == 0:
		return &ParseError{s, "must be positive"}
	case r == '.' || r == ',' || r == ' ' || r == '\u00A0' || r == '\u202F' || r == '\'':
		return f.separatorError(s, r, sc.frac >= 0)
	default:
		return &ParseError{s, fmt.Sprintf("is not a decimal number in the %s format (digits, %q before the decimals, as in %s)", f, dec, f.Example())}
	}
	return nil
}

// end checks what the whole amount must have: complete groups, digits
// before and after the decimal separator.
func (sc *localeScan) end() error {
	switch {
	case sc.groupLen >= 0 && sc.groupLen != 3 && sc.frac < 0:
		return sc.f.groupError(sc.s)
	case sc.intDigits == 0:
		return &ParseError{sc.s, fmt.Sprintf("needs digits before the %q", sc.dec)}
	case sc.frac == 0:
		return &ParseError{sc.s, fmt.Sprintf("needs digits after the %q", sc.dec)}
	}
	return nil
}

func (f Format) groupError(s string) *ParseError {
	return &ParseError{s, fmt.Sprintf("has its thousands grouped wrongly: the %s format groups by three digits, as in %s", f, f.Example())}
}

// separatorError explains a separator that format f does not use there.
func (f Format) separatorError(s string, r rune, afterDecimals bool) *ParseError {
	if afterDecimals && (r == f.decimalSep() || f.isGroupSep(r)) {
		return &ParseError{s, fmt.Sprintf("has %s after the decimals", runeName(r))}
	}
	return &ParseError{s, fmt.Sprintf("has %s, which the %s format does not use (it writes %s): is the file's amount format another one?", runeName(r), f, f.Example())}
}

// runeName names a separator character for a message.
func runeName(r rune) string {
	switch r {
	case ' ':
		return "a space"
	case '\u00A0':
		return "a no-break space"
	case '\u202F':
		return "a narrow no-break space"
	}
	if utf8.ValidRune(r) {
		return fmt.Sprintf("%q", r)
	}
	return fmt.Sprintf("%U", r)
}
