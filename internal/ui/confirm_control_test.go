package ui_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/acme/payout/internal/proof/uitest"
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

// TestReuploadSaysAlreadyLoaded: a file uploaded again after its load is
// told it is already loaded (with its batch), not to "correct it" (issue
// 43 defect 6).
func TestReuploadSaysAlreadyLoaded(t *testing.T) {
	e := newEnv(t, uitest.Options{Spool: t.TempDir()})
	_, tok := e.page()
	m := hashRE.FindStringSubmatch(e.upload(tok, "pay.csv", threeRows, nil).Body.String())
	if m == nil {
		t.Fatal("no confirm form")
	}
	if w := e.post("/batches/confirm", url.Values{"csrf": {tok}, "hash": {m[1]}, "choices_mac": {m[2]}}); w.Code != http.StatusOK {
		t.Fatalf("confirm: %d\n%s", w.Code, w.Body.String())
	}
	body := e.upload(tok, "pay-again.csv", threeRows, nil).Body.String()
	if !strings.Contains(body, `id="already"`) || !strings.Contains(body, "already loaded, as batch") || strings.Contains(body, "correct it") {
		t.Errorf("upload of a loaded file:\n%s", body)
	}
}
