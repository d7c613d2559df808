package ui

import (
	"regexp"
	"strconv"
	"strings"

	"github.com/acme/payout/internal/identity"
	"github.com/acme/payout/internal/lifecycle"
)

// The console shows, beside a payout's raw reason (the PSP's text or the
// classifier's message, kept as it was recorded), a sentence in plain
// words: what happened, and what follows. This file is the one place that
// says them: plainReason reads the payout's state and the classifier's
// message (its "HTTP NNN" or transport prefix: package psp, Classify);
// actorLabel says who acted as a person reads it.

// httpPrefix finds the HTTP status a classifier message starts with.
var httpPrefix = regexp.MustCompile(`^HTTP (\d{3})\b`)

// plainReason is the sentence shown beside the raw reason of a payout in
// state; "" when there is nothing to explain (a paid payout, no reason).
func plainReason(state, reason string) string {
	r := strings.TrimSpace(reason)
	if r == "" && state != string(lifecycle.NeedsReview) && state != string(lifecycle.Checking) {
		return ""
	}
	if s := byAnswer(r); s != "" {
		return s
	}
	switch lifecycle.State(state) {
	case lifecycle.Rejected:
		return "The PSP refused this payout: it was not paid. Correct the row (destination, amount) and send it in a new file."
	case lifecycle.Failed:
		return "The PSP took the order but reports it was not paid (the PSP's reason is beside)."
	case lifecycle.NeedsReview:
		return "The system could not tell whether the PSP has this payout, and stopped trying: a person decides (recheck, mark created or mark rejected)."
	case lifecycle.Checking:
		return "The PSP's answer was unclear: status checks are finding out whether the order exists. Nothing is sent twice."
	case lifecycle.Queued:
		return "It was not sent: it is sent again."
	case lifecycle.Cancelled:
		return cancelledReason(r)
	case lifecycle.Held:
		return "Held over its recipient's velocity limit (payouts or amount a day to one card or phone): nothing is sent until a person releases or cancels it."
	}
	return ""
}

// cancelledReason words a cancel by who made it: the ledger records
// "cancelled by ACTOR: NOTE", and an actor a person gives can never be a
// system identity (identity.System), so the prefix is the system's own.
func cancelledReason(r string) string {
	by, ok := strings.CutPrefix(r, "cancelled by "+identity.SystemPrefix)
	switch {
	case ok && strings.HasPrefix(by, "approval-expiry("):
		return "Its batch's approval request expired before enough people approved it: the system stopped it before it was sent; it was not paid."
	case ok:
		return "The system stopped it before it was sent: it was not paid."
	}
	return "A person stopped it before it was sent: it was not paid."
}

// byAnswer explains a classifier message by the PSP's answer it records;
// "" when it records none known.
func byAnswer(r string) string {
	switch {
	case strings.HasPrefix(r, "TLS handshake refused"):
		return "The PSP refused the secure connection (certificate or TLS setup): nothing reached it."
	case strings.HasPrefix(r, "no answer after the request was sent"):
		return "No answer from the PSP after the request was sent (a timeout or a dropped connection): whether the order exists is checked before anything is sent again."
	case strings.HasPrefix(r, "request not sent"):
		return "The request never reached the PSP (network): it is sent again."
	}
	m := httpPrefix.FindStringSubmatch(r)
	if m == nil {
		return ""
	}
	code, _ := strconv.Atoi(m[1])
	switch {
	case code == 200:
		return "The PSP answered, but not with an order this system can use: whether the order exists is checked."
	case code == 400 || code == 422:
		return "The PSP refused the request as invalid (the destination, amount or another field): it was not paid."
	case code == 401 || code == 403:
		return "The PSP refused this system's credentials (token): nothing was created; the queue waits until an operator fixes it."
	case code == 404 && strings.Contains(r, "on create"):
		return "The PSP's address looks wrong (404 on create): nothing was created."
	case code == 404:
		return "The PSP does not know this order (yet)."
	case code == 423:
		return "The PSP said it was busy with this order (423 Locked): not an answer about the order, so it is checked again."
	case code == 429:
		return "The PSP asked to slow down (429): the request is sent again later."
	case code >= 500:
		return "The PSP had an internal error (" + m[1] + "): whether the order was created is unknown, so it is checked before anything is sent again."
	case code >= 300 && code < 400:
		return "The PSP answered with a redirect, which says nothing about the order: it is checked."
	}
	return ""
}

// hostPID matches a program's identity in the audit trail: host:pid (a
// worker, the reconciler, a load run without a person's name).
var hostPID = regexp.MustCompile(`^[^\s:]+:\d+$`)

// actorLabel is who acted as a person reads it: a person's name as it
// is, "worker" for a payout program (recorded as host:pid), the spool for
// a file dropped there.
func actorLabel(actor string) string {
	a := strings.TrimSpace(actor)
	switch {
	case a == "":
		return "-"
	case hostPID.MatchString(a):
		return "worker"
	case identity.IsSystem(a):
		kind, detail, _ := strings.Cut(a[len(identity.SystemPrefix):], "(")
		detail = strings.TrimSuffix(detail, ")")
		if kind == "spool" {
			kind = "file drop (spool)"
		}
		if detail != "" {
			return kind + ", " + detail
		}
		return kind
	}
	return a
}
