package ui_test

import (
	"strings"
	"testing"

	"github.com/hibiken/asynq"

	"github.com/acme/payout/internal/proof/uitest"
	"github.com/acme/payout/jobs"
)

// TestConsolePausedBanner: while the payout queue is paused, the batches
// page and the working batch's page say that payments are on hold and
// the batch reads "paused", not "working" (issue 43 defect 3); resumed,
// the banner is gone.
func TestConsolePausedBanner(t *testing.T) {
	e, d := demoEnv(t, uitest.Options{})
	insp := asynq.NewInspectorFromRedisClient(e.rdb)
	pages := []string{"/batches", "/batches/" + d.Worked}
	check := func(paused bool) {
		t.Helper()
		for _, p := range pages {
			body := e.get(p, 200)
			if got := strings.Contains(body, `id="paused-banner"`) && strings.Contains(body, "Payments are on hold") &&
				strings.Contains(body, `ph-paused" `); got != paused {
				t.Errorf("queue paused %v: %s shows the paused banner and phase: %v", paused, p, got)
			}
			if paused && strings.Contains(body, `ph-working" `) {
				t.Errorf("queue paused: %s still says working", p)
			}
		}
	}
	check(false)
	if err := insp.PauseQueue(jobs.Queue); err != nil {
		t.Fatal(err)
	}
	check(true)
	if err := insp.UnpauseQueue(jobs.Queue); err != nil {
		t.Fatal(err)
	}
	check(false)
}
