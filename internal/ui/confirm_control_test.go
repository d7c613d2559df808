package ui_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/acme/payout/internal/uitest"
)

// TestConfirmShowsTypedControlTotals: the page after Confirm names the
// control totals typed with the upload, where it said "none typed"
// (issue 43 defect 6).
func TestConfirmShowsTypedControlTotals(t *testing.T) {
	e := newEnv(t, uitest.Options{Spool: t.TempDir()})
	_, tok := e.page()
	w := e.upload(tok, "pay.csv", threeRows, map[string]string{"expect_rows": "3", "expect_total": "30.51"})
	m := hashRE.FindStringSubmatch(w.Body.String())
	if w.Code != http.StatusOK || m == nil || !strings.Contains(w.Body.String(), `id="control">3 rows, total 30.51<`) {
		t.Fatalf("preview: %d\n%s", w.Code, w.Body.String())
	}
	w = e.post("/batches/confirm", url.Values{"csrf": {tok}, "hash": {m[1]}, "choices_mac": {m[2]}})
	body := w.Body.String()
	if w.Code != http.StatusOK || !strings.Contains(body, `id="control">3 rows, total 30.51<`) || strings.Contains(body, "none typed") {
		t.Errorf("confirm page: %d\n%s", w.Code, body)
	}
}
