package ui_test

import (
	"context"
	"html"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/hibiken/asynq"

	"github.com/acme/payout/internal/card"
	"github.com/acme/payout/internal/lifecycle"
	"github.com/acme/payout/internal/proof/uitest"
	"github.com/acme/payout/internal/psp"
	"github.com/acme/payout/internal/ui"
	"github.com/acme/payout/jobs"
)

// get fetches path and fails on another status than want.
func (e *env) get(path string, want int) string {
	e.t.Helper()
	w := e.do(httptest.NewRequest("GET", path, nil))
	if w.Code != want {
		e.t.Fatalf("GET %s: %d, want %d\n%s", path, w.Code, want, w.Body.String())
	}
	return w.Body.String()
}

// token is the CSRF token of the forms of the page at path.
func (e *env) token(path string) string {
	e.t.Helper()
	m := csrfRE.FindStringSubmatch(e.get(path, 200))
	if m == nil {
		e.t.Fatalf("%s has no form", path)
	}
	return html.UnescapeString(m[1])
}

func demoEnv(t *testing.T, o uitest.Options) (*env, uitest.Demo) {
	t.Helper()
	e := newEnv(t, o)
	return e, uitest.LoadDemo(t, e.rdb)
}

// TestConsolePages: each page of the console answers with what it is
// for, amounts with thousands separators, no card number in full; a bad
// id is 400, an unknown one 404.
func TestConsolePages(t *testing.T) {
	e, d := demoEnv(t, uitest.Options{})
	review := d.ByState[lifecycle.NeedsReview][0]
	for _, tc := range []struct {
		path  string
		wants []string
	}{
		{"/batches", []string{`href="/batches/` + d.Worked + `"`, "1,361,722.73", "discarded", "awaiting approval"}},
		{"/batches/" + d.Worked, []string{"finance-bot", "1,234,567.89", "payouts 1-12 of 12", "/download/result.csv", "history", "/monitoring/queues/payouts/tasks/"}},
		{"/batches/" + d.Worked + "?state=failed", []string{"payouts 1-2 of 2", "account closed"}},
		{"/batches/" + d.Worked + "?state=nonsense", []string{"payouts 1-12 of 12"}},
		{"/batches/" + d.Worked + "?sort=amount&page=2", []string{"no payout on page 2 (12 in all)", "page 2 of 1"}},
		{"/batches/" + d.Worked + "/payouts/" + review, []string{"needs review", "no answer from the PSP", `value="recheck"`}},
		{"/queue", []string{review, d.ByState[lifecycle.NeedsReview][1], "payouts-2026-11-26.csv", "Review and approve"}},
		{"/search?ext=" + review, []string{review, "payouts-2026-11-25.csv"}},
		{"/search?ext=NOPE-1", []string{"No batch in Redis holds a payout NOPE-1"}},
	} {
		body := e.get(tc.path, 200)
		for _, w := range tc.wants {
			if !strings.Contains(body, w) {
				t.Errorf("%s lacks %q", tc.path, w)
			}
		}
		if card.Scrub(body) != body {
			t.Errorf("%s shows a card number in full", tc.path)
		}
	}
	e.get("/batches/nope", 404)
	e.get("/batches/bad..id", 400)
	e.get("/batches/"+d.Worked+"/payouts/NOPE", 404)
	e.get("/batches/"+d.Worked+"/download/secrets.csv", 404)
	if got := e.get("/", 302); got == "" {
		t.Log("redirect body empty")
	}
	w := e.do(httptest.NewRequest("GET", "/", nil))
	if loc := w.Header().Get("Location"); loc != "/batches" {
		t.Errorf("/ redirects to %q, want /batches", loc)
	}
}

// TestConsoleDecisions resolves, rechecks, rejects and cancels through
// the console's form: each records the signed-in person and the note,
// refuses what payout resolve and payout cancel refuse, in plain words.
func TestConsoleDecisions(t *testing.T) {
	e, d := demoEnv(t, uitest.Options{PSP: orderDesk{"PSP-1"}, OutcomeWindow: time.Hour})
	ctx := context.Background()
	first, second := d.ByState[lifecycle.NeedsReview][0], d.ByState[lifecycle.NeedsReview][1]
	path := func(ext string) string { return "/batches/" + d.Worked + "/payouts/" + url.PathEscape(ext) + "/decide" }
	tok := e.token("/queue")
	decide := func(ext string, v url.Values) (int, string) {
		v.Set("csrf", tok)
		w := e.post(path(ext), v)
		return w.Code, w.Body.String()
	}

	// Refused before anything is written.
	for _, tc := range []struct {
		name string
		form url.Values
		want string
	}{
		{"no note", url.Values{"action": {"rejected"}}, "a note saying why"},
		{"created without order", url.Values{"action": {"created"}, "note": {"seen"}}, "order id"},
		{"unknown action", url.Values{"action": {"pay"}, "note": {"x"}}, "unknown decision"},
		{"note with a CR", url.Values{"action": {"rejected"}, "note": {"seen\rbob approved"}}, "control character"},
		{"note too long", url.Values{"action": {"rejected"}, "note": {strings.Repeat("n", 1001)}}, "at most 1000"},
		{"order id with a line break", url.Values{"action": {"created"}, "order": {"PSP-1\nbob"}, "note": {"seen"}}, "control character"},
	} {
		if code, body := decide(first, tc.form); code != http.StatusConflict || !strings.Contains(body, tc.want) {
			t.Errorf("%s: %d %s", tc.name, code, body)
		}
	}
	if w := e.post(path(first), url.Values{"action": {"rejected"}, "note": {"x"}}); w.Code != http.StatusForbidden {
		t.Errorf("without the CSRF token: %d", w.Code)
	}
	if p, _ := e.led.Get(ctx, d.Worked, first); p.State != lifecycle.NeedsReview {
		t.Fatalf("a refused decision changed %s to %s", first, p.State)
	}

	// The filtered list before and after (the console's scan of the batch
	// is reused only while its counts stay the same).
	if body := e.get("/batches/"+d.Worked+"?state=needs_review", 200); !strings.Contains(body, "payouts 1-2 of 2") {
		t.Fatal("needs review before: not 2")
	}

	// Created with the PSP's order id, by alice, with her note.
	code, body := decide(first, url.Values{"action": {"created"}, "order": {"PSP-1"}, "note": {"seen in the back office"}})
	if code != 200 || !strings.Contains(body, "needs review -&gt; created by alice") || !strings.Contains(body, "outcome check 1 enqueued") {
		t.Fatalf("resolve as created: %d %s", code, body)
	}
	if _, err := e.inspector().GetTaskInfo(jobs.Queue, jobs.OutcomeTaskID(first, 1)); err != nil {
		t.Errorf("outcome check not enqueued: %v", err)
	}
	p, _ := e.led.Get(ctx, d.Worked, first)
	if p.State != lifecycle.Created || p.OrderID != "PSP-1" || p.ResolvedBy != opUser || p.ResolutionNote != "seen in the back office" {
		t.Fatalf("after resolve: %+v", p)
	}
	if body := e.get("/batches/"+d.Worked+"?state=needs_review", 200); !strings.Contains(body, "payouts 1-1 of 1") {
		t.Error("needs review after a resolve: not 1 (a stale scan?)")
	}
	hist := e.get("/batches/"+d.Worked+"/payouts/"+first, 200)
	if !strings.Contains(hist, "resolved: seen in the back office") || !strings.Contains(hist, `title="alice">alice <small class="role">as operator</small>`) {
		t.Errorf("history lacks the decision: %s", hist)
	}
	// Twice: refused, naming the state, without the ledger's prefix.
	code, body = decide(first, url.Values{"action": {"rejected"}, "note": {"again"}})
	if code != http.StatusConflict || !strings.Contains(body, "is created, not needs review") || strings.Contains(body, "ledger:") {
		t.Errorf("second decision: %d %s", code, body)
	}

	// Recheck: back to checking and a status check enqueued.
	code, body = decide(second, url.Values{"action": {"recheck"}, "note": {"PSP says retry"}})
	if code != 200 || !strings.Contains(body, "status check 1 enqueued") {
		t.Fatalf("recheck: %d %s", code, body)
	}
	if p, _ := e.led.Get(ctx, d.Worked, second); p.State != lifecycle.Checking {
		t.Fatalf("after recheck: %s", p.State)
	}
	if _, err := e.inspector().GetTaskInfo(jobs.Queue, jobs.StatusTaskID(second, 1)); err != nil {
		t.Errorf("status check not enqueued: %v", err)
	}

	// Cancel: only a queued payout.
	queued, paid := d.ByState[lifecycle.Queued][0], d.ByState[lifecycle.Paid][0]
	if code, body := decide(paid, url.Values{"action": {"cancel"}, "note": {"oops"}}); code != http.StatusConflict || !strings.Contains(body, "is paid, not queued") {
		t.Errorf("cancel of a paid payout: %d %s", code, body)
	}
	if code, body := decide(queued, url.Values{"action": {"cancel"}, "note": {"paid by hand"}}); code != 200 || !strings.Contains(body, "cancelled by alice") {
		t.Errorf("cancel: %d %s", code, body)
	}
	if p, _ := e.led.Get(ctx, d.Worked, queued); p.State != lifecycle.Cancelled || p.ResolvedBy != opUser {
		t.Errorf("after cancel: %+v", p)
	}
}

// orderDesk is the PSP as the console asks it before a payout is marked
// created or rejected: it holds one order, for whichever payout asks.
type orderDesk struct{ order string }

func (o orderDesk) CheckWithdrawal(_ context.Context, want psp.Expect) psp.Result {
	if want.OrderID != o.order {
		return psp.Result{Op: psp.OpWithdrawalStatus, Outcome: psp.NotFound, HTTPStatus: 404}
	}
	return psp.Result{Op: psp.OpWithdrawalStatus, Outcome: psp.Created, HTTPStatus: 200,
		Order: psp.Order{OrderID: o.order, ExternalID: want.ExternalID, Status: "Processing"}}
}

// TestConsoleReadOnly: the console shows, and refuses every decision.
func TestConsoleReadOnly(t *testing.T) {
	e, d := demoEnv(t, uitest.Options{ReadOnly: true})
	body := e.get("/queue", 200)
	if strings.Contains(body, `name="csrf"`) || strings.Contains(body, "Resolve") {
		t.Error("read-only work queue offers decisions")
	}
	w := e.post("/batches/"+d.Worked+"/payouts/"+d.ByState[lifecycle.NeedsReview][0]+"/decide", url.Values{"action": {"rejected"}, "note": {"x"}})
	if w.Code != http.StatusForbidden {
		t.Errorf("decision in read-only mode: %d", w.Code)
	}
}

// TestConsoleFourEyes: under four-eyes the loader is not offered Approve
// on any page and is told why; another person is.
func TestConsoleFourEyes(t *testing.T) {
	e, _ := demoEnv(t, uitest.Options{FourEyes: true})
	e.user, e.pass = opUser, opPass
	mine := e.hold("mine.csv", threeRows, opUser)
	for _, p := range []string{"/batches", "/queue", "/batches/" + mine} {
		body := e.get(p, 200)
		if strings.Contains(body, `href="/batches/`+mine+`/approve"`) {
			t.Errorf("%s offers alice Approve of her own batch", p)
		}
		if !strings.Contains(body, "you loaded this batch: under four-eyes another person must approve it") {
			t.Errorf("%s does not say why", p)
		}
	}
	// The held demo batch was loaded by "alice" too; bob's is offered.
	theirs := e.hold("theirs.csv", strings.ReplaceAll(threeRows, "UI-", "TH-"), "bob")
	if body := e.get("/batches/"+theirs, 200); !strings.Contains(body, `href="/batches/`+theirs+`/approve"`) {
		t.Error("alice is not offered Approve of bob's batch")
	}
	// Forced anyway: refused in plain words.
	w := e.post("/batches/"+mine+"/approve", url.Values{"csrf": {e.token("/batches")}, "confirm": {"yes"}})
	if w.Code != http.StatusConflict || strings.Contains(w.Body.String(), "ledger:") || !strings.Contains(w.Body.String(), "four-eyes") {
		t.Errorf("alice's own approval: %d %s", w.Code, w.Body.String())
	}
}

// TestConsoleDownloads: every download of a batch (the result CSV and
// workbook, the summary, the failed rows, the audit trail), card numbers
// masked, as attachments.
func TestConsoleDownloads(t *testing.T) {
	e, d := demoEnv(t, uitest.Options{})
	for _, kind := range ui.DownloadKinds {
		w := e.do(httptest.NewRequest("GET", "/batches/"+d.Worked+"/download/"+kind, nil))
		body := w.Body.String()
		if w.Code != 200 || !strings.HasPrefix(w.Header().Get("Content-Disposition"), "attachment") {
			t.Fatalf("%s: %d %v", kind, w.Code, w.Header())
		}
		if kind == ui.DownloadXLSX {
			noCardInParts(t, w.Body.Bytes()) // compressed: the text check below would see nothing
		} else if card.Scrub(body) != body {
			t.Errorf("%s shows a card number in full", kind)
		}
		switch kind {
		case ui.DownloadResult:
			if n := strings.Count(body, "INV-2026-"); n != d.Rows {
				t.Errorf("result.csv has %d payouts, want %d", n, d.Rows)
			}
		case ui.DownloadFailed:
			if n := strings.Count(body, "INV-2026-"); n != 3 || !strings.Contains(body, "account closed") || !strings.Contains(body, "card expired") {
				t.Errorf("failed.csv: %d payouts\n%s", n, body)
			}
		case ui.DownloadAudit:
			if !strings.Contains(body, "worker-1:4242") || !strings.Contains(body, "INV-2026-0007") {
				t.Errorf("audit.csv:\n%s", body)
			}
		}
	}
}

func (e *env) inspector() *asynq.Inspector { return asynq.NewInspectorFromRedisClient(e.rdb) }

// TestSearchNeverEchoesACard: a card number typed or pasted into the
// search box, however it is spelt, is neither searched nor shown in the
// page (the input field and the "not found" line echoed it).
func TestSearchNeverEchoesACard(t *testing.T) {
	e, _ := demoEnv(t, uitest.Options{})
	for _, typed := range []string{"4111111111111111", "4111 1111 1111 1111", "4111-1111-1111-1111", "PO-4111111111111111"} {
		body := e.get("/search?ext="+url.QueryEscape(typed), 200)
		flat := strings.NewReplacer(" ", "", "-", "", "&#43;", "").Replace(body)
		if strings.Contains(flat, "4111111111111111") || card.Scrub(body) != body {
			t.Errorf("search for %q echoes the card number", typed)
		}
		if !strings.Contains(body, `id="card"`) {
			t.Errorf("search for %q does not say it looks like a card number", typed)
		}
	}
	if body := e.get("/search?ext=100000000001", 200); !strings.Contains(body, "100000000001") {
		t.Error("a numeric id that fails Luhn is not searched as typed")
	}
}
