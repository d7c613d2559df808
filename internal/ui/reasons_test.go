package ui

import (
	"os"
	"strconv"
	"testing"
)

func TestPlainReason(t *testing.T) {
	for _, tc := range []struct {
		state, reason, want string
	}{
		{"paid", "", ""},
		{"rejected", "HTTP 422: destination card expired", "The PSP refused the request as invalid (the destination, amount or another field): it was not paid."},
		{"rejected", "card expired", "The PSP refused this payout: it was not paid. Correct the row (destination, amount) and send it in a new file."},
		{"failed", "account closed", "The PSP took the order but reports it was not paid (the PSP's reason is beside)."},
		{"checking", "HTTP 423: <html><body>Locked</body></html>", "The PSP said it was busy with this order (423 Locked): not an answer about the order, so it is checked again."},
		{"checking", "HTTP 502: bad gateway", "The PSP had an internal error (502): whether the order was created is unknown, so it is checked before anything is sent again."},
		{"needs_review", "no answer after the request was sent: timeout", "No answer from the PSP after the request was sent (a timeout or a dropped connection): whether the order exists is checked before anything is sent again."},
		{"needs_review", "gave up", "The system could not tell whether the PSP has this payout, and stopped trying: a person decides (recheck, mark created or mark rejected)."},
		{"queued", "request not sent: dial tcp: connection refused", "The request never reached the PSP (network): it is sent again."},
		{"queued", "HTTP 429: slow down", "The PSP asked to slow down (429): the request is sent again later."},
		{"queued", "HTTP 401: unauthorized", "The PSP refused this system's credentials (token): nothing was created; the queue waits until an operator fixes it."},
		{"cancelled", "cancelled by alice: wrong file", "A person stopped it before it was sent: it was not paid."},
		{"cancelled", "cancelled by system:approval-expiry(reconciler): batch discarded: approval expired after 7 days",
			"Its batch's approval request expired before enough people approved it: the system stopped it before it was sent; it was not paid."},
		{"cancelled", "cancelled by system:spool(uid 1001): x", "The system stopped it before it was sent: it was not paid."},
		{"cancelled", "cancelled by alice: cancelled by system:approval-expiry(reconciler)", "A person stopped it before it was sent: it was not paid."},
		{"queued", "HTTP 404 on create (wrong base URL?): not found", "The PSP's address looks wrong (404 on create): nothing was created."},
	} {
		if got := plainReason(tc.state, tc.reason); got != tc.want {
			t.Errorf("plainReason(%q, %q) = %q, want %q", tc.state, tc.reason, got, tc.want)
		}
	}
}

func TestActorLabel(t *testing.T) {
	host, _ := os.Hostname()
	for _, tc := range []struct{ actor, want string }{
		{"vm:25779", "worker"},
		{host + ":" + strconv.Itoa(os.Getpid()), "worker"},
		{"alice", "alice"},
		{"alice@example.com", "alice@example.com"},
		{"system:spool(uid 1001 erp-drop)", "file drop (spool), uid 1001 erp-drop"},
		{"", "-"},
	} {
		if got := actorLabel(tc.actor); got != tc.want {
			t.Errorf("actorLabel(%q) = %q, want %q", tc.actor, got, tc.want)
		}
	}
}
