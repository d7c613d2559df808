package payfile

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/shopspring/decimal"
)

// Reading a workbook (.xlsx) is this package's own streaming reader
// (xlsxpkg.go, xlsxsheet.go): the package through archive/zip, each part
// through encoding/xml's token stream, every part and every token within
// bounds, so that memory and time are bounded for any input. The shared
// strings and the number formats are kept; the sheet is read a row at a
// time. A cell becomes the text a row is validated with (textOfCell): a
// text cell is its text; a number cell only when its stored value is exact
// and its number format shows exactly that value (numfmt.go); anything
// else is refused with the reason and the fix (format the column as Text).
//
// What the sheet shows is what is paid: a hidden row, a row filtered out
// by an autofilter, or a hidden column holding a payout column is refused
// unless Options.IncludeHiddenRows.

// IsWorkbook reports whether a file of this name is read as an XLSX
// workbook (its extension is .xlsx, in any case) rather than as CSV.
func IsWorkbook(name string) bool {
	return strings.EqualFold(filepath.Ext(name), ".xlsx")
}

// cellKind is the type of a workbook cell.
type cellKind uint8

const (
	cellEmpty cellKind = iota
	cellText
	cellNumber
	cellBool
	cellError
	cellDate         // an ISO 8601 date cell (t="d")
	cellNoValue      // a formula without a saved value
	cellUnknownValue // an unknown type
	cellBadRef       // a shared string index the workbook has not
)

// xcell is one cell of a workbook row.
type xcell struct {
	kind        cellKind
	formula     bool
	hasValue    bool
	raw         string // text, or the stored digits of a number
	format      string // the number format code
	formatKnown bool   // format is known (not a locale's built-in id)
}

// workbook is an opened workbook and the sheet to read.
type workbook struct {
	pkg   *xlsxPackage
	book  *bookInfo
	sheet sheetInfo
}

// fileProblem turns an error of the reader into the Error that refuses
// the file, if it is one: not a workbook, or over a bound.
func fileProblem(err error) (Error, bool) {
	var nw *notWorkbookError
	var le *limitError
	switch {
	case errors.As(err, &nw):
		return Error{Line: 1, Column: ColumnFile, Kind: KindEncoding, Message: nw.msg}, true
	case errors.As(err, &le):
		return Error{Line: 1, Column: ColumnFile, Kind: KindStructure, Message: "the workbook is refused: " + le.msg}, true
	}
	return Error{}, false
}

// openWorkbook reads an .xlsx workbook from r and picks the sheet: the
// named one, or the first one not hidden. A problem of the file itself is
// a *fatalError.
func openWorkbook(r io.Reader, sheet string) (*workbook, error) {
	pkg, err := openPackage(r)
	if err == nil {
		var book *bookInfo
		if book, err = pkg.readBook(); err == nil {
			return pickSheet(pkg, book, sheet)
		}
	}
	if e, ok := fileProblem(err); ok {
		return nil, &fatalError{e}
	}
	return nil, err
}

func pickSheet(pkg *xlsxPackage, book *bookInfo, sheet string) (*workbook, error) {
	wb := &workbook{pkg: pkg, book: book}
	found := false
	for _, s := range book.sheets {
		if sheet == "" && !s.hidden || sheet != "" && s.name == sheet {
			wb.sheet, found = s, true
			break
		}
	}
	switch {
	case !found && sheet == "":
		return nil, &fatalError{Error{Line: 1, Column: ColumnFile, Kind: KindStructure,
			Message: fmt.Sprintf("every sheet of the workbook is hidden (%s): unhide the one to read, or name it with --sheet", quoteList(book.names()))}}
	case !found:
		return nil, &fatalError{Error{Line: 1, Column: ColumnFile, Kind: KindStructure,
			Message: fmt.Sprintf("the workbook has no sheet %q (--sheet); its sheets: %s", sheet, quoteList(book.names()))}}
	case wb.sheet.part == "" || pkg.files[wb.sheet.part] == nil:
		return nil, &fatalError{Error{Line: 1, Column: ColumnFile, Kind: KindEncoding,
			Message: fmt.Sprintf("not an XLSX workbook (the sheet %q has no part in the package): save it again from the spreadsheet as Excel Workbook (.xlsx)", wb.sheet.name)}}
	}
	return wb, nil
}

// andList quotes names and joins them: "a", "b" and "c".
func andList(names []string) string {
	q := make([]string, len(names))
	for i, n := range names {
		q[i] = strconv.Quote(n)
	}
	if len(q) == 1 {
		return q[0]
	}
	return strings.Join(q[:len(q)-1], ", ") + " and " + q[len(q)-1]
}

func (b *bookInfo) names() []string {
	out := make([]string, len(b.sheets))
	for i, s := range b.sheets {
		out[i] = s.name
	}
	return out
}

func (wb *workbook) Close() error { return nil }

// eachRow calls fn with every row present in the sheet, in order, with
// whether it is hidden and its cells (index 0 is column A; the slice is
// reused). cols gives the sheet reader, for its hidden columns.
func (wb *workbook) eachRow(ctx context.Context, fn func(sr *sheetReader, row int, hidden bool, cells []xcell) error) error {
	sr, err := wb.pkg.openSheet(wb.book, wb.sheet.part)
	if err != nil {
		return err
	}
	defer sr.Close()
	for n := 0; ; n++ {
		if n%1024 == 0 {
			if err := ctx.Err(); err != nil {
				return err
			}
		}
		row, hidden, cells, err := sr.next()
		if err != nil || row == 0 {
			return err
		}
		if err := fn(sr, row, hidden, cells); err != nil {
			return err
		}
	}
}

// colName is the letter name of column col (from 1): "A", "AB".
func colName(col int) string {
	var b []byte
	for col > 0 {
		col--
		b = append([]byte{byte('A' + col%26)}, b...)
		col /= 26
	}
	return string(b)
}

// cellRef is the A1 name of a cell: "C14".
func cellRef(col, row int) string { return colName(col) + strconv.Itoa(row) }

// sheetRef is how a sheet is named before '!' in an error: as is, or
// quoted as a spreadsheet does when the name has other characters than
// letters, digits and '_'.
func sheetRef(sheet string) string {
	for _, r := range sheet {
		if !(r == '_' || r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r > 127 && r != '\u00A0') {
			return "'" + strings.ReplaceAll(sheet, "'", "''") + "'"
		}
	}
	return sheet
}

// sciShort shows a number in scientific notation without its digits
// (they may be a card number's): "6.7…E+18".
func sciShort(s string) string {
	i := strings.IndexAny(s, "eE")
	if i < 0 {
		return s
	}
	sign, m := "", s[:i]
	if strings.HasPrefix(m, "-") {
		sign, m = "-", m[1:]
	}
	if len(m) > 3 {
		m = m[:3] + "…"
	}
	return sign + m + s[i:]
}

// sciOf shows d in scientific notation without its digits: "6.7…E+15".
func sciOf(d decimal.Decimal) string {
	digits := d.Abs().Truncate(0).String()
	if len(digits) < 3 {
		return d.String()
	}
	sign := ""
	if d.IsNegative() {
		sign = "-"
	}
	return fmt.Sprintf("%s%c.%c…E+%d", sign, digits[0], digits[1], len(digits)-1)
}

// isScientific reports whether s is a number written in scientific
// notation ("6.75964982643845E+018", "1.5e3").
func isScientific(s string) bool {
	s = strings.TrimSpace(s)
	i := strings.IndexAny(s, "eE")
	if i < 1 || i == len(s)-1 {
		return false
	}
	m, e := s[:i], strings.TrimLeft(s[i+1:], "+-")
	m = strings.TrimPrefix(m, "-")
	return e != "" && isDigits(e) && m != "" && isDigits(strings.Replace(m, ".", "", 1)) && strings.Replace(m, ".", "", 1) != ""
}

// sciMessage is the refusal of a card number or an amount written in
// scientific notation.
func sciMessage(col, shown string) string {
	if col == ColCardNumber {
		return fmt.Sprintf("holds a number in scientific notation (%s), as a spreadsheet shows a long number in a column not formatted as Text: the card number's last digits are lost; format the cardNumber column as Text and type or paste the card numbers again", sciShort(shown))
	}
	return fmt.Sprintf("holds a number in scientific notation (%s), not an amount: format the %s column as Number with the amount's decimals, or as Text, and check the values", sciShort(shown), col)
}

// textOfCell turns a data cell of column col into the text a row is
// validated with, or says why the cell cannot be taken as it is.
// amountPlain reports that an amount came from a number cell, and so is in
// plain form whatever the file's amount format.
func (c *config) textOfCell(col string, x xcell) (text string, amountPlain bool, problem string) {
	formulaNote := ""
	if x.formula {
		formulaNote = " (the result of a formula)"
	}
	if c.informational(col) {
		if t, ok := infoText(x); ok {
			return t, false, ""
		}
	}
	switch x.kind {
	case cellEmpty:
		return "", false, ""
	case cellText:
		t := strings.Trim(x.raw, " ")
		if (col == ColCardNumber || col == ColAmount) && isScientific(t) {
			return "", false, sciMessage(col, t)
		}
		return t, false, ""
	case cellNoValue:
		return "", false, "is a formula with no saved result (the workbook was written by a program that does not calculate): open and save it in a spreadsheet program (Excel, LibreOffice Calc), or paste the column as values"
	case cellBadRef:
		return "", false, fmt.Sprintf("refers to shared string %s, which the workbook does not have: the file is damaged; open and save it in a spreadsheet program", strconv.Quote(x.raw))
	case cellBool:
		return "", false, fmt.Sprintf("is a TRUE/FALSE cell%s, not text: type the %s as text", formulaNote, col)
	case cellError:
		return "", false, fmt.Sprintf("holds the error %s%s: correct the cell", x.raw, formulaNote)
	case cellDate:
		return "", false, fmt.Sprintf("is a date cell (%s)%s: format the %s column as Text and type the values again", x.raw, formulaNote, col)
	case cellUnknownValue:
		return "", false, fmt.Sprintf("is a cell of an unknown type%s: format the %s column as Text and type the values again", formulaNote, col)
	}
	// A number cell.
	switch col {
	case ColCardNumber:
		// Never the digits: they may be a card number.
		if d, err := decimal.NewFromString(x.raw); err == nil && (isScientific(x.raw) || d.Abs().GreaterThanOrEqual(decimal.New(1, 11))) {
			return "", false, fmt.Sprintf("is a number cell%s, not text, holding a number of %d digits that a spreadsheet shows in scientific notation (%s): a spreadsheet keeps only 15 digits of a number, so a 16-digit card number loses its last digits; format the cardNumber column as Text and type or paste the card numbers again", formulaNote, len(d.Abs().Truncate(0).String()), sciOf(d))
		}
		return "", false, "is a number cell" + formulaNote + ", not text: a spreadsheet keeps only 15 digits of a number, so a 16-digit card number loses its last digit (and shows as 4.11111E+15); format the cardNumber column as Text and type or paste the card numbers again"
	case ColAmount:
		return c.amountOfNumber(x)
	}
	if isDigits(x.raw) && len(x.raw) <= 15 && x.formatKnown {
		switch f := strings.TrimSpace(x.format); {
		case f == "0", f == "@", strings.EqualFold(f, "general") && len(x.raw) <= generalDigits:
			return x.raw, false, ""
		}
	}
	shown := shortDecimal(decimalOr(x.raw))
	if isScientific(x.raw) {
		shown = sciShort(x.raw)
	}
	return "", false, fmt.Sprintf("is a number cell%s holding %s under the number format %q: a number cell drops leading zeros, and shows long numbers as 1.23E+15 or with separators; format the %s column as Text and type or paste the values again", formulaNote, shown, x.format, col)
}

func decimalOr(s string) decimal.Decimal {
	d, err := decimal.NewFromString(s)
	if err != nil {
		return decimal.Zero
	}
	return d
}

// amountOfNumber takes the amount of a number cell: its stored value,
// exactly, when it has at most the allowed decimals and its number format
// shows that value exactly.
func (c *config) amountOfNumber(x xcell) (string, bool, string) {
	formulaNote := ""
	if x.formula {
		formulaNote = ", the result of a formula,"
	}
	d, err := decimal.NewFromString(strings.TrimSpace(x.raw))
	if err != nil {
		return "", false, fmt.Sprintf("is a number cell%s holding %q, which is not a number", formulaNote, x.raw)
	}
	if d.Abs().GreaterThanOrEqual(decimal.New(1, 15)) {
		shown := x.raw // never its digits: a 16-digit card typed as a number
		if !isScientific(shown) {
			shown = sciOf(d)
		}
		return "", false, "is a number cell" + formulaNote + " that " + sciMessage(ColAmount, shown)
	}
	if !d.Round(int32(c.scale)).Equal(d) {
		return "", false, fmt.Sprintf("is a number cell%s holding %s, more than %d decimal places: the binary rounding of a spreadsheet's arithmetic (0.1+0.2 is not 0.3 but a little more); round it in the sheet (=ROUND(...;%d)) and paste as values, or format the amount column as Text and type the amounts", formulaNote, shortDecimal(d), c.scale, c.scale)
	}
	if !x.formatKnown {
		return "", false, fmt.Sprintf("is a number cell%s holding %s under a number format this reader does not know (a locale's built-in format): format the amount column as Number with %d decimals, or as Text", formulaNote, shortDecimal(d), c.scale)
	}
	if p := numberFormatProblem(x.format, d); p != "" {
		return "", false, fmt.Sprintf("is a number cell%s holding %s whose number format %q shows something else: %s; format the amount column as Number with %d decimals (a currency or thousands separators may stay), or as Text, so that it shows the amount", formulaNote, shortDecimal(d), x.format, p, c.scale)
	}
	return d.String(), true, ""
}

// shortDecimal writes d for a message: in full when short (11 characters
// at most: no card number has fewer than 12 digits), else never more than
// its first 6 digits, as much as a masked card number shows ("0.30000...
// with 17 decimal places"), or, with more than 6 digits before the point,
// in scientific notation without its digits ("4.1…E+15"). A card number
// typed as a number into any column is so never shown, not even its first
// 10 digits, which card.Scrub would let through.
func shortDecimal(d decimal.Decimal) string {
	s := d.String()
	if len(s) <= 11 {
		return s
	}
	places := 0
	if i := strings.IndexByte(s, '.'); i >= 0 {
		places = len(s) - i - 1
	}
	if len(d.Abs().Truncate(0).String()) > maxShownDigits {
		if places == 0 {
			return sciOf(d)
		}
		return fmt.Sprintf("%s with %d decimal places", sciOf(d), places)
	}
	n := 0
	for i := 0; i < len(s); i++ {
		if isDigits(s[i : i+1]) {
			if n++; n == maxShownDigits {
				return fmt.Sprintf("%s... with %d decimal places", s[:i+1], places)
			}
		}
	}
	return s // not reached: 12 characters of which at most 2 are not digits
}

// maxShownDigits is how many leading digits of a long number a message
// shows: the first 6 of a masked card number.
const maxShownDigits = 6

func isDigits(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// hiddenMessage says why a hidden row is refused.
func hiddenMessage(sh sheetInfo, row int) string {
	if sh.filterFrom > 0 && row >= sh.filterFrom && row <= sh.filterTo {
		return "is hidden, within the sheet's autofilter (filtered out, or hidden by hand): the sheet does not show it, yet it would be paid; clear the filter or unhide it and check the row, delete it, or load with --include-hidden-rows"
	}
	return "is a hidden row: the sheet does not show it, yet it would be paid; unhide it and check it, delete it, or load with --include-hidden-rows"
}

// scanWorkbook is scan for an XLSX workbook: the first non-empty row of
// the sheet that is not a title (the rule of CSV files) is the header,
// every later non-empty row a record.
func scanWorkbook(ctx context.Context, r io.Reader, cfg *config, emit func(Error), fn func(*record) error) (scanResult, error) {
	var res scanResult
	wb, err := openWorkbook(r, cfg.sheet)
	var fe *fatalError
	if errors.As(err, &fe) {
		emit(fe.e)
		res.aborted = true
		return res, nil
	}
	if err != nil {
		return res, err
	}
	defer wb.Close()
	res.sheet = wb.sheet.name
	sheet := sheetRef(wb.sheet.name)
	if wb.sheet.hidden && !cfg.includeHidden {
		emit(Error{Line: 1, Sheet: sheet, Column: ColumnFile, Kind: KindStructure,
			Message: fmt.Sprintf("the sheet %s is hidden: the workbook does not show it, yet it would be paid; unhide it, or load with --include-hidden-rows", wb.sheet.name)})
		res.aborted = true
		return res, nil
	}
	s := &sheetScan{cfg: cfg, wb: wb, emit: emit, fn: fn, sheet: sheet, res: res, tt: titles{cfg: cfg, sheet: sheet}}
	return s.finish(wb.eachRow(ctx, s.row))
}

// errSheetRefused stops the reading of a sheet whose header is refused
// (the problems are reported already).
var errSheetRefused = errors.New("payfile: sheet refused")

// sheetScan is the state of scanWorkbook while it reads the sheet's rows.
type sheetScan struct {
	cfg   *config
	wb    *workbook
	emit  func(Error)
	fn    func(*record) error
	sheet string // sheetRef of the sheet
	res   scanResult
	tt    titles

	h       *header           // nil until the header is read
	letters map[string]string // canonical column name -> column letter
	cur     record            // one variable for all records: fn gets a pointer to it
	rows    int               // data rows
}

// blank reports whether a cell is empty or a text of spaces only.
func (x *xcell) blank() bool {
	return x.kind == cellEmpty || x.kind == cellText && strings.Trim(x.raw, " ") == ""
}

// row takes a row of the sheet: a blank one is skipped, the first others
// are titles or the header, then each is a record.
func (s *sheetScan) row(sr *sheetReader, row int, hidden bool, cells []xcell) error {
	blank := true
	for i := range cells {
		if !cells[i].blank() {
			blank = false
			break
		}
	}
	switch {
	case blank:
		return nil
	case s.h == nil:
		return s.headerRow(sr, row, cells)
	}
	return s.dataRow(row, hidden, cells)
}

// headerRow takes a non-blank row before the header: a title, or the
// header, refused (errSheetRefused) if it has problems or a payout column
// is hidden.
func (s *sheetScan) headerRow(sr *sheetReader, row int, cells []xcell) error {
	fields := make([]string, len(cells))
	for i, x := range cells {
		fields[i] = x.raw
	}
	for len(fields) > 0 && strings.Trim(fields[len(fields)-1], " ") == "" {
		fields = fields[:len(fields)-1]
	}
	if s.tt.skip(fields, row) {
		return nil
	}
	h, problems := s.cfg.parseHeader(fields, row)
	if problems != nil {
		for _, e := range problems {
			e.Sheet = s.sheet
			s.emit(s.tt.explain(e))
		}
		s.otherSheets(row)
		return errSheetRefused
	}
	s.res.columns, s.res.headerLine, s.res.titles = h.names, h.line, s.tt.lines
	s.letters = make(map[string]string, len(h.names))
	for i, n := range h.names {
		s.letters[n] = colName(i + 1)
	}
	if !s.cfg.includeHidden && s.hiddenColumns(sr, h, row) {
		return errSheetRefused
	}
	s.h = h
	return nil
}

// hiddenColumns reports each column of the header h, on row, that the
// sheet hides, and whether there is one.
func (s *sheetScan) hiddenColumns(sr *sheetReader, h *header, row int) bool {
	found := false
	for i, n := range h.names {
		if n != "" && sr.colHidden(i+1) {
			s.emit(Error{Line: row, Sheet: s.sheet, Cell: cellRef(i+1, row), Column: ColumnHeader, Kind: KindHeader,
				Message: fmt.Sprintf("the %s column (%s) is hidden: the sheet does not show it, yet it would be paid; unhide it and check it, or load with --include-hidden-rows", n, colName(i+1))})
			found = true
		}
	}
	return found
}

// otherSheets names the workbook's sheets after the refusal of a sheet
// without a header.
func (s *sheetScan) otherSheets(row int) {
	if len(s.wb.book.sheets) > 1 {
		s.emit(Error{Line: row, Sheet: s.sheet, Column: ColumnHeader, Kind: KindHeader,
			Message: fmt.Sprintf("the sheet %s has no payout header; the workbook's sheets are %s: if the payouts are on another sheet, name it with --sheet", s.wb.sheet.name, andList(s.wb.book.names()))})
	}
}

// dataRow hands a non-blank row after the header to fn as a record.
func (s *sheetScan) dataRow(row int, hidden bool, cells []xcell) error {
	s.rows++
	if hidden {
		s.res.hidden++
	}
	s.cur = record{Line: row, sheet: s.sheet, letters: s.letters}
	if hidden && !s.cfg.includeHidden {
		s.cur.cellErrs = append(s.cur.cellErrs, Error{Line: row, Column: ColumnRow, Kind: KindField, Message: hiddenMessage(s.wb.sheet, row)})
	}
	for i := len(s.h.names); i < len(cells); i++ {
		if !cells[i].blank() {
			s.cur.Problem = fmt.Sprintf("has a value in column %s, right of the header's last column %s", colName(i+1), colName(len(s.h.names)))
			return s.fn(&s.cur)
		}
	}
	s.takeCells(row, cells)
	return s.fn(&s.cur)
}

// takeCells sets the record's fields from the cells of the header's
// columns, or notes why a cell cannot be taken.
func (s *sheetScan) takeCells(row int, cells []xcell) {
	extra := make([]string, len(s.cfg.extras))
	for i, name := range s.h.names {
		if name == ColReason {
			continue // informational (a retry file's), never read
		}
		var x xcell
		if i < len(cells) {
			x = cells[i]
		}
		text, plain, problem := s.cfg.textOfCell(name, x)
		if problem != "" {
			s.cur.cellErrs = append(s.cur.cellErrs, Error{Line: row, Column: name, Kind: KindField, Message: problem})
			continue
		}
		switch name {
		case ColExternalID:
			s.cur.ExternalID = text
		case ColAmount:
			s.cur.Amount, s.cur.amountPlain = text, plain
		case ColCardNumber:
			s.cur.CardNumber = text
		case ColTelecomOperator:
			s.cur.Telecom = text
		default:
			for k, n := range s.cfg.extras {
				if n == name {
					extra[k] = text
				}
			}
		}
	}
	s.cur.Extra = strings.Join(extra, extraSep)
}

// finish ends the reading of the sheet with err, eachRow's: a problem of
// the file, or of a sheet without a header or data rows, is reported and
// aborts.
func (s *sheetScan) finish(err error) (scanResult, error) {
	if e, ok := fileProblem(err); ok {
		e.Sheet = s.sheet
		s.emit(e)
		s.res.aborted = true
		return s.res, nil
	}
	switch {
	case err == errSheetRefused:
		s.res.aborted = true
	case err != nil:
		return s.res, err
	case s.h == nil && len(s.tt.lines) > 0:
		e, _ := s.tt.noHeader()
		s.emit(e)
		s.otherSheets(e.Line)
		s.res.aborted = true
	case s.h == nil:
		s.emit(Error{Line: 1, Sheet: s.sheet, Column: ColumnFile, Kind: KindEmpty, Message: fmt.Sprintf("the sheet %s is empty", s.wb.sheet.name)})
		s.res.aborted = true
	case s.rows == 0:
		s.emit(Error{Line: s.h.line, Sheet: s.sheet, Column: ColumnFile, Kind: KindEmpty, Message: "the sheet has a header but no data rows"})
		s.res.aborted = true
	}
	return s.res, nil
}

// ErrNotWorkbook is matched by WorkbookDigest's error for a file that is
// not a usable workbook (or has not the sheet asked for, or is over a
// bound): Check refuses such a file with the reason.
var ErrNotWorkbook = errors.New("payfile: not a usable workbook")

// WorkbookDigest hashes the contents of the cells of a workbook's sheet
// (the named one, or the first not hidden): for every non-empty cell its
// position, type and stored value. It is
// the same for the same data however the workbook is saved again (another
// time, author, program, column widths or number formats), so that the
// batch id derived from it recognises data already loaded.
func WorkbookDigest(ctx context.Context, r io.Reader, sheet string) ([]byte, error) {
	wb, err := openWorkbook(r, sheet)
	if err != nil {
		var fe *fatalError
		if errors.As(err, &fe) {
			return nil, fmt.Errorf("%w: %s", ErrNotWorkbook, fe.e.Message)
		}
		return nil, err
	}
	defer wb.Close()
	h := sha256.New()
	h.Write([]byte("payout xlsx cells v1\x00"))
	var n [8]byte
	put := func(v uint64) {
		binary.BigEndian.PutUint64(n[:], v)
		h.Write(n[:])
	}
	err = wb.eachRow(ctx, func(_ *sheetReader, row int, _ bool, cells []xcell) error {
		for i, x := range cells {
			if x.kind == cellEmpty {
				continue
			}
			put(uint64(row))
			put(uint64(i + 1))
			put(uint64(x.kind))
			put(uint64(len(x.raw)))
			h.Write([]byte(x.raw))
		}
		return nil
	})
	if e, ok := fileProblem(err); ok {
		return nil, fmt.Errorf("%w: %s", ErrNotWorkbook, e.Message)
	}
	if err != nil {
		return nil, err
	}
	return h.Sum(nil), nil
}
