package ui_test

import (
	"context"
	"strings"
	"testing"

	"github.com/acme/payout/internal/lifecycle"
	"github.com/acme/payout/internal/proof/uitest"
)

// TestScheduledRowsShowTheirRelease: on the batch page a scheduled row
// says when it is released ("releases 2026-12-10 00:00 UTC"); a row in
// another state says nothing of a release.
func TestScheduledRowsShowTheirRelease(t *testing.T) {
	e := newEnv(t, uitest.Options{})
	es := uitest.LoadEveryState(t, e.rdb)
	ext := es.ByState[lifecycle.Scheduled][0]
	p, err := e.led.Get(context.Background(), es.Batch, ext)
	if err != nil || p.ReleaseAt.IsZero() {
		t.Fatalf("%s: release %v, %v", ext, p.ReleaseAt, err)
	}
	want := "releases " + p.ReleaseAt.UTC().Format("2006-01-02 15:04") + " UTC"
	body := e.get("/batches/"+es.Batch+"?state=scheduled", 200)
	if n := strings.Count(body, want); n != len(es.ByState[lifecycle.Scheduled]) {
		t.Errorf("%d scheduled rows say %q, want %d", n, want, len(es.ByState[lifecycle.Scheduled]))
	}
	if body := e.get("/batches/"+es.Batch+"?state=queued", 200); strings.Contains(body, "releases ") {
		t.Error("a queued row speaks of a release")
	}
}
