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
	var (
		inRow, inV, inIs bool
		inPh             int
		cur              *xcell
		curT             string
		curS             int
		col              int
		text             strings.Builder
		rowText          int
		cellText         int
	)
	for {
		tok, err := s.d.RawToken()
		if err == io.EOF {
			s.done = true
			if inRow {
				return 0, false, nil, notXLSX(s.part + " is cut short")
			}
			return 0, false, nil, nil
		}
		if err != nil {
			return 0, false, nil, partErr(s.part, err)
		}
		switch el := tok.(type) {
		case xml.StartElement:
			switch el.Name.Local {
			case "sheetFormatPr":
				s.zeroHeight = isTrue(attr(el, "zeroHeight"))
			case "col":
				if isTrue(attr(el, "hidden")) || attr(el, "width") != "" && isZero(attr(el, "width")) {
					lo, err1 := strconv.Atoi(attr(el, "min"))
					hi, err2 := strconv.Atoi(attr(el, "max"))
					if err1 == nil && err2 == nil && len(s.hidCols) < xlsxMaxStyles {
						s.hidCols = append(s.hidCols, colRange{lo, hi})
					}
				}
			case "row":
				s.rows++
				row = s.lastRow + 1
				if v := attr(el, "r"); v != "" {
					n, err := strconv.Atoi(v)
					if err != nil || n < 1 || n <= s.lastRow {
						return 0, false, nil, notXLSX(s.part + ": a row number " + strconv.Quote(v) + " out of order")
					}
					row = n
				}
				if row > XLSXMaxRows || s.rows > XLSXMaxRows {
					return 0, false, nil, overLimit("its sheet has more than %d rows", XLSXMaxRows)
				}
				s.lastRow = row
				ht := attr(el, "ht")
				hidden = isTrue(attr(el, "hidden")) || ht != "" && isZero(ht) ||
					s.zeroHeight && (ht == "" || isZero(ht))
				inRow, col, s.row = true, 0, s.row[:0]
			case "c":
				if !inRow {
					continue
				}
				s.cells++
				if s.cells > XLSXMaxCells {
					return 0, false, nil, overLimit("its sheet has more than %d cells", XLSXMaxCells)
				}
				col++
				if ref := attr(el, "r"); ref != "" {
					c, r, ok := parseRef(ref)
					if !ok || r != row {
						return 0, false, nil, notXLSX(s.part + ": a cell reference " + strconv.Quote(ref) + " out of its row " + strconv.Itoa(row))
					}
					if c < col {
						return 0, false, nil, notXLSX(s.part + ": cell " + ref + " out of order")
					}
					col = c
				}
				if col > XLSXMaxColumns {
					return 0, false, nil, overLimit("its sheet has more than %d columns", XLSXMaxColumns)
				}
				for len(s.row) < col {
					s.row = append(s.row, xcell{})
				}
				cur = &s.row[col-1]
				curT = attr(el, "t")
				curS, _ = strconv.Atoi(attr(el, "s"))
				cur.format, cur.formatKnown = s.book.formats.code(curS)
				text.Reset()
				cellText = 0
			case "f":
				if cur != nil {
					cur.formula = true
				}
			case "v":
				if cur != nil {
					inV, cur.hasValue = true, true
				}
			case "is":
				if cur != nil {
					inIs, cur.hasValue = true, true
				}
			case "rPh":
				inPh++
			}
		case xml.CharData:
			if inV || inIs && inPh == 0 {
				cellText += len(el)
				rowText += len(el)
				if cellText > XLSXMaxToken || rowText > xlsxMaxRowText {
					return 0, false, nil, overLimit("its sheet has a row %d holding more than %d MiB of text", row, xlsxMaxRowText>>20)
				}
				text.Write(el)
			}
		case xml.EndElement:
			switch el.Name.Local {
			case "v":
				inV = false
			case "is":
				inIs = false
			case "rPh":
				inPh--
			case "c":
				if cur == nil {
					continue
				}
				cur.raw = text.String()
				cur.kind = kindOf(curT, cur)
				if curT == "s" && cur.hasValue {
					i, err := strconv.Atoi(strings.TrimSpace(cur.raw))
					str, ok := s.book.shared.get(i)
					if err != nil || !ok {
						cur.kind, cur.raw = cellBadRef, strings.TrimSpace(cur.raw)
					} else {
						rowText += len(str)
						if rowText > xlsxMaxRowText {
							return 0, false, nil, overLimit("its sheet has a row %d holding more than %d MiB of text", row, xlsxMaxRowText>>20)
						}
						cur.raw = str
					}
				}
				cur = nil
			case "row":
				return row, hidden, s.row, nil
			case "sheetData":
				s.done = true
				return 0, false, nil, nil
			}
		}
	}
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
