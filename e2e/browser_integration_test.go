//go:build integration

package e2e_test

import (
	"context"
	"encoding/base64"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/acme/payout/internal/queue"
	"github.com/alicebob/miniredis/v2"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"
	"github.com/hibiken/asynq"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
	"github.com/rs/zerolog"

	"github.com/acme/payout/internal/proof/testenv"
	"github.com/acme/payout/internal/proof/uitest"
	"github.com/acme/payout/internal/ui"
	"github.com/acme/payout/jobs"
)

const (
	browserUser = "operator"
	browserPass = "browser-test-Pa55"
	fullPAN     = "4111111111111111"
	maskedPAN   = "411111******1111"
)

// missing fails under CI=true and skips elsewhere.
func missing(t *testing.T, why string) {
	t.Helper()
	if os.Getenv("CI") == "true" {
		t.Fatalf("CI=true and %s", why)
	}
	t.Skip(why)
}

func chromiumPath(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("PAYOUT_CHROMIUM"); p != "" {
		return p
	}
	for _, name := range []string{"/usr/bin/chromium", "chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	missing(t, "chromium not found (apt-get install -y chromium chromium-driver)")
	return ""
}

func artifactsDir(t *testing.T) string {
	t.Helper()
	dir := os.Getenv("PAYOUT_TEST_ARTIFACTS")
	if dir == "" {
		dir = t.TempDir()
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatalf("artifacts dir: %v", err)
	}
	t.Logf("screenshots go to %s", dir)
	return dir
}

// startUI serves the UI on a free loopback port until the test ends.
func startUI(t *testing.T, rc redis.UniversalClient) string {
	t.Helper()
	return serveUI(t, ui.Config{
		Redis: rc, User: browserUser, Password: browserPass, ReadOnly: true, Batches: oneBatch{},
		Registry: prometheus.NewRegistry(), Logger: zerolog.New(zerolog.NewTestWriter(t)).Level(zerolog.WarnLevel),
	})
}

// serveUI serves cfg on a free loopback port until the test ends.
func serveUI(t *testing.T, cfg ui.Config) string {
	t.Helper()
	port, err := testenv.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	cfg.Addr = addr
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- ui.Serve(ctx, cfg) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	base := "http://" + addr
	deadline := time.Now().Add(10 * time.Second)
	for {
		resp, err := http.Get(base + "/healthz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return base
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("UI did not come up on %s: %v", addr, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

type oneBatch struct{}

func (oneBatch) Batches(context.Context) ([]ui.BatchView, error) {
	return []ui.BatchView{{
		ID: "b-2025-03-01", File: "payouts-2025-03-01.csv", LoadedAt: time.Date(2025, 3, 1, 8, 0, 0, 0, time.UTC),
		Counts: map[string]int64{"queued": 3, "created": 5, "rejected": 1, "checking": 1}, Rows: 10,
		AmountCreated: "1500.00", AmountTotal: "3000.00",
	}}, nil
}

// seed enqueues payout tasks shaped like the loader's, and one rogue task
// enqueued by "someone else" whose payload holds a full card number.
func seed(t *testing.T, rc redis.UniversalClient) {
	t.Helper()
	c := asynq.NewClientFromRedisClient(rc)
	for i := 1; i <= 3; i++ {
		task, err := queue.Step{Kind: queue.Create,
			Batch: "b-2025-03-01", ExternalID: fmt.Sprintf("PAY-%04d", i), N: 1,
			Amount: fmt.Sprintf("%d.50", 100*i), Destination: "card " + maskedPAN,
		}.AsynqTask(time.Now())
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.Enqueue(task); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := c.Enqueue(asynq.NewTask("rogue:import",
		[]byte(`{"note":"enqueued by a legacy tool","pan":"`+fullPAN+`"}`)),
		asynq.Queue(jobs.Queue), asynq.TaskID("rogue-1")); err != nil {
		t.Fatal(err)
	}
}

// pageProblems collects what the page reports as wrong: uncaught
// exceptions, console errors and CSP violations.
type pageProblems struct {
	mu   sync.Mutex
	list []string
}

func (p *pageProblems) add(s string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.list = append(p.list, s)
}

func (p *pageProblems) all() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.list...)
}

const recordCSPViolations = `window.__csp = [];
document.addEventListener('securitypolicyviolation', function (e) {
  window.__csp.push(e.violatedDirective + ' blocked ' + (e.blockedURI || 'inline') + ' at ' + e.sourceFile + ':' + e.lineNumber);
});`

// browser is a headless Chromium logged in to the UI, with helpers that
// fail the test with a screenshot.
type browser struct {
	t         *testing.T
	ctx       context.Context
	artifacts string
	problems  *pageProblems
}

// newBrowser starts Chromium for the test, sending basic-auth credentials
// with every request and recording CSP violations.
func newBrowser(t *testing.T, artifacts string) *browser {
	t.Helper()
	return newBrowserAt(t, artifacts, 1400)
}

// newBrowserAt is newBrowser with a window width px wide.
func newBrowserAt(t *testing.T, artifacts string, width int) *browser {
	t.Helper()
	chromium := chromiumPath(t)
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(context.Background(),
		chromedp.ExecPath(chromium),
		chromedp.Headless,
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.NoFirstRun,
		chromedp.NoDefaultBrowserCheck,
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(width, 900),
	)
	t.Cleanup(cancelAlloc)
	ctx, cancelCtx := chromedp.NewContext(allocCtx, chromedp.WithLogf(t.Logf))
	t.Cleanup(cancelCtx)
	ctx, cancelTimeout := context.WithTimeout(ctx, 120*time.Second)
	t.Cleanup(cancelTimeout)

	// Start the browser with no deadline on this first call (it binds the
	// browser's life to the context); steps below get their own deadlines.
	if err := chromedp.Do(ctx); err != nil {
		missing(t, "chromium does not start: "+err.Error())
	}
	problems := &pageProblems{}
	msgs := chromedp.Console(ctx)
	go func() {
		for m, err := range msgs {
			if err != nil {
				return
			}
			if m.IsException() || m.Type == "error" {
				problems.add(m.String())
			}
		}
	}()

	auth := "Basic " + base64.StdEncoding.EncodeToString([]byte(browserUser+":"+browserPass))
	// Log in: every request of the page carries the credentials.
	if _, err := chromedp.Call(ctx, network.Enable, network.EnableParams{}); err != nil {
		t.Fatalf("network.enable: %v", err)
	}
	if _, err := chromedp.Call(ctx, network.SetExtraHTTPHeaders,
		network.SetExtraHTTPHeadersParams{Headers: network.Headers{"Authorization": auth}}); err != nil {
		t.Fatalf("set auth header: %v", err)
	}
	if _, err := chromedp.Call(ctx, page.AddScriptToEvaluateOnNewDocument,
		page.AddScriptToEvaluateOnNewDocumentParams{Source: recordCSPViolations}); err != nil {
		t.Fatalf("add CSP recorder: %v", err)
	}

	return &browser{t: t, ctx: ctx, artifacts: artifacts, problems: problems}
}

func (b *browser) shot(name string) {
	t, ctx, artifacts := b.t, b.ctx, b.artifacts
	t.Helper()
	sctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	png, err := chromedp.Run(sctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatalf("screenshot %s: %v", name, err)
	}
	p := filepath.Join(artifacts, name)
	if err := os.WriteFile(p, png, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot: %s", p)
}

// step runs actions with their own deadline, so that a page that never
// renders fails fast with the step's name.
func (b *browser) step(name string, d time.Duration, actions ...chromedp.Action[chromedp.Void]) {
	b.t.Helper()
	sctx, cancel := context.WithTimeout(b.ctx, d)
	defer cancel()
	if err := chromedp.Do(sctx, actions...); err != nil {
		b.shot("failed-" + strings.ReplaceAll(name, " ", "-") + ".png")
		b.t.Fatalf("%s: %v (problems: %v)", name, err, b.problems.all())
	}
}

func (b *browser) read(name string, a chromedp.Action[string]) string {
	b.t.Helper()
	sctx, cancel := context.WithTimeout(b.ctx, 10*time.Second)
	defer cancel()
	v, err := chromedp.Run(sctx, a)
	if err != nil {
		b.t.Fatalf("%s: %v", name, err)
	}
	return v
}

func (b *browser) noViolations(where string) {
	b.t.Helper()
	sctx, cancel := context.WithTimeout(b.ctx, 10*time.Second)
	defer cancel()
	violations, err := chromedp.Run(sctx, chromedp.Evaluate[[]string](`window.__csp || []`))
	if err != nil {
		b.t.Fatalf("read CSP violations: %v", err)
	}
	if len(violations) > 0 {
		b.t.Errorf("CSP violations on %s: %v", where, violations)
	}
}

// pageErrors fails on CSP problems or exceptions the console reported.
func (b *browser) pageErrors() {
	b.t.Helper()
	for _, p := range b.problems.all() {
		if strings.Contains(p, "Content Security Policy") || strings.Contains(p, "exception") {
			b.t.Errorf("page problem: %s", p)
		} else {
			b.t.Logf("page console: %s", p)
		}
	}
}

func TestBrowserShowsMaskedPayloads(t *testing.T) {
	artifacts := artifactsDir(t)

	mr := miniredis.RunT(t)
	rc := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	t.Cleanup(func() { _ = rc.Close() })
	seed(t, rc)
	base := startUI(t, rc)

	b := newBrowser(t, artifacts)
	shot, step, read, noViolations := b.shot, b.step, b.read, b.noViolations
	checkText := func(where string) {
		t.Helper()
		text := read("text of "+where, chromedp.Text(chromedp.CSS("body")))
		html := read("html of "+where, chromedp.OuterHTML(chromedp.CSS("html")))
		if strings.Contains(text, fullPAN) || strings.Contains(html, fullPAN) {
			t.Errorf("%s shows the full card number", where)
		}
		if !strings.Contains(text, maskedPAN) {
			t.Errorf("%s does not show the masked number %s; text:\n%s", where, maskedPAN, text)
		}
	}

	// 1. The queues overview.
	step("open queues page", 30*time.Second,
		chromedp.Navigate(base+"/monitoring/"),
		chromedp.WaitVisible(chromedp.CSS(`a[href="/monitoring/queues/payouts"]`)),
	)
	shot("01-queues.png")

	// 2. The queue, then its pending tasks (through the UI's own links).
	step("open payouts queue", 20*time.Second,
		chromedp.Click(chromedp.CSS(`a[href="/monitoring/queues/payouts"]`)),
		chromedp.WaitVisible(`//div[contains(@class,"MuiChip")][.//div[starts-with(normalize-space(.),"Pending")]]`),
	)
	step("open pending tasks", 20*time.Second,
		chromedp.Click(`//div[contains(@class,"MuiChip")][.//div[starts-with(normalize-space(.),"Pending")]]`),
		chromedp.WaitVisible(`//td[normalize-space(.)="rogue:import"]`),
		chromedp.WaitVisible(`//td[normalize-space(.)="withdrawal:create"]`),
	)
	checkText("pending tasks list")
	shot("02-pending-tasks.png")

	// 3. The rogue task's details: its payload, masked.
	step("open rogue task", 20*time.Second,
		chromedp.Click(`//td[normalize-space(.)="rogue:import"]`),
		chromedp.WaitVisible(`//*[contains(text(),"Payload:")]`),
		chromedp.WaitVisible(`//*[contains(text(),"enqueued by a legacy tool")]`),
	)
	checkText("rogue task details")
	shot("03-rogue-task.png")
	// The strict CSP must not have blocked anything the UI needs.
	noViolations("asynqmon")

	// 4. Our batch page renders under the same policy.
	step("open batches page", 20*time.Second,
		chromedp.Navigate(base+"/batches"),
		chromedp.WaitVisible(`//h2[text()="Batches"]`),
		chromedp.WaitVisible(`//td[contains(., "payouts-2025-03-01.csv")]`),
		chromedp.WaitVisible(chromedp.CSS(`#b0 .bar .s-created`)),
	)

	shot("04-batches.png")
	noViolations("/batches")
	b.pageErrors()
}

const (
	uploadHeader = "externalId,amount,cardNumber,telecomOperator\n"
	uploadBad    = uploadHeader + "WEB-1,10.50,4111 1111 1111 1111,\nWEB-2,12;5,,MTS\nWEB-3,7.25,,Beeline\n"
	uploadGood   = uploadHeader + "WEB-1,10.50,4111 1111 1111 1111,\nWEB-2,12.50,,MTS\nWEB-3,7.25,,Beeline\n"
)

// TestBrowserUploadPreviewApprove uploads a file with an error, sees the
// preview with the error's line, uploads the corrected file, confirms it,
// and approves the batch that then awaits approval.
func TestBrowserUploadPreviewApprove(t *testing.T) {
	artifacts := artifactsDir(t)
	mr := miniredis.RunT(t)
	rc := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	t.Cleanup(func() { _ = rc.Close() })
	spool := t.TempDir()
	base := serveUI(t, uitest.Config(t, rc, uitest.Options{User: browserUser, Password: browserPass,
		Spool: spool, ApprovalRequired: true, FourEyes: false}))
	files := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(files, name)
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	bad, good := write("payouts-web.csv", uploadBad), filepath.Join(files, "fixed", "payouts-web.csv")
	if err := os.MkdirAll(filepath.Dir(good), 0o700); err != nil {
		t.Fatal(err)
	}
	write(filepath.Join("fixed", "payouts-web.csv"), uploadGood)

	b := newBrowser(t, artifacts)
	upload := func(path string) {
		b.step("upload "+path, 30*time.Second,
			chromedp.Navigate(base+"/batches"),
			chromedp.WaitVisible(chromedp.CSS(`#upload input[type=file]`)),
			chromedp.SetUploadFiles(chromedp.CSS(`#upload input[type=file]`), []string{path}),
			chromedp.Click(chromedp.CSS(`#upload button[type=submit]`)),
			chromedp.WaitVisible(chromedp.CSS(`#summary`)),
		)
	}

	// 1. The file with an error: the preview names its line, no confirm.
	upload(bad)
	b.shot("10-preview-error.png")
	errRow := b.read("error row", chromedp.Text(chromedp.CSS(`#errors tbody tr`)))
	if !strings.Contains(errRow, "3") || !strings.Contains(errRow, "amount") {
		t.Fatalf("preview error row %q: want line 3, column amount", errRow)
	}
	if n := b.read("refusal", chromedp.Text(chromedp.CSS(`#refused`))); !strings.Contains(n, "cannot be loaded") {
		t.Fatalf("preview of a bad file: %q", n)
	}

	// 2. The corrected file: confirm, and it awaits approval.
	upload(good)
	b.shot("11-preview-ok.png")
	if got := b.read("rows", chromedp.Text(chromedp.CSS(`#rows`))) + " " + b.read("total", chromedp.Text(chromedp.CSS(`#total`))); got != "3 30.25" {
		t.Fatalf("preview figures %q, want 3 30.25", got)
	}
	b.step("confirm", 30*time.Second,
		chromedp.Click(chromedp.CSS(`#confirm`)),
		chromedp.WaitVisible(chromedp.CSS(`#loaded`)),
	)
	b.shot("12-loaded.png")
	if msg := b.read("loaded", chromedp.Text(chromedp.CSS(`#loaded`))); !strings.Contains(msg, "awaits approval") {
		t.Fatalf("after confirm: %q", msg)
	}

	// 3. The batch is listed with its rows, awaiting approval: approve it.
	b.step("open batches", 20*time.Second,
		chromedp.Navigate(base+"/batches"),
		chromedp.WaitVisible(`//table[contains(@class,"awaiting")]//td[contains(., "payouts-web.csv")]`),
		chromedp.WaitVisible(`//table[not(contains(@class,"awaiting"))]//td[contains(., "payouts-web.csv")]`),
	)
	b.shot("13-awaiting.png")
	if q := b.read("queued", chromedp.Text(chromedp.CSS(`#b0 .n-queued`))); q != "3" {
		t.Fatalf("queued rows of the batch: %q, want 3", q)
	}
	b.step("approve", 20*time.Second,
		chromedp.Click(chromedp.CSS(`.approve`)),
		chromedp.WaitVisible(chromedp.CSS(`#message, #approve-confirm`)),
	)
	// Approve may open the review before money moves (issue 43,
	// TestBrowserApproveReview): then confirm it.
	if b.read("review", chromedp.Evaluate[string](`document.getElementById('approve-confirm') ? 'review' : ''`)) == "review" {
		b.shot("14-review.png")
		b.step("confirm the approval", 20*time.Second,
			chromedp.Click(chromedp.CSS(`#approve-confirm`)),
			chromedp.WaitVisible(chromedp.CSS(`#message`)),
		)
	}
	b.shot("14-approved.png")
	if msg := b.read("approved", chromedp.Text(chromedp.CSS(`#message`))); !strings.Contains(msg, "approved by "+browserUser+": 3 payouts") {
		t.Fatalf("after approve: %q", msg)
	}
	b.step("batches after approval", 20*time.Second,
		chromedp.Navigate(base+"/batches"),
		chromedp.WaitVisible(`//td[contains(., "payouts-web.csv")]`),
		chromedp.WaitNotPresent(chromedp.CSS(`.approve`)),
	)
	b.shot("15-batches.png")
	info, err := asynq.NewInspectorFromRedisClient(rc).GetQueueInfo(jobs.Queue)
	if err != nil || info.Pending != 3 {
		t.Fatalf("creates enqueued after approval: %+v %v", info, err)
	}
	if _, err := os.Stat(filepath.Join(spool, "done", "payouts-web.csv")); err != nil {
		t.Fatalf("confirmed upload not in done/: %v", err)
	}
	b.noViolations("/batches")
	b.pageErrors()
}
