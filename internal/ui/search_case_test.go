package ui_test

import (
	"net/url"
	"strings"
	"testing"

	"github.com/acme/payout/internal/lifecycle"
	"github.com/acme/payout/internal/proof/uitest"
)

// TestConsoleSearchIgnoresCase: the search finds a payout by its id in
// another case, as ids are unique ignoring case (issue 43 defect 6: "No
// batch in Redis holds a payout po-..." for a PO-... in Redis).
func TestConsoleSearchIgnoresCase(t *testing.T) {
	e, d := demoEnv(t, uitest.Options{})
	id := d.ByState[lifecycle.NeedsReview][0]
	for _, q := range []string{id, strings.ToLower(id), strings.ToUpper(id)} {
		body := e.get("/search?ext="+url.QueryEscape(q), 200)
		if !strings.Contains(body, "/payouts/"+url.PathEscape(id)) || strings.Contains(body, "No batch in Redis holds") {
			t.Errorf("search %q does not find %s", q, id)
		}
	}
	if body := e.get("/search?ext=NOPE-1", 200); !strings.Contains(body, "No batch in Redis holds a payout NOPE-1") {
		t.Errorf("search NOPE-1 finds something")
	}
}
