package payfile

import (
	"fmt"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"
)

// header is the validated header row of a file.
type header struct {
	line    int
	names   []string // canonical name of each file column
	folded  []string // fold of each file column, to spot a repeated header
	extras  []int    // file column of each of config.extras (extra properties, then informational columns), -1 if absent
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

// SameColumn reports whether two column names name the same column, as
// a header is read: ignoring case and the characters a header ignores
// (spaces, '_', '-', invisible ones).
func SameColumn(a, b string) bool { return fold(a) == fold(b) }

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

// MaxInfoColumns bounds the informational columns of a file: columns whose
// name is not a known one (notes, a pay date, a recipient's name). They
// are kept and carried into the result file, never sent to the PSP.
const MaxInfoColumns = 20

// MaxTitleRows bounds the rows above the header that are taken as a title
// and skipped: at most 2 non-empty cells and no known column name.
const MaxTitleRows = 10

// expected says what a header row holds, for the refusal of a file
// without one.
func (c *config) expected() string {
	return fmt.Sprintf("a header row naming the columns %s, %s and %s or %s (also allowed: %s; other columns are kept as information)",
		ColExternalID, ColAmount, ColCardNumber, ColTelecomOperator, strings.Join(c.allowed[4:], ", "))
}

// titleRow reports whether fields, read above the header, look like a
// title: no known column name, at most 2 non-empty cells.
func (c *config) titleRow(fields []string) bool {
	n := 0
	for _, f := range fields {
		f = strings.Trim(f, " ")
		if f == "" {
			continue
		}
		n++
		if n > 2 {
			return false
		}
		if _, ok := c.byCanon[fold(f)]; ok {
			return false
		}
		if _, near := c.nearName(fold(f)); near {
			return false
		}
	}
	return n > 0 && n <= 2
}

// titles finds the header among the rows at the top of a file, for CSV
// files and workbooks alike: a non-blank row that looks like a title
// (titleRow) is skipped, MaxTitleRows of them at most; the first other row
// is the header. sheet is the workbook's sheet as errors name it ("" for
// CSV).
type titles struct {
	cfg   *config
	sheet string
	lines []int
}

// skip reports whether the non-blank row fields, on line, is a title, and
// notes it.
func (t *titles) skip(fields []string, line int) bool {
	if len(t.lines) < MaxTitleRows && t.cfg.titleRow(fields) {
		t.lines = append(t.lines, line)
		return true
	}
	return false
}

// noHeader is the refusal of a file that ends after its title rows, or
// false when no row was taken as a title.
func (t *titles) noHeader() (Error, bool) {
	if len(t.lines) == 0 {
		return Error{}, false
	}
	return Error{Line: t.lines[0], Sheet: t.sheet, Column: ColumnHeader, Kind: KindHeader,
		Message: fmt.Sprintf("no header row after %s taken as a title: expected %s", placeList(t.sheet, t.lines), t.cfg.expected())}, true
}

// explain adds to a problem of the header the rows taken as a title.
func (t *titles) explain(e Error) Error {
	if len(t.lines) > 0 {
		e.Message += fmt.Sprintf(" (%s above it taken as a title)", placeList(t.sheet, t.lines))
	}
	return e
}

// titleWarning is the warning of a file whose header follows title rows.
func titleWarning(sheet string, lines []int, header int) string {
	return fmt.Sprintf("%s above the header row (%s) taken as a title and skipped", placeList(sheet, lines), placeList(sheet, []int{header}))
}

// placeList names lines of a CSV file ("lines 1-2") or rows of a
// workbook's sheet, sheet as errors name it ("rows Payouts!1-2").
func placeList(sheet string, lines []int) string {
	l := lineList(lines)
	if sheet == "" {
		return l
	}
	word, nums, _ := strings.Cut(l, " ")
	if word == "line" {
		word = "row"
	} else {
		word = "rows"
	}
	parts := strings.Split(nums, ", ")
	for i, p := range parts {
		parts[i] = sheet + "!" + p
	}
	return word + " " + strings.Join(parts, ", ")
}

// parseHeader checks the header fields read on line and returns the header,
// or the problems that make the file unusable. Columns of a known name
// (fixed or configured extra) are mapped by it; any other named column is
// informational unless its name is a near miss of a known one (amout,
// card_numbr), which is refused with "did you mean". It sets c.extras for
// the file: the configured extra properties, then its informational
// columns.
func (c *config) parseHeader(fields []string, line int) (*header, []Error) {
	bad := func(format string, args ...any) Error {
		return headerProblem(line, format, args...)
	}
	c.extras = c.props
	allowed := strings.Join(c.allowed, ", ")
	// Far more columns than allowed names is refused at once, without
	// looking at 10,000 names; a few too many are named one by one below
	// (near misses, repeats).
	if len(fields) > len(c.allowed)+MaxInfoColumns {
		return nil, []Error{bad("has %d columns, at most %d are allowed: %s and %d other columns kept as information", len(fields), len(c.allowed)+MaxInfoColumns, allowed, MaxInfoColumns)}
	}
	h := &header{line: line, names: make([]string, len(fields)), folded: make([]string, len(fields))}
	var errs []Error
	var info []string
	infoCol := map[string]int{}
	known := 0
	seen := make(map[string]int, len(fields))
	for i, f := range fields {
		f = strings.Trim(f, " ")
		h.folded[i] = fold(f)
		name, ok := c.byCanon[h.folded[i]]
		switch {
		case h.folded[i] == "":
			errs = append(errs, bad("column %d has no name (allowed: %s; a column of notes needs a name too)", i+1, allowed))
		case ok:
			known++
			if j, dup := seen[name]; dup {
				errs = append(errs, bad("column %d %q repeats column %d (%s)", i+1, f, j+1, name))
			}
			seen[name] = i
			h.names[i] = name
		case h.folded[i] == fold(ColBankName):
			// A destination property, never mere information.
			errs = append(errs, bad("column %q is a destination property sent to the PSP: it is allowed only with the PSP's bank dictionary (--bank-names FILE)", f))
		default:
			if msg := c.infoProblem(i, f, h.folded[i], allowed, infoCol); msg != "" {
				errs = append(errs, bad("%s", msg))
				continue
			}
			infoCol[h.folded[i]] = i
			h.names[i] = f
			info = append(info, f)
		}
	}
	if known == 0 {
		return nil, []Error{bad("no known column name: is the header row missing, or a title row above it (more than 2 cells)? Expected %s", c.expected())}
	}
	errs = append(errs, missingColumns(seen, line, allowed)...)
	if msg := c.payDateProblem(seen, infoCol, info); msg != "" {
		errs = append(errs, bad("%s", msg))
	}
	if len(errs) > 0 {
		return nil, errs
	}
	c.mapColumns(h, seen, infoCol, info)
	return h, nil
}

// headerProblem is a problem of the header row, on line.
func headerProblem(line int, format string, args ...any) Error {
	return Error{Line: line, Column: ColumnHeader, Kind: KindHeader, Message: fmt.Sprintf(format, args...)}
}

// infoProblem says why column i, named f (folded), of no known name, is
// refused as an informational column, or "": a near miss of a known name,
// a card number, a non-printable character, or a repeat of another
// informational column (infoCol).
func (c *config) infoProblem(i int, f, folded, allowed string, infoCol map[string]int) string {
	if near, ok := c.nearName(folded); ok {
		return fmt.Sprintf("unknown column %q: did you mean %q? (allowed: %s; other columns are kept as information, but not one named so close to a known one)", f, near, allowed)
	}
	if m := cardIn(f, CardPrefixesAny, false); m != "" {
		return fmt.Sprintf("column %d is named with a card number (%s)", i+1, m)
	}
	if msg := textProblem(f, false); msg != "" {
		return fmt.Sprintf("column %d %s", i+1, msg)
	}
	if j, dup := infoCol[folded]; dup {
		return fmt.Sprintf("column %d %q repeats column %d", i+1, f, j+1)
	}
	return ""
}

// payDateProblem says why the header lacks the pay date column
// (Options.PayDateColumn), "" when it has it or none is asked for: a
// column named for the pay dates that the file lacks is refused at its
// header, never ignored (every row would take the batch's release time,
// or none). seen are the known columns, infoCol and info the
// informational ones.
func (c *config) payDateProblem(seen, infoCol map[string]int, info []string) string {
	if c.payDate == "" {
		return ""
	}
	if _, ok := infoCol[c.payDate]; ok {
		return ""
	}
	if name, ok := c.byCanon[c.payDate]; ok {
		if _, in := seen[name]; in {
			return fmt.Sprintf("the pay date column %q (--pay-date-column) is %s, a column sent to the PSP, not an informational column", c.payDateName, name)
		}
	}
	for _, n := range info {
		if nameDistance(fold(n), c.payDate) <= 2 {
			return fmt.Sprintf("no pay date column %q (--pay-date-column) in the header: did you mean %q?", c.payDateName, n)
		}
	}
	if len(info) == 0 {
		return fmt.Sprintf("no pay date column %q (--pay-date-column) in the header: the file has no informational column", c.payDateName)
	}
	return fmt.Sprintf("no pay date column %q (--pay-date-column) in the header: its informational columns are %s", c.payDateName, strings.Join(info, ", "))
}

// missingColumns are the problems of a header, on line, whose known
// columns (seen) lack a required column or a destination.
func missingColumns(seen map[string]int, line int, allowed string) []Error {
	var errs []Error
	for _, req := range []string{ColExternalID, ColAmount} {
		if _, ok := seen[req]; !ok {
			errs = append(errs, headerProblem(line, "missing required column %s (allowed: %s)", req, allowed))
		}
	}
	_, hasCard := seen[ColCardNumber]
	_, hasTel := seen[ColTelecomOperator]
	if !hasCard && !hasTel {
		errs = append(errs, headerProblem(line, "missing a destination column: %s or %s", ColCardNumber, ColTelecomOperator))
	}
	return errs
}

// mapColumns completes a valid header h: the fixed columns it lacks, and
// the file column of each of c.extras, which it sets to the configured
// extra properties, then the informational columns info.
func (c *config) mapColumns(h *header, seen, infoCol map[string]int, info []string) {
	for _, n := range []string{ColExternalID, ColAmount, ColCardNumber, ColTelecomOperator} {
		if _, ok := seen[n]; !ok {
			h.missing = append(h.missing, n)
		}
	}
	c.extras = append(slices.Clip(c.props), info...)
	h.extras = make([]int, len(c.extras))
	for k, n := range c.extras {
		h.extras[k] = -1
		if k >= len(c.props) {
			h.extras[k] = infoCol[fold(n)]
		} else if i, ok := seen[n]; ok {
			h.extras[k] = i
		}
	}
}

// nearName returns the known column name that the folded name f is a
// near miss of: at most 1 edit (insertion, deletion, substitution or swap
// of neighbours) from a known name of up to 6 letters, at most 2 from a
// longer one; or f begins a known name and has 4 letters or more (card),
// or is inside one and has 5 or more (phone, operator), or holds a known
// name of 5 letters or more (externalid2).
func (c *config) nearName(f string) (string, bool) {
	best, bestD := "", 3
	for _, n := range c.allowed {
		k := fold(n)
		limit := 2
		if utf8.RuneCountInString(k) <= 6 {
			limit = 1
		}
		if d := nameDistance(f, k); d <= limit && d < bestD {
			best, bestD = n, d
		}
	}
	if best != "" {
		return best, true
	}
	for _, n := range c.allowed {
		k := fold(n)
		if (len(f) >= 4 && strings.HasPrefix(k, f)) || (len(f) >= 5 && strings.Contains(k, f)) || (len(k) >= 5 && strings.Contains(f, k)) {
			return n, true
		}
	}
	return "", false
}

// nameDistance is the optimal string alignment distance of a and b, by
// runes: insertions, deletions, substitutions and swaps of neighbours.
func nameDistance(a, b string) int {
	ra, rb := []rune(a), []rune(b)
	prev2 := make([]int, len(rb)+1)
	prev := make([]int, len(rb)+1)
	cur := make([]int, len(rb)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(ra); i++ {
		cur[0] = i
		for j := 1; j <= len(rb); j++ {
			cost := 1
			if ra[i-1] == rb[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
			if i > 1 && j > 1 && ra[i-1] == rb[j-2] && ra[i-2] == rb[j-1] {
				cur[j] = min(cur[j], prev2[j-2]+1)
			}
		}
		prev2, prev, cur = prev, cur, prev2
	}
	return prev[len(rb)]
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
