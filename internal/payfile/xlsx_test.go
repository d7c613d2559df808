package payfile

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/acme/payout/internal/proof/testenv/golden"
	"github.com/xuri/excelize/v2"
)

// typedWorkbook is testdata/xlsx/payouts.xlsx: go test -update writes it
// again with writeTypedWorkbook.
var typedWorkbook = filepath.Join("testdata", "xlsx", "payouts.xlsx")

// writeTypedWorkbook writes the test workbook: a sheet of payouts whose
// cells are text, numbers under several number formats, dates, booleans
// and formulas with and without a saved result, each row showing one way
// a spreadsheet keeps (or loses) a value; and a second sheet for --sheet.
func writeTypedWorkbook(path string) error {
	f := excelize.NewFile()
	defer f.Close()
	const s = "Sheet1"
	style := func(st excelize.Style) int {
		id, err := f.NewStyle(&st)
		if err != nil {
			panic(err)
		}
		return id
	}
	fixed2 := style(excelize.Style{NumFmt: 2})   // 0.00
	whole := style(excelize.Style{NumFmt: 1})    // 0
	grouped := style(excelize.Style{NumFmt: 4})  // #,##0.00
	date := style(excelize.Style{NumFmt: 14})    // a short date
	percent := style(excelize.Style{NumFmt: 9})  // 0%
	textFmt := style(excelize.Style{NumFmt: 49}) // @ (Text)
	zeros := "00000"
	padded := style(excelize.Style{CustomNumFmt: &zeros})

	var err error
	set := func(cell string, v any) {
		if err == nil {
			err = f.SetCellValue(s, cell, v)
		}
	}
	num := func(cell string, v float64, st int) { // a number cell, stored with all its digits
		if err == nil {
			err = f.SetCellFloat(s, cell, v, -1, 64)
		}
		if err == nil && st != 0 {
			err = f.SetCellStyle(s, cell, cell, st)
		}
	}
	formula := func(cell, formula string, result float64, digits, st int) { // a formula with its saved result
		if err == nil {
			err = f.SetCellFormula(s, cell, formula)
		}
		if err == nil {
			err = f.SetCellFloat(s, cell, result, digits, 64)
		}
		if err == nil && st != 0 {
			err = f.SetCellStyle(s, cell, cell, st)
		}
	}
	for i, h := range []string{"External ID", "Amount", "Card Number", "Telecom Operator"} {
		set(fmt.Sprintf("%c1", 'A'+i), h)
	}
	// 2-6: valid rows: text ids and cards, number amounts shown as stored.
	set("A2", "PO-1")
	num("B2", 1500.5, fixed2)
	set("C2", "4111111111111111")
	set("A3", "PO-2")
	num("B3", 250, 0)
	set("D3", "MTS")
	set("A4", "00123") // a text id keeps its leading zeros
	set("B4", "99.99") // a text amount
	set("D4", "Beeline")
	if err == nil {
		err = f.SetCellStyle(s, "A4", "A4", textFmt)
	}
	num("A5", 1005, 0) // a number id shown as stored
	num("B5", 1000000, grouped)
	set("D5", "Tele2")
	set("A6", "PO-6")
	formula("B6", "ROUND(0.1+0.2,2)", 0.3, -1, fixed2)
	set("D6", "Megafon")
	// 7-15: one refused cell each.
	num("A7", 123, padded) // shows 00123: the zeros are only the format
	num("B7", 10, 0)
	set("D7", "MTS")
	set("A8", "PO-8")
	tenth := 0.1
	formula("B8", "0.1+0.2", tenth+0.2, 17, fixed2) // saved as 0.30000000000000004, shown 0.30
	set("D8", "MTS")
	set("A9", "PO-9")
	num("B9", 10, 0)
	num("C9", 4111111111111111, 0) // a card typed as a number: 4111111111111110
	set("A10", "PO-10")
	num("B10", 45306, date) // a date in the amount column
	set("D10", "MTS")
	if err == nil {
		err = f.SetCellFormula(s, "A11", `"PO-"&ROW()`) // no saved result
	}
	num("B11", 10, 0)
	set("D11", "MTS")
	set("A12", "PO-12")
	num("B12", 1500.5, whole) // shows 1501
	set("D12", "MTS")
	set("A13", "PO-13")
	num("B13", 10, 0)
	set("D13", true)
	set("A14", "PO-14")
	set("B14", "1 500,50") // a locale's text amount under the plain format
	set("D14", "MTS")
	set("A15", "PO-15")
	num("B15", 0.5, percent) // shows 50%
	set("D15", "MTS")
	// 16 is empty. 17: a repeated id; 18: a value right of the header.
	set("A17", "PO-1")
	num("B17", 10, 0)
	set("D17", "MTS")
	set("A18", "PO-18")
	num("B18", 10, 0)
	set("D18", "MTS")
	set("F18", "note")
	// A second sheet, read with --sheet Other.
	if _, e := f.NewSheet("Other"); err == nil {
		err = e
	}
	for i, v := range []any{"externalId", "amount", "telecomOperator", "X-1", 5, "Yota"} {
		if err == nil {
			err = f.SetCellValue("Other", fmt.Sprintf("%c%d", 'A'+i%3, 1+i/3), v)
		}
	}
	if err != nil {
		return err
	}
	return f.SaveAs(path)
}

// dumpCells lists every cell of every sheet as the reader sees it: kind,
// formula, stored and shown value.
func dumpCells(t *testing.T, path string) string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	for _, sheet := range []string{"Sheet1", "Other"} {
		wb, err := openWorkbook(bytes.NewReader(data), sheet)
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		err = wb.eachRow(context.Background(), func(_ *sheetReader, row int, hidden bool, cells []xcell) error {
			for i, x := range cells {
				if x.kind != cellEmpty {
					fmt.Fprintf(&b, "%s!%s kind=%d formula=%v hidden=%v raw=%q format=%q\n", sheet, cellRef(i+1, row), x.kind, x.formula, hidden, x.raw, x.format)
				}
			}
			return nil
		})
		wb.Close()
		if err != nil {
			t.Fatal(err)
		}
	}
	return b.String()
}

// TestWorkbookGolden checks the typed workbook against its listing.
func TestWorkbookGolden(t *testing.T) {
	if golden.Updating() {
		if err := writeTypedWorkbook(typedWorkbook); err != nil {
			t.Fatal(err)
		}
	}
	sum, got := fullListing(t, typedWorkbook, Options{})
	golden.CheckString(t, filepath.Join("testdata", "xlsx", "payouts.golden"), got)
	if sum.Sheet != "Sheet1" || sum.Aborted || sum.ValidRows != 5 {
		t.Errorf("summary %+v", sum)
	}
	if strings.Contains(got, "4111111111111110") || strings.Contains(got, "4111111111111111") {
		t.Error("a full card number in the listing")
	}

	_, other := fullListing(t, typedWorkbook, Options{Sheet: "Other"})
	if want := "-- 1 rows, 1 valid, total 5.00\n2 X-1 5.00 telecom Yota\n"; other != want {
		t.Errorf("--sheet Other:\n%s\nwant\n%s", other, want)
	}
	_, errs := listing(t, typedWorkbook, Options{Sheet: "Nope"}, 5*time.Second)
	if want := `payouts.xlsx:1: file: the workbook has no sheet "Nope" (--sheet); its sheets: "Sheet1" or "Other"` + "\n"; errs != want {
		t.Errorf("--sheet Nope: %q, want %q", errs, want)
	}
}

// TestWorkbookRegenerates: writing the test workbook again gives the same
// cells, and the same digest (so the same batch id) although the file's
// bytes may differ.
func TestWorkbookRegenerates(t *testing.T) {
	again := filepath.Join(t.TempDir(), "payouts.xlsx")
	if err := writeTypedWorkbook(again); err != nil {
		t.Fatal(err)
	}
	committed, fresh := dumpCells(t, typedWorkbook), dumpCells(t, again)
	if committed != fresh {
		t.Fatalf("regenerated cells differ (go test -update rewrites the workbook)\n--- committed\n%s--- regenerated\n%s", committed, fresh)
	}
	d1, d2 := digestOf(t, typedWorkbook, ""), digestOf(t, again, "")
	if !bytes.Equal(d1, d2) {
		t.Error("the same cells give another digest")
	}
	if bytes.Equal(d1, digestOf(t, typedWorkbook, "Other")) {
		t.Error("two sheets give the same digest")
	}
}

func digestOf(t *testing.T, path, sheet string) []byte {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	d, err := WorkbookDigest(context.Background(), f, sheet)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// TestWorkbookDigestIgnoresFormatting: a workbook saved again with other
// number formats and metadata but the same cells has the same digest; a
// changed amount changes it.
func TestWorkbookDigestIgnoresFormatting(t *testing.T) {
	dir := t.TempDir()
	write := func(name string, amount float64, styled bool) string {
		f := excelize.NewFile()
		defer f.Close()
		f.SetCellValue("Sheet1", "A1", "externalId")
		f.SetCellValue("Sheet1", "B1", "amount")
		f.SetCellValue("Sheet1", "A2", "PO-1")
		f.SetCellFloat("Sheet1", "B2", amount, -1, 64)
		if styled {
			st, _ := f.NewStyle(&excelize.Style{NumFmt: 4})
			f.SetCellStyle("Sheet1", "B2", "B2", st)
			f.SetColWidth("Sheet1", "A", "B", 30)
			f.SetDocProps(&excelize.DocProperties{Creator: "someone else", Modified: "2030-01-01T00:00:00Z"})
		}
		p := filepath.Join(dir, name)
		if err := f.SaveAs(p); err != nil {
			t.Fatal(err)
		}
		return p
	}
	a, b, c := write("a.xlsx", 10.5, false), write("b.xlsx", 10.5, true), write("c.xlsx", 10.51, false)
	if !bytes.Equal(digestOf(t, a, ""), digestOf(t, b, "")) {
		t.Error("re-saving with formats and properties changed the digest")
	}
	if bytes.Equal(digestOf(t, a, ""), digestOf(t, c, "")) {
		t.Error("another amount, the same digest")
	}
}

func TestWorkbookNotAWorkbook(t *testing.T) {
	for _, tt := range []struct {
		data, want string
	}{
		{"externalId,amount\nA,1\n", "x.xlsx:1: file: not an XLSX workbook (not a ZIP package, as an .xlsx file is): save it from the spreadsheet as Excel Workbook (.xlsx), or as CSV UTF-8 and name it .csv"},
		{"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1", "x.xlsx:1: file: not an XLSX workbook (an old Excel 97-2003 .xls workbook): save it from the spreadsheet as Excel Workbook (.xlsx), or as CSV UTF-8 and name it .csv"},
	} {
		sum, errs, err := Collect(context.Background(), "x.xlsx", strings.NewReader(tt.data), Options{})
		if err != nil || !sum.Aborted || len(errs) != 1 || errs[0].String() != tt.want {
			t.Errorf("%q: %v %+v %v", tt.data, errs, sum, err)
		}
	}
	// An empty sheet.
	f := excelize.NewFile()
	var buf bytes.Buffer
	if err := f.Write(&buf); err != nil {
		t.Fatal(err)
	}
	_, errs, err := Collect(context.Background(), "e.xlsx", bytes.NewReader(buf.Bytes()), Options{})
	if err != nil || len(errs) != 1 || errs[0].String() != "e.xlsx:Sheet1!1: file: the sheet Sheet1 is empty" || !errors.Is(errs[0], KindEmpty) {
		t.Errorf("empty sheet: %v %v", errs, err)
	}
}

func TestSheetRef(t *testing.T) {
	for in, want := range map[string]string{"Sheet1": "Sheet1", "Выплаты": "Выплаты", "My payouts": "'My payouts'", "it's": "'it''s'"} {
		if got := sheetRef(in); got != want {
			t.Errorf("sheetRef(%q) = %q, want %q", in, got, want)
		}
	}
}

// writeBigWorkbook writes rows payout rows with excelize's stream writer:
// text ids and cards, number amounts.
func writeBigWorkbook(tb testing.TB, path string, rows int) {
	f := excelize.NewFile()
	defer f.Close()
	sw, err := f.NewStreamWriter("Sheet1")
	if err != nil {
		tb.Fatal(err)
	}
	if err := sw.SetRow("A1", []any{"externalId", "amount", "cardNumber", "telecomOperator"}); err != nil {
		tb.Fatal(err)
	}
	for i := 1; i <= rows; i++ {
		row := []any{fmt.Sprintf("PO-%07d", i), float64(i%100000) + 0.25, nil, nil}
		if i%2 == 0 {
			row[2] = "4111111111111111"
		} else {
			row[3] = "MTS"
		}
		cell, _ := excelize.CoordinatesToCellName(1, i+1)
		if err := sw.SetRow(cell, row); err != nil {
			tb.Fatal(err)
		}
	}
	if err := sw.Flush(); err != nil {
		tb.Fatal(err)
	}
	if err := f.SaveAs(path); err != nil {
		tb.Fatal(err)
	}
}

// BenchmarkWorkbook checks and reads a workbook of 10,000 and 100,000
// rows as the loader does (Check, then Each), reporting the peak live heap
// above the start (peak-heap-MiB) and the workbook's size (file-MiB).
func BenchmarkWorkbook(b *testing.B) {
	for _, rows := range []int{10_000, 100_000} {
		b.Run(fmt.Sprintf("rows=%d", rows), func(b *testing.B) {
			path := filepath.Join(b.TempDir(), "big.xlsx")
			writeBigWorkbook(b, path, rows)
			info, _ := os.Stat(path)
			b.ResetTimer()
			var peak uint64
			for i := 0; i < b.N; i++ {
				growth, _ := peakHeap(func() { loadLike(b, path, rows) })
				peak = max(peak, growth)
			}
			b.ReportMetric(float64(peak)/(1<<20), "peak-heap-MiB")
			b.ReportMetric(float64(info.Size())/(1<<20), "file-MiB")
		})
	}
}

// loadLike is the loader's use of a file: Check, then Each of the valid rows.
func loadLike(tb testing.TB, path string, rows int) {
	f, err := os.Open(path)
	if err != nil {
		tb.Fatal(err)
	}
	defer f.Close()
	ctx := context.Background()
	sum, err := Check(ctx, filepath.Base(path), f, Options{}, func(e Error) { tb.Fatal(e) })
	if err != nil || sum.ValidRows != rows {
		tb.Fatalf("%+v %v", sum, err)
	}
	if _, err := f.Seek(0, 0); err != nil {
		tb.Fatal(err)
	}
	n := 0
	if err := Each(ctx, filepath.Base(path), f, Options{}, sum.IsBad, func(Row) error { n++; return nil }); err != nil || n != rows {
		tb.Fatalf("Each: %d rows, %v", n, err)
	}
}
