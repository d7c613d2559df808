package payfile

import (
	"archive/zip"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"path"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/shopspring/decimal"
	"github.com/xuri/excelize/v2"
)

// Reading a workbook (.xlsx) is excelize's work: the package, the shared
// strings, the styles and the number formats that make a cell's shown
// text. excelize streams a sheet's rows as strings only, without the cell
// types, so three streams over the sheet go in step, row by row:
//
//   - excelize's row iterator with raw values: the text of text cells, the
//     stored digits of number cells ("0.30000000000000004");
//   - excelize's row iterator with formatted values: what the spreadsheet
//     shows ("0.30", "4.11111E+15", "01-15-24");
//   - cellTypes, a reader of the sheet's XML that keeps only each cell's
//     type attribute and whether it holds a formula and a saved value.
//
// From the three a cell becomes the text a row is validated with (toText):
// a text cell is its text; a number cell only when its stored value is the
// value shown and exact (a number never goes through a float64); anything
// else is refused with the reason and the fix (format the column as Text).
//
// Memory: excelize holds the compressed workbook, and writes any sheet or
// shared string table over xlsxPartInMemory to a temporary file that it
// reads as a stream; rows are handled one at a time.

// xlsxPartInMemory is the largest sheet or shared string table excelize
// keeps unzipped in memory; larger ones go to a temporary file.
const xlsxPartInMemory = 1 << 20

// xlsxMaxUnzipped bounds the unzipped size of a workbook (a zip bomb).
const xlsxMaxUnzipped = 4 << 30

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
)

// xcell is one cell of a workbook row.
type xcell struct {
	kind    cellKind
	formula bool
	raw     string // text, or the stored digits of a number
	shown   string // as the spreadsheet shows it
}

// workbook is an opened workbook and the sheet to read.
type workbook struct {
	f     *excelize.File
	zr    *zip.Reader
	sheet string
	part  string // the sheet's part in the package
}

// openWorkbook reads an .xlsx workbook from r and picks the sheet: the
// named one, or the first. A problem of the file itself is a *fatalError.
func openWorkbook(r io.Reader, sheet string) (*workbook, error) {
	data, err := io.ReadAll(r)
	if err != nil {
		return nil, err
	}
	notWorkbook := func(why string) error {
		return &fatalError{Error{Line: 1, Column: ColumnFile, Kind: KindEncoding,
			Message: "not an XLSX workbook (" + why + "): save it from the spreadsheet as Excel Workbook (.xlsx), or as CSV UTF-8 and name it .csv"}}
	}
	zr, err := zip.NewReader(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		if bytes.HasPrefix(data, []byte{0xD0, 0xCF, 0x11, 0xE0}) {
			return nil, notWorkbook("an old .xls workbook or an encrypted one")
		}
		return nil, notWorkbook("not a ZIP package")
	}
	f, err := excelize.OpenReader(bytes.NewReader(data), excelize.Options{
		UnzipXMLSizeLimit: xlsxPartInMemory, UnzipSizeLimit: xlsxMaxUnzipped,
	})
	if err != nil {
		return nil, notWorkbook(err.Error())
	}
	wb := &workbook{f: f, zr: zr}
	list := f.GetSheetList()
	switch {
	case len(list) == 0:
		f.Close()
		return nil, notWorkbook("it has no sheet")
	case sheet == "":
		wb.sheet = list[0]
	default:
		for _, s := range list {
			if s == sheet {
				wb.sheet = s
			}
		}
		if wb.sheet == "" {
			f.Close()
			return nil, &fatalError{Error{Line: 1, Column: ColumnFile, Kind: KindStructure,
				Message: fmt.Sprintf("the workbook has no sheet %q (--sheet); its sheets: %s", sheet, quoteList(list))}}
		}
	}
	if wb.part, err = sheetPart(zr, wb.sheet); err != nil {
		f.Close()
		return nil, notWorkbook(err.Error())
	}
	return wb, nil
}

func (wb *workbook) Close() error { return wb.f.Close() }

// sheetPart finds the package part of the named sheet, through the
// workbook's relationships.
func sheetPart(zr *zip.Reader, sheet string) (string, error) {
	var book struct {
		Sheets []struct {
			Name string `xml:"name,attr"`
			RID  string `xml:"http://schemas.openxmlformats.org/officeDocument/2006/relationships id,attr"`
		} `xml:"sheets>sheet"`
	}
	var rels struct {
		Rels []struct {
			ID     string `xml:"Id,attr"`
			Target string `xml:"Target,attr"`
		} `xml:"Relationship"`
	}
	if err := decodePart(zr, "xl/workbook.xml", &book); err != nil {
		return "", err
	}
	if err := decodePart(zr, "xl/_rels/workbook.xml.rels", &rels); err != nil {
		return "", err
	}
	for _, s := range book.Sheets {
		if s.Name != sheet {
			continue
		}
		for _, r := range rels.Rels {
			if r.ID == s.RID {
				if strings.HasPrefix(r.Target, "/") {
					return strings.TrimPrefix(r.Target, "/"), nil
				}
				return path.Join("xl", r.Target), nil
			}
		}
	}
	return "", fmt.Errorf("no part for sheet %q", sheet)
}

func openPart(zr *zip.Reader, name string) (io.ReadCloser, error) {
	for _, f := range zr.File {
		if strings.EqualFold(strings.ReplaceAll(f.Name, "\\", "/"), name) {
			return f.Open()
		}
	}
	return nil, fmt.Errorf("no %s in the package", name)
}

func decodePart(zr *zip.Reader, name string, v any) error {
	rc, err := openPart(zr, name)
	if err != nil {
		return err
	}
	defer rc.Close()
	if err := xml.NewDecoder(rc).Decode(v); err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	return nil
}

// cellType is what cellTypes keeps of a cell.
type cellType struct {
	col      int // from 1
	t        string
	formula  bool
	hasValue bool
}

// cellTypes reads the sheet's XML for the cells' types, a row at a time.
type cellTypes struct {
	d       *xml.Decoder
	rc      io.Closer
	row     int // number of the last row started
	pending []cellType
	pendRow int // row of pending, 0 if none
	done    bool
}

func newCellTypes(zr *zip.Reader, part string) (*cellTypes, error) {
	rc, err := openPart(zr, part)
	if err != nil {
		return nil, err
	}
	return &cellTypes{d: xml.NewDecoder(rc), rc: rc}, nil
}

// next returns the next row present in the sheet and its cells.
func (ct *cellTypes) next() (int, []cellType, error) {
	if ct.done {
		return 0, nil, nil
	}
	var (
		cells []cellType
		cur   *cellType
		inRow bool
		rowN  int
		col   int
	)
	for {
		tok, err := ct.d.RawToken()
		if err == io.EOF {
			ct.done = true
			return rowN, cells, nil
		}
		if err != nil {
			return 0, nil, err
		}
		switch el := tok.(type) {
		case xml.StartElement:
			switch el.Name.Local {
			case "row":
				ct.row++
				if v := attr(el, "r"); v != "" {
					if n, err := strconv.Atoi(v); err == nil {
						ct.row = n
					}
				}
				inRow, rowN, col, cells = true, ct.row, 0, nil
			case "c":
				if !inRow {
					continue
				}
				col++
				if ref := attr(el, "r"); ref != "" {
					if c, _, err := excelize.CellNameToCoordinates(ref); err == nil {
						col = c
					}
				}
				cells = append(cells, cellType{col: col, t: attr(el, "t")})
				cur = &cells[len(cells)-1]
			case "f":
				if cur != nil {
					cur.formula = true
				}
			case "v", "is":
				if cur != nil {
					cur.hasValue = true
				}
			}
		case xml.EndElement:
			switch el.Name.Local {
			case "c":
				cur = nil
			case "row":
				return rowN, cells, nil
			case "sheetData":
				ct.done = true
				return 0, nil, nil
			}
		}
	}
}

// at returns the cells of row n, reading on as needed; rows must be asked
// in ascending order.
func (ct *cellTypes) at(n int) ([]cellType, error) {
	for ct.pendRow < n {
		if ct.done {
			return nil, nil
		}
		r, cells, err := ct.next()
		if err != nil {
			return nil, err
		}
		if r == 0 {
			continue
		}
		ct.pendRow, ct.pending = r, cells
	}
	if ct.pendRow == n {
		return ct.pending, nil
	}
	return nil, nil
}

func attr(el xml.StartElement, name string) string {
	for _, a := range el.Attr {
		if a.Name.Local == name && a.Name.Space == "" {
			return a.Value
		}
	}
	return ""
}

// eachRow calls fn with every row of the sheet, from row 1, as cells
// (index 0 is column A); rows missing from the sheet come as nil.
func (wb *workbook) eachRow(ctx context.Context, fn func(row int, cells []xcell) error) error {
	raw, err := wb.f.Rows(wb.sheet)
	if err != nil {
		return err
	}
	defer raw.Close()
	shown, err := wb.f.Rows(wb.sheet)
	if err != nil {
		return err
	}
	defer shown.Close()
	types, err := newCellTypes(wb.zr, wb.part)
	if err != nil {
		return err
	}
	defer types.rc.Close()
	rawOpt, shownOpt := excelize.Options{RawCellValue: true}, excelize.Options{RawCellValue: false}
	var cells []xcell
	for row := 1; raw.Next(); row++ {
		if row%1024 == 0 {
			if err := ctx.Err(); err != nil {
				return err
			}
		}
		if !shown.Next() {
			return fmt.Errorf("sheet %s: row %d: the formatted rows end early", wb.sheet, row)
		}
		rv, err := raw.Columns(rawOpt)
		if err != nil {
			return err
		}
		sv, err := shown.Columns(shownOpt)
		if err != nil {
			return err
		}
		ts, err := types.at(row)
		if err != nil {
			return err
		}
		cells = cells[:0]
		for _, t := range ts {
			if t.col < 1 || t.col > excelize.MaxColumns {
				continue
			}
			for len(cells) < t.col {
				cells = append(cells, xcell{})
			}
			c := &cells[t.col-1]
			c.formula = t.formula
			if t.col <= len(rv) {
				c.raw = rv[t.col-1]
			}
			if t.col <= len(sv) {
				c.shown = sv[t.col-1]
			}
			switch {
			case t.formula && !t.hasValue:
				c.kind = cellNoValue
			case !t.hasValue && c.raw == "":
				c.kind = cellEmpty
			case t.t == "s" || t.t == "str" || t.t == "inlineStr":
				c.kind = cellText
			case t.t == "" || t.t == "n":
				c.kind = cellNumber
			case t.t == "b":
				c.kind = cellBool
			case t.t == "e":
				c.kind = cellError
			case t.t == "d":
				c.kind = cellDate
			default:
				c.kind = cellUnknownValue
			}
		}
		if err := fn(row, cells); err != nil {
			return err
		}
	}
	return raw.Error()
}

// cellRef is the A1 name of a cell: "C14".
func cellRef(col, row int) string {
	name, err := excelize.ColumnNumberToName(col)
	if err != nil {
		return strconv.Itoa(row)
	}
	return name + strconv.Itoa(row)
}

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

// textOfCell turns a data cell of column col into the text a row is
// validated with, or says why the cell cannot be taken as it is.
// amountPlain reports that an amount came from a number cell, and so is in
// plain form whatever the file's amount format.
func (c *config) textOfCell(col string, x xcell) (text string, amountPlain bool, problem string) {
	formulaNote := ""
	if x.formula {
		formulaNote = " (the result of a formula)"
	}
	switch x.kind {
	case cellEmpty:
		return "", false, ""
	case cellText:
		return strings.Trim(x.raw, " "), false, ""
	case cellNoValue:
		return "", false, "is a formula with no saved result (was the workbook written by a program that does not calculate?): open and save it in a spreadsheet, or paste the column as values"
	case cellBool:
		return "", false, fmt.Sprintf("is a TRUE/FALSE cell%s, not text: type the %s as text", formulaNote, col)
	case cellError:
		return "", false, fmt.Sprintf("holds the error %s%s: correct the cell", x.raw, formulaNote)
	case cellDate:
		return "", false, fmt.Sprintf("is a date cell (%s)%s: format the %s column as Text and type the values again", x.shown, formulaNote, col)
	case cellUnknownValue:
		return "", false, fmt.Sprintf("is a cell of an unknown type%s: format the %s column as Text and type the values again", formulaNote, col)
	}
	// A number cell.
	switch col {
	case ColCardNumber:
		// Never the digits: they may be a card number.
		return "", false, "is a number cell, not text: a spreadsheet keeps only 15 digits of a number, so a 16-digit card number loses its last digit (and shows as 4.11111E+15); format the cardNumber column as Text and type or paste the card numbers again"
	case ColAmount:
		return c.amountOfNumber(x)
	}
	if isDigits(x.raw) && x.shown == x.raw && len(x.raw) <= 15 {
		return x.raw, false, ""
	}
	return "", false, fmt.Sprintf("is a number cell%s that shows %q and holds %s: a number cell drops leading zeros and shows long numbers as 1.23E+15; format the %s column as Text and type or paste the values again", formulaNote, x.shown, x.raw, col)
}

// amountOfNumber takes the amount of a number cell: its stored value,
// exactly, when it has at most the allowed decimals and is what the cell
// shows.
func (c *config) amountOfNumber(x xcell) (string, bool, string) {
	formulaNote := ""
	if x.formula {
		formulaNote = ", the result of a formula,"
	}
	d, err := decimal.NewFromString(x.raw)
	if err != nil {
		return "", false, fmt.Sprintf("is a number cell%s holding %q, which is not a number", formulaNote, x.raw)
	}
	if !d.Round(int32(c.scale)).Equal(d) {
		return "", false, fmt.Sprintf("is a number cell%s that shows %q but holds %s, more than %d decimal places: the binary rounding of a spreadsheet's arithmetic (0.1+0.2 is not 0.3 but a little more); round it in the sheet (=ROUND(...;%d)) and paste as values, or format the amount column as Text and type the amounts", formulaNote, x.shown, shortDecimal(d), c.scale, c.scale)
	}
	if !sameNumber(x.shown, d) {
		return "", false, fmt.Sprintf("is a number cell%s that shows %q but holds %s: its number format changes what is seen (a date, a percentage, rounding, an exponent); format the amount column as Number with %d decimals, or as Text, so that it shows the amount", formulaNote, x.shown, d.String(), c.scale)
	}
	return d.String(), true, ""
}

// sameNumber reports whether the text a cell shows, less grouping commas,
// spaces and a currency sign, is the number d.
func sameNumber(shown string, d decimal.Decimal) bool {
	s := strings.Map(func(r rune) rune {
		switch {
		case r >= '0' && r <= '9', r == '.', r == '-':
			return r
		case r == ',', r == ' ', r == '\u00A0', r == '\u202F':
			return -1
		case r == '$', r == '€', r == '₽', r == '£', r == '¥', r == '"':
			return -1
		}
		return 'x'
	}, strings.TrimSpace(shown))
	v, err := decimal.NewFromString(s)
	return err == nil && !strings.ContainsAny(s, "x") && v.Equal(d)
}

// shortDecimal writes d for a message: in full when short, else its first
// digits and how many decimal places it has ("0.3000000... with 17
// decimal places"), so that no long run of digits is taken for a card
// number by card.Scrub.
func shortDecimal(d decimal.Decimal) string {
	s := d.String()
	if len(s) <= 11 {
		return s
	}
	places := 0
	if i := strings.IndexByte(s, '.'); i >= 0 {
		places = len(s) - i - 1
	}
	return fmt.Sprintf("%s... with %d decimal places", s[:10], places)
}

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

// scanWorkbook is scan for an XLSX workbook: the first non-empty row of
// the sheet is the header, every later non-empty row a record.
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
	res.sheet = wb.sheet
	sheet := sheetRef(wb.sheet)
	var (
		h       *header
		letters map[string]string // canonical column name -> column letter
		cur     record
		rows    int
		stopped = errors.New("stop")
	)
	err = wb.eachRow(ctx, func(row int, cells []xcell) error {
		blank := true
		for _, x := range cells {
			if x.kind != cellEmpty && (x.kind != cellText || strings.Trim(x.raw, " ") != "") {
				blank = false
				break
			}
		}
		if blank {
			return nil
		}
		if h == nil {
			fields := make([]string, len(cells))
			for i, x := range cells {
				fields[i] = x.raw
			}
			for len(fields) > 0 && strings.Trim(fields[len(fields)-1], " ") == "" {
				fields = fields[:len(fields)-1]
			}
			var problems []Error
			h, problems = cfg.parseHeader(fields, row)
			if problems != nil {
				for _, e := range problems {
					e.Sheet = sheet
					emit(e)
				}
				return stopped
			}
			res.columns = h.names
			letters = make(map[string]string, len(h.names))
			for i, n := range h.names {
				letters[n], _ = excelize.ColumnNumberToName(i + 1)
			}
			return nil
		}
		rows++
		cur = record{Line: row, sheet: sheet, letters: letters}
		for i := len(h.names); i < len(cells); i++ {
			if cells[i].kind != cellEmpty && !(cells[i].kind == cellText && strings.Trim(cells[i].raw, " ") == "") {
				letter, _ := excelize.ColumnNumberToName(i + 1)
				last, _ := excelize.ColumnNumberToName(len(h.names))
				cur.Problem = fmt.Sprintf("has a value in column %s, right of the header's last column %s", letter, last)
				return fn(&cur)
			}
		}
		extra := make([]string, len(cfg.extras))
		for i, name := range h.names {
			if name == ColReason {
				continue // informational (a retry file's), never read
			}
			var x xcell
			if i < len(cells) {
				x = cells[i]
			}
			text, plain, problem := cfg.textOfCell(name, x)
			if problem != "" {
				cur.cellErrs = append(cur.cellErrs, Error{Line: row, Column: name, Kind: KindField, Message: problem})
				continue
			}
			switch name {
			case ColExternalID:
				cur.ExternalID = text
			case ColAmount:
				cur.Amount, cur.amountPlain = text, plain
			case ColCardNumber:
				cur.CardNumber = text
			case ColTelecomOperator:
				cur.Telecom = text
			default:
				for k, n := range cfg.extras {
					if n == name {
						extra[k] = text
					}
				}
			}
		}
		cur.Extra = strings.Join(extra, extraSep)
		return fn(&cur)
	})
	switch {
	case err == stopped:
		res.aborted = true
		return res, nil
	case err != nil:
		return res, err
	case h == nil:
		emit(Error{Line: 1, Sheet: sheet, Column: ColumnFile, Kind: KindEmpty, Message: fmt.Sprintf("the sheet %s is empty", wb.sheet)})
		res.aborted = true
	case rows == 0:
		emit(Error{Line: h.line, Sheet: sheet, Column: ColumnFile, Kind: KindEmpty, Message: "the sheet has a header but no data rows"})
		res.aborted = true
	}
	return res, nil
}

// ErrNotWorkbook is matched by WorkbookDigest's error for a file that is
// not a usable workbook (or has not the sheet asked for): Check refuses
// such a file with the reason.
var ErrNotWorkbook = errors.New("payfile: not a usable workbook")

// WorkbookDigest hashes the contents of the cells of a workbook's sheet
// (the named one, or the first): for every non-empty cell its position,
// type and stored value. It is the same for the same data however the
// workbook is saved again (another time, author, program, column widths or
// number formats), so that the batch id derived from it recognises data
// already loaded.
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
	err = wb.eachRow(ctx, func(row int, cells []xcell) error {
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
	if err != nil {
		return nil, err
	}
	return h.Sum(nil), nil
}
