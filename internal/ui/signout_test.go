package ui_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/acme/payout/internal/lifecycle"
	"github.com/acme/payout/internal/proof/uitest"
	"github.com/acme/payout/internal/ui"
)

// TestSignOut: every console page offers Sign out; with basic auth it is
// answered 401 with a challenge (the browser forgets the password) and a
// page that says what it can and cannot do; a single sign-on session's
// cookies are expired and the browser sent to the proxy's sign-out; a
// cross-site POST is refused.
func TestSignOut(t *testing.T) {
	e := newEnv(t, uitest.Options{})
	for _, page := range []string{"/batches", "/queue", "/search"} {
		if body := e.get(page, 200); !strings.Contains(body, `<form method="post" action="/signout" id="signout-form"`) {
			t.Errorf("%s offers no sign-out", page)
		}
	}
	w := e.post("/signout", nil)
	if w.Code != http.StatusUnauthorized || !strings.HasPrefix(w.Header().Get("WWW-Authenticate"), "Basic") ||
		!strings.Contains(w.Body.String(), "You are signed out") || !strings.Contains(w.Body.String(), "close the browser") {
		t.Fatalf("basic sign-out: %d %q\n%s", w.Code, w.Header().Get("WWW-Authenticate"), w.Body.String())
	}

	r := httptest.NewRequest("POST", "/signout", nil)
	r.Header.Set("Sec-Fetch-Site", "cross-site")
	r.SetBasicAuth(opUser, opPass)
	cross := httptest.NewRecorder()
	e.h.ServeHTTP(cross, r)
	if cross.Code != http.StatusForbidden {
		t.Errorf("cross-site sign-out: %d, want 403", cross.Code)
	}
}

func TestSignOutSingleSignOn(t *testing.T) {
	e, _ := ssoEnv(t, ui.IdentityLogins(t))
	w := e.sso(httptest.NewRequest("POST", "/signout", nil), "alice@example.com", "s1")
	if w.Code != http.StatusSeeOther || w.Header().Get("Location") != "/oauth2/sign_out?rd=%2Fbatches" {
		t.Fatalf("sso sign-out: %d %q", w.Code, w.Header().Get("Location"))
	}
	var expired bool
	for _, c := range w.Result().Cookies() {
		expired = expired || (strings.HasPrefix(c.Name, "_oauth2_proxy") && c.MaxAge < 0 && c.Value == "")
	}
	if !expired {
		t.Errorf("the session cookie was not expired: %v", w.Header().Values("Set-Cookie"))
	}
}

// TestBatchPageRefreshesWhileWorking: a batch's page reloads itself while
// the batch has payouts in progress, not once it is done, not while it
// awaits approval (its page has forms), and never the payout page.
func TestBatchPageRefreshesWhileWorking(t *testing.T) {
	e, d := demoEnv(t, uitest.Options{})
	const refresh = `<meta http-equiv="refresh" content="10" id="refresh">`
	if body := e.get("/batches/"+d.Worked, 200); !strings.Contains(body, refresh) {
		t.Errorf("the page of a working batch (%d queued) does not refresh", len(d.ByState[lifecycle.Queued]))
	}
	if body := e.get("/batches/"+d.Held, 200); strings.Contains(body, refresh) {
		t.Error("the page of a batch awaiting approval refreshes")
	}
	if body := e.get("/batches/"+d.Worked+"/payouts/"+d.ByState[lifecycle.Queued][0], 200); strings.Contains(body, "http-equiv=\"refresh\"") {
		t.Error("a payout's page (it has forms) refreshes")
	}
	// Once nothing is open, the page stops refreshing.
	id := e.hold("done.csv", threeRows, "bob")
	if _, err := e.led.DiscardBatch(t.Context(), id, "carol", "wrong file"); err != nil {
		t.Fatal(err)
	}
	if body := e.get("/batches/"+id, 200); strings.Contains(body, refresh) {
		t.Error("the page of a discarded batch refreshes")
	}
}
