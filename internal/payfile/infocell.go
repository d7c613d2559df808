package payfile

import (
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/shopspring/decimal"
)

// An informational column (any column not sent to the PSP: payDate,
// count, a comment) is read as the sheet shows it: a date cell, or a
// number under a date format, as its date; a plain number with its
// format's decimals. The strictness of textOfCell (a number cell drops
// leading zeros and digits) protects ids, amounts and destinations; in a
// column never paid from it only refused whole workbooks (issue 43). A
// number too long for a spreadsheet to show whole (a card number typed as
// a number) is still refused, without its digits.

// informational reports whether col is a column kept as information only.
func (c *config) informational(col string) bool {
	return col != ColReason && !slices.Contains(c.allowed, col)
}

// infoText is the text of cell x of an informational column as the sheet
// shows it, or ok false when it is not a date or a plain number shown so.
func infoText(x xcell) (text string, ok bool) {
	switch x.kind {
	case cellDate:
		return isoDate(x.raw), x.raw != ""
	case cellNumber:
	default:
		return "", false
	}
	d, err := decimal.NewFromString(strings.TrimSpace(x.raw))
	if err != nil || !x.formatKnown {
		return "", false
	}
	sec := splitSections(x.format)[0]
	if isDateFormat(sec) {
		f, _ := d.Float64()
		if f < 1 || f > 2958465 { // 9999-12-31
			return "", false
		}
		return formatDate(sec, serialTime(f)), true
	}
	if len(d.Abs().Truncate(0).String()) > generalDigits {
		return "", false
	}
	if d.IsNegative() && len(splitSections(x.format)) > 1 {
		sec = splitSections(x.format)[1]
	}
	nf, problem := readSection(sec)
	switch {
	case problem != "":
		return "", false
	case nf.general:
		return d.String(), true
	}
	return d.StringFixed(int32(nf.decimals)), true
}

// isoDate is the ISO 8601 value of a date cell (t="d") without a
// midnight time: "2026-11-20T00:00:00Z" is "2026-11-20".
func isoDate(raw string) string {
	date, tm, found := strings.Cut(strings.TrimSpace(raw), "T")
	if !found || strings.Trim(strings.TrimSuffix(tm, "Z"), "0:.") == "" {
		return date
	}
	return strings.TrimSpace(raw)
}

// serialTime is the time of a spreadsheet's date serial number (days
// since 1899-12-30, the 1900 date system; serials before 1900-03-01 are
// off by Excel's phantom 1900-02-29).
func serialTime(serial float64) time.Time {
	base := time.Date(1899, 12, 30, 0, 0, 0, 0, time.UTC)
	if serial < 61 {
		base = base.AddDate(0, 0, 1)
	}
	days := math.Floor(serial)
	secs := math.Round((serial - days) * 86400)
	return base.AddDate(0, 0, int(days)).Add(time.Duration(secs) * time.Second)
}

// dateLiteral reports the literal text of a format code at i (quoted,
// escaped, a bracket such as [$-409] or [Red], _ and * padding), its
// length, and whether there is one.
func dateLiteral(code string, i int) (lit string, n int, ok bool) {
	switch code[i] {
	case '"':
		end := strings.IndexByte(code[i+1:], '"')
		if end < 0 {
			return code[i+1:], len(code) - i, true
		}
		return code[i+1 : i+1+end], end + 2, true
	case '\\':
		if i+1 < len(code) {
			return code[i+1 : i+2], 2, true
		}
		return "", 1, true
	case '[':
		end := strings.IndexByte(code[i:], ']')
		if end < 0 {
			return "", len(code) - i, true
		}
		return "", end + 1, true
	case '_':
		return " ", min(2, len(code)-i), true
	case '*':
		return "", min(2, len(code)-i), true
	}
	return "", 0, false
}

// isDateFormat reports whether a format code section shows a date or a
// time: it has a year, day, hour or second code outside its literals.
func isDateFormat(sec string) bool {
	for i := 0; i < len(sec); {
		if _, n, ok := dateLiteral(sec, i); ok {
			i += n
			continue
		}
		switch sec[i] | 0x20 {
		case 'y', 'd', 'h', 's':
			return true
		}
		i++
	}
	return false
}

// formatDate writes t as the date format code section sec shows it (the
// English names of months and days; AM/PM as a 12-hour clock).
func formatDate(sec string, t time.Time) string {
	lower := strings.ToLower(sec)
	ampm := strings.Contains(lower, "am/pm") || strings.Contains(lower, "a/p")
	var b strings.Builder
	afterHour := false
	for i := 0; i < len(sec); {
		if lit, n, ok := dateLiteral(sec, i); ok {
			b.WriteString(lit)
			i += n
			continue
		}
		if strings.HasPrefix(lower[i:], "am/pm") {
			b.WriteString(t.Format("PM"))
			i += 5
			continue
		}
		c := lower[i]
		n := 1
		for i+n < len(lower) && lower[i+n] == c {
			n++
		}
		minutes := c == 'm' && (afterHour || strings.HasPrefix(strings.TrimLeft(lower[i+n:], ":"), "s"))
		b.WriteString(dateToken(c, n, t, minutes, ampm))
		if c == 'h' {
			afterHour = true
		} else if c != ':' && c != 'm' && c != ' ' {
			afterHour = false
		}
		i += n
	}
	return b.String()
}

// dateToken is the text of n repeats of the format code letter c.
func dateToken(c byte, n int, t time.Time, minutes, ampm bool) string {
	pad := func(v int) string {
		if n >= 2 {
			return twoDigits(v)
		}
		return strconv.Itoa(v)
	}
	switch c {
	case 'y':
		if n <= 2 {
			return twoDigits(t.Year() % 100)
		}
		return strconv.Itoa(t.Year())
	case 'm':
		switch {
		case minutes:
			return pad(t.Minute())
		case n == 3:
			return t.Format("Jan")
		case n == 4:
			return t.Format("January")
		case n >= 5:
			return t.Format("January")[:1]
		}
		return pad(int(t.Month()))
	case 'd':
		switch {
		case n == 3:
			return t.Format("Mon")
		case n >= 4:
			return t.Format("Monday")
		}
		return pad(t.Day())
	case 'h':
		h := t.Hour()
		if ampm {
			h = (h+11)%12 + 1
		}
		return pad(h)
	case 's':
		return pad(t.Second())
	}
	return strings.Repeat(string(c), n)
}

func twoDigits(v int) string { return string([]byte{byte('0' + v/10%10), byte('0' + v%10)}) }
