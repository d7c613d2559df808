package operator

import (
	"errors"
	"fmt"
	"regexp"
	"strings"

	"github.com/acme/payout/internal/card"
	"github.com/acme/payout/internal/ledger"
	"github.com/acme/payout/internal/lifecycle"
	"github.com/acme/payout/internal/money"
)

// The kinds of refusal of a person's command. Every *Refusal matches
// ErrRefused and one of these (errors.Is), and the ledger's own error it
// stems from when there is one (ledger.ErrNotAwaiting, ledger.ErrSamePerson,
// *ledger.ConflictError, *VerifyError ...).
var (
	// ErrRefused is matched by every refusal: nothing was changed.
	ErrRefused = errors.New("operator: refused")
	// ErrNotFound: no such batch or payout in Redis (never loaded, or
	// archived since).
	ErrNotFound = errors.New("operator: no such batch or payout")
	// ErrWrongState: the batch or payout is not in a state the command
	// acts on (not awaiting approval, not needs_review, not queued, sent
	// before, a load still running).
	ErrWrongState = errors.New("operator: not in a state the command acts on")
	// ErrNeedsSecondPerson: four-eyes, this person may not take this
	// decision (they loaded the batch, or proposed the resolution).
	ErrNeedsSecondPerson = errors.New("operator: four-eyes: needs a second person")
	// ErrNotApprover: the batch's approval rule asks for approvers of a
	// role this person does not hold.
	ErrNotApprover = errors.New("operator: the approval rule asks for another role")
	// ErrOverLimit: the daily limit or the amount ceiling.
	ErrOverLimit = errors.New("operator: over a limit")
	// ErrUnconfirmed: the PSP contradicts the decision, cannot confirm it,
	// or is not configured.
	ErrUnconfirmed = errors.New("operator: the PSP did not confirm the decision")
	// ErrIncomplete: who acts, why, or what (an order id) is missing or
	// cannot be recorded as typed.
	ErrIncomplete = errors.New("operator: incomplete command")
	// ErrRolledBack: the ledger went back in time and is not reconciled.
	ErrRolledBack = errors.New("operator: the ledger went back in time")
	// ErrForbidden: the person does not hold the role the command needs
	// (internal/access), or acts under another name than they signed in
	// with. The console answers it 403.
	ErrForbidden = errors.New("operator: the person does not hold the role the command needs")
)

// Refusal is a person's command refused: nothing changed. Its Error is
// the sentence people read, the same in the CLI and the console.
type Refusal struct {
	Command string // approve, discard, cancel, resolve, pause, resume
	Kind    error  // ErrNotFound, ErrWrongState, ...
	Cause   error  // the ledger's error, or nil
	words   string
}

func (r *Refusal) Error() string { return r.words }

// Unwrap makes errors.Is and errors.As see the kind and the cause.
func (r *Refusal) Unwrap() []error {
	if r.Cause == nil {
		return []error{r.Kind}
	}
	return []error{r.Kind, r.Cause}
}

// Is makes every refusal match ErrRefused.
func (r *Refusal) Is(target error) bool { return target == ErrRefused }

// refuse is the refusal of command cmd of kind, worded "not VERBed: why".
func refuse(cmd string, kind, cause error, why string) *Refusal {
	return &Refusal{Command: cmd, Kind: kind, Cause: cause, words: notDone(cmd) + ": " + why}
}

// notDone is how a refusal of cmd begins.
func notDone(cmd string) string {
	switch cmd {
	case "approve", "discard", "resolve", "pause", "resume":
		return "not " + strings.TrimSuffix(cmd, "e") + "ed"
	case "cancel":
		return "not cancelled"
	case "redeliver":
		return "not redelivered"
	case "load":
		return "not loaded"
	case "release":
		return "not released"
	case "status", "history", "report", "review":
		return "not shown"
	case "reconcile":
		return "not reconciled"
	case "archive":
		return "not archived"
	case "token":
		return "no token managed"
	}
	return "not done"
}

// classify turns the ledger's refusal err of cmd on batch (and payout
// ext, "" for a batch) into a *Refusal; a fault is returned as it is.
func classify(cmd, batch, ext string, err error) error {
	var (
		conflict *ledger.ConflictError
		verify   *VerifyError
	)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, ErrRefused):
		return err
	case errors.Is(err, ledger.ErrNotFound):
		return refuse(cmd, ErrNotFound, err, notFoundWords(batch, ext))
	case errors.As(err, &conflict):
		return refuse(cmd, ErrWrongState, err, notReviewWords(ext, conflict.Found))
	case errors.Is(err, ledger.ErrNotAwaiting), errors.Is(err, ledger.ErrLoadRunning), errors.Is(err, ledger.ErrEverSent), errors.Is(err, ledger.ErrNotHeld),
		errors.Is(err, ledger.ErrExpired):
		return refuse(cmd, ErrWrongState, err, plain(err))
	case errors.Is(err, ledger.ErrApproverRole):
		return refuse(cmd, ErrNotApprover, err, plain(err))
	case errors.Is(err, ledger.ErrFourEyes), errors.Is(err, ledger.ErrAlreadyApproved):
		return refuse(cmd, ErrNeedsSecondPerson, err, plain(err))
	case errors.Is(err, ledger.ErrDailyLimit), errors.Is(err, money.ErrCeiling):
		return refuse(cmd, ErrOverLimit, err, plain(err))
	case errors.As(err, &verify), errors.Is(err, ErrNoPSP):
		return refuse(cmd, ErrUnconfirmed, err, plain(err))
	case errors.Is(err, ledger.ErrBadResolution), errors.Is(err, ErrMissingOperator):
		return refuse(cmd, ErrIncomplete, err, incompleteWords(cmd))
	}
	return err
}

// notFoundWords: no such batch, or no such payout in it.
func notFoundWords(batch, ext string) string {
	if ext == "" {
		return fmt.Sprintf("there is no batch %s (never loaded, or archived)", batch)
	}
	return fmt.Sprintf("batch %s has no payout %s", batch, card.Scrub(ext))
}

// notReviewWords: a resolution of a payout that does not need review.
func notReviewWords(ext string, found lifecycle.State) string {
	return fmt.Sprintf("payout %s is %s, not needs review: only a payout that needs review can be resolved", card.Scrub(ext), found.Label())
}

// notQueuedWords: a cancel of a payout that is no longer queued.
func notQueuedWords(ext string, was lifecycle.State) string {
	s := fmt.Sprintf("payout %s is %s, not queued: only a payout not sent yet can be cancelled", card.Scrub(ext), was.Label())
	if was == lifecycle.Submitting || was == lifecycle.Checking {
		s += " (a request may have reached the PSP; it is left to finish)"
	}
	return s
}

// incompleteWords: who acts, or why, is missing.
func incompleteWords(cmd string) string {
	if cmd == "approve" || cmd == "pause" || cmd == "resume" || cmd == "redeliver" {
		return "every operator action records who took it"
	}
	return "every operator action records who took it and, for a " + cmd + ", a note saying why"
}

// typedWords: what was typed cannot be recorded as it is.
func typedWords(err error) string { return plain(err) }

// missingOrderWords: marking created without the PSP's order id.
func missingOrderWords() string { return "marking a payout created needs the PSP's order id" }

// unknownDecisionWords: a decision that is none of recheck, created,
// rejected.
func unknownDecisionWords(d string) string {
	return fmt.Sprintf("unknown decision %q: recheck, created or rejected", d)
}

// rolledBackWords: a resume while the ledger went back in time.
func rolledBackWords(what string) string {
	return fmt.Sprintf("the ledger went back in time (%s): workers create nothing until it is reconciled with the PSP. "+
		"Reconcile it (docs/operations.md, \"Alert: PayoutLedgerRolledBack\"), then resume with the ledger marked reconciled "+
		"(payout resume --ledger-reconciled --note WHY)", what)
}

// reconciledNoteWords: --ledger-reconciled without saying how.
func reconciledNoteWords() string {
	return "clearing the ledger's rollback mark needs a note: how the ledger was reconciled (recorded in the audit trail)"
}

// internalPrefix matches the package prefixes of Go error messages
// ("ledger: ", "operator: "...), which mean nothing to the person reading.
var internalPrefix = regexp.MustCompile(`(^|[\s(])(?:ledger|operator|money|scrub|psp): `)

// plain is err's message as a person reads it: without the internal
// prefixes, card-like numbers masked.
func plain(err error) string {
	s := err.Error()
	for {
		t := internalPrefix.ReplaceAllString(s, "$1")
		if t == s {
			return card.Scrub(s)
		}
		s = t
	}
}
