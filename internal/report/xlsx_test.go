package report

import (
	"bytes"
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/acme/payout/internal/lifecycle"
	"github.com/acme/payout/internal/money"
	"github.com/shopspring/decimal"
	"github.com/xuri/excelize/v2"
)

func writeXLSX(t *testing.T, b Batch, rows []Row) ([]byte, Summary) {
	t.Helper()
	var buf bytes.Buffer
	s, err := WriteXLSX(&buf, b, FromSlice(rows))
	if err != nil {
		t.Fatalf("WriteXLSX: %v", err)
	}
	return buf.Bytes(), s
}

// dumpXLSX is a workbook as text for a golden file: per sheet, per row,
// each cell's type (n: number, s: text), its stored value and, for
// numbers, its number format.
func dumpXLSX(t *testing.T, data []byte) []byte {
	t.Helper()
	f, err := excelize.OpenReader(bytes.NewReader(data))
	if err != nil {
		t.Fatalf("excelize cannot open the workbook: %v", err)
	}
	defer f.Close()
	var out strings.Builder
	for _, sheet := range f.GetSheetList() {
		fmt.Fprintf(&out, "== %s\n", sheet)
		rows, err := f.GetRows(sheet, excelize.Options{RawCellValue: true})
		if err != nil {
			t.Fatal(err)
		}
		for i, row := range rows {
			cells := make([]string, len(row))
			for j, v := range row {
				ref, _ := excelize.CoordinatesToCellName(j+1, i+1)
				typ, err := f.GetCellType(sheet, ref)
				if err != nil {
					t.Fatal(err)
				}
				switch typ {
				case excelize.CellTypeNumber, excelize.CellTypeUnset:
					if v == "" {
						cells[j] = ""
						continue
					}
					style, _ := f.GetCellStyle(sheet, ref)
					format := ""
					if st, err := f.GetStyle(style); err == nil && st.CustomNumFmt != nil {
						format = " [" + *st.CustomNumFmt + "]"
					}
					cells[j] = "n:" + v + format
				default:
					cells[j] = "s:" + strconv.Quote(v)
				}
			}
			fmt.Fprintf(&out, "%d: %s\n", i+1, strings.Join(cells, " | "))
		}
	}
	return []byte(out.String())
}

// TestXLSXAmountsExact: a spreadsheet reads every amount of the Payouts
// sheet back as the exact decimal, as a number when a number cell can hold
// it and as text beyond 14 significant digits; the sum of the number
// cells, taken as decimals, is the file's total.
func TestXLSXAmountsExact(t *testing.T) {
	amounts := []string{"0.10", "0.20", "2775.50", "11474.10", "999999999999.99", "9999999999999.99", "99999999999999.99", "123456789012345.67", "1"}
	var rows []Row
	for i, a := range amounts {
		rows = append(rows, Row{Line: i + 2, ExternalID: "X-" + strconv.Itoa(i), Amount: money.MustParse(a),
			Destination: "411111******1111", State: string(lifecycle.Paid)})
	}
	b := batchOf("b-x", "x.csv", rows)
	data, s := writeXLSX(t, b, rows)
	if !s.Reconciled {
		t.Fatalf("not reconciled")
	}
	f, err := excelize.OpenReader(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if got := f.GetSheetList(); len(got) != 2 || got[0] != SheetPayouts || got[1] != SheetSummary {
		t.Fatalf("sheets %q", got)
	}
	for i, a := range amounts {
		ref, _ := excelize.CoordinatesToCellName(3, i+2)
		raw, err := f.GetCellValue(SheetPayouts, ref, excelize.Options{RawCellValue: true})
		if err != nil {
			t.Fatal(err)
		}
		shown, _ := f.GetCellValue(SheetPayouts, ref)
		typ, _ := f.GetCellType(SheetPayouts, ref)
		want := money.MustParse(a).StringFixed(2)
		got, err := decimal.NewFromString(raw)
		if err != nil || !got.Equal(money.MustParse(a).Decimal()) {
			t.Errorf("%s: stored %q, want the exact amount", a, raw)
		}
		if shown != want && !(typ == excelize.CellTypeInlineString || typ == excelize.CellTypeSharedString) {
			t.Errorf("%s: shown as %q, want %q", a, shown, want)
		}
		isText := typ == excelize.CellTypeInlineString || typ == excelize.CellTypeSharedString
		if long := len(strings.ReplaceAll(strings.TrimLeft(a, "0"), ".", "")) > maxNumberDigits; long != isText {
			t.Errorf("%s: text cell %v, want text only beyond %d significant digits", a, isText, maxNumberDigits)
		}
	}
}

// BenchmarkWriteXLSX writes a 100,000-row workbook (the UI's download of
// a large batch).
func BenchmarkWriteXLSX(b *testing.B) {
	const n = 100_000
	rows := make([]Row, n)
	for i := range rows {
		rows[i] = Row{Line: i + 2, ExternalID: "PAY-" + strconv.Itoa(i), Amount: money.FromMinor(int64(i%100000+1), 2),
			Destination: "411111******1111", State: states[i%len(states)], PSPOrderID: "ord-" + strconv.Itoa(i),
			PSPStatus: "SUCCESS", Attempts: 1, UpdatedAt: updatedAt}
	}
	batch := Batch{ID: "bench", Rows: n, Total: sumRows(rows), Scale: 2}
	b.ReportAllocs()
	for b.Loop() {
		var size countingWriter
		s, err := WriteXLSX(&size, batch, FromSlice(rows))
		if err != nil || !s.Reconciled {
			b.Fatal(err, s.Reconciled)
		}
		b.ReportMetric(float64(size), "bytes")
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/row")
}
