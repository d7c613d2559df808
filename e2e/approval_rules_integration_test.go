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
	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"
	"github.com/rs/zerolog"

	"github.com/acme/payout/internal/approval"
	"github.com/acme/payout/internal/ledger"
	"github.com/acme/payout/internal/lifecycle"
	"github.com/acme/payout/internal/proof/uitest"
	"github.com/acme/payout/internal/reconcile"
	"github.com/acme/payout/internal/view"
	"github.com/acme/payout/jobs"
)

// ruleRows is a file of 55,000.00 in three payouts: over the rule's
// threshold of 50,000.
const ruleRows = "externalId,amount,cardNumber\n" +
	"RUL-0001,30000.00,4111 1111 1111 1111\n" +
	"RUL-0002,20000.00,5555 5555 5555 4444\n" +
	"RUL-0003,5000.00,4000 0566 5566 5556\n"

// ruleExts are ruleRows' externalIds.
var ruleExts = []string{"RUL-0001", "RUL-0002", "RUL-0003"}

// twoApprovers is the rules file of the tests: a batch of 50,000 or more
// needs two distinct approvers.
func twoApprovers(t *testing.T) approval.Set {
	t.Helper()
	rules, err := approval.Parse("rules.conf", strings.NewReader("# finance\ntotal >= 50000: 2 approver\n"))
	if err != nil {
		t.Fatal(err)
	}
	return rules
}

// uploadAs signs b in as alice, uploads and confirms name (content
// ruleRows) and returns the id of the batch it loaded, which awaits
// approval.
func uploadRuled(t *testing.T, b *browser, base string, rc redis.UniversalClient, name string) string {
	t.Helper()
	file := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(file, []byte(ruleRows), 0o600); err != nil {
		t.Fatal(err)
	}
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
	if msg := b.read("loaded", chromedp.Text(chromedp.CSS(`#loaded`))); !strings.Contains(msg, "awaits approval") || !strings.Contains(msg, "total >= 50000: 2 approver") {
		t.Fatalf("the maker's upload: %q", msg)
	}
	ids, err := view.New(rc).BatchIDs(context.Background())
	if err != nil || len(ids) != 1 {
		t.Fatalf("batches: %v %v", ids, err)
	}
	return ids[0]
}

// queuedTasks counts the batch's payouts' create tasks in Asynq and the
// queue's pending and scheduled tasks.
func queuedTasks(t *testing.T, insp *asynq.Inspector) (creates, pending int) {
	t.Helper()
	for _, ext := range ruleExts {
		if _, err := insp.GetTaskInfo(jobs.Queue, jobs.CreateTaskID(ext, 1)); err == nil {
			creates++
		}
	}
	info, err := insp.GetQueueInfo(jobs.Queue)
	if err != nil {
		if strings.Contains(err.Error(), "does not exist") {
			return creates, 0
		}
		t.Fatalf("queue info: %v", err)
	}
	return creates, info.Pending + info.Scheduled
}

// approveInReview: the signed-in person opens the batch's review from its
// page and confirms; it returns the message the console answers.
func (b *browser) approveInReview(base, id string) string {
	b.t.Helper()
	b.step("approve "+id, 30*time.Second,
		chromedp.Navigate(base+"/batches/"+id),
		chromedp.Click(chromedp.CSS(`#approve-review-link`), chromedp.NodeVisible),
		chromedp.WaitVisible(chromedp.CSS(`#approve-confirm`)),
		chromedp.Click(chromedp.CSS(`#approve-confirm`)),
		chromedp.WaitVisible(chromedp.CSS(`#message`)),
	)
	return b.read("approval message", chromedp.Text(chromedp.CSS(`#message`)))
}

// TestBrowserTwoApprovers (issue 40): under the rule "total >= 50000: 2
// approver", alice's batch of 55,000.00 waits for two distinct
// approvers. bob approves: the batch page shows 1 of 2 and bob, nothing
// is enqueued, bob is no longer offered Approve (he is told why) and his
// second approval, forced, is refused; carol approves: the
// batch is approved, its three payouts enqueued, and its page shows both
// approvers and the rule applied.
func TestBrowserTwoApprovers(t *testing.T) {
	artifacts := artifactsDir(t)
	mr := miniredis.RunT(t)
	rc := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	t.Cleanup(func() { _ = rc.Close() })
	insp := asynq.NewInspectorFromRedisClient(rc)
	base := serveUI(t, uitest.Config(t, rc, uitest.Options{Users: namedLogins(t), Spool: t.TempDir(),
		ApprovalRules: twoApprovers(t), ApprovalExpiry: 7 * 24 * time.Hour}))

	b := newBrowserAt(t, artifacts, consoleWidth)
	id := uploadRuled(t, b, base, rc, "payouts-two-approvers.csv")

	b.signIn("bob", bobPass)
	if msg := b.approveInReview(base, id); !strings.Contains(msg, "1 of 2 approvals: bob") {
		t.Errorf("bob's approval: %q", msg)
	}
	b.step("the batch after bob", 20*time.Second,
		chromedp.Navigate(base+"/batches/"+id),
		chromedp.WaitVisible(chromedp.CSS(`#approvers`)),
	)
	b.shot("50-one-of-two.png")
	if got := b.read("approvals", chromedp.Text(chromedp.CSS(`#approvers`))); !strings.Contains(got, "1 of 2") || !strings.Contains(got, "bob") {
		t.Errorf("after bob, the batch page's approvers: %q", got)
	}
	if c, n := queuedTasks(t, insp); c != 0 || n != 0 {
		t.Fatalf("after one approval of two: %d create tasks, %d tasks queued", c, n)
	}
	if n := b.read("approve links", chromedp.Evaluate[string](`String(document.querySelectorAll('.approve, #approve-review-link').length)`)); n != "0" {
		t.Errorf("bob, who approved, is offered %s approve links", n)
	}
	if why := b.read("why no approval", chromedp.Text(chromedp.CSS(`#noapprove`))); !strings.Contains(why, "you approved this batch already (1 of 2 approvals: bob)") {
		t.Errorf("bob is told %q", why)
	}
	if got := b.forgedApprove(id); strings.HasPrefix(got, "2") || !strings.Contains(got, "bob") {
		t.Errorf("bob's second approval: %.300s", got)
	}
	if bt, err := ledger.New(rc).Batch(context.Background(), id); err != nil || bt.Phase != lifecycle.PhaseAwaiting || len(bt.Approvers) != 1 {
		t.Fatalf("after bob's second approval: %s, %d approvers, %v", bt.Phase, len(bt.Approvers), err)
	}

	b.signIn("carol", carolPass)
	if msg := b.approveInReview(base, id); !strings.Contains(msg, "carol") {
		t.Errorf("carol's approval: %q", msg)
	}
	b.step("the batch, approved", 20*time.Second,
		chromedp.Navigate(base+"/batches/"+id),
		chromedp.WaitVisible(chromedp.CSS(`#approvers`)),
		chromedp.WaitNotPresent(chromedp.CSS(`.approve`)),
	)
	b.shot("51-two-of-two.png")
	b.fits("two approvers")
	if got := b.read("approvers", chromedp.Text(chromedp.CSS(`#approvers`))); !strings.Contains(got, "bob") || !strings.Contains(got, "carol") {
		t.Errorf("the approved batch's approvers: %q", got)
	}
	if got := b.read("rule", chromedp.Text(chromedp.CSS(`#approval-rule`))); !strings.Contains(got, "total >= 50000: 2 approver") {
		t.Errorf("the rule shown: %q", got)
	}
	bt, err := ledger.New(rc).Batch(context.Background(), id)
	if err != nil || bt.Phase != lifecycle.PhaseLoaded || bt.ApproverNames() != "bob, carol" {
		t.Fatalf("after carol: %s, approvers %q, %v", bt.Phase, bt.ApproverNames(), err)
	}
	if c, n := queuedTasks(t, insp); c != len(ruleExts) || n != len(ruleExts) {
		t.Errorf("after the two approvals: %d create tasks, %d tasks queued, want %d", c, n, len(ruleExts))
	}
	b.noViolations("/batches/" + id)
	b.pageErrors()
}

// TestBrowserExpiredApproval (issue 40): a batch held under a rule whose
// approval request expires (seven days, Redis's clock moved on) is
// discarded by the reconciler's sweep; the console shows it discarded
// with the reason, offers no approval, and Asynq holds no task of it.
func TestBrowserExpiredApproval(t *testing.T) {
	artifacts := artifactsDir(t)
	mr := miniredis.RunT(t)
	start := time.Now().UTC().Truncate(time.Second)
	mr.SetTime(start)
	rc := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	t.Cleanup(func() { _ = rc.Close() })
	insp := asynq.NewInspectorFromRedisClient(rc)
	base := serveUI(t, uitest.Config(t, rc, uitest.Options{Users: namedLogins(t), Spool: t.TempDir(),
		ApprovalRules: twoApprovers(t), ApprovalExpiry: 7 * 24 * time.Hour}))

	b := newBrowserAt(t, artifacts, consoleWidth)
	id := uploadRuled(t, b, base, rc, "payouts-expiring.csv")
	led := ledger.New(rc)
	bt, err := led.Batch(context.Background(), id)
	if err != nil || bt.Phase != lifecycle.PhaseAwaiting || bt.ExpiresAt.IsZero() {
		t.Fatalf("held batch: %s, expires %v, %v", bt.Phase, bt.ExpiresAt, err)
	}

	sweeper := reconcile.New(rc, led, reconcile.Config{}, zerolog.Nop())
	mr.SetTime(bt.ExpiresAt.Add(-time.Minute))
	if rep, err := sweeper.Sweep(context.Background(), false); err != nil || len(rep.Expired) != 0 {
		t.Fatalf("a minute before the expiry: %+v %v", rep.Expired, err)
	}
	mr.SetTime(bt.ExpiresAt.Add(time.Second))
	rep, err := sweeper.Sweep(context.Background(), false)
	if err != nil || len(rep.Expired) != 1 || rep.Expired[0].Batch != id || !rep.Expired[0].Done || rep.Expired[0].Cancelled != len(ruleExts) {
		t.Fatalf("the sweep after the expiry: %+v %v", rep.Expired, err)
	}

	b.signIn("bob", bobPass)
	b.step("the expired batch", 20*time.Second,
		chromedp.Navigate(base+"/batches/"+id),
		chromedp.WaitVisible(chromedp.CSS(`#approval`)),
	)
	b.shot("52-expired.png")
	b.fits("expired approval")
	if got := b.read("approval", chromedp.Text(chromedp.CSS(`#approval`))); !strings.Contains(got, "discarded") || !strings.Contains(got, "approval expired after 7 days") {
		t.Errorf("the expired batch's approval: %q", got)
	}
	if n := b.read("approve links", chromedp.Evaluate[string](`String(document.querySelectorAll('.approve, #approve-review-link').length)`)); n != "0" {
		t.Errorf("the expired batch offers %s approve links", n)
	}
	// Each cancelled row says the expiry stopped it, not a person.
	plain := b.read("plain reasons", chromedp.Evaluate[string](`Array.from(document.querySelectorAll('.reason .plain')).map(e => e.textContent).join('\n')`))
	if strings.Count(plain, "approval request expired") != len(ruleExts) || strings.Contains(plain, "A person") {
		t.Errorf("the cancelled rows' plain reasons: %q", plain)
	}
	if got := b.forgedApprove(id); strings.HasPrefix(got, "2") {
		t.Errorf("approving the expired batch: %.300s", got)
	}
	bt, err = led.Batch(context.Background(), id)
	if err != nil || bt.Phase != lifecycle.PhaseDiscarded || bt.Note != "approval expired after 7 days" {
		t.Fatalf("after the sweep: %s %q %v", bt.Phase, bt.Note, err)
	}
	for _, ext := range ruleExts {
		if p, err := led.Get(context.Background(), id, ext); err != nil || p.State != lifecycle.Cancelled {
			t.Errorf("%s: %s %v", ext, p.State, err)
		}
	}
	if c, n := queuedTasks(t, insp); c != 0 || n != 0 {
		t.Errorf("after the expiry: %d create tasks, %d tasks queued", c, n)
	}
	b.noViolations("/batches/" + id)
	b.pageErrors()
}
