package ui_test

import (
	"html"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/acme/payout/internal/ledger"
	"github.com/acme/payout/internal/lifecycle"
	"github.com/acme/payout/internal/proof/testenv/fakeredis"
	"github.com/acme/payout/internal/proof/uitest"
	"github.com/acme/payout/internal/ui"
)

// ssoEnv is a four-eyes UI with the basic-auth logins of users and single
// sign-on from 10.0.0.5, on a clock the test moves.
func ssoEnv(t *testing.T, users *ui.Users) (*env, *time.Time) {
	t.Helper()
	rdb := fakeredis.Working(t)
	cfg := uitest.Config(t, rdb, uitest.Options{Users: users, FourEyes: true})
	cfg.ProxyUserHeader, cfg.TrustedProxies = "X-Forwarded-User", []netip.Prefix{netip.MustParsePrefix("10.0.0.5/32")}
	now := time.Now()
	ui.SetClock(&cfg, func() time.Time { return now })
	h, err := ui.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return &env{t: t, rdb: rdb, led: ledger.New(rdb), h: h}, &now
}

// sso sends r as the single sign-on proxy does for name, with the proxy's
// session cookie.
func (e *env) sso(r *http.Request, name, session string) *httptest.ResponseRecorder {
	r.Header.Set("X-Forwarded-User", name)
	r.Header.Set("Sec-Fetch-Site", "same-origin")
	if session != "" {
		r.AddCookie(&http.Cookie{Name: "_oauth2_proxy", Value: session})
	}
	r.RemoteAddr = "10.0.0.5:40000"
	w := httptest.NewRecorder()
	e.h.ServeHTTP(w, r)
	return w
}

func (e *env) ssoToken(name, session string) string {
	e.t.Helper()
	w := e.sso(httptest.NewRequest("GET", "/batches", nil), name, session)
	m := csrfRE.FindStringSubmatch(w.Body.String())
	if w.Code != 200 || m == nil {
		e.t.Fatalf("GET /batches as %q by single sign-on: %d\n%s", name, w.Code, w.Body.String())
	}
	return html.UnescapeString(m[1])
}

func (e *env) ssoPost(path, name, session string, form url.Values) *httptest.ResponseRecorder {
	r := httptest.NewRequest("POST", path, strings.NewReader(form.Encode()))
	r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	return e.sso(r, name, session)
}

// TestFourEyesOnePersonAcrossSignIns: the users file makes the basic-auth
// login alice and the single sign-on name alice@example.com one person, so
// a batch loaded by one is refused to the other; a sign-on name with a
// zero-width space is refused; bob approves.
func TestFourEyesOnePersonAcrossSignIns(t *testing.T) {
	e, _ := ssoEnv(t, ui.IdentityLogins(t))
	id := e.hold("sso.csv", threeRows, "alice@example.com")
	alice := e.as("alice", ui.AlicePass)
	_, tok := alice.page()
	if w := alice.post("/batches/"+id+"/approve", url.Values{"csrf": {tok}, "confirm": {"yes"}}); w.Code != http.StatusConflict || !strings.Contains(w.Body.String(), "four-eyes") {
		t.Fatalf("basic-auth alice approving what alice@example.com loaded: %d %s", w.Code, w.Body.String())
	}
	for _, name := range []string{"alice", "Alice@Example.com"} {
		if w := e.ssoPost("/batches/"+id+"/approve", name, "s1", url.Values{"csrf": {e.ssoToken(name, "s1")}, "confirm": {"yes"}}); w.Code != http.StatusConflict {
			t.Fatalf("single sign-on %q approving what alice@example.com loaded: %d %s", name, w.Code, w.Body.String())
		}
	}
	if w := e.sso(httptest.NewRequest("GET", "/batches", nil), "alice\u200b@example.com", "s1"); w.Code != http.StatusUnauthorized {
		t.Fatalf("a sign-on name with a zero-width space: %d, want 401", w.Code)
	}
	if ph := e.phase(id); ph != lifecycle.PhaseAwaiting {
		t.Fatalf("phase after alice's attempts: %s", ph)
	}
	bob := e.as("bob", ui.BobPass)
	_, bobTok := bob.page()
	if w := bob.post("/batches/"+id+"/approve", url.Values{"csrf": {bobTok}, "confirm": {"yes"}}); w.Code != 200 {
		t.Fatalf("bob's approval: %d %s", w.Code, w.Body.String())
	}
	if got := decisions(e.audit(id)); got != "[bob -> loaded]" {
		t.Fatalf("audit: %s", got)
	}
}

// TestCSRFTokenBoundAndExpiring: a form's token is good for the sign-in
// session it was issued to (the proxy's session cookie, or the basic-auth
// credentials) and for 8 hours.
func TestCSRFTokenBoundAndExpiring(t *testing.T) {
	e, now := ssoEnv(t, ui.NamedLogins(t))
	id := e.hold("csrf.csv", threeRows, "carol")
	discard := func(w *httptest.ResponseRecorder) int { return w.Code }
	tok := e.ssoToken("bob@example.com", "session-1")
	if c := discard(e.ssoPost("/batches/"+id+"/discard", "bob@example.com", "session-2", url.Values{"csrf": {tok}, "note": {"n"}})); c != http.StatusForbidden {
		t.Fatalf("a token of another sign-on session: %d, want 403", c)
	}
	bob := e.as("bob", ui.BobPass)
	_, bobTok := bob.page()
	*now = now.Add(8*time.Hour + time.Minute)
	if c := discard(bob.post("/batches/"+id+"/discard", url.Values{"csrf": {bobTok}, "note": {"n"}})); c != http.StatusForbidden {
		t.Fatalf("a token 8 hours old: %d, want 403", c)
	}
	if ph := e.phase(id); ph != lifecycle.PhaseAwaiting {
		t.Fatalf("refused forms changed the batch: %s", ph)
	}
	_, bobTok = bob.page()
	if w := bob.post("/batches/"+id+"/discard", url.Values{"csrf": {bobTok}, "note": {"wrong month"}}); w.Code != 200 {
		t.Fatalf("a fresh token: %d %s", w.Code, w.Body.String())
	}
}
