package ui

import (
	"net/http"
	"strings"
	"time"

	"github.com/acme/payout/internal/lifecycle"
)

// signOutPath signs the person out (POST; a cross-site POST is refused
// by the UI's cross-origin protection).
const signOutPath = "/signout"

// ssoSignOut is where a single sign-on session ends: oauth2-proxy's
// sign-out endpoint, which clears its session and may sign out of the
// identity provider, then comes back to the UI.
const ssoSignOut = "/oauth2/sign_out?rd=%2Fbatches"

// ssoCookie starts the names of oauth2-proxy's session cookies (split
// cookies end in _0, _1...).
const ssoCookie = "_oauth2_proxy"

// signOut ends the sign-in the request came with, as far as the UI can:
// a single sign-on session's cookies are expired and the browser is sent
// to the proxy's sign-out; a basic-auth login is answered 401, which makes
// most browsers forget the password they remembered for the UI (they
// still may send it again until closed: docs/ui.md says so); a token or
// the local mode has nothing to end.
func (h *batchHandlers) signOut(w http.ResponseWriter, r *http.Request) {
	user := userFrom(r.Context())
	w.Header().Set("Cache-Control", "no-store")
	auth := r.Header.Get("Authorization")
	kind, _, _ := strings.Cut(auth, " ")
	switch {
	case strings.EqualFold(kind, "basic"):
		h.log.Info().Str("user", logUser(user)).Msg("ui: signed out (basic auth)")
		w.Header().Set("WWW-Authenticate", `Basic realm="payout"`)
		h.render(w, r, http.StatusUnauthorized, resultPage{Title: "Signed out", Message: "You are signed out: this browser was asked to forget your password for the payout console. " +
			"A browser may still remember it until all its windows are closed: on a shared computer, close the browser.", Back: "/batches", BackLabel: "Sign in again"})
		return
	case hasSSOCookie(r):
		h.log.Info().Str("user", logUser(user)).Msg("ui: signed out (single sign-on)")
		for _, c := range r.Cookies() {
			if strings.HasPrefix(c.Name, ssoCookie) {
				http.SetCookie(w, &http.Cookie{Name: c.Name, Value: "", Path: "/", MaxAge: -1, Expires: time.Unix(0, 0), Secure: r.TLS != nil, HttpOnly: true})
			}
		}
		http.Redirect(w, r, ssoSignOut, http.StatusSeeOther)
		return
	}
	h.render(w, r, http.StatusOK, resultPage{Title: "Sign out", Message: "Nothing to sign out of: this console is opened with a token or without credentials (local mode). Close the browser tab to leave it."})
}

// hasSSOCookie tells whether r carries a single sign-on session.
func hasSSOCookie(r *http.Request) bool {
	for _, c := range r.Cookies() {
		if strings.HasPrefix(c.Name, ssoCookie) {
			return true
		}
	}
	return false
}

// refreshWorking is how often a batch's page reloads while the batch
// works.
const refreshWorking = 10

// working tells whether b still has payouts the workers will move: queued,
// submitting or checking payouts of a batch let go (not awaiting approval
// nor discarded), or created ones whose outcome is followed.
func working(b BatchView) bool {
	if b.Phase == lifecycle.PhaseAwaiting || b.Phase == lifecycle.PhaseDiscarded {
		return false
	}
	if b.Awaiting > 0 {
		return true
	}
	for s, n := range b.Counts {
		if n > 0 && lifecycle.State(s).Open() {
			return true
		}
	}
	return false
}
