package payfile

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/xuri/excelize/v2"
)

// infoBook is a workbook whose informational columns hold what finance
// types: a payDate of real dates (LibreOffice's DD/MM/YYYY, Excel's
// built-in short date), a count and a rate as numbers, and a 16-digit
// number in memo; and a row whose externalId is a date.
func infoBook(t *testing.T) []byte {
	t.Helper()
	f := excelize.NewFile()
	defer f.Close()
	const s = "Sheet1"
	style := func(st excelize.Style) int {
		id, err := f.NewStyle(&st)
		if err != nil {
			t.Fatal(err)
		}
		return id
	}
	lo := "DD/MM/YYYY"
	styles := map[string]int{
		"lo": style(excelize.Style{CustomNumFmt: &lo}), "short": style(excelize.Style{NumFmt: 14}),
		"fixed2": style(excelize.Style{NumFmt: 2}), "general": 0,
	}
	type cell struct {
		ref   string
		v     any
		style string
	}
	for _, c := range []cell{
		{"A1", "externalId", ""}, {"B1", "amount", ""}, {"C1", "telecomOperator", ""}, {"D1", "payDate", ""}, {"E1", "count", ""}, {"F1", "rate", ""}, {"G1", "memo", ""},
		{"A2", "PO-1", ""}, {"B2", "10.00", ""}, {"C2", "MTS", ""}, {"D2", 46346.0, "lo"}, {"E2", 3.0, "general"}, {"F2", 2.5, "fixed2"},
		{"A3", "PO-2", ""}, {"B3", "11.00", ""}, {"C3", "MTS", ""}, {"D3", 46347.0, "short"},
		{"A4", "PO-3", ""}, {"B4", "12.00", ""}, {"C4", "MTS", ""}, {"G4", 4111111111111111.0, "general"},
		{"A5", 46346.0, "lo"}, {"B5", "13.00", ""}, {"C5", "MTS", ""},
	} {
		var err error
		switch v := c.v.(type) {
		case float64:
			err = f.SetCellFloat(s, c.ref, v, -1, 64)
		default:
			err = f.SetCellValue(s, c.ref, v)
		}
		if err == nil && c.style != "" && styles[c.style] != 0 {
			err = f.SetCellStyle(s, c.ref, c.ref, styles[c.style])
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	buf, err := f.WriteToBuffer()
	if err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// TestInfoColumnsReadAsShown: dates and plain numbers in informational
// columns are read as the sheet shows them, where every row was refused
// ("is a number cell holding 46346 ... format the payDate column as
// Text": issue 43 defect 5); a date in externalId and a card-length
// number in memo are still refused, the number without its digits.
func TestInfoColumnsReadAsShown(t *testing.T) {
	book := infoBook(t)
	ctx := context.Background()
	var errs []Error
	sum, err := Check(ctx, "info.xlsx", bytes.NewReader(book), Options{}, func(e Error) { errs = append(errs, e) })
	if err != nil {
		t.Fatal(err)
	}
	bad := map[int]string{}
	for _, e := range errs {
		bad[e.Line] += e.Column + ": " + e.Message + "\n"
	}
	if len(bad) != 2 || bad[4] == "" || bad[5] == "" || !strings.HasPrefix(bad[4], "memo: ") || !strings.HasPrefix(bad[5], "externalId: ") {
		t.Errorf("refused rows %v, want row 4 (memo) and row 5 (externalId) only", bad)
	}
	if strings.Contains(bad[4], "4111111111") {
		t.Errorf("the memo's refusal shows the digits: %s", bad[4])
	}
	got := map[string][]string{}
	if err := Each(ctx, "info.xlsx", bytes.NewReader(book), Options{}, sum.IsBad, func(r Row) error {
		got[r.ExternalID] = r.Info
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if strings.Join(sum.Info, ",") != "payDate,count,rate,memo" {
		t.Fatalf("info columns %v", sum.Info)
	}
	want := map[string]string{"PO-1": "20/11/2026|3|2.50|", "PO-2": "11-21-26|||"}
	for id, w := range want {
		if g := strings.Join(got[id], "|"); g != w {
			t.Errorf("%s: info %q, want %q", id, g, w)
		}
	}
}

// TestFormatDate: a date format code shows a serial as a spreadsheet does.
func TestFormatDate(t *testing.T) {
	tm := serialTime(46346.5625) // 2026-11-20 13:30
	if want := time.Date(2026, 11, 20, 13, 30, 0, 0, time.UTC); !tm.Equal(want) {
		t.Fatalf("serialTime: %v, want %v", tm, want)
	}
	for code, want := range map[string]string{
		"DD/MM/YYYY":             "20/11/2026",
		"d.m.yy":                 "20.11.26",
		"mm-dd-yy":               "11-20-26",
		"d-mmm-yy":               "20-Nov-26",
		"dddd, mmmm d, yyyy":     "Friday, November 20, 2026",
		"[$-409]yyyy-mm-dd h:mm": "2026-11-20 13:30",
		"h:mm AM/PM":             "1:30 PM",
		"hh:mm:ss":               "13:30:00",
		`yyyy"г."`:               "2026г.",
	} {
		if !isDateFormat(code) {
			t.Errorf("%q is not seen as a date format", code)
		}
		if got := formatDate(code, tm); got != want {
			t.Errorf("formatDate(%q) = %q, want %q", code, got, want)
		}
	}
	for _, code := range []string{"0.00", "#,##0", `"days: "0`, "General", "0%"} {
		if isDateFormat(code) {
			t.Errorf("%q is seen as a date format", code)
		}
	}
}
