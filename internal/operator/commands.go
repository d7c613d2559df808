package operator

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/acme/payout/internal/access"
	"github.com/acme/payout/internal/card"
	"github.com/acme/payout/internal/ledger"
	"github.com/acme/payout/internal/lifecycle"
	"github.com/acme/payout/internal/loader"
	"github.com/acme/payout/internal/queue"
	"github.com/acme/payout/internal/scrub"
	"github.com/acme/payout/jobs"
)

// This file is the one implementation of every person's command:
// approve, discard, cancel, resolve (resolve.go), pause and resume. Each
// returns a typed result whose Words say what was done, or a *Refusal
// whose Error says why nothing was; the CLI and the console print those
// words as they are.

// ApprovedBatch is what Approve did.
type ApprovedBatch struct {
	Batch  ledger.Batch
	By     string
	Handed int // payouts whose create was enqueued
	// Partly is ErrNotEnqueued when the approval stands but not every
	// create was enqueued (the reconciler enqueues the rest).
	Partly error
	// Pending: the approval is recorded, and the batch's approval rule
	// asks for more (Batch.Approvers, Batch.Needed): it still waits, and
	// nothing was enqueued.
	Pending bool
}

// Words says what an approval did.
func (r ApprovedBatch) Words() string {
	b := r.Batch
	if r.Pending {
		more := b.Needed() - len(b.Approvers)
		return fmt.Sprintf("batch %s (%s): %s; it waits for %d more (role %s, rule %s): nothing is paid before",
			b.ID, b.File, b.ApprovalProgress(), more, b.NeedRole, b.Rule)
	}
	if r.Partly != nil {
		return fmt.Sprintf("batch %s (%s) approved by %s: total %s; %s", b.ID, b.File, r.By, b.Total.StringFixed(b.Scale), LeftToReconciler)
	}
	return fmt.Sprintf("batch %s (%s) approved by %s: %d payouts, total %s, handed to the workers", b.ID, b.File, r.By, r.Handed, b.Total.StringFixed(b.Scale))
}

// Approve lets a batch awaiting approval go to the workers: the ledger
// records the approval (refusing when it is not awaiting approval or its
// request expired, under four-eyes or an approval rule to whoever loaded
// it, under a rule to a person without its role or who approved already,
// over the daily limit); the last approval the batch's rule needs moves
// it, and only then is every queued payout's create enqueued, once
// whatever the number of calls. An approval before the last returns
// Pending ("1 of 2 approvals: alice"). An approval
// recorded whose creates were not all enqueued returns its result and an
// error matching ErrNotEnqueued.
func (a *Actions) Approve(ctx context.Context, batch string, ap ledger.Approval) (ApprovedBatch, error) {
	r := ApprovedBatch{By: ap.By}
	ctx, err := a.allow(ctx, "approve", access.Approve, ap.By)
	if err != nil {
		return r, err
	}
	if ap.By == "" {
		return r, refuse("approve", ErrIncomplete, ErrMissingOperator, incompleteWords("approve"))
	}
	if _, err := scrub.Note(ap.Note); err != nil {
		return r, refuse("approve", ErrIncomplete, err, typedWords(err))
	}
	if ap.Roles == 0 {
		// the approval rule's role is checked against who acts
		ap.Roles = a.principal(ctx).Roles
	}
	b, err := a.Ledger.Controls().Approve(ctx, batch, ap)
	r.Batch = b
	if err != nil {
		return r, classify("approve", batch, "", err)
	}
	if b.Phase == lifecycle.PhaseAwaiting { // recorded; the rule asks for more
		r.Pending = true
		a.Log.Info().Str("batch", batch).Str("by", ap.By).Str("approvals", b.ApprovalProgress()).Msg("approval recorded; the batch waits for more")
		return r, nil
	}
	ld := loader.New(a.Ledger, a.Queue, nil, a.Log)
	if r.Handed, err = ld.EnqueueApproved(ctx, batch); err != nil {
		r.Partly = fmt.Errorf("%w: %w", ErrNotEnqueued, err)
		return r, r.Partly
	}
	a.Log.Info().Str("batch", batch).Str("by", ap.By).Int("payouts", r.Handed).Msg("batch approved")
	return r, nil
}

// DiscardedBatch is what Discard did.
type DiscardedBatch struct {
	Batch, By string
	ledger.Discarded
}

// Words says what a discard did.
func (r DiscardedBatch) Words() string {
	if r.Phase == lifecycle.PhaseLoading {
		return fmt.Sprintf("interrupted load of batch %s discarded by %s: %d payouts cancelled, %d externalId claims released (a corrected file with those ids can be loaded)",
			r.Batch, r.By, r.Cancelled, r.Released)
	}
	return fmt.Sprintf("batch %s discarded by %s: %d payouts cancelled", r.Batch, r.By, r.Cancelled)
}

// Discard refuses a batch awaiting approval, or abandons an interrupted
// load: every payout is cancelled (ledger.DiscardBatch).
func (a *Actions) Discard(ctx context.Context, batch, by, note string) (DiscardedBatch, error) {
	r := DiscardedBatch{Batch: batch, By: by}
	ctx, err := a.allow(ctx, "discard", access.Discard, by)
	if err != nil {
		return r, err
	}
	if err := who("discard", by, note); err != nil {
		return r, err
	}
	d, err := a.Ledger.DiscardBatch(ctx, batch, by, note)
	r.Discarded = d
	if err != nil {
		return r, classify("discard", batch, "", err)
	}
	a.Log.Info().Str("batch", batch).Str("by", by).Str("phase", d.Phase).Int("cancelled", d.Cancelled).
		Int("released", d.Released).Msg("batch discarded")
	return r, nil
}

// who refuses cmd without the person acting or a note saying why, or
// with a note that cannot be recorded as typed.
func who(cmd, by, note string) error {
	if strings.TrimSpace(by) == "" || strings.TrimSpace(note) == "" {
		return refuse(cmd, ErrIncomplete, ErrMissingOperator, incompleteWords(cmd))
	}
	if _, err := scrub.Note(note); err != nil {
		return refuse(cmd, ErrIncomplete, err, typedWords(err))
	}
	return nil
}

// CancelledPayout is what Cancel did.
type CancelledPayout struct {
	Batch, ExternalID, By, Note string
}

// Words says what a cancel did.
func (r CancelledPayout) Words() string {
	return fmt.Sprintf("payout %s cancelled by %s: %s", card.Scrub(r.ExternalID), r.By, card.Scrub(r.Note))
}

// Cancel moves payout ext of batch, queued and never sent or scheduled
// (waiting for its release time), to cancelled.
// A payout in any other state, or sent before, is refused
// (ErrWrongState): whatever may have reached the PSP is left to finish.
func (a *Actions) Cancel(ctx context.Context, batch, ext, by, note string) (CancelledPayout, error) {
	r := CancelledPayout{Batch: batch, ExternalID: ext, By: by, Note: strings.TrimSpace(note)}
	ctx, err := a.allow(ctx, "cancel", access.Cancel, by)
	if err != nil {
		return r, err
	}
	if err := who("cancel", by, note); err != nil {
		return r, err
	}
	was, err := a.Ledger.Cancel(ctx, batch, ext, by, r.Note)
	if err != nil {
		return r, classify("cancel", batch, ext, err)
	}
	if was != lifecycle.Queued && was != lifecycle.Held && was != lifecycle.Scheduled {
		return r, refuse("cancel", ErrWrongState, nil, notQueuedWords(ext, was))
	}
	a.Log.Info().Str("batch", batch).Str("externalId", ext).Str("by", by).Msg("payout cancelled by an operator")
	return r, nil
}

// Cancellable is the payouts of batch a cancel may take: those queued
// or scheduled.
func (a *Actions) Cancellable(ctx context.Context, batch string) ([]string, error) {
	var ids []string
	err := a.Ledger.EachOpen(ctx, batch, func(p ledger.OpenPayout) error {
		if p.State == lifecycle.Queued || p.State == lifecycle.Scheduled {
			ids = append(ids, p.ExternalID)
		}
		return nil
	})
	return ids, classify("cancel", batch, "", err)
}

// QueueSwitch is a pause or resume of the payout queue.
type QueueSwitch struct {
	By, Note string
	// How says through what ("payout pause", "the web UI"), for the
	// notification.
	How string
	// LedgerReconciled, on a resume, clears the ledger's rollback mark
	// (the person reconciled the ledger with the PSP; Note says how).
	LedgerReconciled bool
}

// SwitchedQueue is what Pause or Resume did.
type SwitchedQueue struct {
	Paused  bool
	Already bool   // the queue was so already: nothing done
	Cleared string // the rollback mark cleared by a resume ("" none)
	By      string
	Info    queue.Info // what waits in the queue
	// Unrecorded is the audit or notification failure after the queue
	// was switched (the switch stands).
	Unrecorded error
}

// Words says what a pause or resume did.
func (r SwitchedQueue) Words() string {
	state := map[bool]string{true: "paused", false: "resumed"}[r.Paused]
	if r.Already {
		return fmt.Sprintf("queue %s is already %s", jobs.Queue, map[bool]string{true: "paused", false: "running"}[r.Paused])
	}
	s := ""
	if r.Cleared != "" {
		s = "ledger rollback mark cleared (" + r.Cleared + "); "
	}
	return s + fmt.Sprintf("queue %s %s by %s (%d pending, %d scheduled, %d retry)", jobs.Queue, state, r.By, r.Info.Pending, r.Info.Scheduled, r.Info.Retry)
}

// Pause pauses the payout queue (no request goes to the PSP), audits and
// announces it; a queue paused already is left as it is.
func (a *Actions) Pause(ctx context.Context, s QueueSwitch) (SwitchedQueue, error) {
	return a.switchQueue(ctx, "pause", s, true)
}

// Resume resumes the payout queue, audits and announces it. While the
// ledger is marked as gone back in time it is refused (ErrRolledBack)
// unless s.LedgerReconciled, which clears the mark (audited).
func (a *Actions) Resume(ctx context.Context, s QueueSwitch) (SwitchedQueue, error) {
	return a.switchQueue(ctx, "resume", s, false)
}

// switchQueue is Pause (pause) or Resume.
func (a *Actions) switchQueue(ctx context.Context, cmd string, s QueueSwitch, pause bool) (SwitchedQueue, error) {
	r := SwitchedQueue{Paused: pause, By: s.By}
	ctx, err := a.allow(ctx, cmd, map[bool]access.Action{true: access.Pause, false: access.Resume}[pause], s.By)
	if err != nil {
		return r, err
	}
	if strings.TrimSpace(s.By) == "" {
		return r, refuse(cmd, ErrIncomplete, ErrMissingOperator, incompleteWords(cmd))
	}
	if _, err := scrub.Note(s.Note); err != nil {
		return r, refuse(cmd, ErrIncomplete, err, typedWords(err))
	}
	if !pause {
		var err error
		if r.Cleared, err = a.clearRollback(ctx, s); err != nil {
			return r, err
		}
	}
	// A queue no task was ever put in is unknown to Asynq: register it,
	// as its client's first enqueue does.
	if err := a.Queue.Register(ctx); err != nil {
		return r, err
	}
	info, err := a.Queue.Info(ctx)
	if err != nil {
		return r, err
	}
	r.Info = info
	if r.Already = info.Paused == pause; r.Already {
		return r, nil
	}
	if pause {
		err = a.Queue.Pause(ctx)
	} else {
		err = a.Queue.Resume(ctx)
	}
	if err != nil {
		return r, err
	}
	r.Unrecorded = a.QueueChanged(ctx, jobs.Queue, s.By, s.Note, s.How, pause)
	return r, nil
}

// clearRollback refuses a resume while the ledger is marked as gone back
// in time, unless reconciled: then it clears the mark and returns what
// it said.
func (a *Actions) clearRollback(ctx context.Context, s QueueSwitch) (string, error) {
	what, found, err := a.Ledger.RolledBack(ctx)
	switch {
	case err != nil || !found:
		return "", err
	case !s.LedgerReconciled:
		return "", refuse("resume", ErrRolledBack, nil, rolledBackWords(what))
	case strings.TrimSpace(s.Note) == "":
		return "", refuse("resume", ErrIncomplete, nil, reconciledNoteWords())
	}
	if _, err := a.Ledger.ClearRollback(ctx, s.By, s.Note); err != nil {
		return "", err
	}
	a.Log.Warn().Str("by", s.By).Str("found", what).Msg("ledger rollback mark cleared")
	return what, nil
}

// ResolvedPayout is what Resolve did.
type ResolvedPayout struct {
	Batch, ExternalID string
	ledger.Resolved
	// Partly is ErrNextNotEnqueued when the decision stands but its next
	// check was not enqueued (the workers' reconciler enqueues it).
	Partly error
}

// Words says what a resolution did: the proposal recorded under
// four-eyes, or the move and the check enqueued after it.
func (r ResolvedPayout) Words() string {
	p, ext := r.Payout, card.Scrub(r.ExternalID)
	if r.Proposed && p.Proposal != nil {
		return fmt.Sprintf("payout %s: %s Until then nothing changed yet.", ext, ProposalWords(p.Proposal))
	}
	msg := fmt.Sprintf("payout %s: %s -> %s by %s: %s", ext, r.From.Label(), r.To.Label(), card.Scrub(p.ResolvedBy), card.Scrub(p.ResolutionNote))
	if r.ProposedBy != "" {
		msg += " (proposed by " + card.Scrub(r.ProposedBy) + ": four-eyes)"
	}
	if r.To == lifecycle.Created {
		msg += " (PSP order " + card.Scrub(p.OrderID) + ", PSP status " + card.Scrub(p.PSPStatus) + ")"
	}
	switch {
	case r.Partly != nil:
		return msg + "; its next check is left to the workers' reconciler"
	case r.To == lifecycle.Checking:
		return msg + "; status check " + strconv.Itoa(r.Seq) + " enqueued"
	case r.Awaiting:
		return msg + "; outcome check " + strconv.Itoa(p.OutcomeSeq) + " enqueued: the workers follow the order to paid or failed"
	}
	return msg
}

// ProposalWords says a pending four-eyes proposal, as the console shows
// it on the payout and a resolution's words quote it ("" for none).
func ProposalWords(q *ledger.Proposal) string {
	if q == nil {
		return ""
	}
	what := "mark " + q.To.Label()
	if q.To == lifecycle.Created {
		what += " (PSP order " + card.Scrub(q.OrderID) + ")"
	}
	return fmt.Sprintf("%s, proposed by %s at %s: %s. Four-eyes: a second person carries it out by taking the same decision.",
		what, card.Scrub(q.By), q.At.UTC().Format("2006-01-02 15:04:05Z"), card.Scrub(q.Note))
}

// ReleasedPayout is what Release did.
type ReleasedPayout struct {
	Batch, ExternalID, By, Note string
	// Enqueued: its create was enqueued (false while its batch awaits
	// approval: the approval enqueues it).
	Enqueued bool
}

// Words says what a release did.
func (r ReleasedPayout) Words() string {
	then := "its create is enqueued"
	if !r.Enqueued {
		then = "it is sent once its batch is approved"
	}
	return fmt.Sprintf("payout %s released by %s over its recipient's velocity limit: %s; %s", card.Scrub(r.ExternalID), r.By, card.Scrub(r.Note), then)
}

// Release lets a payout held over its recipient's velocity limit go: the
// ledger counts it toward its recipient today and moves it held ->
// queued, then its create is enqueued (queue.NextStep) unless its batch
// awaits approval. A payout that is not held is refused (ErrWrongState).
func (a *Actions) Release(ctx context.Context, batch, ext, by, note string) (ReleasedPayout, error) {
	r := ReleasedPayout{Batch: batch, ExternalID: ext, By: by, Note: strings.TrimSpace(note)}
	ctx, err := a.allow(ctx, "release", access.Release, by)
	if err != nil {
		return r, err
	}
	if err := who("release", by, note); err != nil {
		return r, err
	}
	p, err := a.Ledger.Release(ctx, batch, ext, by, r.Note)
	if err != nil {
		return r, classify("release", batch, ext, err)
	}
	a.Log.Info().Str("batch", batch).Str("externalId", ext).Str("by", by).Msg("held payout released by an operator")
	b, err := a.Ledger.Batch(ctx, batch)
	if err != nil || b.Phase != lifecycle.PhaseLoaded {
		return r, nil // the approval (or the reconciler) enqueues it
	}
	if s, ok := queue.NextStep(p); ok {
		if _, err := a.Queue.Add(ctx, s); err != nil {
			return r, fmt.Errorf("released, but its create was not enqueued (the reconciler will): %w", err)
		}
		r.Enqueued = true
	}
	return r, nil
}
