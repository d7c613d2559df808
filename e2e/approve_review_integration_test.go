//go:build integration

package e2e_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/hibiken/asynq"

	"github.com/acme/payout/internal/proof/testenv/redistest"
	"github.com/acme/payout/internal/proof/uitest"
	"github.com/acme/payout/jobs"
)

// reviewRows is the file alice uploads: twelve payouts, three of them
// much larger than the rest. Total 1,893,010.37.
var reviewRows = []struct{ ext, amount, card string }{
	{"APR-0001", "120.00", "4111 1111 1111 1111"},
	{"APR-0002", "950000.00", "5500 0000 0000 0004"},
	{"APR-0003", "75.50", "4000 0566 5566 5556"},
	{"APR-0004", "1310.25", "5105 1051 0510 5100"},
	{"APR-0005", "610000.00", "4012 8888 8888 1881"},
	{"APR-0006", "88.10", "5555 5555 5555 4444"},
	{"APR-0007", "2500.00", "4111 1111 1111 1111"},
	{"APR-0008", "325000.00", "5500 0000 0000 0004"},
	{"APR-0009", "19.99", "4000 0566 5566 5556"},
	{"APR-0010", "3300.00", "5105 1051 0510 5100"},
	{"APR-0011", "410.00", "4012 8888 8888 1881"},
	{"APR-0012", "186.53", "5555 5555 5555 4444"},
}

const (
	reviewTotal = "1,893,010.37"
	reviewNote  = "checked against ERP export 2026-12-01, totals agree"
)

// TestBrowserApproveReview: finance reviews before money moves (issue
// 43, "Finance's review before money moves"). alice uploads and confirms
// a file that then awaits approval under four-eyes; she is not offered
// Approve, and her approval forced through the review's own form is
// refused. bob's Approve opens the review page (#approve-review) with the
// batch's rows, its total and its largest rows, card numbers masked,
// fitting 1,280 px, while nothing is enqueued yet; he types a note and
// confirms (#approve-confirm): the batch is approved by him, its payouts
// enqueued, and the note recorded in its audit trail.
//
// It runs against the approve review page of review43's branch: on a
// branch without it, it fails at "open the review".
func TestBrowserApproveReview(t *testing.T) {
	artifacts := artifactsDir(t)
	rc := redistest.Start(t).ClientT(t)
	insp := asynq.NewInspectorFromRedisClient(rc)
	base := serveUI(t, uitest.Config(t, rc, uitest.Options{Users: namedLogins(t), Spool: t.TempDir(),
		ApprovalRequired: true, FourEyes: true}))
	pending := func() int {
		t.Helper()
		info, err := insp.GetQueueInfo(jobs.Queue)
		if err != nil {
			if strings.Contains(err.Error(), "does not exist") {
				return 0
			}
			t.Fatalf("queue info: %v", err)
		}
		return info.Pending + info.Scheduled
	}

	var csv strings.Builder
	csv.WriteString("externalId,amount,cardNumber\n")
	for _, r := range reviewRows {
		fmt.Fprintf(&csv, "%s,%s,%s\n", r.ext, r.amount, r.card)
	}
	file := filepath.Join(t.TempDir(), "payouts-2026-12-01-review.csv")
	if err := os.WriteFile(file, []byte(csv.String()), 0o600); err != nil {
		t.Fatal(err)
	}

	b := newBrowserAt(t, artifacts, consoleWidth)
	check := func(where string) {
		t.Helper()
		b.fits(where)
		b.noFullCard(where)
		b.noViolations(where)
	}

	// 1. alice uploads and confirms: the batch awaits approval.
	b.signIn("alice", alicePass)
	b.step("upload", 30*time.Second,
		chromedp.Navigate(base+"/batches"),
		chromedp.WaitVisible(chromedp.CSS(`#upload input[type=file]`)),
		chromedp.SetUploadFiles(chromedp.CSS(`#upload input[type=file]`), []string{file}),
		chromedp.Click(chromedp.CSS(`#upload button[type=submit]`)),
		chromedp.WaitVisible(chromedp.CSS(`#summary`)),
	)
	b.step("confirm the upload", 30*time.Second,
		chromedp.Click(chromedp.CSS(`#confirm`)),
		chromedp.WaitVisible(chromedp.CSS(`#loaded`)),
	)
	if msg := b.read("loaded", chromedp.Text(chromedp.CSS(`#loaded`))); !strings.Contains(msg, "awaits approval") {
		t.Fatalf("after confirm: %q", msg)
	}
	fileLink := `//table[contains(@class,"awaiting")]//a[normalize-space(.)="payouts-2026-12-01-review.csv"]`
	b.step("open the held batch as alice", 20*time.Second,
		chromedp.Navigate(base+"/batches"),
		chromedp.Click(fileLink, chromedp.NodeVisible),
		chromedp.WaitVisible(chromedp.CSS(`#noapprove`)),
		chromedp.WaitNotPresent(chromedp.CSS(`.approve`)),
	)
	batchURL := b.read("batch url", chromedp.Evaluate[string](`location.pathname`))
	aliceCSRF := b.read("alice's csrf", chromedp.Evaluate[string](`document.querySelector('input[name=csrf]').value`))

	// 2. bob's Approve opens the review: nothing is approved yet.
	b.signIn("bob", bobPass)
	b.step("open the held batch as bob", 20*time.Second,
		chromedp.Navigate(base+batchURL),
		chromedp.WaitVisible(chromedp.CSS(`.approve`)),
	)
	b.step("open the review", 20*time.Second,
		chromedp.Click(chromedp.CSS(`.approve`)),
		chromedp.WaitVisible(chromedp.CSS(`#approve-review`)),
		chromedp.WaitVisible(chromedp.CSS(`#approve-confirm`)),
	)
	check("approve review")
	b.shot("console-approve-review.png")
	review := b.read("review", chromedp.Text(chromedp.CSS(`#approve-review`)))
	for _, want := range []string{
		"12",        // rows
		reviewTotal, // total, grouped
		// the three largest rows, with their amounts
		"APR-0002", "950,000.00", "APR-0005", "610,000.00", "APR-0008", "325,000.00",
	} {
		if !strings.Contains(review, want) {
			t.Errorf("the review lacks %q:\n%s", want, review)
		}
	}
	if n := pending(); n != 0 {
		t.Fatalf("%d payouts enqueued before the approval was confirmed", n)
	}
	if got := b.read("phase", chromedp.Evaluate[string](`fetch(location.origin + '/api/batches').then(r => r.text())`, chromedp.EvalAwaitPromise)); !strings.Contains(got, "awaiting_approval") {
		t.Errorf("the batch no longer awaits approval once the review is open: %s", got)
	}

	// 3. Four-eyes: alice's approval forced through the review's own form
	// (her session, her CSRF token) is refused.
	confirmForm := `//form[.//*[@id="approve-confirm"]]`
	b.signIn("alice", alicePass)
	forced := b.read("alice confirms", chromedp.Evaluate[string](fmt.Sprintf(`(() => {
  const f = document.getElementById('approve-confirm').form;
  const data = new URLSearchParams(new FormData(f));
  data.set('csrf', %q);
  data.set('note', 'approving my own batch');
  return fetch(f.action, {method: 'POST', headers: {'Content-Type': 'application/x-www-form-urlencoded'}, body: data.toString()})
    .then(async r => r.status + " " + await r.text());
})()`, aliceCSRF), chromedp.EvalAwaitPromise))
	t.Logf("alice's forced approval: %.200s", forced)
	if strings.HasPrefix(forced, "2") {
		t.Errorf("alice's approval of her own batch through the review: %.300s", forced)
	}
	if n := pending(); n != 0 {
		t.Fatalf("%d payouts enqueued after alice's refused approval", n)
	}

	// 4. bob types a note and confirms: approved, enqueued, recorded.
	b.signIn("bob", bobPass)
	b.step("confirm the approval", 20*time.Second,
		chromedp.SendKeys(confirmForm+`//*[@name="note"]`, reviewNote),
		chromedp.Click(chromedp.CSS(`#approve-confirm`)),
		chromedp.WaitVisible(chromedp.CSS(`#message`)),
	)
	check("approved")
	b.shot("console-approved.png")
	if msg := b.read("approved", chromedp.Text(chromedp.CSS(`#message`))); !strings.Contains(msg, "approved by bob: 12 payouts") {
		t.Errorf("after confirming: %q", msg)
	}
	if n := pending(); n != len(reviewRows) {
		t.Errorf("%d payouts enqueued after the approval, want %d", n, len(reviewRows))
	}
	b.step("the batch, approved", 20*time.Second,
		chromedp.Navigate(base+batchURL),
		chromedp.WaitVisible(chromedp.CSS(`#approval`)),
		chromedp.WaitNotPresent(chromedp.CSS(`.approve`)),
	)
	if got := b.read("approval", chromedp.Text(chromedp.CSS(`#approval`))); !strings.Contains(got, "bob") {
		t.Errorf("batch page approval: %q", got)
	}
	code, audit := get(t, base, strings.TrimSuffix(batchURL, "/")+"/download/audit.csv", "bob", bobPass)
	page := b.read("batch page", chromedp.Text(chromedp.CSS(`main`)))
	if code != 200 || (!strings.Contains(audit, reviewNote) && !strings.Contains(page, reviewNote)) {
		t.Errorf("bob's note %q is neither on the batch page nor in its audit trail (%d):\n%s", reviewNote, code, audit)
	}
	b.pageErrors()
}
