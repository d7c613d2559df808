package ui_test

import (
	"archive/zip"
	"bytes"
	"context"
	"io"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"testing"

	"github.com/xuri/excelize/v2"

	"github.com/acme/payout/internal/card"
	"github.com/acme/payout/internal/ledger"
	"github.com/acme/payout/internal/lifecycle"
	"github.com/acme/payout/internal/money"
	"github.com/acme/payout/internal/proof/uitest"
	"github.com/acme/payout/internal/report"
	"github.com/acme/payout/internal/results"
	"github.com/acme/payout/internal/ui"
	"github.com/acme/payout/internal/view"
)

// download fetches a batch's file kind and checks that it comes as an
// attachment named after the batch's file (<file>.<kind>, the file's
// extension left off) of media type ctype.
func (e *env) download(batch, kind, ctype string) []byte {
	e.t.Helper()
	w := e.do(httptest.NewRequest("GET", "/batches/"+batch+"/download/"+kind, nil))
	if w.Code != 200 {
		e.t.Fatalf("%s: %d %s", kind, w.Code, w.Body.String())
	}
	b, err := e.led.Batch(context.Background(), batch)
	if err != nil {
		e.t.Fatal(err)
	}
	name := ui.DownloadName(b.File, batch, kind)
	if strings.Contains(name, batch) || !strings.HasSuffix(name, "."+kind) {
		e.t.Errorf("%s of %s (file %s) is named %q: not after the file", kind, batch, b.File, name)
	}
	if got, want := w.Header().Get("Content-Disposition"), `attachment; filename="`+name+`"; filename*=UTF-8''`+url.PathEscape(name); got != want {
		e.t.Errorf("%s: Content-Disposition %q, want %q", kind, got, want)
	}
	if got := w.Header().Get("Content-Type"); got != ctype {
		e.t.Errorf("%s: Content-Type %q, want %q", kind, got, ctype)
	}
	return w.Body.Bytes()
}

const xlsxType = "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet"

// TestConsoleXLSXDownload: the batch page offers the result workbook; it
// opens, has the Payouts and Summary sheets, one row per payout with the
// ledger's amount, totals that reconcile with the file's, and no card
// number in full anywhere in it.
func TestConsoleXLSXDownload(t *testing.T) {
	e, d := demoEnv(t, uitest.Options{})
	if page := e.get("/batches/"+d.Worked, 200); !strings.Contains(page, "/download/result.xlsx") || !strings.Contains(page, "/download/summary.txt") {
		t.Error("the batch page does not offer result.xlsx and summary.txt")
	}
	data := e.download(d.Worked, "result.xlsx", xlsxType)

	ledgerAmounts := map[string]money.Amount{}
	err := view.New(e.led.Redis()).Each(context.Background(), d.Worked, func(p ledger.Payout) error {
		a, err := money.Parse(p.Amount, 18)
		ledgerAmounts[p.ExternalID] = a
		return err
	})
	if err != nil || len(ledgerAmounts) != d.Rows {
		t.Fatalf("ledger: %v, %d payouts", err, len(ledgerAmounts))
	}

	f, err := excelize.OpenReader(bytes.NewReader(data))
	if err != nil {
		t.Fatalf("result.xlsx does not open: %v", err)
	}
	defer f.Close()
	if got := f.GetSheetList(); !slices.Equal(got, []string{report.SheetPayouts, report.SheetSummary}) {
		t.Fatalf("sheets %v", got)
	}
	rows, err := f.GetRows(report.SheetPayouts, excelize.Options{RawCellValue: true})
	if err != nil || len(rows) < 1 {
		t.Fatalf("Payouts: %v", err)
	}
	ext, amt := slices.Index(rows[0], "externalId"), slices.Index(rows[0], "amount")
	if ext < 0 || amt < 0 {
		t.Fatalf("Payouts header %v", rows[0])
	}
	if len(rows)-1 != d.Rows {
		t.Errorf("Payouts has %d rows, want one per payout (%d)", len(rows)-1, d.Rows)
	}
	sum, seen := money.Zero, map[string]bool{}
	for _, r := range rows[1:] {
		a, err := money.Parse(r[amt], 18)
		if err != nil {
			t.Fatalf("%s: amount %q: %v", r[ext], r[amt], err)
		}
		want, ok := ledgerAmounts[r[ext]]
		if !ok || seen[r[ext]] || a.Cmp(want) != 0 {
			t.Errorf("%s: amount %s, ledger %s (known %v, seen before %v)", r[ext], a, want, ok, seen[r[ext]])
		}
		seen[r[ext]] = true
		sum = sum.Add(a)
	}
	if got := sum.StringFixed(2); got != d.Total {
		t.Errorf("Payouts amounts add up to %s, want %s", got, d.Total)
	}

	// Summary: the total of the states and of the outcomes is the file's,
	// and the reconciliation says so.
	summary, err := f.GetRows(report.SheetSummary, excelize.Options{RawCellValue: true})
	if err != nil {
		t.Fatal(err)
	}
	totals, verdict := 0, ""
	for i, r := range summary {
		if len(r) >= 3 && r[0] == "total" {
			totals++
			if a, err := money.Parse(r[2], 18); err != nil || a.StringFixed(2) != d.Total {
				t.Errorf("Summary total %q (%v), want %s", r[2], err, d.Total)
			}
		}
		if len(r) > 0 && r[0] == "reconciliation" && i+1 < len(summary) {
			verdict = summary[i+1][len(summary[i+1])-1]
		}
	}
	if totals != 2 || verdict != "OK" {
		t.Errorf("Summary: %d total rows, reconciliation %q\n%v", totals, verdict, summary)
	}
	noCardInParts(t, data)
}

// demoCards are the card numbers of the demo batches (uitest), digits
// only as the ledger and the writers see them.
var demoCards = []string{"4111111111111111", "5500000000000004", "4000056655665556", "5105105105105100",
	"4012888888881881", "5555555555554444"}

// noCardInParts fails when a cell of a workbook shows a card-like number
// in full, or a part of it (the sheet XML, shared strings, anything else)
// holds one of the demo's card numbers.
func noCardInParts(t *testing.T, data []byte) {
	t.Helper()
	zr, err := zip.NewReader(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range zr.File {
		rc, err := p.Open()
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(rc)
		rc.Close()
		if err != nil {
			t.Fatal(err)
		}
		for _, pan := range demoCards {
			if bytes.Contains(b, []byte(pan)) {
				t.Errorf("%s holds card number %s in full", p.Name, card.Mask(pan))
			}
		}
	}
	f, err := excelize.OpenReader(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, sheet := range f.GetSheetList() {
		rows, err := f.GetRows(sheet)
		if err != nil {
			t.Fatal(err)
		}
		for i, r := range rows {
			for j, c := range r {
				if card.Scrub(c) != c {
					t.Errorf("%s row %d column %d shows a card-like number in full: %q", sheet, i+1, j+1, c)
				}
			}
		}
	}
}

// TestConsoleXLSXLastPass: a card number the writers do not mask (here
// a PSP order id, stored exactly as the PSP confirmed it) is masked in the workbook by the
// download's last pass, as in the CSV, and the workbook still opens.
func TestConsoleXLSXLastPass(t *testing.T) {
	e, d := demoEnv(t, uitest.Options{})
	const pan = "4111111111111111"
	review := d.ByState[lifecycle.NeedsReview][0]
	if _, err := e.led.ResolveAsConfirmed(context.Background(), d.Worked, review, ledger.PSPOrder{OrderID: pan}, ledger.Resolution{By: "alice", Note: "seen in the back office"}); err != nil {
		t.Fatal(err)
	}
	if csv := e.download(d.Worked, "result.csv", "text/csv; charset=utf-8"); bytes.Contains(csv, []byte(pan)) {
		t.Error("result.csv shows the card number")
	}
	data := e.download(d.Worked, "result.xlsx", xlsxType)
	noCardInParts(t, data)
	f, err := excelize.OpenReader(bytes.NewReader(data))
	if err != nil {
		t.Fatalf("result.xlsx does not open after the last pass: %v", err)
	}
	defer f.Close()
	rows, err := f.GetRows(report.SheetPayouts)
	if err != nil || len(rows)-1 != d.Rows {
		t.Fatalf("Payouts: %v, %d rows", err, len(rows)-1)
	}
	order := slices.Index(rows[0], "pspOrderId")
	found := false
	for _, r := range rows[1:] {
		if r[1] != review {
			continue
		}
		found = true
		if order < 0 || order >= len(r) || r[order] != card.Mask(pan) {
			t.Errorf("%s: %v, want order id %s", review, r, card.Mask(pan))
		}
	}
	if !found {
		t.Errorf("%s missing from Payouts", review)
	}
}

// TestConsoleDownloadsAsReport: the result CSV and the summary the UI
// offers are the files payout report writes (package results), byte for byte.
func TestConsoleDownloadsAsReport(t *testing.T) {
	e, d := demoEnv(t, uitest.Options{})
	ctx := context.Background()
	for _, tc := range []struct {
		kind, ctype string
		write       func(*bytes.Buffer) error
	}{
		{"result.csv", "text/csv; charset=utf-8", func(b *bytes.Buffer) error {
			_, err := results.WriteCSV(ctx, e.led, d.Worked, b)
			return err
		}},
		{"summary.txt", "text/plain; charset=utf-8", func(b *bytes.Buffer) error {
			_, err := results.WriteSummary(ctx, e.led, d.Worked, b)
			return err
		}},
	} {
		var want bytes.Buffer
		if err := tc.write(&want); err != nil {
			t.Fatal(err)
		}
		if got := e.download(d.Worked, tc.kind, tc.ctype); !bytes.Equal(got, want.Bytes()) {
			t.Errorf("%s differs from payout report's:\n%s\nwant:\n%s", tc.kind, got, want.Bytes())
		}
	}
	if sum := string(e.download(d.Worked, "summary.txt", "text/plain; charset=utf-8")); !strings.Contains(sum, d.Total) {
		t.Errorf("summary.txt lacks the total %s:\n%s", d.Total, sum)
	}
}

// TestConsoleNewDownloadsGuarded: result.xlsx and summary.txt need a
// signed-in person like every page (401 without, 404 for an unknown
// batch) and stay available when the UI is read-only: a download changes
// nothing.
func TestConsoleNewDownloadsGuarded(t *testing.T) {
	e, d := demoEnv(t, uitest.Options{ReadOnly: true})
	for _, kind := range []string{"result.xlsx", "summary.txt"} {
		r := httptest.NewRequest("GET", "/batches/"+d.Worked+"/download/"+kind, nil)
		r.RemoteAddr = "192.0.2.1:40000"
		w := httptest.NewRecorder()
		e.h.ServeHTTP(w, r)
		if w.Code != 401 || w.Body.Len() > 200 {
			t.Errorf("%s without credentials: %d, %d bytes", kind, w.Code, w.Body.Len())
		}
		if w := e.do(httptest.NewRequest("GET", "/batches/"+d.Worked+"/download/"+kind, nil)); w.Code != 200 {
			t.Errorf("%s in read-only mode: %d %s", kind, w.Code, w.Body.String())
		}
		e.get("/batches/no-such-batch/download/"+kind, 404)
	}
}

// TestDownloadName: a download is named after the payout file, its
// extension left off; a name that holds nothing usable falls back to the
// batch id; characters a file name should not hold are replaced.
func TestDownloadName(t *testing.T) {
	for _, tc := range []struct{ file, want string }{
		{"payouts-june.csv", "payouts-june.result.csv"},
		{"Выплаты июнь.xlsx", "Выплаты июнь.result.csv"},
		{`C:\\export\\june.csv`, "june.result.csv"},
		{"a\"b:c.csv", "a_b_c.result.csv"},
		{"", "b123.result.csv"},
		{".csv", "b123.result.csv"},
	} {
		if got := ui.DownloadName(tc.file, "b123", "result.csv"); got != tc.want {
			t.Errorf("DownloadName(%q) = %q, want %q", tc.file, got, tc.want)
		}
	}
}

// TestConsoleExcelEUDownload: the "Excel (EU)" result file is the result
// CSV as a decimal-comma spreadsheet writes one: a UTF-8 BOM, ';' between
// cells, 1500,50; the same rows and amounts as the plain result file.
func TestConsoleExcelEUDownload(t *testing.T) {
	e, d := demoEnv(t, uitest.Options{})
	if page := e.get("/batches/"+d.Worked, 200); !strings.Contains(page, "/download/result-excel-eu.csv") {
		t.Error("the batch page does not offer the Excel (EU) result file")
	}
	plain := string(e.download(d.Worked, "result.csv", "text/csv; charset=utf-8"))
	eu := string(e.download(d.Worked, "result-excel-eu.csv", "text/csv; charset=utf-8"))
	body, bom := strings.CutPrefix(eu, "\ufeff")
	if !bom {
		t.Fatalf("no UTF-8 BOM: %q", eu[:min(len(eu), 40)])
	}
	pl, el := strings.Split(strings.TrimSpace(plain), "\n"), strings.Split(strings.TrimSpace(body), "\n")
	if len(pl) != len(el) || len(pl) < 2 {
		t.Fatalf("%d lines plain, %d Excel (EU)", len(pl), len(el))
	}
	if want := strings.Join(report.Header, ";"); !strings.HasPrefix(el[0], want) {
		t.Errorf("header %q, want it to start %q", el[0], want)
	}
	for i := 1; i < len(pl); i++ {
		p, q := strings.Split(pl[i], ","), strings.Split(el[i], ";")
		if len(p) < 3 || len(q) < 3 || q[1] != p[1] || q[2] != strings.Replace(p[2], ".", ",", 1) || !strings.Contains(q[2], ",") {
			t.Fatalf("line %d: plain %q, Excel (EU) %q", i, pl[i], el[i])
		}
	}
}
