//go:build integration

package e2e_test

import (
	"archive/zip"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/csv"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"
	"github.com/rs/zerolog"
	"github.com/xuri/excelize/v2"
	"golang.org/x/crypto/bcrypt"

	"github.com/acme/payout/internal/card"
	"github.com/acme/payout/internal/lifecycle"
	"github.com/acme/payout/internal/money"
	"github.com/acme/payout/internal/proof/testenv/redistest"
	"github.com/acme/payout/internal/proof/uitest"
	"github.com/acme/payout/internal/psp"
	"github.com/acme/payout/internal/report"
	"github.com/acme/payout/internal/ui"
)

// consoleWidth is the width the console must fit.
const consoleWidth = 1280

const (
	alicePass = "alice-Pa55-console"
	bobPass   = "bob-Pa55-console"
	carolPass = "carol-Pa55-console"
)

// namedLogins are alice, bob and carol, each with their own password.
func namedLogins(t *testing.T) *ui.Users {
	t.Helper()
	var b strings.Builder
	for _, u := range [][2]string{{"alice", alicePass}, {"bob", bobPass}, {"carol", carolPass}} {
		h, err := bcrypt.GenerateFromPassword([]byte(u[1]), bcrypt.MinCost+6)
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&b, "%s:%s\n", u[0], h)
	}
	p := filepath.Join(t.TempDir(), "users")
	if err := os.WriteFile(p, []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	users, err := ui.LoadUsers(p, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	return users
}

// signIn makes every request of the browser carry user's credentials.
func (b *browser) signIn(user, pass string) {
	b.t.Helper()
	auth := "Basic " + base64.StdEncoding.EncodeToString([]byte(user+":"+pass))
	if _, err := chromedp.Call(b.ctx, network.SetExtraHTTPHeaders,
		network.SetExtraHTTPHeadersParams{Headers: network.Headers{"Authorization": auth}}); err != nil {
		b.t.Fatalf("sign in as %s: %v", user, err)
	}
}

// fits fails when the page is wider than the window (a table cut off).
func (b *browser) fits(where string) {
	b.t.Helper()
	sctx, cancel := context.WithTimeout(b.ctx, 10*time.Second)
	defer cancel()
	w, err := chromedp.Run(sctx, chromedp.Evaluate[int](`document.documentElement.scrollWidth`))
	if err != nil {
		b.t.Fatalf("page width of %s: %v", where, err)
	}
	if w > consoleWidth {
		b.shot("wide-" + strings.ReplaceAll(where, "/", "_") + ".png")
		b.t.Errorf("%s is %d px wide, more than %d", where, w, consoleWidth)
	}
}

// noFullCard fails when the page shows a card-like number unmasked.
func (b *browser) noFullCard(where string) {
	b.t.Helper()
	html := b.read("html of "+where, chromedp.OuterHTML(chromedp.CSS("html")))
	// Hashes and tokens are hex or base64: a run of 12 digits in them is
	// not a card number.
	html = opaqueValue.ReplaceAllString(html, `$1""`)
	if masked := card.Scrub(html); masked != html {
		i := 0
		for i < len(html) && i < len(masked) && html[i] == masked[i] {
			i++
		}
		b.t.Errorf("%s shows a card-like number unmasked near %q", where, html[max(0, i-60):min(len(html), i+30)])
	}
}

// opaqueValue matches the values of the hidden inputs holding hashes and
// tokens.
var opaqueValue = regexp.MustCompile(`(name="(?:hash|csrf|choices_mac)" value=)"[^"]*"`)

// get fetches path as user, outside the browser (downloads).
func get(t *testing.T, base, path, user, pass string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest("GET", base+path, nil)
	req.SetBasicAuth(user, pass)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

// TestBrowserConsole walks the finance console as finance does, on the
// demo batches: open a batch from /batches, filter its payouts by state,
// sort them by amount, find an externalId, resolve a payout that needs
// review from the work queue with a note and see it in its history,
// download the result file and check it, and approve under four-eyes as
// the second person while the loader is refused. Every page fits 1,280 px
// and shows no card number in full; the screenshots are docs/img's.
func TestBrowserConsole(t *testing.T) {
	artifacts := artifactsDir(t)
	rc := redistest.Start(t).ClientT(t)
	demo := uitest.LoadDemo(t, rc)
	base := serveUI(t, uitest.Config(t, rc, uitest.Options{Users: namedLogins(t), FourEyes: true, Spool: t.TempDir(),
		PSP: backOffice{order: "PSP-990017"}, OutcomeWindow: time.Hour}))

	b := newBrowserAt(t, artifacts, consoleWidth)
	b.signIn("alice", alicePass)
	check := func(where string) {
		t.Helper()
		b.fits(where)
		b.noFullCard(where)
		b.noViolations(where)
	}

	// 1. /batches, then the worked batch through its link.
	b.step("open batches", 20*time.Second,
		chromedp.Navigate(base+"/"),
		chromedp.WaitVisible(`//h2[text()="Batches"]`),
		chromedp.WaitVisible(`//span[contains(@class,"phase")][normalize-space(.)="discarded"]`),
	)
	check("/batches")
	b.shot("console-batches.png")
	b.step("open the worked batch", 20*time.Second,
		chromedp.Click(`//a[normalize-space(.)="payouts-2026-11-25.csv"]`, chromedp.NodeVisible),
		chromedp.WaitVisible(chromedp.CSS(`#payouts tbody tr`)),
	)
	check("batch page")
	b.shot("console-batch.png")
	if got := b.read("rows", chromedp.Text(chromedp.CSS(`#rows`))); got != fmt.Sprint(demo.Rows) {
		t.Errorf("batch rows %q, want %d", got, demo.Rows)
	}
	if got, want := b.read("total", chromedp.Text(chromedp.CSS(`#total`))), "1,361,722.73"; got != want {
		t.Errorf("batch total %q, want %q (demo total %s)", got, want, demo.Total)
	}
	if got := b.read("loaded by", chromedp.Text(chromedp.CSS(`#loadedby`))); got != "finance-bot" {
		t.Errorf("loaded by %q", got)
	}
	lines := b.read("payout rows", chromedp.Evaluate[string](`document.querySelectorAll('#payouts tbody tr').length + ''`))
	if lines != fmt.Sprint(demo.Rows) {
		t.Errorf("batch page lists %s payouts, want %d", lines, demo.Rows)
	}
	// The page's download links, followed in step 6.
	links := map[string]string{}
	for _, id := range []string{"dl-result", "dl-xlsx", "dl-summary"} {
		links[id] = b.read(id, chromedp.Evaluate[string](`(document.getElementById('`+id+`') || {getAttribute: () => ''}).getAttribute('href') || ''`))
		if links[id] == "" {
			t.Fatalf("the batch page has no #%s link", id)
		}
	}

	// 2. Filter by state: the failed ones, with their reasons.
	b.step("filter failed", 20*time.Second,
		chromedp.SetValue(chromedp.CSS(`#state`), "failed"),
		loadAfter(chromedp.Click(chromedp.CSS(`#apply`))),
		chromedp.WaitVisible(`//span[@id="count"][contains(., "of 2")]`),
	)
	b.shot("console-batch-failed.png")
	states := b.read("states", chromedp.Evaluate[string](`[...document.querySelectorAll('#payouts .state')].map(e => e.textContent).join(',')`))
	if states != "failed,failed" {
		t.Errorf("filtered states %q, want failed,failed", states)
	}
	reasons := b.read("reasons", chromedp.Text(chromedp.CSS(`#payouts tbody`)))
	if !strings.Contains(reasons, "account closed") {
		t.Errorf("failed rows without their reason: %q", reasons)
	}

	// 3. Every state, largest amount first.
	b.step("sort by amount", 20*time.Second,
		chromedp.SetValue(chromedp.CSS(`#state`), ""),
		chromedp.SetValue(chromedp.CSS(`#sort`), "-amount"),
		loadAfter(chromedp.Click(chromedp.CSS(`#apply`))),
		chromedp.WaitVisible(`//span[@id="count"][contains(., "of 12")]`),
	)
	first := b.read("largest", chromedp.Text(chromedp.CSS(`#payouts tbody tr:first-child .amount`)))
	if first != "1,234,567.89" {
		t.Errorf("largest amount first: %q", first)
	}

	// 4. Find an externalId from the header, and open its history.
	wanted := demo.ByState[lifecycle.Rejected][0]
	b.step("search", 20*time.Second,
		chromedp.SetValue(chromedp.CSS(`#search input[name=ext]`), wanted),
		chromedp.Submit(chromedp.CSS(`#search input[name=ext]`)),
		chromedp.WaitVisible(chromedp.CSS(`#found .ext`)),
	)
	check("search")
	b.shot("console-search.png")
	if got := b.read("found", chromedp.Text(chromedp.CSS(`#found .ext`))); got != wanted {
		t.Errorf("search %s found %q", wanted, got)
	}

	// 5. The work queue: resolve a needs_review payout as created with the
	// order the PSP shows, with a note; then its history says so.
	review := demo.ByState[lifecycle.NeedsReview][0]
	b.step("open work queue", 20*time.Second,
		chromedp.Navigate(base+"/queue"),
		chromedp.WaitVisible(chromedp.CSS(`#review`)),
	)
	check("/queue")
	b.shot("console-queue.png")
	row := fmt.Sprintf(`//table[@id="review"]//tr[.//a[normalize-space(.)=%q]]`, review)
	resolve := func(who string) string {
		b.step("resolve as "+who, 20*time.Second,
			chromedp.Navigate(base+"/queue"),
			chromedp.WaitVisible(chromedp.CSS(`#review`)),
			chromedp.SetValue(row+`//select[@name="action"]`, "created"),
			chromedp.SendKeys(row+`//input[@name="order"]`, "PSP-990017"),
			chromedp.SendKeys(row+`//input[@name="note"]`, "order seen in the PSP back office"),
			chromedp.Click(row+`//button[contains(@class,"resolve")]`),
			chromedp.WaitVisible(chromedp.CSS(`#message`)),
		)
		return b.read("resolved by "+who, chromedp.Text(chromedp.CSS(`#message`)))
	}
	// Under four-eyes (the demo batch records it) alice's mark created is
	// a proposal; bob taking the same decision carries it out.
	if msg := resolve("alice"); !strings.Contains(msg, "proposed by alice") || !strings.Contains(msg, "nothing changed yet") {
		t.Fatalf("after alice's resolve: %q", msg)
	}
	b.signIn("bob", bobPass)
	if msg := resolve("bob"); !strings.Contains(msg, "needs review -> created by bob") || !strings.Contains(msg, "outcome check 1 enqueued") {
		t.Fatalf("after bob's resolve: %q", msg)
	}
	b.signIn("alice", alicePass)
	b.step("history", 20*time.Second,
		chromedp.Click(chromedp.CSS(`#back`)),
		chromedp.WaitVisible(chromedp.CSS(`#history`)),
	)
	check("payout history")
	b.shot("console-payout.png")
	hist := b.read("history", chromedp.Text(chromedp.CSS(`#history`)))
	if !strings.Contains(hist, "alice") || !strings.Contains(hist, "bob") || !strings.Contains(hist, "order seen in the PSP back office") {
		t.Errorf("history lacks the proposal and the decision:\n%s", hist)
	}
	if st := b.read("state", chromedp.Text(chromedp.CSS(`#state`))); st != "created" {
		t.Errorf("resolved payout is %q", st)
	}

	// 6. The downloads: the result file as CSV and as XLSX, one row per
	// payout, masked, and the summary, through the batch page's links.
	code, body := get(t, base, links["dl-result"], "alice", alicePass)
	if code != 200 {
		t.Fatalf("result.csv: %d %s", code, body)
	}
	checkResult(t, body, demo)
	code, body = get(t, base, links["dl-xlsx"], "alice", alicePass)
	if code != 200 {
		t.Fatalf("result.xlsx: %d %s", code, body)
	}
	checkXLSX(t, []byte(body), demo)
	code, body = get(t, base, links["dl-summary"], "alice", alicePass)
	if code != 200 || card.Scrub(body) != body || !strings.Contains(body, demo.Total) || !strings.Contains(body, "reconciled: ") {
		t.Errorf("summary.txt: %d, masked %v, total %s in it %v:\n%s", code, card.Scrub(body) == body, demo.Total, strings.Contains(body, demo.Total), body)
	}
	for _, kind := range []string{"failed.csv", "audit.csv"} {
		code, body := get(t, base, "/batches/"+demo.Worked+"/download/"+kind, "alice", alicePass)
		if code != 200 || card.Scrub(body) != body {
			t.Errorf("%s: %d, card numbers masked: %v", kind, code, card.Scrub(body) == body)
		}
		if kind == "failed.csv" && !strings.Contains(body, "account closed") {
			t.Errorf("failed.csv lacks the reasons:\n%s", body)
		}
		if kind == "audit.csv" && !strings.Contains(body, "order seen in the PSP back office") {
			t.Errorf("audit.csv lacks the decision:\n%s", body)
		}
	}

	// 7. Four-eyes: alice loaded the held batch, so she is not offered
	// Approve and is told why; her approval forced by hand is refused in
	// plain words; bob approves it.
	b.step("held batch as its loader", 20*time.Second,
		chromedp.Navigate(base+"/batches/"+demo.Held),
		chromedp.WaitVisible(chromedp.CSS(`#noapprove`)),
		chromedp.WaitNotPresent(chromedp.CSS(`.approve`)),
	)
	check("held batch")
	b.shot("console-four-eyes.png")
	if why := b.read("why", chromedp.Text(chromedp.CSS(`#noapprove`))); !strings.Contains(why, "you loaded this batch") {
		t.Errorf("why no Approve: %q", why)
	}
	tok := b.read("csrf", chromedp.Evaluate[string](`document.querySelector('input[name=csrf]').value`))
	forced := b.read("forced approve", chromedp.Evaluate[string](fmt.Sprintf(
		`fetch('/batches/%s/approve', {method: 'POST', headers: {'Content-Type': 'application/x-www-form-urlencoded'}, body: 'confirm=yes&csrf=' + encodeURIComponent(%q)}).then(async r => r.status + " " + await r.text())`,
		demo.Held, tok), chromedp.EvalAwaitPromise))
	if !strings.HasPrefix(forced, "409 ") || strings.Contains(forced, "ledger:") || !strings.Contains(forced, "loaded by alice") {
		t.Errorf("alice's forced approval: %s", forced)
	}
	b.signIn("bob", bobPass)
	b.step("approve as bob", 20*time.Second,
		chromedp.Navigate(base+"/batches/"+demo.Held),
		chromedp.Click(chromedp.CSS(`a.approve`), chromedp.NodeVisible),
		chromedp.WaitVisible(chromedp.CSS(`#approve-review`)),
		chromedp.SendKeys(chromedp.CSS(`textarea[name=note]`), "checked against the export"),
		chromedp.Click(chromedp.CSS(`#approve-confirm`), chromedp.NodeVisible),
		chromedp.WaitVisible(chromedp.CSS(`#message`)),
	)
	if msg := b.read("approved", chromedp.Text(chromedp.CSS(`#message`))); !strings.Contains(msg, "approved by bob: 3 payouts, total 20210.25") {
		t.Errorf("bob's approval: %q", msg)
	}

	// 8. The upload form offers what payout load does for a file: the
	// amount format, the sheet, the control totals; the preview shows them.
	file := filepath.Join(t.TempDir(), "payouts-2026-11-27.csv")
	if err := os.WriteFile(file, []byte("externalId,amount,cardNumber\nNOV-1,\"1 500,50\",4111 1111 1111 1111\nNOV-2,\"75,25\",5500 0000 0000 0004\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	b.step("upload with choices", 30*time.Second,
		chromedp.Navigate(base+"/batches"),
		chromedp.WaitVisible(chromedp.CSS(`#amount_format`)),
		chromedp.SetValue(chromedp.CSS(`#amount_format`), "comma"),
		chromedp.SendKeys(chromedp.CSS(`#upload input[name=expect_rows]`), "2"),
		chromedp.SendKeys(chromedp.CSS(`#upload input[name=expect_total]`), "1575.75"),
		chromedp.SetUploadFiles(chromedp.CSS(`#upload input[type=file]`), []string{file}),
		chromedp.Click(chromedp.CSS(`#upload button[type=submit]`)),
		chromedp.WaitVisible(chromedp.CSS(`#summary`)),
	)
	check("upload preview")
	b.shot("console-upload-preview.png")
	got := b.read("preview", chromedp.Text(chromedp.CSS(`#summary`)))
	for _, want := range []string{"1,575.75", "comma", "2 rows, total 1575.75"} {
		if !strings.Contains(got, want) {
			t.Errorf("preview lacks %q:\n%s", want, got)
		}
	}
	b.pageErrors()
}

// checkResult reads the result file's table (up to its first blank line)
// and checks it against the demo: one row per payout, their amounts
// adding up to the batch's total, no card number in full.
func checkResult(t *testing.T, body string, demo uitest.Demo) {
	t.Helper()
	if card.Scrub(body) != body {
		t.Errorf("result.csv shows a card number unmasked")
	}
	table, _, _ := strings.Cut(body, "\n\n")
	r := csv.NewReader(strings.NewReader(table))
	recs, err := r.ReadAll()
	if err != nil || len(recs) < 2 {
		t.Fatalf("result.csv: %v\n%s", err, body)
	}
	col := map[string]int{}
	for i, h := range recs[0] {
		col[h] = i
	}
	rows := recs[1:]
	if len(rows) != demo.Rows {
		t.Errorf("result.csv has %d rows, want %d", len(rows), demo.Rows)
	}
	sum := money.Zero
	for _, rec := range rows {
		a, err := money.Parse(rec[col["amount"]], 2)
		if err != nil {
			t.Fatalf("amount %q: %v", rec[col["amount"]], err)
		}
		sum = sum.Add(a)
	}
	if got := sum.StringFixed(2); got != demo.Total {
		t.Errorf("result.csv amounts add up to %s, want %s", got, demo.Total)
	}
}

// checkXLSX opens the result workbook and checks it against the demo:
// the Payouts and Summary sheets, one row per payout, their amounts
// adding up to the batch's total, the Summary's totals and reconciliation
// agreeing, no card number in full in any cell nor in any part of the
// file.
func checkXLSX(t *testing.T, data []byte, demo uitest.Demo) {
	t.Helper()
	f, err := excelize.OpenReader(bytes.NewReader(data))
	if err != nil {
		t.Fatalf("result.xlsx does not open: %v", err)
	}
	defer f.Close()
	if got := f.GetSheetList(); !slices.Equal(got, []string{report.SheetPayouts, report.SheetSummary}) {
		t.Fatalf("result.xlsx sheets %v", got)
	}
	for _, sheet := range f.GetSheetList() {
		rows, err := f.GetRows(sheet)
		if err != nil {
			t.Fatal(err)
		}
		for i, r := range rows {
			for _, c := range r {
				if card.Scrub(c) != c {
					t.Errorf("result.xlsx %s row %d shows a card number unmasked: %q", sheet, i+1, c)
				}
			}
		}
	}
	zr, err := zip.NewReader(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range zr.File {
		rc, err := p.Open()
		if err != nil {
			t.Fatal(err)
		}
		part, err := io.ReadAll(rc)
		rc.Close()
		if err != nil {
			t.Fatal(err)
		}
		// The demo's card numbers, as the ledger holds them.
		for _, pan := range []string{"4111111111111111", "5500000000000004", "4000056655665556", "5105105105105100", "4012888888881881", "5555555555554444"} {
			if bytes.Contains(part, []byte(pan)) {
				t.Errorf("result.xlsx %s holds card number %s in full", p.Name, card.Mask(pan))
			}
		}
	}

	rows, err := f.GetRows(report.SheetPayouts, excelize.Options{RawCellValue: true})
	if err != nil || len(rows) < 1 {
		t.Fatalf("Payouts: %v", err)
	}
	amt := slices.Index(rows[0], "amount")
	if amt < 0 {
		t.Fatalf("Payouts header %v", rows[0])
	}
	if len(rows)-1 != demo.Rows {
		t.Errorf("result.xlsx has %d payout rows, want %d", len(rows)-1, demo.Rows)
	}
	sum := money.Zero
	for _, r := range rows[1:] {
		a, err := money.Parse(r[amt], 18)
		if err != nil {
			t.Fatalf("amount %q: %v", r[amt], err)
		}
		sum = sum.Add(a)
	}
	if got := sum.StringFixed(2); got != demo.Total {
		t.Errorf("result.xlsx amounts add up to %s, want %s", got, demo.Total)
	}
	summary, err := f.GetRows(report.SheetSummary, excelize.Options{RawCellValue: true})
	if err != nil {
		t.Fatal(err)
	}
	totals, verdict := 0, ""
	for i, r := range summary {
		if len(r) >= 3 && r[0] == "total" {
			totals++
			if a, err := money.Parse(r[2], 18); err != nil || a.StringFixed(2) != demo.Total {
				t.Errorf("result.xlsx Summary total %q, want %s", r[2], demo.Total)
			}
		}
		if len(r) > 0 && r[0] == "reconciliation" && i+1 < len(summary) {
			verdict = summary[i+1][len(summary[i+1])-1]
		}
	}
	if totals != 2 || verdict != "OK" {
		t.Errorf("result.xlsx Summary: %d total rows, reconciliation %q", totals, verdict)
	}
}

// backOffice is the PSP as the console asks it before a payout is marked
// created: it holds order, for whichever payout asks.
type backOffice struct{ order string }

func (b backOffice) CheckWithdrawal(_ context.Context, want psp.Expect) psp.Result {
	if want.OrderID != b.order {
		return psp.Result{Op: psp.OpWithdrawalStatus, Outcome: psp.NotFound, HTTPStatus: 404, Message: "HTTP 404"}
	}
	return psp.Result{Op: psp.OpWithdrawalStatus, Outcome: psp.Created, HTTPStatus: 200,
		Order: psp.Order{OrderID: b.order, ExternalID: want.ExternalID, Status: "Processing"}}
}
