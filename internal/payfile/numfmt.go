package payfile

import (
	"strings"
	"unicode/utf8"

	"github.com/shopspring/decimal"
)

// A number cell is what a spreadsheet shows of it through its number
// format. An amount is taken from a number cell only when the format shows
// the stored value exactly: it may add a currency, signs, spaces, padding,
// thousands grouping or more decimals than the value has, but not round to
// fewer decimals, scale (a trailing ',' divides by a thousand, '%' by a
// hundredth), nor show a date, a time, a fraction or an exponent.
// numberFormatProblem reads the format code for that (the format codes of
// OOXML are always written with ',' grouping and '.' decimals, whatever the
// locale shows).

// builtinFormats are the number formats of ids not written in a
// workbook's styles (ECMA-376 part 1, 18.8.30). The ids of locale-
// specific dates (27-36, 50-81) are left out: they are refused as unknown.
var builtinFormats = map[int]string{
	0: "General", 1: "0", 2: "0.00", 3: "#,##0", 4: "#,##0.00",
	5: `"$"#,##0_);\("$"#,##0\)`, 6: `"$"#,##0_);[Red]\("$"#,##0\)`,
	7: `"$"#,##0.00_);\("$"#,##0.00\)`, 8: `"$"#,##0.00_);[Red]\("$"#,##0.00\)`,
	9: "0%", 10: "0.00%", 11: "0.00E+00", 12: "# ?/?", 13: "# ??/??",
	14: "mm-dd-yy", 15: "d-mmm-yy", 16: "d-mmm", 17: "mmm-yy", 18: "h:mm AM/PM",
	19: "h:mm:ss AM/PM", 20: "h:mm", 21: "h:mm:ss", 22: "m/d/yy h:mm",
	37: "#,##0 ;(#,##0)", 38: "#,##0 ;[Red](#,##0)", 39: "#,##0.00;(#,##0.00)",
	40: "#,##0.00;[Red](#,##0.00)",
	41: `_(* #,##0_);_(* \(#,##0\);_(* "-"_);_(@_)`,
	42: `_("$"* #,##0_);_("$"* \(#,##0\);_("$"* "-"_);_(@_)`,
	43: `_(* #,##0.00_);_(* \(#,##0.00\);_(* "-"??_);_(@_)`,
	44: `_("$"* #,##0.00_);_("$"* \(#,##0.00\);_("$"* "-"??_);_(@_)`,
	45: "mm:ss", 46: "[h]:mm:ss", 47: "mmss.0", 48: "##0.0E+0", 49: "@",
}

// generalDigits is how many digits the General format shows before it
// rounds or turns to an exponent (Excel, in a column of standard width).
const generalDigits = 11

// numberFormatProblem says how the number format code shows the value d
// otherwise than exactly ("a date", "rounded to 0 decimal places"), or ""
// when it shows d exactly.
func numberFormatProblem(code string, d decimal.Decimal) string {
	sections := splitSections(code)
	sec := sections[0]
	switch {
	case d.IsNegative() && len(sections) > 1:
		sec = sections[1]
	case d.IsZero() && len(sections) > 2:
		sec = sections[2]
	}
	f, problem := readSection(sec)
	if problem != "" {
		return problem
	}
	places := 0
	if exp := d.Exponent(); exp < 0 {
		// Trailing zeros of the stored value do not count.
		s := strings.TrimRight(d.String(), "0")
		if i := strings.IndexByte(s, '.'); i >= 0 {
			places = len(s) - i - 1
		}
	}
	if f.general {
		digits := len(strings.TrimLeft(strings.ReplaceAll(strings.TrimPrefix(d.String(), "-"), ".", ""), "0"))
		if digits > generalDigits {
			return "the General format, which shows at most 11 digits"
		}
		return ""
	}
	if places > f.decimals {
		return "rounded to " + plural(f.decimals, "decimal place")
	}
	return ""
}

// splitSections splits a format code at its top-level ';'.
func splitSections(code string) []string {
	var out []string
	start, quoted, bracket := 0, false, false
	for i := 0; i < len(code); i++ {
		c := code[i]
		switch {
		case quoted:
			quoted = c != '"'
		case bracket:
			bracket = c != ']'
		case c == '"':
			quoted = true
		case c == '[':
			bracket = true
		case c == '\\' || c == '_' || c == '*':
			if i+1 < len(code) {
				_, size := utf8.DecodeRuneInString(code[i+1:])
				i += size
			}
		case c == ';':
			out = append(out, code[start:i])
			start = i + 1
		}
	}
	return append(out, code[start:])
}

// numberFormat is what readSection finds of a section.
type numberFormat struct {
	general  bool
	decimals int
}

// readSection reads one section of a format code: its decimal places, or
// why it does not show a number exactly.
func readSection(sec string) (numberFormat, string) {
	if strings.TrimSpace(sec) == "@" {
		return numberFormat{general: true}, ""
	}
	if strings.Contains(unquoted(sec), "/") {
		return numberFormat{}, "a fraction or a date"
	}
	s := sectionReader{sec: sec}
	for i := 0; i < len(sec); {
		next, problem := s.token(i)
		if problem != "" {
			return s.f, problem
		}
		i = next
	}
	if p := s.endDigits(); p != "" {
		return s.f, p
	}
	if !s.digits {
		return s.f, "text without the number"
	}
	return s.f, ""
}

// sectionReader is the state of readSection along a section.
type sectionReader struct {
	sec          string
	f            numberFormat
	digits       bool // a digit placeholder seen
	dot          bool // the decimal point seen
	digitsEnded  bool // something else followed the digits
	commaPending bool // a ',' after the last digit placeholder
}

// endDigits notes that something other than the number follows the digit
// placeholders, if they have not ended yet, and refuses a ',' just before
// it (scaling).
func (s *sectionReader) endDigits() string {
	if s.digits && !s.digitsEnded {
		s.digitsEnded = true
		if s.commaPending {
			return "scaled by a thousand (a ',' after the digits)"
		}
	}
	return ""
}

// token reads the token of the section that starts at i, and returns where
// the next one starts, or why the section does not show a number exactly.
func (s *sectionReader) token(i int) (next int, problem string) {
	sec := s.sec
	r, size := utf8.DecodeRuneInString(sec[i:])
	next = i + size
	switch {
	case r == '"':
		if j := strings.IndexByte(sec[next:], '"'); j >= 0 {
			next += j + 1
		} else {
			next = len(sec)
		}
		return next, s.endDigits()
	case r == '\\' || r == '_' || r == '*':
		if next < len(sec) {
			_, s2 := utf8.DecodeRuneInString(sec[next:])
			next += s2
		}
		return next, s.endDigits()
	case r == '[':
		return s.bracket(next)
	case r == '0' || r == '#' || r == '?':
		return next, s.placeholder()
	case r == '.':
		return next, s.point()
	case r == ',':
		if s.digits && !s.digitsEnded {
			s.commaPending = true
		}
		return next, ""
	case r == '%' || r == '‰':
		return next, "a percentage"
	case (r == 'E' || r == 'e') && next < len(sec) && (sec[next] == '+' || sec[next] == '-'):
		return next, "scientific notation (an exponent)"
	case r == '/':
		return next, "a fraction or a date"
	case r == '@':
		return next, "text"
	case r < 128 && (r|0x20 >= 'a' && r|0x20 <= 'z'):
		return s.letter(i)
	}
	// A literal: a space, a sign, a currency sign, a letter of another
	// alphabet.
	return next, s.endDigits()
}

// bracket reads a bracketed part of the section, whose text starts at
// from: a currency or a locale ends the digits, a colour is no matter; a
// condition, a time or another special format is refused.
func (s *sectionReader) bracket(from int) (next int, problem string) {
	j := strings.IndexByte(s.sec[from:], ']')
	if j < 0 {
		return from, "a format that cannot be read"
	}
	in := s.sec[from : from+j]
	next = from + j + 1
	switch {
	case strings.HasPrefix(in, "$"): // a currency or a locale
		return next, s.endDigits()
	case isColor(in):
		return next, ""
	case strings.ContainsAny(in[:min(1, len(in))], "<>="):
		return next, "a conditional format"
	case strings.Trim(strings.ToLower(in), "hms") == "":
		return next, "a time"
	}
	return next, "a special number format [" + in + "]"
}

// placeholder reads a digit placeholder ('0', '#', '?'): a decimal place
// after the point.
func (s *sectionReader) placeholder() string {
	if s.digitsEnded {
		return "digits broken up by text"
	}
	s.digits, s.commaPending = true, false
	if s.dot {
		s.f.decimals++
	}
	return ""
}

// point reads a '.': the decimal point, or a literal after the number.
func (s *sectionReader) point() string {
	switch {
	case s.digitsEnded:
		// a literal after the number ("руб.")
	case s.dot:
		return "digits broken up by text"
	case s.commaPending:
		return "scaled by a thousand (a ',' before the decimal point)"
	default:
		s.dot = true
	}
	return ""
}

// letter reads the ASCII letter at i: the General format, else a date or
// a time code.
func (s *sectionReader) letter(i int) (next int, problem string) {
	if len(s.sec)-i >= 7 && strings.EqualFold(s.sec[i:i+7], "general") {
		if s.digits {
			return i + 7, "digits broken up by text"
		}
		s.f.general, s.digits = true, true
		return i + 7, ""
	}
	return i + 1, "a date or a time"
}

// unquoted is a section without its quoted text, escaped characters and
// brackets.
func unquoted(sec string) string {
	var b strings.Builder
	for i := 0; i < len(sec); i++ {
		switch c := sec[i]; c {
		case '"':
			if j := strings.IndexByte(sec[i+1:], '"'); j >= 0 {
				i += j + 1
			} else {
				i = len(sec)
			}
		case '[':
			if j := strings.IndexByte(sec[i+1:], ']'); j >= 0 {
				i += j + 1
			} else {
				i = len(sec)
			}
		case '\\', '_', '*':
			i++
		default:
			b.WriteByte(c)
		}
	}
	return b.String()
}

func isColor(s string) bool {
	switch strings.ToLower(s) {
	case "black", "blue", "cyan", "green", "magenta", "red", "white", "yellow":
		return true
	}
	l := strings.ToLower(s)
	return strings.HasPrefix(l, "color") && len(l) > 5 && strings.Trim(l[5:], "0123456789") == ""
}
