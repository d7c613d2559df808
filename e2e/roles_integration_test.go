//go:build integration

package e2e_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/chromedp/chromedp"
	"github.com/redis/go-redis/v9"

	"github.com/acme/payout/internal/access"
	"github.com/acme/payout/internal/ledger"
	"github.com/acme/payout/internal/lifecycle"
	"github.com/acme/payout/internal/proof/uitest"
	"github.com/acme/payout/internal/view"
)

// forgedApprove posts the approval of batch id from the page, as a person
// who crafted the form would (with the page's form token, if it has one),
// and returns "STATUS BODY".
func (b *browser) forgedApprove(id string) string {
	b.t.Helper()
	js := `(function () {
  var t = document.querySelector('input[name=csrf]');
  var body = 'confirm=yes&csrf=' + encodeURIComponent(t ? t.value : '');
  return fetch('/batches/` + id + `/approve', {method: 'POST', headers: {'Content-Type': 'application/x-www-form-urlencoded'}, body: body})
    .then(function (r) { return r.text().then(function (s) { return r.status + ' ' + s; }); });
})()`
	return b.read("forged approval of "+id, chromedp.Evaluate[string](js, chromedp.EvalAwaitPromise))
}

// TestBrowserRoles: with a roles file, a maker (alice) uploads and
// confirms a file in Chromium but is offered no approval, and is told why;
// her forged approval is refused 403 with the role it needs. A viewer
// (bob) sees no upload form, no Approve and no Discard, each with the
// reason, and his forged approval is refused 403 alike. The batch still
// awaits approval.
func TestBrowserRoles(t *testing.T) {
	artifacts := artifactsDir(t)
	mr := miniredis.RunT(t)
	rc := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	t.Cleanup(func() { _ = rc.Close() })
	roles, err := access.Parse("roles", strings.NewReader("person alice: maker\nperson bob: viewer\n"))
	if err != nil {
		t.Fatal(err)
	}
	base := serveUI(t, uitest.Config(t, rc, uitest.Options{Users: namedLogins(t), Spool: t.TempDir(), ApprovalRequired: true, Roles: roles}))
	file := filepath.Join(t.TempDir(), "payouts-roles.csv")
	if err := os.WriteFile(file, []byte(uploadGood), 0o600); err != nil {
		t.Fatal(err)
	}

	b := newBrowser(t, artifacts)
	b.signIn("alice", alicePass)
	b.step("the maker uploads", 30*time.Second,
		chromedp.Navigate(base+"/batches"),
		chromedp.WaitVisible(chromedp.CSS(`#upload input[type=file]`)),
		chromedp.SetUploadFiles(chromedp.CSS(`#upload input[type=file]`), []string{file}),
		chromedp.Click(chromedp.CSS(`#upload button[type=submit]`)),
		chromedp.WaitVisible(chromedp.CSS(`#confirm`)),
		chromedp.Click(chromedp.CSS(`#confirm`)),
		chromedp.WaitVisible(chromedp.CSS(`#loaded`)),
	)
	if msg := b.read("loaded", chromedp.Text(chromedp.CSS(`#loaded`))); !strings.Contains(msg, "awaits approval") {
		t.Fatalf("the maker's upload: %q", msg)
	}
	ids, err := view.New(rc).BatchIDs(context.Background())
	if err != nil || len(ids) != 1 {
		t.Fatalf("batches: %v %v", ids, err)
	}
	id := ids[0]
	b.step("the maker's batches", 20*time.Second,
		chromedp.Navigate(base+"/batches"),
		chromedp.WaitVisible(`//table[contains(@class,"awaiting")]//td[contains(., "payouts-roles.csv")]`),
	)
	b.shot("40-maker-batches.png")
	if n := b.read("approve links", chromedp.Evaluate[string](`String(document.querySelectorAll('a.approve').length)`)); n != "0" {
		t.Errorf("the maker is offered %s approve links", n)
	}
	if why := b.read("why no approval", chromedp.Text(chromedp.CSS(`.noapprove`))); !strings.Contains(why, "approving needs the approver role; you hold viewer,maker") {
		t.Errorf("the maker is told %q", why)
	}
	if got := b.forgedApprove(id); !strings.HasPrefix(got, "403 ") || !strings.Contains(got, "approving needs the approver role; alice holds viewer,maker") {
		t.Errorf("the maker's forged approval: %.300s", got)
	}

	b.signIn("bob", bobPass)
	b.step("the viewer's batches", 20*time.Second,
		chromedp.Navigate(base+"/batches"),
		chromedp.WaitVisible(chromedp.CSS(`#noupload`)),
	)
	b.shot("41-viewer-batches.png")
	buttons := b.read("forms offered", chromedp.Evaluate[string](
		`String(document.querySelectorAll('#upload, a.approve, button.discard, form[action$="/discard"]').length)`))
	if buttons != "0" {
		t.Errorf("the viewer is offered %s forms or buttons", buttons)
	}
	page := b.read("the viewer's page", chromedp.Text(chromedp.CSS(`main`)))
	for _, why := range []string{"uploading or loading a file needs the maker role; you hold viewer",
		"approving needs the approver role; you hold viewer", "discarding needs the approver role; you hold viewer"} {
		if !strings.Contains(page, why) {
			t.Errorf("the viewer's page does not say %q", why)
		}
	}
	b.step("the viewer's batch page", 20*time.Second,
		chromedp.Navigate(base+"/batches/"+id),
		chromedp.WaitVisible(chromedp.CSS(`#noapprove`)),
	)
	b.shot("42-viewer-batch.png")
	if n := b.read("forms on the batch page", chromedp.Evaluate[string](`String(document.querySelectorAll('main form[method=post], #approve-review-link').length)`)); n != "0" {
		t.Errorf("the viewer's batch page offers %s forms", n)
	}
	if r := b.read("roles shown", chromedp.Text(chromedp.CSS(`#roles`))); r != "(viewer)" {
		t.Errorf("the viewer's roles shown as %q", r)
	}
	if got := b.forgedApprove(id); !strings.HasPrefix(got, "403 ") || !strings.Contains(got, "approving needs the approver role; bob holds viewer") {
		t.Errorf("the viewer's forged approval: %.300s", got)
	}
	if bt, err := ledger.New(rc).Batch(context.Background(), id); err != nil || bt.Phase != lifecycle.PhaseAwaiting {
		t.Fatalf("batch %s after the refusals: %s %v", id, bt.Phase, err)
	}
	b.noViolations("/batches/" + id)
	b.pageErrors()
}
