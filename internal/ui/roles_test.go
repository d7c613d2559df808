package ui_test

import (
	"html"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"github.com/acme/payout/internal/access"
	"github.com/acme/payout/internal/ledger"
	"github.com/acme/payout/internal/lifecycle"
	"github.com/acme/payout/internal/proof/testenv/fakeredis"
	"github.com/acme/payout/internal/proof/uitest"
	"github.com/acme/payout/internal/ui"
)

// roles parses a roles file.
func roles(t *testing.T, text string) *access.Map {
	t.Helper()
	m, err := access.Parse("roles", strings.NewReader(text))
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// TestRolesInTheConsole: a viewer (bob) is offered no form and is
// refused a forged one with 403 and the role it needs; a maker (alice)
// uploads but is offered no approval, and a forged approval is refused
// alike; nothing changes.
func TestRolesInTheConsole(t *testing.T) {
	rdb := fakeredis.Working(t)
	spool := t.TempDir()
	h, err := ui.New(uitest.Config(t, rdb, uitest.Options{Users: ui.NamedLogins(t), Spool: spool, ApprovalRequired: true,
		Roles: roles(t, "person alice: maker\nperson bob: viewer\n")}))
	if err != nil {
		t.Fatal(err)
	}
	one := &env{t: t, rdb: rdb, led: ledger.New(rdb), h: h}
	alice, bob := one.as("alice", ui.AlicePass), one.as("bob", ui.BobPass)
	id := one.hold("held.csv", threeRows, "carol")

	body, bobTok := bob.page()
	for _, form := range []string{`id="upload"`, `/approve"`, `class="discard"`} {
		if strings.Contains(body, form) {
			t.Errorf("the viewer is offered %s", form)
		}
	}
	for _, why := range []string{"Upload is not offered: uploading or loading a file needs the maker role; you hold viewer",
		"approving needs the approver role; you hold viewer", "Discard is not offered: discarding needs the approver role; you hold viewer"} {
		if !strings.Contains(body, why) {
			t.Errorf("the viewer's page does not say %q", why)
		}
	}
	for _, path := range []string{"/batches/" + id + "/approve", "/batches/" + id + "/discard"} {
		w := bob.post(path, url.Values{"csrf": {bobTok}, "note": {"forged"}, "confirm": {"yes"}})
		if w.Code != http.StatusForbidden || !strings.Contains(w.Body.String(), "needs the approver role; bob holds viewer") {
			t.Errorf("the viewer's forged %s: %d %s", path, w.Code, w.Body.String())
		}
	}
	if w := bob.upload(bobTok, "forged.csv", threeRows, nil); w.Code != http.StatusForbidden || !strings.Contains(w.Body.String(), "needs the maker role") {
		t.Errorf("the viewer's forged upload: %d %s", w.Code, w.Body.String())
	}
	if len(staged(t, spool)) != 0 {
		t.Errorf("the viewer's upload was staged: %v", staged(t, spool))
	}

	body, aliceTok := alice.page()
	if !strings.Contains(body, `id="upload"`) || strings.Contains(body, `/approve"`) || !strings.Contains(body, "approving needs the approver role; you hold viewer,maker") {
		t.Errorf("the maker's page: upload offered %v, approval offered %v", strings.Contains(body, `id="upload"`), strings.Contains(body, `/approve"`))
	}
	w := alice.upload(aliceTok, "mine.csv", strings.ReplaceAll(threeRows, "UI-", "MINE-"), nil)
	m := hashRE.FindStringSubmatch(w.Body.String())
	if w.Code != 200 || m == nil {
		t.Fatalf("the maker's upload: %d\n%s", w.Code, w.Body.String())
	}
	if w := alice.post("/batches/confirm", url.Values{"csrf": {aliceTok}, "hash": {m[1]}, "choices_mac": {m[2]}}); w.Code != 200 || !strings.Contains(w.Body.String(), "It awaits approval") {
		t.Fatalf("the maker's confirm: %d\n%s", w.Code, w.Body.String())
	}
	w = alice.post("/batches/"+id+"/approve", url.Values{"csrf": {aliceTok}, "confirm": {"yes"}})
	if w.Code != http.StatusForbidden || !strings.Contains(w.Body.String(), "approving needs the approver role; alice holds viewer,maker") {
		t.Errorf("the maker's forged approval: %d %s", w.Code, w.Body.String())
	}
	if one.phase(id) != lifecycle.PhaseAwaiting {
		t.Fatalf("batch %s is %s after refusals", id, one.phase(id))
	}
}

// TestSSOGroupsMapToRoles: through oauth2-proxy's header convention (a
// trusted proxy sending X-Forwarded-User and X-Forwarded-Groups), the
// groups give the roles of the roles file's group lines; the groups
// header of anyone else is not believed; the audit records the person
// and the role they approved in. The --set-xauthrequest header names
// work alike when configured.
func TestSSOGroupsMapToRoles(t *testing.T) {
	for _, hdr := range []struct{ user, groups string }{
		{"X-Forwarded-User", ""}, // the default groups header, X-Forwarded-Groups
		{"X-Auth-Request-User", "X-Auth-Request-Groups"},
	} {
		t.Run(hdr.user, func(t *testing.T) {
			rdb := fakeredis.Working(t)
			cfg := uitest.Config(t, rdb, uitest.Options{Roles: roles(t, "group finance-approvers: approver\ndefault: viewer\n")})
			cfg.ProxyUserHeader, cfg.ProxyGroupsHeader = hdr.user, hdr.groups
			cfg.TrustedProxies = []netip.Prefix{netip.MustParsePrefix("10.0.0.5/32")}
			h, err := ui.New(cfg)
			if err != nil {
				t.Fatal(err)
			}
			e := &env{t: t, rdb: rdb, led: ledger.New(rdb), h: h}
			id := e.hold("held.csv", threeRows, "bob")
			groupsHeader := hdr.groups
			if groupsHeader == "" {
				groupsHeader = ui.DefaultGroupsHeader
			}
			send := func(from, user, groups string, r *http.Request) *httptest.ResponseRecorder {
				r.RemoteAddr = from + ":5000"
				r.Header.Set(hdr.user, user)
				if groups != "" {
					r.Header.Set(groupsHeader, groups)
				}
				r.Header.Set("Sec-Fetch-Site", "same-origin")
				w := httptest.NewRecorder()
				h.ServeHTTP(w, r)
				return w
			}
			// page is the batch's page and the form token of its forms
			// ("" when it offers none).
			page := func(user, groups string) (string, string) {
				w := send("10.0.0.5", user, groups, httptest.NewRequest("GET", "/batches/"+id, nil))
				if w.Code != 200 {
					t.Fatalf("%s's batch page: %d %s", user, w.Code, w.Body.String())
				}
				if m := csrfRE.FindStringSubmatch(w.Body.String()); m != nil {
					return w.Body.String(), html.UnescapeString(m[1])
				}
				return w.Body.String(), ""
			}
			approve := func(from, user, groups, tok string) *httptest.ResponseRecorder {
				r := httptest.NewRequest("POST", "/batches/"+id+"/approve", strings.NewReader(url.Values{"csrf": {tok}, "confirm": {"yes"}}.Encode()))
				r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
				return send(from, user, groups, r)
			}

			body, tok := page("dave", "")
			if strings.Contains(body, "approve-review-link") || !strings.Contains(body, "approving needs the approver role; you hold viewer") {
				t.Errorf("dave, in no group, is offered the approval or not told why")
			}
			if w := approve("10.0.0.5", "dave", "", tok); w.Code != http.StatusForbidden {
				t.Errorf("dave's approval: %d %s", w.Code, w.Body.String())
			}
			// The groups header of a client that is not the proxy is not
			// believed, nor is its user header.
			if w := approve("192.0.2.9", "carol", "finance-approvers", tok); w.Code != http.StatusUnauthorized {
				t.Errorf("a client's own sign-on headers: %d %s", w.Code, w.Body.String())
			}
			body, tok = page("carol", "staff, finance-approvers")
			if !strings.Contains(body, "approve-review-link") || !strings.Contains(body, "(viewer,approver)") {
				t.Fatalf("carol, in finance-approvers, is not offered the approval:\n%s", body)
			}
			if w := approve("10.0.0.5", "carol", "staff, finance-approvers", tok); w.Code != 200 || !strings.Contains(w.Body.String(), "approved by carol") {
				t.Fatalf("carol's approval: %d %s", w.Code, w.Body.String())
			}
			var got []string
			for _, a := range e.audit(id) {
				if a.From == lifecycle.PhaseAwaiting {
					got = append(got, a.Actor+" as "+a.Role+" -> "+a.To)
				}
			}
			if strings.Join(got, ";") != "carol as approver -> loaded" {
				t.Errorf("audit of the approval: %q", got)
			}
			w := send("10.0.0.5", "dave", "", httptest.NewRequest("GET", "/batches/"+id+"/download/audit.csv", nil))
			if w.Code != 200 || !strings.Contains(w.Body.String(), ",details,role\n") || !regexp.MustCompile(`(?m)^[^\n]*,carol,,awaiting_approval,loaded,[^\n]*,approver$`).MatchString(strings.ReplaceAll(w.Body.String(), "\r", "")) {
				t.Errorf("the audit download by a viewer: %d\n%s", w.Code, w.Body.String())
			}
		})
	}
}

// TestNoRoleNoConsole: a person the roles file gives no role (no default
// line) may not even read: 403 saying so.
func TestNoRoleNoConsole(t *testing.T) {
	rdb := fakeredis.Working(t)
	h, err := ui.New(uitest.Config(t, rdb, uitest.Options{Users: ui.NamedLogins(t), Roles: roles(t, "person alice: viewer\n")}))
	if err != nil {
		t.Fatal(err)
	}
	e := &env{t: t, rdb: rdb, led: ledger.New(rdb), h: h}
	if w := e.as("bob", ui.BobPass).do(httptest.NewRequest("GET", "/batches", nil)); w.Code != http.StatusForbidden || !strings.Contains(w.Body.String(), "reading needs the viewer role; bob holds none") {
		t.Errorf("bob without a role: %d %s", w.Code, w.Body.String())
	}
	if w := e.as("alice", ui.AlicePass).do(httptest.NewRequest("GET", "/batches", nil)); w.Code != 200 {
		t.Errorf("alice, a viewer: %d", w.Code)
	}
	if w := e.as("alice", ui.AlicePass).do(httptest.NewRequest("POST", "/monitoring/api/queues/default:pause", nil)); w.Code != http.StatusForbidden || !strings.Contains(w.Body.String(), "needs the operator role") {
		t.Errorf("a viewer pausing a queue in asynqmon: %d %s", w.Code, w.Body.String())
	}
}
