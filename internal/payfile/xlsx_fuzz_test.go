package payfile

import (
	"archive/zip"
	"bytes"
	"context"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/shopspring/decimal"
)

// fuzzPackage packages a sheet, a shared string table and a style sheet
// as a workbook (the parts a fuzzer cannot write itself: ZIP checksums).
func fuzzPackage(sheet, shared, styles []byte) []byte {
	var b bytes.Buffer
	zw := zip.NewWriter(&b)
	put := func(name string, data []byte) {
		w, _ := zw.Create(name)
		w.Write(data)
	}
	put("[Content_Types].xml", []byte(`<?xml version="1.0"?><Types xmlns="http://schemas.openxmlformats.org/package/2006/content-types"/>`))
	put("_rels/.rels", []byte(`<Relationships xmlns="http://schemas.openxmlformats.org/package/2006/relationships"><Relationship Id="rId1" Type="http://schemas.openxmlformats.org/officeDocument/2006/relationships/officeDocument" Target="xl/workbook.xml"/></Relationships>`))
	put("xl/workbook.xml", []byte(`<workbook xmlns="http://schemas.openxmlformats.org/spreadsheetml/2006/main" xmlns:r="http://schemas.openxmlformats.org/officeDocument/2006/relationships"><sheets><sheet name="Sheet1" sheetId="1" r:id="rId1"/></sheets><definedNames><definedName name="_xlnm._FilterDatabase" localSheetId="0" hidden="1">Sheet1!$A$1:$D$4</definedName></definedNames></workbook>`))
	put("xl/_rels/workbook.xml.rels", []byte(`<Relationships xmlns="http://schemas.openxmlformats.org/package/2006/relationships"><Relationship Id="rId1" Type="http://schemas.openxmlformats.org/officeDocument/2006/relationships/worksheet" Target="worksheets/sheet1.xml"/><Relationship Id="rId2" Type="http://schemas.openxmlformats.org/officeDocument/2006/relationships/sharedStrings" Target="sharedStrings.xml"/><Relationship Id="rId3" Type="http://schemas.openxmlformats.org/officeDocument/2006/relationships/styles" Target="styles.xml"/></Relationships>`))
	put("xl/worksheets/sheet1.xml", sheet)
	put("xl/sharedStrings.xml", shared)
	put("xl/styles.xml", styles)
	zw.Close()
	return b.Bytes()
}

// partOf reads a part of a workbook file, "" if absent.
func partOf(f *testing.F, path, name string) []byte {
	data, err := os.ReadFile(path)
	if err != nil {
		f.Fatal(err)
	}
	zr, err := zip.NewReader(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		return nil // not a ZIP package (an .xls renamed)
	}
	for _, zf := range zr.File {
		if zf.Name == name {
			rc, _ := zf.Open()
			b, _ := io.ReadAll(rc)
			rc.Close()
			return b
		}
	}
	return nil
}

// FuzzWorkbook reads fuzzed sheets, shared strings and styles packaged as
// a workbook, and also the fuzzed bytes as a whole file: never a panic or
// an I/O error on an in-memory file, every error well formed and without
// a full card number, and Each hands on exactly the rows Check found
// valid.
func FuzzWorkbook(f *testing.F) {
	files, _ := filepath.Glob(filepath.Join("testdata", "corpus", "*.xlsx"))
	files = append(files, typedWorkbook)
	for _, path := range files {
		sheet := partOf(f, path, "xl/worksheets/sheet1.xml")
		if sheet == nil {
			continue // not a workbook (.ods or .xls renamed)
		}
		f.Add(sheet, partOf(f, path, "xl/sharedStrings.xml"), partOf(f, path, "xl/styles.xml"), uint8(0))
	}
	f.Add([]byte(`<worksheet><cols><col min="2" max="2" hidden="1"/></cols><sheetData><row r="1"><c t="inlineStr"><is><t>externalId</t></is></c><c t="inlineStr"><is><t>amount</t></is></c><c t="inlineStr"><is><t>cardNumber</t></is></c></row><row r="2" hidden="1"><c t="s"><v>0</v></c><c s="1"><v>10.5</v></c><c t="s"><v>1</v></c></row></sheetData></worksheet>`),
		[]byte(`<sst><si><t>PO-1</t></si><si><r><t>4111111111</t></r><r><t>111111</t></r></si></sst>`),
		[]byte(`<styleSheet><numFmts><numFmt numFmtId="164" formatCode="#,##0.00\ [$€-407]"/></numFmts><cellXfs><xf numFmtId="0"/><xf numFmtId="164"/></cellXfs></styleSheet>`), uint8(1))

	// Title rows above the header (one of 2 cells, then a blank row), a
	// card and an amount in scientific notation as text, a total row.
	f.Add([]byte(`<worksheet><sheetData><row r="1"><c t="inlineStr"><is><t>Payouts</t></is></c><c t="inlineStr"><is><t>March</t></is></c></row><row r="2"><c t="inlineStr"><is><t> </t></is></c></row><row r="3"><c t="inlineStr"><is><t>externalId</t></is></c><c t="inlineStr"><is><t>amount</t></is></c><c t="inlineStr"><is><t>cardNumber</t></is></c></row><row r="4"><c t="inlineStr"><is><t>PO-1</t></is></c><c t="inlineStr"><is><t>1.5E+03</t></is></c><c t="inlineStr"><is><t>6.75964982643845E+018</t></is></c></row><row r="5"><c t="inlineStr"><is><t>PO-2</t></is></c><c s="1"><v>10</v></c><c t="s"><v>0</v></c></row><row r="6"><c t="inlineStr"><is><t>Total</t></is></c><c><f>SUM(B4:B5)</f><v>10</v></c></row></sheetData></worksheet>`),
		[]byte(`<sst><si><t>4111111111111111</t></si></sst>`),
		[]byte(`<styleSheet><cellXfs><xf numFmtId="0"/><xf numFmtId="4"/></cellXfs></styleSheet>`), uint8(0))

	f.Fuzz(func(t *testing.T, sheet, shared, styles []byte, mode uint8) {
		opts := fuzzOptions(mode)
		opts.IncludeHiddenRows = mode&16 != 0
		data := fuzzPackage(sheet, shared, styles)
		if mode&32 != 0 {
			data = sheet // the bytes as a whole file
		}
		ctx := context.Background()
		var errs []Error
		sum, err := Check(ctx, "fuzz.xlsx", bytes.NewReader(data), opts, func(e Error) { errs = append(errs, e) })
		if err != nil {
			t.Fatalf("Check returned %v on an in-memory file", err)
		}
		for _, e := range errs {
			if e.Line < 1 || e.Message == "" || e.Column == "" || e.Kind < KindHeader || e.Kind > KindEmpty {
				t.Errorf("malformed error %+v", e)
			}
			if c := fullCard(e.String()); c != "" {
				t.Errorf("error shows a full card number: %q", e.String())
			}
		}
		if sum.HiddenRows < 0 || sum.HiddenRows > sum.Rows {
			t.Errorf("%d hidden rows of %d", sum.HiddenRows, sum.Rows)
		}
		if sum.Aborted {
			return
		}
		n := 0
		err = Each(ctx, "fuzz.xlsx", bytes.NewReader(data), opts, sum.IsBad, func(Row) error { n++; return nil })
		if err != nil || n != sum.ValidRows {
			t.Fatalf("Each: %d rows, %v; Check found %d valid", n, err, sum.ValidRows)
		}
	})
}

// FuzzNumberFormat: any format code and value are read without a panic,
// and a format that passes a value passes it exactly (the same value with
// a digit more is not passed when the format shows fewer decimals).
func FuzzNumberFormat(f *testing.F) {
	for _, c := range builtinFormats {
		f.Add(c, "48000.5")
	}
	f.Add(`#,##0.00\ [$руб.-419];[RED]\-#,##0.00\ [$руб.-419]`, "-12.25")
	f.Add(`"a"0"b"0.0,,%`, "0")
	f.Fuzz(func(t *testing.T, code, value string) {
		d, err := decimal.NewFromString(value)
		if err != nil || len(value) > 40 {
			return
		}
		_ = numberFormatProblem(code, d)
		_ = splitSections(code)
		_ = unquoted(code)
	})
}
