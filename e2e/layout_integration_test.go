//go:build integration

package e2e_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"
	"github.com/hibiken/asynq"

	"github.com/acme/payout/internal/lifecycle"
	"github.com/acme/payout/internal/proof/testenv"
	"github.com/acme/payout/internal/proof/testenv/redistest"
	"github.com/acme/payout/internal/proof/uitest"
	"github.com/acme/payout/jobs"
)

// overflow lists what is wider than the window on the page: the page
// itself (document scrollWidth over clientWidth), and every element that
// scrolls sideways (a table in a .scroll box cut off at the window's edge
// is as unread as one past it).
const overflow = `(() => {
  const out = [];
  const d = document.documentElement;
  if (d.scrollWidth > d.clientWidth) out.push('page ' + d.scrollWidth + ' > ' + d.clientWidth);
  for (const e of document.querySelectorAll('body *')) {
    const s = getComputedStyle(e);
    if ((s.overflowX === 'auto' || s.overflowX === 'scroll') && e.scrollWidth > e.clientWidth + 1) {
      const cols = [...e.querySelectorAll('thead th')].map(th => th.textContent.trim() + ' ' + th.offsetWidth).join(', ');
      out.push((e.id ? '#' + e.id : e.tagName.toLowerCase() + '.' + e.className) + ' ' + e.scrollWidth + ' > ' + e.clientWidth +
        (cols ? ' (columns: ' + cols + ')' : ''));
    }
  }
  return out;
})()`

// fitsWindow fails when anything on the page is wider than the window.
func (b *browser) fitsWindow(where string, width int) {
	b.t.Helper()
	sctx, cancel := context.WithTimeout(b.ctx, 10*time.Second)
	defer cancel()
	over, err := chromedp.Run(sctx, chromedp.Evaluate[[]string](overflow))
	if err != nil {
		b.t.Fatalf("widths of %s: %v", where, err)
	}
	if len(over) > 0 {
		b.shot(fmt.Sprintf("wide-%d-%s.png", width, strings.ReplaceAll(strings.Trim(where, "/"), "/", "_")))
		b.t.Errorf("at %d px %s is wider than the window: %s", width, where, strings.Join(over, "; "))
	}
}

// TestBrowserEveryStateFits: the 1,280 px rule (and 1,400 px, where
// /batches overflowed with four or more states, issue 43 defect 6) on a
// working batch with a payout in every state of the machine, beside the
// demo's batches: /batches, the batch page and its state filter fit the
// window, no table cut off.
func TestBrowserEveryStateFits(t *testing.T) {
	artifacts := artifactsDir(t)
	rc := redistest.Start(t).ClientT(t)
	uitest.LoadDemo(t, rc)
	every := uitest.LoadEveryState(t, rc)
	for _, s := range lifecycle.Machine {
		if len(every.ByState[s.State]) == 0 {
			t.Fatalf("the fixture has no %s payout", s.State)
		}
	}
	base := serveUI(t, uitest.Config(t, rc, uitest.Options{Users: namedLogins(t), FourEyes: true, Spool: t.TempDir()}))

	for _, width := range []int{1280, 1400} {
		t.Run(fmt.Sprint(width), func(t *testing.T) {
			b := newBrowserAt(t, artifacts, width)
			b.signIn("alice", alicePass)
			b.step("open batches", 20*time.Second,
				chromedp.Navigate(base+"/batches"),
				chromedp.WaitVisible(fmt.Sprintf(`//a[normalize-space(.)=%q]`, every.File)),
			)
			// Every state is on the page, counted.
			counts := b.read("counts", chromedp.Evaluate[string](
				`[...document.querySelectorAll('tr')].filter(r => r.textContent.includes('`+every.File+`')).map(r => r.querySelector('td.counts').textContent).join('')`))
			for _, s := range lifecycle.Machine {
				if want := fmt.Sprintf("%d %s", len(every.ByState[s.State]), s.Label); !strings.Contains(counts, want) {
					t.Errorf("/batches counts %q lack %q", counts, want)
				}
			}
			b.fitsWindow("/batches", width)
			b.noViolations("/batches")
			b.shot(fmt.Sprintf("every-state-batches-%d.png", width))

			b.step("open the every-state batch", 20*time.Second,
				chromedp.Click(fmt.Sprintf(`//a[normalize-space(.)=%q]`, every.File), chromedp.NodeVisible),
				chromedp.WaitVisible(chromedp.CSS(`#payouts tbody tr`)),
			)
			if got := b.read("rows", chromedp.Text(chromedp.CSS(`#rows`))); got != fmt.Sprint(every.Rows) {
				t.Errorf("batch rows %q, want %d", got, every.Rows)
			}
			tags := b.read("state tags", chromedp.Evaluate[string](`[...new Set([...document.querySelectorAll('#payouts .state')].map(e => e.textContent))].join(',')`))
			for _, s := range lifecycle.Machine {
				if !strings.Contains(tags, s.Label) {
					t.Errorf("batch page lists no %s payout: %s", s.Label, tags)
				}
			}
			b.fitsWindow("batch page", width)
			b.noViolations("batch page")
			b.shot(fmt.Sprintf("every-state-batch-%d.png", width))

			b.step("filter needs review", 20*time.Second,
				chromedp.SetValue(chromedp.CSS(`#state`), string(lifecycle.NeedsReview)),
				// Wait for the filtered page's load: a navigation started
				// while the form's is on its way is cancelled by it.
				loadAfter(chromedp.Click(chromedp.CSS(`#apply`))),
				chromedp.WaitVisible(fmt.Sprintf(`//span[@id="count"][contains(., " of %d")]`, len(every.ByState[lifecycle.NeedsReview]))),
			)
			b.fitsWindow("batch page, needs review", width)

			b.step("open the work queue", 20*time.Second,
				chromedp.Navigate(base+"/queue"),
				chromedp.WaitVisible(chromedp.CSS(`#review`)),
			)
			b.fitsWindow("/queue", width)
			b.pageErrors()
		})
	}
}

// TestBrowserPausedBanner: on-call pauses the payout queue (as payout
// pause and the Queues page do):
// /batches and the working batch's page say that payments are on hold
// and the batch reads paused, not working (issue 43 defect 3); resumed,
// the banner goes and the batch works again.
func TestBrowserPausedBanner(t *testing.T) {
	artifacts := artifactsDir(t)
	rc := redistest.Start(t).ClientT(t)
	insp := asynq.NewInspectorFromRedisClient(rc)
	every := uitest.LoadEveryState(t, rc)
	base := serveUI(t, uitest.Config(t, rc, uitest.Options{Users: namedLogins(t), FourEyes: true, Spool: t.TempDir()}))
	b := newBrowserAt(t, artifacts, consoleWidth)
	b.signIn("alice", alicePass)

	batchPage := base + "/batches/" + every.Batch
	phaseOnBatches := `//tr[.//a[normalize-space(.)=` + fmt.Sprintf("%q", every.File) + `]]//span[contains(@class,"phase")]`
	// shows reports whether url, once loaded, has the paused banner.
	shows := func(url string) bool {
		t.Helper()
		b.step("open "+url, 20*time.Second,
			chromedp.Navigate(url),
			chromedp.WaitVisible(chromedp.CSS(`main`)),
		)
		return b.read("banner on "+url, chromedp.Evaluate[string](`document.getElementById('paused-banner') ? 'yes' : 'no'`)) == "yes"
	}

	// Working: no banner anywhere.
	for _, u := range []string{base + "/batches", batchPage} {
		if shows(u) {
			b.shot("unexpected-banner.png")
			t.Fatalf("%s shows the paused banner while the queue runs", u)
		}
	}
	if got := b.read("phase", chromedp.Text(chromedp.CSS(`#phase`))); got != "working" {
		t.Errorf("batch phase while the queue runs: %q", got)
	}

	// Paused: the banner on both pages, the batch reads paused.
	if err := insp.PauseQueue(jobs.Queue); err != nil {
		t.Fatal(err)
	}
	b.step("batches, paused", 20*time.Second,
		chromedp.Navigate(base+"/batches"),
		chromedp.WaitVisible(chromedp.CSS(`#paused-banner`)),
	)
	b.shot("paused-batches.png")
	banner := b.read("banner", chromedp.Text(chromedp.CSS(`#paused-banner`)))
	for _, want := range []string{"Payments are on hold", "nothing is lost", "payout resume"} {
		if !strings.Contains(banner, want) {
			t.Errorf("/batches banner %q lacks %q", banner, want)
		}
	}
	if got := b.read("phase on /batches", chromedp.Text(phaseOnBatches)); got != "paused" {
		t.Errorf("/batches reads the paused batch %q, want paused", got)
	}
	b.fitsWindow("/batches, paused", consoleWidth)
	b.step("batch page, paused", 20*time.Second,
		chromedp.Navigate(batchPage),
		chromedp.WaitVisible(chromedp.CSS(`#paused-banner`)),
	)
	b.shot("paused-batch.png")
	if got := b.read("banner", chromedp.Text(chromedp.CSS(`#paused-banner`))); !strings.Contains(got, "Payments are on hold") {
		t.Errorf("batch page banner %q", got)
	}
	if got := b.read("phase", chromedp.Text(chromedp.CSS(`#phase`))); got != "paused" {
		t.Errorf("batch phase while paused: %q", got)
	}
	b.fitsWindow("batch page, paused", consoleWidth)
	b.noViolations("batch page, paused")

	// Resumed: the banner goes from both pages.
	if err := insp.UnpauseQueue(jobs.Queue); err != nil {
		t.Fatal(err)
	}
	for _, u := range []string{base + "/batches", batchPage} {
		err := testenv.Poll(context.Background(), 20*time.Second, 100*time.Millisecond, func() (bool, error) {
			return !shows(u), nil
		})
		if err != nil {
			b.shot("banner-stays.png")
			t.Fatalf("%s still shows the paused banner after the resume: %v", u, err)
		}
	}
	if got := b.read("phase", chromedp.Text(chromedp.CSS(`#phase`))); got != "working" {
		t.Errorf("batch phase after resume: %q", got)
	}
	b.pageErrors()
}

// loadAfter runs trigger and waits for the load of the page it navigates
// to.
func loadAfter(trigger chromedp.Action[chromedp.Void]) chromedp.Action[chromedp.Void] {
	return func(ctx context.Context, t *chromedp.Target) (chromedp.Void, error) {
		_, err := chromedp.WaitEvent(page.LoadEventFired, nil, trigger)(ctx, t)
		return chromedp.Void{}, err
	}
}
