package report

import (
	"fmt"
	"io"
	"iter"
	"strconv"
	"strings"

	"github.com/shopspring/decimal"
	"github.com/xuri/excelize/v2"
)

// Sheets of the XLSX result file.
const (
	SheetPayouts = "Payouts"
	SheetSummary = "Summary"
)

// maxNumberDigits is the most significant digits an amount has in a
// number cell; a longer one is written as text (xlsxNumber).
const maxNumberDigits = 14

// xlsxNumber returns the float64 an XLSX number cell stores for d, and
// whether that cell shows d exactly. An XLSX file stores a number cell as
// the text of an IEEE double (excelize writes the shortest text that reads
// back as the same double); a decimal of at most 15 significant digits
// survives that round trip digit for digit, and spreadsheets (Excel,
// LibreOffice, excelize) show and read 15 significant digits at most; at
// 15 digits LibreOffice's display may still round (it shows
// 9999999999999.99 as 10000000000000.00). So a number cell is used for at
// most 14 significant digits (any amount below 10^12 with cents), and the
// round trip is checked exactly: the double's shortest text must read
// back as d. This is
// a storage format of the file, never arithmetic of ours: the amount was
// summed as a decimal, and a cell that would not show it exactly is
// written as text instead.
func xlsxNumber(d decimal.Decimal) (float64, bool) {
	text := d.String()
	digits := strings.Trim(strings.Map(func(r rune) rune {
		if r < '0' || r > '9' {
			return -1
		}
		return r
	}, text), "0")
	if len(digits) > maxNumberDigits {
		return 0, false
	}
	f, err := strconv.ParseFloat(text, 64)
	if err != nil {
		return 0, false
	}
	back, err := decimal.NewFromString(strconv.FormatFloat(f, 'f', -1, 64))
	return f, err == nil && back.Equal(d)
}

// xlsxOut holds the workbook and its styles while it is written.
type xlsxOut struct {
	f      *excelize.File
	amount int // style of amount cells: a number with the batch's decimals
	bold   int
}

func newXLSXOut(scale int) (*xlsxOut, error) {
	f := excelize.NewFile()
	if err := f.SetSheetName("Sheet1", SheetPayouts); err != nil {
		return nil, xlsxErr(err)
	}
	if scale < 0 {
		scale = 0
	}
	format := "0"
	if scale > 0 {
		format += "." + strings.Repeat("0", scale)
	}
	amount, err := f.NewStyle(&excelize.Style{CustomNumFmt: &format})
	if err != nil {
		return nil, xlsxErr(err)
	}
	bold, err := f.NewStyle(&excelize.Style{Font: &excelize.Font{Bold: true}})
	if err != nil {
		return nil, xlsxErr(err)
	}
	return &xlsxOut{f: f, amount: amount, bold: bold}, nil
}

func xlsxErr(err error) error { return fmt.Errorf("report: writing XLSX: %w", err) }

// amountCell is an amount as a number cell with the batch's decimals when
// the cell shows it exactly, else as its exact text.
func (o *xlsxOut) amountCell(d decimal.Decimal, scale int) any {
	if f, ok := xlsxNumber(d); ok {
		return excelize.Cell{StyleID: o.amount, Value: f}
	}
	return formatDecimal(d, scale)
}

func (o *xlsxOut) header(cells []string) []any {
	row := make([]any, len(cells))
	for i, c := range cells {
		row[i] = excelize.Cell{StyleID: o.bold, Value: Neutralize(c)}
	}
	return row
}

// WriteXLSX writes the result file of batch b as a workbook: a Payouts
// sheet with the columns of the CSV result file (Header), one row per
// payout, and a Summary sheet with the batch, the totals by state and by
// outcome group, and the reconciliation. Rows are streamed to a temporary
// file by excelize (a 100,000-row batch does not stay in memory); the
// workbook is written to w at the end. Amounts are number cells with the
// batch's decimals (0.00), so that the spreadsheet shows the exact amount
// and sums them; an amount a number cell may not show exactly (more than
// 14 significant digits) is written as text. Every text cell, headers
// included (the names of a file's informational columns come from the
// file), is neutralised against formulas as a CSV cell is (Neutralize, the
// one neutraliser): a text cell is not a formula while the workbook is as
// written, but it becomes one when a person edits it or the sheet is saved
// as CSV. Card numbers are masked as in every output. The file's
// informational columns follow the fixed ones, as in WriteCSV. Rows must
// come in strictly increasing line order.
func WriteXLSX(w io.Writer, b Batch, rows iter.Seq2[Row, error]) (s Summary, err error) {
	o, err := newXLSXOut(b.Scale)
	if err != nil {
		return Summary{}, err
	}
	defer func() {
		if cerr := o.f.Close(); err == nil && cerr != nil {
			err = xlsxErr(cerr)
		}
	}()
	if s, err = o.payoutsSheet(b, rows); err != nil {
		return Summary{}, err
	}
	if err := o.summarySheet(b, s); err != nil {
		return Summary{}, err
	}
	if _, err := o.f.WriteTo(w); err != nil {
		return Summary{}, xlsxErr(err)
	}
	return s, nil
}

// payoutsSheet streams the Payouts sheet: the header, then one row per
// payout, in strictly increasing line order. It returns the summary of
// the rows.
func (o *xlsxOut) payoutsSheet(b Batch, rows iter.Seq2[Row, error]) (Summary, error) {
	sw, err := o.startPayouts(b)
	if err != nil {
		return Summary{}, err
	}
	t := NewTally(b)
	order := orderCheck{batch: b.ID}
	n := 1
	cells := make([]any, len(Header)+len(b.InfoColumns))
	for r, err := range rows {
		if err != nil {
			return Summary{}, sourceError(b, err)
		}
		if err := order.next(r.Line); err != nil {
			return Summary{}, err
		}
		t.Add(r)
		n++
		o.rowCells(cells, r, b.Scale)
		cell, _ := excelize.CoordinatesToCellName(1, n)
		if err := sw.SetRow(cell, cells); err != nil {
			return Summary{}, xlsxErr(err)
		}
	}
	if err := sw.Flush(); err != nil {
		return Summary{}, xlsxErr(err)
	}
	return t.Summary(), nil
}

// startPayouts opens the Payouts sheet's stream: column widths, the
// header row frozen, and the header.
func (o *xlsxOut) startPayouts(b Batch) (*excelize.StreamWriter, error) {
	sw, err := o.f.NewStreamWriter(SheetPayouts)
	if err != nil {
		return nil, xlsxErr(err)
	}
	for i, width := range []float64{7, 22, 14, 22, 13, 24, 12, 9, 48, 21, 14, 30, 10} {
		if err := sw.SetColWidth(i+1, i+1, width); err != nil {
			return nil, xlsxErr(err)
		}
	}
	if err := sw.SetPanes(&excelize.Panes{Freeze: true, YSplit: 1, TopLeftCell: "A2", ActivePane: "bottomLeft"}); err != nil {
		return nil, xlsxErr(err)
	}
	if err := sw.SetRow("A1", o.header(InfoHeader(b.InfoColumns))); err != nil {
		return nil, xlsxErr(err)
	}
	return sw, nil
}

// rowCells fills cells with the Payouts row of r: the columns of Header,
// then the file's informational columns.
func (o *xlsxOut) rowCells(cells []any, r Row, scale int) {
	cells[0] = r.Line
	cells[1] = textCell(r.ExternalID)
	cells[2] = o.amountCell(r.Amount.Decimal(), scale)
	cells[3] = textCell(scrub(r.Destination))
	cells[4] = textCell(r.State)
	cells[5] = textCell(r.PSPOrderID)
	cells[6] = textCell(r.PSPStatus)
	cells[7] = r.Attempts
	cells[8] = textCell(scrub(r.Error))
	cells[9] = textCell(formatTime(r.UpdatedAt))
	cells[10] = textCell(scrub(r.ResolvedBy))
	cells[11] = textCell(scrub(r.ResolutionNote))
	cells[12] = GroupOf(r)
	infoCells(cells[len(Header):], r)
}

// infoCells fills cells with r's values of the file's informational
// columns, as written, as the CSV result has them (WriteCSV).
func infoCells(cells []any, r Row) {
	for i := range cells {
		v := ""
		if i < len(r.Info) {
			v = r.Info[i]
		}
		cells[i] = textCell(v)
	}
}

// summarySheet writes the Summary sheet: the lines of the CSV trailer
// (package documentation) as a table, without the "# " marks, amounts as
// numbers.
func (o *xlsxOut) summarySheet(b Batch, s Summary) error {
	if _, err := o.f.NewSheet(SheetSummary); err != nil {
		return xlsxErr(err)
	}
	sw, err := o.f.NewStreamWriter(SheetSummary)
	if err != nil {
		return xlsxErr(err)
	}
	if err := sw.SetColWidth(1, 1, 26); err != nil {
		return xlsxErr(err)
	}
	if err := sw.SetColWidth(2, 5, 16); err != nil {
		return xlsxErr(err)
	}
	amount := func(d decimal.Decimal) any { return o.amountCell(d, s.Scale) }
	final, verdict := "no", "MISMATCH"
	if s.Final {
		final = "yes"
	}
	if s.Reconciled {
		verdict = "OK"
	}
	lines := [][]any{
		o.header([]string{"batch", "file", "loadedAt", "final"}),
		{textCell(b.ID), textCell(b.File), formatTime(b.LoadedAt), final},
		nil,
		o.header([]string{"state", "rows", "amount"}),
	}
	for _, st := range s.ByState {
		lines = append(lines, []any{st.State, st.Rows, amount(st.Amount.Decimal())})
	}
	lines = append(lines,
		[]any{"total", s.Rows, amount(s.Total.Decimal())},
		[]any{"created awaiting outcome", s.Awaiting.Rows, amount(s.Awaiting.Amount.Decimal())},
		nil,
		o.header([]string{"outcome", "rows", "amount", "meaning"}),
	)
	for _, g := range s.ByGroup {
		lines = append(lines, []any{g.Group, g.Rows, amount(g.Amount.Decimal()), GroupMeaning[g.Group]})
	}
	lines = append(lines,
		[]any{"total", s.Rows, amount(s.GroupsTotal.Decimal())},
		nil,
		o.header([]string{"reconciliation", "total of states", "file total", "rows", "file rows", "result"}),
		[]any{"", amount(s.Total.Decimal()), amount(s.FileTotal.Decimal()), s.Rows, s.FileRows, verdict},
	)
	for i, l := range lines {
		if l == nil {
			continue
		}
		cell, _ := excelize.CoordinatesToCellName(1, i+1)
		if err := sw.SetRow(cell, l); err != nil {
			return xlsxErr(err)
		}
	}
	return xlsxErr2(sw.Flush())
}

func xlsxErr2(err error) error {
	if err != nil {
		return xlsxErr(err)
	}
	return nil
}

// textCell is a text cell of a workbook: neutralised against formulas
// as a CSV cell is (Neutralize); an empty value is an empty cell.
func textCell(s string) any {
	if s == "" {
		return nil
	}
	return Neutralize(s)
}
