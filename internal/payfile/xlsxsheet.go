package payfile

import (
	"encoding/xml"
	"io"
	"strconv"
	"strings"
)

// xlsxMaxRowText bounds the text of one row's cells, shared strings
// included (a row of 16384 cells that all refer to one long shared string
// would otherwise be 16384 copies of it).
const xlsxMaxRowText = 4 << 20

// sheetReader streams a sheet's rows from its XML.
type sheetReader struct {
	d       *xml.Decoder
	c       io.Closer
	part    string
	book    *bookInfo
	hidCols []colRange
	// zeroHeight: rows are hidden unless they say otherwise
	// (<sheetFormatPr zeroHeight="1">).
	zeroHeight bool
	lastRow    int
	rows       int
	cells      int
	done       bool
	row        []xcell
}

// colRange is a run of hidden columns (<col min max hidden>).
type colRange struct{ min, max int }

func (p *xlsxPackage) openSheet(book *bookInfo, part string) (*sheetReader, error) {
	d, c, err := p.open(part)
	if err != nil {
		return nil, err
	}
	return &sheetReader{d: d, c: c, part: part, book: book}, nil
}

func (s *sheetReader) Close() error { return s.c.Close() }

// colHidden reports whether column col (from 1) is hidden; known once the
// first row is read.
func (s *sheetReader) colHidden(col int) bool {
	for _, r := range s.hidCols {
		if col >= r.min && col <= r.max {
			return true
		}
	}
	return false
}

// next returns the next row present in the sheet: its number, whether it
// is hidden, and its cells (index 0 is column A; the slice is reused).
// row is 0 at the end.
func (s *sheetReader) next() (row int, hidden bool, cells []xcell, err error) {
	if s.done {
		return 0, false, nil, nil
	}
	var st rowScan
	for {
		tok, err := s.d.RawToken()
		if err == io.EOF {
			s.done = true
			if st.inRow {
				return 0, false, nil, notXLSX(s.part + " is cut short")
			}
			return 0, false, nil, nil
		}
		if err != nil {
			return 0, false, nil, partErr(s.part, err)
		}
		switch el := tok.(type) {
		case xml.StartElement:
			err = s.startElement(&st, el)
		case xml.CharData:
			err = st.addText(el)
		case xml.EndElement:
			switch el.Name.Local {
			case "row":
				return st.row, st.hidden, s.row, nil
			case "sheetData":
				s.done = true
				return 0, false, nil, nil
			}
			err = s.endElement(&st, el.Name.Local)
		}
		if err != nil {
			return 0, false, nil, err
		}
	}
}

// rowScan is the state of next while it reads one row's XML.
type rowScan struct {
	row      int  // the row's number
	hidden   bool // the row is hidden
	inRow    bool // within <row>
	inV      bool // within <v>, a cell's value
	inIs     bool // within <is>, an inline string
	inPh     int  // depth of <rPh>, a phonetic run (not the cell's text)
	cur      *xcell
	curT     string // the current cell's type attribute
	col      int    // the current cell's column (from 1)
	text     strings.Builder
	rowText  int // bytes of text in the row, shared strings included
	cellText int // bytes of text in the current cell
}

// startElement takes the start of an element of the sheet.
func (s *sheetReader) startElement(st *rowScan, el xml.StartElement) error {
	switch el.Name.Local {
	case "sheetFormatPr":
		s.zeroHeight = isTrue(attr(el, "zeroHeight"))
	case "col":
		s.addHiddenCols(el)
	case "row":
		return s.startRow(st, el)
	case "c":
		if st.inRow {
			return s.startCell(st, el)
		}
	case "f":
		if st.cur != nil {
			st.cur.formula = true
		}
	case "v":
		if st.cur != nil {
			st.inV, st.cur.hasValue = true, true
		}
	case "is":
		if st.cur != nil {
			st.inIs, st.cur.hasValue = true, true
		}
	case "rPh":
		st.inPh++
	}
	return nil
}

// addHiddenCols notes the columns of a <col> element if they are hidden
// (by the attribute, or by a width of 0).
func (s *sheetReader) addHiddenCols(el xml.StartElement) {
	if isTrue(attr(el, "hidden")) || attr(el, "width") != "" && isZero(attr(el, "width")) {
		lo, err1 := strconv.Atoi(attr(el, "min"))
		hi, err2 := strconv.Atoi(attr(el, "max"))
		if err1 == nil && err2 == nil && len(s.hidCols) < xlsxMaxStyles {
			s.hidCols = append(s.hidCols, colRange{lo, hi})
		}
	}
}

// startRow begins a row: its number (in order, within the bounds) and
// whether it is hidden.
func (s *sheetReader) startRow(st *rowScan, el xml.StartElement) error {
	s.rows++
	st.row = s.lastRow + 1
	if v := attr(el, "r"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n <= s.lastRow {
			return notXLSX(s.part + ": a row number " + strconv.Quote(v) + " out of order")
		}
		st.row = n
	}
	if st.row > XLSXMaxRows || s.rows > XLSXMaxRows {
		return overLimit("its sheet has more than %d rows", XLSXMaxRows)
	}
	s.lastRow = st.row
	ht := attr(el, "ht")
	st.hidden = isTrue(attr(el, "hidden")) || ht != "" && isZero(ht) ||
		s.zeroHeight && (ht == "" || isZero(ht))
	st.inRow, st.col, s.row = true, 0, s.row[:0]
	return nil
}

// startCell begins a cell of the row: its column (in order, within the
// bounds), its type and its number format.
func (s *sheetReader) startCell(st *rowScan, el xml.StartElement) error {
	s.cells++
	if s.cells > XLSXMaxCells {
		return overLimit("its sheet has more than %d cells", XLSXMaxCells)
	}
	st.col++
	if ref := attr(el, "r"); ref != "" {
		c, r, ok := parseRef(ref)
		if !ok || r != st.row {
			return notXLSX(s.part + ": a cell reference " + strconv.Quote(ref) + " out of its row " + strconv.Itoa(st.row))
		}
		if c < st.col {
			return notXLSX(s.part + ": cell " + ref + " out of order")
		}
		st.col = c
	}
	if st.col > XLSXMaxColumns {
		return overLimit("its sheet has more than %d columns", XLSXMaxColumns)
	}
	for len(s.row) < st.col {
		s.row = append(s.row, xcell{})
	}
	st.cur = &s.row[st.col-1]
	st.curT = attr(el, "t")
	curS, _ := strconv.Atoi(attr(el, "s"))
	st.cur.format, st.cur.formatKnown = s.book.formats.code(curS)
	st.text.Reset()
	st.cellText = 0
	return nil
}

// addText takes text of the sheet: a cell's value or inline string (not
// its phonetic runs), within the bounds of a cell and of a row.
func (st *rowScan) addText(el xml.CharData) error {
	if st.inV || st.inIs && st.inPh == 0 {
		st.cellText += len(el)
		st.rowText += len(el)
		if st.cellText > XLSXMaxToken || st.rowText > xlsxMaxRowText {
			return overLimit("its sheet has a row %d holding more than %d MiB of text", st.row, xlsxMaxRowText>>20)
		}
		st.text.Write(el)
	}
	return nil
}

// endElement takes the end of an element within a row.
func (s *sheetReader) endElement(st *rowScan, name string) error {
	switch name {
	case "v":
		st.inV = false
	case "is":
		st.inIs = false
	case "rPh":
		st.inPh--
	case "c":
		if st.cur != nil {
			return s.endCell(st)
		}
	}
	return nil
}

// endCell completes the current cell: its text and its kind, a shared
// string looked up (within the row's bound of text).
func (s *sheetReader) endCell(st *rowScan) error {
	cur := st.cur
	st.cur = nil
	cur.raw = st.text.String()
	cur.kind = kindOf(st.curT, cur)
	if st.curT == "s" && cur.hasValue {
		i, err := strconv.Atoi(strings.TrimSpace(cur.raw))
		str, ok := s.book.shared.get(i)
		if err != nil || !ok {
			cur.kind, cur.raw = cellBadRef, strings.TrimSpace(cur.raw)
			return nil
		}
		st.rowText += len(str)
		if st.rowText > xlsxMaxRowText {
			return overLimit("its sheet has a row %d holding more than %d MiB of text", st.row, xlsxMaxRowText>>20)
		}
		cur.raw = str
	}
	return nil
}

// kindOf is the kind of a cell of type attribute t.
func kindOf(t string, x *xcell) cellKind {
	switch {
	case x.formula && !x.hasValue:
		return cellNoValue
	case !x.hasValue:
		return cellEmpty
	case t == "s" || t == "str" || t == "inlineStr":
		return cellText
	case t == "" || t == "n":
		return cellNumber
	case t == "b":
		return cellBool
	case t == "e":
		return cellError
	case t == "d":
		return cellDate
	}
	return cellUnknownValue
}

// parseRef reads an A1 cell reference.
func parseRef(ref string) (col, row int, ok bool) {
	i := 0
	for i < len(ref) && i < 4 {
		c := ref[i] | 0x20
		if c < 'a' || c > 'z' {
			break
		}
		col = col*26 + int(c-'a'+1)
		i++
	}
	if i == 0 || i > 3 {
		return 0, 0, false
	}
	n, err := strconv.Atoi(ref[i:])
	if err != nil || n < 1 || ref[i] == '+' {
		return 0, 0, false
	}
	return col, n, true
}

func isTrue(v string) bool { return v == "1" || v == "true" }

// isZero reports whether a height or width attribute is 0.
func isZero(v string) bool {
	f, err := strconv.ParseFloat(v, 64)
	return err == nil && f == 0
}
