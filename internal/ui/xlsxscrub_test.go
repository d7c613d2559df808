package ui

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/xuri/excelize/v2"

	"github.com/acme/payout/internal/card"
)

// workbook builds a workbook with a shared-string sheet (cells) and a
// streamed one of inline strings (Streamed), as report.WriteXLSX does.
func workbook(t testing.TB, cells map[string]any, streamed [][]any) []byte {
	t.Helper()
	f := excelize.NewFile()
	defer f.Close()
	for ref, v := range cells {
		if err := f.SetCellValue("Sheet1", ref, v); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := f.NewSheet("Streamed"); err != nil {
		t.Fatal(err)
	}
	sw, err := f.NewStreamWriter("Streamed")
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range streamed {
		cell, _ := excelize.CoordinatesToCellName(1, i+1)
		if err := sw.SetRow(cell, r); err != nil {
			t.Fatal(err)
		}
	}
	if err := sw.Flush(); err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if _, err := f.WriteTo(&buf); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// TestScrubXLSX: card-like numbers in text cells, shared or inline, are
// masked; numbers and other text are kept; the workbook still opens; a
// workbook with nothing to mask comes back as it was.
func TestScrubXLSX(t *testing.T) {
	const pan = "4111111111111111"
	in := workbook(t, map[string]any{"A1": "order " + pan, "A2": 1234567.89, "A3": "INV-2026-0001 & <co>"},
		[][]any{{"4111 1111 1111 1111", 98350.5, "plain"}, {"5500-0000-0000-0004", 42, "x"}})
	out, err := scrubXLSX(in)
	if err != nil {
		t.Fatal(err)
	}
	f, err := excelize.OpenReader(bytes.NewReader(out))
	if err != nil {
		t.Fatalf("scrubbed workbook does not open: %v", err)
	}
	defer f.Close()
	for _, tc := range []struct{ sheet, ref, want string }{
		{"Sheet1", "A1", "order " + card.Mask(pan)},
		{"Sheet1", "A2", "1234567.89"},
		{"Sheet1", "A3", "INV-2026-0001 & <co>"},
		{"Streamed", "A1", card.Scrub("4111 1111 1111 1111")},
		{"Streamed", "B1", "98350.5"},
		{"Streamed", "C1", "plain"},
		{"Streamed", "A2", card.Scrub("5500-0000-0000-0004")},
		{"Streamed", "B2", "42"},
	} {
		got, err := f.GetCellValue(tc.sheet, tc.ref, excelize.Options{RawCellValue: true})
		if err != nil || got != tc.want {
			t.Errorf("%s!%s = %q (%v), want %q", tc.sheet, tc.ref, got, err, tc.want)
		}
	}
	if tc := card.Scrub("4111 1111 1111 1111"); tc == "4111 1111 1111 1111" {
		t.Fatal("card.Scrub masks nothing: the test proves nothing")
	}

	clean := workbook(t, map[string]any{"A1": "INV-1", "A2": 12.5}, [][]any{{"card 411111******1111", 1}})
	if got, err := scrubXLSX(clean); err != nil || !bytes.Equal(got, clean) {
		t.Errorf("a workbook with nothing to mask was rewritten (err %v)", err)
	}
	if _, err := scrubXLSX([]byte("not a zip")); err == nil {
		t.Error("a file that is no workbook was taken")
	}
}

// BenchmarkScrubXLSX: the last pass over a 10,000-row workbook with one
// card number to mask (every part read, the sheet written again).
func BenchmarkScrubXLSX(b *testing.B) {
	rows := make([][]any, 10_000)
	for i := range rows {
		rows[i] = []any{i + 2, fmt.Sprintf("INV-%06d", i), 1234.5, "card 411111******1111", "paid", "PO-" + fmt.Sprint(i)}
	}
	rows[7][5] = "4111111111111111"
	data := workbook(b, nil, rows)
	b.SetBytes(int64(len(data)))
	for b.Loop() {
		if _, err := scrubXLSX(data); err != nil {
			b.Fatal(err)
		}
	}
}

// FuzzScrubText: the pass over a part never panics, is idempotent, and
// leaves a part without cell text as it is.
func FuzzScrubText(f *testing.F) {
	f.Add([]byte(`<c t="inlineStr"><is><t>4111 1111 1111 1111</t></is></c><v>4111111111111111</v>`))
	f.Add([]byte(`<si><t xml:space="preserve">order 5500000000000004 </t></si><t/><tableParts/>`))
	f.Add([]byte(`<t>`))
	f.Fuzz(func(t *testing.T, part []byte) {
		once := scrubText(part)
		if twice := scrubText(once); !bytes.Equal(once, twice) {
			t.Errorf("not idempotent:\n%q\n%q", once, twice)
		}
		if !bytes.Contains(part, []byte("<t")) && !bytes.Equal(once, part) {
			t.Errorf("changed a part without cell text:\n%q\n%q", part, once)
		}
	})
}
