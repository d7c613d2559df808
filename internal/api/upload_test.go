package api_test

import (
	"bytes"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/xuri/excelize/v2"

	"github.com/acme/payout/internal/api"
)

const (
	csvType  = "text/csv"
	xlsxType = "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet"
)

// workbook is an XLSX payout file of rows (the first the header).
func workbook(t *testing.T, rows [][]any) []byte {
	t.Helper()
	f := excelize.NewFile()
	defer f.Close()
	for i, r := range rows {
		cell, _ := excelize.CoordinatesToCellName(1, i+1)
		if err := f.SetSheetRow("Sheet1", cell, &r); err != nil {
			t.Fatal(err)
		}
	}
	var b bytes.Buffer
	if err := f.Write(&b); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// fileError is one error of a refused file.
type fileError struct {
	Line                       int
	Column, Sheet, Cell, Field string
	Detail                     string
}

// TestCreateFromFile: a CSV or XLSX payout file as the body of a create
// is loaded as a file in the spool is, all or nothing, each error with
// its line and column (and cell); other media types are 415, a body
// over the limit 413.
func TestCreateFromFile(t *testing.T) {
	e := newEnv(t, func(c *api.Config) { c.MaxBody = 64 << 10 })
	good := "externalId,amount,cardNumber,telecomOperator,notes\r\nF-caf\u00e9,10.50,4111 1111 1111 1111,,first\r\nF-2,75,,MTS,\r\n"
	const card = "4111111111111111"
	cases := []struct {
		name, media, filename string
		query                 string
		body                  []byte
		status                int
		// want: for a 2xx the batch's rows and total; for a 422 an error
		// at line/column (and cell) saying says.
		rows               int64
		total              string
		line               int
		column, cell, says string
	}{
		{name: "good CSV", media: csvType, filename: "june.csv", body: []byte(good), status: 201, rows: 2, total: "85.50"},
		{name: "the same CSV again", media: csvType, filename: "june-again.csv", body: []byte(good), status: 200, rows: 2, total: "85.50"},
		{name: "good XLSX", media: xlsxType, filename: "july.xlsx", status: 201, rows: 2, total: "30.51", body: workbook(t, [][]any{
			{"externalId", "amount", "cardNumber", "telecomOperator"},
			{"X-1", 10.5, "4111 1111 1111 1111", nil},
			{"X-2", 20.01, nil, "MTS"},
		})},
		{name: "control totals met", media: csvType, filename: "ctl.csv", query: "&expectRows=1&expectTotal=5.00",
			body: []byte("externalId,amount,cardNumber\nC-1,5,4111111111111111\n"), status: 201, rows: 1, total: "5.00"},
		{name: "control totals at odds", media: csvType, filename: "ctl2.csv", query: "&expectRows=2",
			body: []byte("externalId,amount,cardNumber\nC-2,5,4111111111111111\n"), status: 422, line: 0, column: "control", says: "declares 2 rows"},
		{name: "bad amount line", media: csvType, filename: "bad.csv", status: 422, line: 3, column: "amount", says: "",
			body: []byte("externalId,amount,cardNumber\nB-1,10,4111111111111111\nB-2,1e3,4111111111111111\n")},
		{name: "bad cell in XLSX", media: xlsxType, filename: "bad.xlsx", status: 422, line: 3, column: "cardNumber", cell: "C3", says: "411111******1112 fails the Luhn check", body: workbook(t, [][]any{
			{"externalId", "amount", "cardNumber"},
			{"W-1", 1, "4111 1111 1111 1111"},
			{"W-2", 2, "4111 1111 1111 1112"},
		})},
		{name: "card in a notes column", media: csvType, filename: "notes.csv", status: 422, line: 2, column: "notes", says: "card",
			body: []byte("externalId,amount,cardNumber,notes\nN-1,1,4111111111111111,pay to " + card + "\n")},
		{name: "card as the id", media: csvType, filename: "id.csv", status: 422, line: 2, column: "externalId", says: "card",
			body: []byte("externalId,amount,cardNumber\n" + card + ",1,4111111111111111\n")},
		{name: "look-alike ids in one file", media: csvType, filename: "twins.csv", status: 422, line: 3, column: "externalId", says: "",
			body: []byte("externalId,amount,cardNumber\nLA-1,1,4111111111111111\nla-1,1,4111111111111111\n")},
		{name: "decomposed twin of a loaded id", media: csvType, filename: "nfd.csv", status: 422, line: 2, column: "externalId", says: "",
			body: []byte("externalId,amount,cardNumber\nf-CAFE\u0301,1,4111111111111111\n")},
		{name: "control character", media: csvType, filename: "bell.csv", status: 422, line: 2, column: "file", says: "control byte 0x07",
			body: []byte("externalId,amount,cardNumber\nCC-\a1,1,4111111111111111\n")},
		{name: "a body over the limit", media: csvType, filename: "huge.csv", status: 413,
			body: append([]byte("externalId,amount,cardNumber\n"), bytes.Repeat([]byte("H-1,1,4111111111111111\n"), 4000)...)},
		{name: "JSON as plain text", media: "text/plain", filename: "x.csv", status: 415, body: []byte("{}")},
		{name: "a form", media: "multipart/form-data; boundary=x", filename: "x.csv", status: 415, body: []byte("--x--")},
		{name: "no filename", media: csvType, status: 400, body: []byte(good)},
		{name: "a name at odds with the type", media: csvType, filename: "x.xlsx", status: 400, body: []byte(good)},
		{name: "a path as the name", media: csvType, filename: "../x.csv", status: 400, body: []byte(good)},
	}
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			path := "/api/v1/batches"
			if c.filename != "" || c.query != "" {
				path += "?filename=" + c.filename + c.query
			}
			hostile := c.status == 415 || c.status == 413 || c.filename == "" || strings.Contains(c.filename, "/")
			a := e.do(req{method: "POST", path: path, token: "erp", key: fmt.Sprintf("file-%d", i), body: c.body,
				header: http.Header{"Content-Type": {c.media}}, hostile: hostile})
			expect(t, a, c.status, c.name)
			if bytes.Contains(a.body, []byte(card)) || bytes.Contains(a.body, []byte("4111 1111 1111 1111")) {
				t.Fatalf("a full card number in the answer: %s", a.body)
			}
			switch {
			case c.status < 300:
				var b api.Batch
				a.json(t, &b)
				if b.Rows != c.rows || b.Total != c.total || b.LoadedBy != "token:erp" || b.Phase != "awaiting_approval" {
					t.Fatalf("batch: %+v", b)
				}
			case c.status == 422:
				var p struct {
					Type   string
					Errors []fileError
				}
				a.json(t, &p)
				hit := false
				for _, fe := range p.Errors {
					hit = hit || (fe.Line == c.line && fe.Column == c.column && fe.Cell == c.cell && strings.Contains(fe.Detail, c.says))
				}
				if p.Type != api.TypeBase+api.KindRefusedItems || !hit {
					t.Fatalf("no error at line %d column %q cell %q saying %q: %s", c.line, c.column, c.cell, c.says, a.body)
				}
			default:
				var p problem
				a.json(t, &p)
				if p.Status != c.status {
					t.Fatalf("problem: %s", a.body)
				}
			}
		})
	}
	var page struct{ Items []api.Batch }
	e.do(req{method: "GET", path: "/api/v1/batches", token: "audit"}).json(t, &page)
	if len(page.Items) != 3 {
		t.Fatalf("batches loaded: %d, want 3 (june, july, ctl): %+v", len(page.Items), page.Items)
	}
}

// TestFileCreateIdempotency: a file create's Idempotency-Key replays the
// first answer; the same key with another file, or the same bytes under
// another name, is refused as a reused key.
func TestFileCreateIdempotency(t *testing.T) {
	e := newEnv(t, nil)
	body := []byte("externalId,amount,cardNumber\nI-1,1,4111111111111111\n")
	h := http.Header{"Content-Type": {csvType}}
	first := e.do(req{method: "POST", path: "/api/v1/batches?filename=i.csv", token: "erp", key: "f-1", body: body, header: h})
	expect(t, first, 201, "first")
	again := e.do(req{method: "POST", path: "/api/v1/batches?filename=i.csv", token: "erp", key: "f-1", body: body, header: h})
	if again.status != 201 || !bytes.Equal(again.body, first.body) || again.header.Get("Idempotent-Replayed") != "true" {
		t.Fatalf("retry: %d %q %s", again.status, again.header.Get("Idempotent-Replayed"), again.body)
	}
	other := []byte("externalId,amount,cardNumber\nI-2,1,4111111111111111\n")
	expect(t, e.do(req{method: "POST", path: "/api/v1/batches?filename=i.csv", token: "erp", key: "f-1", body: other, header: h}), 422, "the key with another file")
	expect(t, e.do(req{method: "POST", path: "/api/v1/batches?filename=j.csv", token: "erp", key: "f-1", body: body, header: h}), 422, "the key with another name")
}
