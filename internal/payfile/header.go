package payfile

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// header is the validated header row of a file.
type header struct {
	line    int
	names   []string // canonical name of each file column
	folded  []string // fold of each file column, to spot a repeated header
	extras  []int    // file column of each configured extra column, -1 if absent
	missing []string // fixed columns absent from the file (given empty to gocsv)
}

// ignorable tells the runes that header matching skips: spaces of any kind,
// '-', '_' and zero-width characters (a BOM left in a cell, Excel's line
// breaks inside a wrapped header cell).
func ignorable(r rune) bool {
	switch r {
	case '-', '_', '\u200B', '\u200C', '\u200D', '\uFEFF':
		return true
	}
	return unicode.IsSpace(r)
}

// fold is the form in which header names are compared.
func fold(s string) string {
	var b strings.Builder
	b.Grow(len(s))
	for _, r := range s {
		if !ignorable(r) {
			b.WriteRune(unicode.ToLower(r))
		}
	}
	return b.String()
}

// foldEqual reports whether fold(s) == f without allocating.
func foldEqual(s, f string) bool {
	for _, r := range s {
		if ignorable(r) {
			continue
		}
		fr, size := utf8.DecodeRuneInString(f)
		if size == 0 || unicode.ToLower(r) != fr {
			return false
		}
		f = f[size:]
	}
	return f == ""
}

// parseHeader checks the header fields read on line and returns the header,
// or the problems that make the file unusable.
func (c *config) parseHeader(fields []string, line int) (*header, []Error) {
	bad := func(format string, args ...any) Error {
		return Error{Line: line, Column: ColumnHeader, Kind: KindHeader, Message: fmt.Sprintf(format, args...)}
	}
	allowed := strings.Join(c.allowed, ", ")
	// Every column must be distinct and allowed. Far more columns than
	// allowed names is refused at once, without looking at 10,000 names; a
	// few too many are named one by one below (unknown or repeated).
	if len(fields) > len(c.allowed)+8 {
		return nil, []Error{bad("has %d columns, at most %d are allowed: %s", len(fields), len(c.allowed), allowed)}
	}
	h := &header{line: line, names: make([]string, len(fields)), folded: make([]string, len(fields))}
	var errs []Error
	known := 0
	seen := make(map[string]int, len(fields))
	for i, f := range fields {
		f = strings.Trim(f, " ")
		h.folded[i] = fold(f)
		name, ok := c.byCanon[h.folded[i]]
		if ok {
			known++
		}
		switch {
		case h.folded[i] == "":
			errs = append(errs, bad("column %d has no name (allowed: %s)", i+1, allowed))
		case !ok:
			errs = append(errs, bad("unknown column %q (allowed: %s)", f, allowed))
		default:
			if j, dup := seen[name]; dup {
				errs = append(errs, bad("column %d %q repeats column %d (%s)", i+1, f, j+1, name))
			}
			seen[name] = i
			h.names[i] = name
		}
	}
	if known == 0 {
		return nil, []Error{bad("no known column name: is the header row missing? The first line must name the columns: %s", allowed)}
	}
	for _, req := range []string{ColExternalID, ColAmount} {
		if _, ok := seen[req]; !ok {
			errs = append(errs, bad("missing required column %s (allowed: %s)", req, allowed))
		}
	}
	_, hasCard := seen[ColCardNumber]
	_, hasTel := seen[ColTelecomOperator]
	if !hasCard && !hasTel {
		errs = append(errs, bad("missing a destination column: %s or %s", ColCardNumber, ColTelecomOperator))
	}
	if len(errs) > 0 {
		return nil, errs
	}
	for _, n := range []string{ColExternalID, ColAmount, ColCardNumber, ColTelecomOperator} {
		if _, ok := seen[n]; !ok {
			h.missing = append(h.missing, n)
		}
	}
	h.extras = make([]int, len(c.extras))
	for k, n := range c.extras {
		h.extras[k] = -1
		if i, ok := seen[n]; ok {
			h.extras[k] = i
		}
	}
	return h, nil
}

// repeats reports whether a data record is the header again.
func (h *header) repeats(fields []string) bool {
	if len(fields) != len(h.folded) {
		return false
	}
	for i, f := range fields {
		if !foldEqual(f, h.folded[i]) {
			return false
		}
	}
	return true
}
