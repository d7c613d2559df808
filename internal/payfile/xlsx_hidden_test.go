package payfile

import (
	"archive/zip"
	"bytes"
	"context"
	"strings"
	"testing"
)

// twoSheets is a workbook of two sheets, the first hidden ("Old", whose
// row holds another amount) and "New".
func twoSheets(t *testing.T) []byte {
	t.Helper()
	var b bytes.Buffer
	zw := zip.NewWriter(&b)
	put := func(name, data string) {
		w, err := zw.Create(name)
		if err != nil {
			t.Fatal(err)
		}
		w.Write([]byte(data))
	}
	sheet := func(amount string) string {
		return `<worksheet><sheetData><row r="1"><c t="inlineStr"><is><t>externalId</t></is></c><c t="inlineStr"><is><t>amount</t></is></c><c t="inlineStr"><is><t>telecomOperator</t></is></c></row>` +
			`<row r="2"><c t="inlineStr"><is><t>PO-1</t></is></c><c><v>` + amount + `</v></c><c t="inlineStr"><is><t>MTS</t></is></c></row></sheetData></worksheet>`
	}
	put("xl/workbook.xml", `<workbook xmlns:r="http://schemas.openxmlformats.org/officeDocument/2006/relationships"><sheets><sheet name="Old" sheetId="1" state="hidden" r:id="rId1"/><sheet name="New" sheetId="2" r:id="rId2"/></sheets></workbook>`)
	put("xl/_rels/workbook.xml.rels", `<Relationships><Relationship Id="rId1" Type="http://schemas.openxmlformats.org/officeDocument/2006/relationships/worksheet" Target="worksheets/sheet1.xml"/><Relationship Id="rId2" Type="http://schemas.openxmlformats.org/officeDocument/2006/relationships/worksheet" Target="/xl/worksheets/sheet2.xml"/></Relationships>`)
	put("xl/worksheets/sheet1.xml", sheet("999"))
	put("xl/worksheets/sheet2.xml", sheet("10"))
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// TestHiddenSheet: without --sheet the first sheet not hidden is read; a
// hidden sheet named is refused unless hidden rows are included.
func TestHiddenSheet(t *testing.T) {
	data := twoSheets(t)
	ctx := context.Background()
	for _, tt := range []struct {
		opts  Options
		sheet string
		total string
		err   string
	}{
		{Options{}, "New", "10", ""},
		{Options{Sheet: "Old"}, "Old", "0", "w.xlsx:Old!1: file: the sheet Old is hidden: the workbook does not show it, yet it would be paid; unhide it, or load with --include-hidden-rows"},
		{Options{Sheet: "Old", IncludeHiddenRows: true}, "Old", "999", ""},
	} {
		sum, errs, err := Collect(ctx, "w.xlsx", bytes.NewReader(data), tt.opts)
		var got []string
		for _, e := range errs {
			got = append(got, e.String())
		}
		if err != nil || sum.Sheet != tt.sheet || sum.Total.String() != tt.total || strings.Join(got, "\n") != tt.err {
			t.Errorf("%+v: sheet %q total %s errors %q %v; want %q %s %q", tt.opts, sum.Sheet, sum.Total, got, err, tt.sheet, tt.total, tt.err)
		}
	}
}

// TestRowHiddenAttributes: a row is hidden by hidden="1", a zero height,
// or a sheet whose rows are hidden unless they say otherwise
// (zeroHeight); a column by hidden="1" or a zero width. (fuzzPackage
// declares an autofilter over A1:D4, so the rows are within it.)
func TestRowHiddenAttributes(t *testing.T) {
	for _, tt := range []struct {
		name, format, cols, row string
		hidden                  int
		refused                 string
	}{
		{"shown", "", "", `<row r="2">`, 0, ""},
		{"hidden", "", "", `<row r="2" hidden="1">`, 1, "Sheet1!2: row: is hidden, within the sheet's autofilter"},
		{"hidden true", "", "", `<row r="2" hidden="true">`, 1, "Sheet1!2: row: is hidden, within the sheet's autofilter"},
		{"zero height", "", "", `<row r="2" ht="0" customHeight="1">`, 1, "Sheet1!2: row: is hidden, within the sheet's autofilter"},
		{"zeroHeight sheet", `<sheetFormatPr zeroHeight="1"/>`, "", `<row r="2">`, 1, "Sheet1!2: row: is hidden, within the sheet's autofilter"},
		{"zeroHeight sheet, row with a height", `<sheetFormatPr zeroHeight="1"/>`, "", `<row r="2" ht="15">`, 0, ""},
		{"hidden amount column", "", `<cols><col min="2" max="2" hidden="1"/></cols>`, `<row r="2">`, 0, "the amount column (B) is hidden"},
		{"zero-width column", "", `<cols><col min="1" max="3" width="0"/></cols>`, `<row r="2">`, 0, "the externalId column (A) is hidden"},
		{"hidden column right of the header", "", `<cols><col min="5" max="9" hidden="1"/></cols>`, `<row r="2">`, 0, ""},
	} {
		sheet := `<worksheet>` + tt.format + tt.cols + `<sheetData><row r="1"><c t="inlineStr"><is><t>externalId</t></is></c><c t="inlineStr"><is><t>amount</t></is></c><c t="inlineStr"><is><t>telecomOperator</t></is></c></row>` +
			tt.row + `<c t="inlineStr"><is><t>PO-1</t></is></c><c><v>10</v></c><c t="inlineStr"><is><t>MTS</t></is></c></row></sheetData></worksheet>`
		data := fuzzPackage([]byte(sheet), []byte(`<sst/>`), []byte(`<styleSheet/>`))
		sum, errs, err := Collect(context.Background(), "h.xlsx", bytes.NewReader(data), Options{})
		var got []string
		for _, e := range errs {
			got = append(got, e.String())
		}
		all := strings.Join(got, "\n")
		if err != nil || sum.HiddenRows != tt.hidden || (tt.refused == "") != (all == "") || !strings.Contains(all, tt.refused) {
			t.Errorf("%s: %d hidden, errors %q %v; want %d hidden, %q", tt.name, sum.HiddenRows, all, err, tt.hidden, tt.refused)
		}
	}
}
