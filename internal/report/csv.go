package report

import (
	"encoding/csv"
	"fmt"
	"io"
	"iter"
	"slices"
	"strconv"
	"strings"

	"github.com/acme/payout/internal/money"
)

// Header is the first line of a result CSV.
var Header = []string{"line", "externalId", "amount", "destination", "state", "pspOrderId", "pspStatus", "attempts", "error", "updatedAt", "resolvedBy", "resolutionNote", "outcome"}

// InfoHeader is the header of a result CSV with the informational
// columns info: Header, then each name, prefixed "file:" when it is also
// one of Header's.
func InfoHeader(info []string) []string {
	if len(info) == 0 {
		return Header
	}
	out := slices.Clone(Header)
	for _, n := range info {
		if slices.ContainsFunc(Header, func(h string) bool { return strings.EqualFold(h, n) }) {
			n = "file:" + n
		}
		out = append(out, n)
	}
	return out
}

// ErrorsHeader is the first line of an error listing.
var ErrorsHeader = []string{"file", "line", "column", "message"}

// Neutralize returns cell with a single quote prepended when its first
// character would make a spreadsheet read it as a formula ('=', '+', '-',
// '@', tab, carriage return), and cell unchanged otherwise.
func Neutralize(cell string) string {
	if cell == "" {
		return cell
	}
	switch cell[0] {
	case '=', '+', '-', '@', '\t', '\r':
		return "'" + cell
	}
	return cell
}

// csvOut writes neutralised records and remembers the first error.
type csvOut struct {
	w     *csv.Writer
	width int
	rec   []string
}

func newCSVOut(w io.Writer, header []string) (*csvOut, error) {
	return newCSVOutComma(w, header, false)
}

// newCSVOutComma is newCSVOut, its cells separated by ';' if semicolon.
func newCSVOutComma(w io.Writer, header []string, semicolon bool) (*csvOut, error) {
	o := &csvOut{w: csv.NewWriter(w), width: len(header), rec: make([]string, len(header))}
	if semicolon {
		o.w.Comma = ';'
	}
	return o, o.write(header...)
}

// write writes one record of cells, neutralised, padded with empty cells to
// the header's width.
func (o *csvOut) write(cells ...string) error {
	rec := o.rec[:0]
	for _, c := range cells {
		rec = append(rec, Neutralize(c))
	}
	for len(rec) < o.width {
		rec = append(rec, "")
	}
	if err := o.w.Write(rec); err != nil {
		return fmt.Errorf("report: writing CSV: %w", err)
	}
	return nil
}

func (o *csvOut) blank() error {
	if err := o.w.Write(nil); err != nil {
		return fmt.Errorf("report: writing CSV: %w", err)
	}
	return nil
}

func (o *csvOut) flush() error {
	o.w.Flush()
	if err := o.w.Error(); err != nil {
		return fmt.Errorf("report: writing CSV: %w", err)
	}
	return nil
}

// CSVOptions change the layout of a result CSV.
type CSVOptions struct {
	// SummaryInCSV appends, after the rows, a blank line and the "# ..."
	// summary trailer described in the package documentation: the layout
	// of the result file before the summary moved to its own file, kept
	// for readers that parse it (payout report --summary-in-csv).
	SummaryInCSV bool
	// ExcelEU writes for a spreadsheet in a decimal-comma locale (Excel
	// in most of Europe opens a ';' file with a BOM as columns): cells
	// separated by ';', amounts with ',' before the decimals (1500,50, no
	// grouping), and a UTF-8 byte order mark first so that names and notes
	// in any script open as written.
	ExcelEU bool
}

// utf8BOM is the UTF-8 byte order mark.
const utf8BOM = "\ufeff"

// WriteCSV writes the result file of batch b as a clean table: the header
// and one line per row, nothing else (the summary goes to WriteSummary or
// the Summary sheet of WriteXLSX). Rows must come in strictly increasing
// line order. It returns the summary of the rows it wrote.
//
// The file's informational columns (Batch.InfoColumns) follow the fixed
// columns, under their names in the file (prefixed "file:" when one is
// also a fixed column's name), with each row's values as written.
func WriteCSV(w io.Writer, b Batch, rows iter.Seq2[Row, error]) (Summary, error) {
	return WriteCSVWith(w, b, rows, CSVOptions{})
}

// WriteCSVWith is WriteCSV with options.
func WriteCSVWith(w io.Writer, b Batch, rows iter.Seq2[Row, error], o CSVOptions) (Summary, error) {
	amount := formatAmount
	if o.ExcelEU {
		if _, err := io.WriteString(w, utf8BOM); err != nil {
			return Summary{}, fmt.Errorf("report: writing CSV: %w", err)
		}
		amount = func(a money.Amount, scale int) string {
			return strings.Replace(formatAmount(a, scale), ".", ",", 1)
		}
	}
	out, err := newCSVOutComma(w, InfoHeader(b.InfoColumns), o.ExcelEU)
	if err != nil {
		return Summary{}, err
	}
	cells := make([]string, 0, len(Header)+len(b.InfoColumns))
	t := NewTally(b)
	order := orderCheck{batch: b.ID}
	for r, err := range rows {
		if err != nil {
			return Summary{}, sourceError(b, err)
		}
		if err := order.next(r.Line); err != nil {
			return Summary{}, err
		}
		t.Add(r)
		cells = append(cells[:0],
			strconv.Itoa(r.Line),
			r.ExternalID,
			amount(r.Amount, b.Scale),
			scrub(r.Destination),
			r.State,
			r.PSPOrderID,
			r.PSPStatus,
			strconv.Itoa(r.Attempts),
			scrub(r.Error),
			formatTime(r.UpdatedAt),
			scrub(r.ResolvedBy),
			scrub(r.ResolutionNote),
			GroupOf(r),
		)
		for i := range b.InfoColumns {
			v := ""
			if i < len(r.Info) {
				v = r.Info[i]
			}
			cells = append(cells, v) // as written: payfile refused any card number in it
		}
		if err := out.write(cells...); err != nil {
			return Summary{}, err
		}
	}
	s := t.Summary()
	if o.SummaryInCSV {
		if err := writeTrailer(out, b, s); err != nil {
			return Summary{}, err
		}
	}
	return s, out.flush()
}

func writeTrailer(out *csvOut, b Batch, s Summary) error {
	final := "no"
	if s.Final {
		final = "yes"
	}
	verdict := "MISMATCH"
	if s.Reconciled {
		verdict = "OK"
	}
	lines := [][]string{
		{"# batch", "id", "file", "loadedAt", "final"},
		{"# batch", b.ID, b.File, formatTime(b.LoadedAt), final},
		{"# summary", "state", "rows", "amount"},
	}
	for _, st := range s.ByState {
		lines = append(lines, []string{"# summary", st.State, strconv.Itoa(st.Rows), formatAmount(st.Amount, s.Scale)})
	}
	lines = append(lines,
		[]string{"# summary", "total", strconv.Itoa(s.Rows), formatAmount(s.Total, s.Scale)},
		[]string{"# summary", "created awaiting outcome", strconv.Itoa(s.Awaiting.Rows), formatAmount(s.Awaiting.Amount, s.Scale)},
		[]string{"# outcome", "group", "rows", "amount", "meaning"},
	)
	for _, g := range s.ByGroup {
		lines = append(lines, []string{"# outcome", g.Group, strconv.Itoa(g.Rows), formatAmount(g.Amount, s.Scale), GroupMeaning[g.Group]})
	}
	lines = append(lines,
		[]string{"# outcome", "total", strconv.Itoa(s.Rows), formatAmount(s.GroupsTotal, s.Scale)},
		[]string{"# reconciliation",
			"total of states", formatAmount(s.Total, s.Scale),
			"file total", formatAmount(s.FileTotal, s.Scale),
			"rows", strconv.Itoa(s.Rows),
			"file rows", strconv.Itoa(s.FileRows),
			verdict},
	)
	if err := out.blank(); err != nil {
		return err
	}
	for _, l := range lines {
		if err := out.write(l...); err != nil {
			return err
		}
	}
	return nil
}

// ErrorRow is one reason why a payout file was refused.
type ErrorRow struct {
	File    string // name of the payout file
	Line    int    // line number in the file; 0 for a fault of the whole file
	Column  string // column name; "" when the fault is not in one column
	Message string // what is wrong, for a person
}

// WriteErrorsCSV writes the error listing of a refused file (the
// outbox/NAME.errors.csv file): the header file,line,column,message then one
// line per error, in the order given. A Line of 0 is written as an empty
// cell. Cells are neutralised and messages scrubbed of card numbers.
func WriteErrorsCSV(w io.Writer, errs iter.Seq[ErrorRow]) error {
	out, err := newCSVOut(w, ErrorsHeader)
	if err != nil {
		return err
	}
	for e := range errs {
		line := ""
		if e.Line != 0 {
			line = strconv.Itoa(e.Line)
		}
		if err := out.write(e.File, line, e.Column, scrub(e.Message)); err != nil {
			return err
		}
	}
	return out.flush()
}
