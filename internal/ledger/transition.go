package ledger

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// BeginAction is what a create task must do, as decided by BeginCreate.
type BeginAction string

// The answers of BeginCreate.
const (
	Proceed      BeginAction = "proceed" // the payout is now submitting: send the create
	CheckNow     BeginAction = "check"   // a create of this attempt may have been sent: moved to checking, enqueue status check Seq
	EnsureStatus BeginAction = "ensure"  // already checking: make sure status check Seq is enqueued
	Skip         BeginAction = "skip"    // final, or the task is stale: nothing to do
	// Hold: the payout is queued but its batch is not loaded (a load not
	// completed, awaiting approval, discarded): nothing changed, nothing
	// may be sent; Begin.Phase says the batch's phase.
	Hold BeginAction = "hold"
	// Foreign: the payout is queued, its batch loaded, but its card
	// number is sealed with a data key this ledger's worker does not hold
	// (OpeningKeys): nothing changed, nothing may be sent; Begin.KeyID
	// names the key.
	Foreign BeginAction = "foreign"
)

// replyNoPayout is every transition script's answer for a payout that
// does not exist: ErrNotFound. It is not an answer of the PSP (a status
// query's 404 is the CheckOutcome Missing).
const replyNoPayout = "nopayout"

// interruptedNote is the error BeginCreate keeps on a payout whose
// earlier create delivery died before recording its answer.
const interruptedNote = "create interrupted before its answer was recorded; checking status"

// Begin is BeginCreate's decision and the payout as it stands after it.
type Begin struct {
	Action BeginAction
	Seq    int
	Phase  string // with Hold: the batch's phase ("" when it has no metadata)
	// Epoch, with Proceed, is the batch's create epoch this mark took:
	// higher than every value this batch answered before, unless the
	// ledger went back in time (0 with the other decisions).
	Epoch int64
	KeyID string // with Foreign: the key id the card number is sealed with
	// Payout holds the fields a create task uses: Batch, ExternalID,
	// State, Creates, Seq, Amount, Destination, Sealed, Telecom, Extra,
	// Tries.
	Payout Payout
}

// beginKeys are the keys of beginCreateScript.
func beginKeys(batch, ext string) []string {
	return []string{payoutKey(batch, ext), countsKey(batch), auditKey(batch), metaKey(batch)}
}

// notFound is the error of a transition on a payout that does not exist.
func notFound(batch, ext string) error {
	return fmt.Errorf("payout %s of batch %s: %w", ext, batch, ErrNotFound)
}

// replyOf reads a transition script's reply: an array of strings whose
// first element is the decision, at least n elements unless the payout
// does not exist.
func replyOf(cmd *redis.Cmd, batch, ext, what string, n int) ([]string, error) {
	res, err := cmd.StringSlice()
	if err != nil {
		return nil, fmt.Errorf("ledger: %s of %s: %w", what, ext, err)
	}
	if len(res) > 0 && res[0] == replyNoPayout {
		return nil, notFound(batch, ext)
	}
	if len(res) < n {
		return nil, fmt.Errorf("ledger: %s of %s: reply %q has %d elements, want %d", what, ext, res, len(res), n)
	}
	return res, nil
}

// replyInts parses the decimal elements of a reply at the indexes idx.
func replyInts(res []string, what string, idx ...int) ([]int, error) {
	out := make([]int, len(idx))
	for i, j := range idx {
		n, err := strconv.Atoi(res[j])
		if err != nil {
			return nil, fmt.Errorf("ledger: %s: element %d of reply %q: %w", what, j, res, err)
		}
		out[i] = n
	}
	return out, nil
}

// parseBegin reads beginCreateScript's reply: {action, seq, phase, state,
// creates, seq field, amount, dest, sealed, tel, extra, tries, epoch}.
func parseBegin(batch, ext string, cmd *redis.Cmd) (Begin, error) {
	res, err := replyOf(cmd, batch, ext, "begin create", 13)
	if err != nil {
		return Begin{}, err
	}
	n, err := replyInts(res, "begin create of "+ext, 1, 4, 5, 11, 12)
	if err != nil {
		return Begin{}, err
	}
	b := Begin{Action: BeginAction(res[0]), Seq: n[0], Phase: res[2], Epoch: int64(n[4]), Payout: Payout{
		Batch: batch, ExternalID: ext, State: State(res[3]), Creates: n[1], Seq: n[2], Tries: n[3],
		Amount: res[6], Destination: res[7], Sealed: unpackSealed(res[8]), Telecom: res[9], Extra: res[10],
	}}
	if b.Action == Foreign {
		b.KeyID, b.Phase = b.Phase, ""
	}
	return b, nil
}

// OpeningKeys returns a copy of l whose BeginCreate holds back a payout
// whose card number is sealed with a data key whose id is not in ids
// (vault.Keyring.KeyIDs; "plain" for unencrypted values): the decision
// Foreign, nothing changed. A worker that cannot open a card number thus
// leaves the payout as it was, never marked submitting. Malformed sealed
// values are not held back: they fail to open, a problem of that payout.
func (l *Ledger) OpeningKeys(ids []string) *Ledger {
	c := *l
	c.keys = ""
	if len(ids) > 0 {
		c.keys = "|" + strings.Join(ids, "|") + "|"
	}
	return &c
}

// BeginCreate moves a payout from queued to submitting for create attempt
// attempt, BEFORE the request is sent. A payout found in submitting with the
// same attempt is moved to checking instead: that request may have reached
// the PSP, so it must never be sent again. A queued payout of a batch that
// is not loaded is held (Hold): no create before the whole batch is
// registered (and approved, where approval applies).
func (l *Ledger) BeginCreate(ctx context.Context, batch, ext string, attempt int) (Begin, error) {
	return parseBegin(batch, ext, l.transitionKeys(ctx, beginCreateScript, beginKeys(batch, ext), attempt, interruptedNote, l.keys))
}

// CreateResult is the classified answer of a create request.
type CreateResult struct {
	To        State // created, rejected, checking, queued (not sent) or needs_review
	OrderID   string
	PSPStatus string
	Error     string
	// MaxTries, with To queued, counts this as a try that provably did not
	// reach the PSP; past MaxTries such tries the payout goes to
	// needs_review instead, with TriesNote as its error. 0: not counted
	// (paused queue, breaker).
	MaxTries int
	// Tries, with MaxTries, is the payout's count of such tries as
	// BeginCreate read it (Begin.Payout.Tries); the write checks it.
	Tries int
	// OutcomeWindow, with To created, makes the payout await its outcome
	// (paid or failed) for that long; 0: created is final.
	OutcomeWindow time.Duration
	HTTPStatus    int // of the answer, for the audit trail (0: none)
}

// TriesNote is the error of a payout whose budget of maxTries tries that
// provably did not reach the PSP is used up (the last one answered msg).
func TriesNote(maxTries int, msg string) string {
	return fmt.Sprintf("PSP did not take the request after %d tries (nothing was sent): %s", maxTries+1, msg)
}

// Finished is what FinishCreate did.
type Finished struct {
	State State // the payout's new state
	Seq   int   // the status check to enqueue, when State is checking
	// Awaiting: State is created and the payout awaits its outcome:
	// outcome check 1 is due.
	Awaiting bool
	Error    string // the error recorded with the state
}

// FinishCreate records the answer to create attempt attempt. A
// *ConflictError means another delivery of the task already decided.
func (l *Ledger) FinishCreate(ctx context.Context, batch, ext string, attempt int, r CreateResult) (Finished, error) {
	to, note, tries := decideFinish(r)
	res, err := replyOf(l.transition(ctx, finishCreateScript, batch, ext,
		attempt, string(to), r.OutcomeWindow.Milliseconds(), r.OrderID, r.PSPStatus, note, tries, r.Tries, r.HTTPStatus),
		batch, ext, "finish create", 2)
	if err != nil {
		return Finished{}, err
	}
	if res[0] != "ok" {
		return Finished{}, &ConflictError{ExternalID: ext, Found: State(res[1])}
	}
	if len(res) < 4 {
		return Finished{}, fmt.Errorf("ledger: finish create of %s: reply %q has %d elements, want 4", ext, res, len(res))
	}
	n, err := replyInts(res, "finish create of "+ext, 1)
	if err != nil {
		return Finished{}, err
	}
	return Finished{State: State(res[2]), Seq: n[0], Awaiting: res[3] == "1", Error: note}, nil
}

// CheckOutcome is what a status query told.
type CheckOutcome string

// Status query outcomes.
const (
	Found    CheckOutcome = "found"    // the PSP has the order
	Missing  CheckOutcome = "missing"  // the PSP answered 404 (not: no such payout, which is ErrNotFound)
	NoAnswer CheckOutcome = "noanswer" // a fault: nothing learned
)

// CheckPolicy bounds the resolution of an ambiguous create.
type CheckPolicy struct {
	AbsentChecks  int           // K: consecutive 404s that confirm absence
	AbsentSpacing time.Duration // D: minimum time between counted 404s
	MaxCreates    int           // M: creates in all, the first included
	MaxFaults     int           // N: status checks without an answer before needs_review
	// OutcomeWindow: a payout found created awaits its outcome for that
	// long (0: created is final).
	OutcomeWindow time.Duration
	// FaultDelay and FaultDelayMax space the checks after a check without
	// an answer: FaultDelay doubling per fault, at most FaultDelayMax
	// (defaults 1s and 5m), on Redis's clock.
	FaultDelay    time.Duration
	FaultDelayMax time.Duration
}

// faultDelays returns FaultDelay and FaultDelayMax with their defaults.
func (p CheckPolicy) faultDelays() (base, max time.Duration) {
	base, max = p.FaultDelay, p.FaultDelayMax
	if base <= 0 {
		base = time.Second
	}
	if max < base {
		max = 5 * time.Minute
	}
	return base, max
}

// The errors RecordCheck keeps when a status check ends the checking:
// absence confirmed with creates left, absence confirmed after the last
// create, too many checks without an answer (the last one's message).
func (p CheckPolicy) recreateNote() string {
	return fmt.Sprintf("PSP confirmed it has no order after %d status checks; creating again", p.AbsentChecks)
}

func (p CheckPolicy) absentNote() string {
	return fmt.Sprintf("PSP has no order after %d creates; a person must decide", p.MaxCreates)
}

func (p CheckPolicy) faultNote(msg string) string {
	return fmt.Sprintf("status unknown after %d status checks without an answer: %s", p.MaxFaults, msg)
}

// CheckAction is what follows a recorded status check.
type CheckAction string

// The answers of RecordCheck.
const (
	CheckDone     CheckAction = "done"     // created
	CheckAgain    CheckAction = "again"    // enqueue status check Seq after Wait (misses) or a backoff for Faults
	CheckRecreate CheckAction = "recreate" // absence confirmed: enqueue create Attempt
	CheckReview   CheckAction = "review"   // needs_review
	CheckEarly    CheckAction = "early"    // check Seq is not due yet (Wait): nothing recorded
	CheckStale    CheckAction = "stale"    // another check (Seq) is current: ensure it is enqueued
	CheckSkip     CheckAction = "skip"     // the payout is not checking any more
)

// CheckStep is RecordCheck's decision.
type CheckStep struct {
	Action   CheckAction
	Seq      int
	Attempt  int
	Wait     time.Duration // again, early: until the check is due (Redis time)
	Faults   int
	Awaiting bool   // done: the payout awaits its outcome (outcome check 1 is due)
	Error    string // recreate, review: the error recorded with the new state
}

// CheckAnswer is the result of a status query.
type CheckAnswer struct {
	Outcome    CheckOutcome
	OrderID    string
	PSPStatus  string
	Message    string
	HTTPStatus int // for the audit trail (0: no answer)
}

// RecordCheck records the answer a to status check seq of the payout read
// as s (Snapshot, before the PSP was asked), as decideCheck decides under
// policy p, in one round trip: the write checks that the payout is still
// as read. A payout that moved meanwhile gets CheckSkip or CheckStale, as if
// read afterwards; one that changed otherwise under the same check is an
// ErrConflict (the task runs again and reads it afresh).
func (l *Ledger) RecordCheck(ctx context.Context, s Snapshot, seq int, a CheckAnswer, p CheckPolicy) (CheckStep, error) {
	d := decideCheck(s, seq, a, p)
	if !d.write {
		return d.step, nil
	}
	batch, ext := s.Batch, s.ExternalID
	head := []string{string(d.step.Action), "0", "0", "0"}
	switch d.step.Action {
	case CheckDone:
		head[1] = boolField(d.step.Awaiting)
	case CheckAgain:
		head[1], head[2], head[3] = strconv.Itoa(d.step.Seq), strconv.Itoa(d.step.Faults), strconv.FormatInt(d.step.Wait.Milliseconds(), 10)
	case CheckRecreate:
		head[1] = strconv.Itoa(d.step.Attempt)
	}
	res, err := replyOf(l.transition(ctx, applyCheckScript, batch, ext,
		s.Seq, s.Misses, unixMilli(s.LastMiss), s.Faults, s.Creates, unixMilli(s.CheckDue),
		string(d.to), d.errText, boolField(d.keepError), d.misses, boolField(d.countMiss), d.faults, d.step.Wait.Milliseconds(),
		p.OutcomeWindow.Milliseconds(), a.OrderID, a.PSPStatus, a.HTTPStatus, a.Message,
		head[0], head[1], head[2], head[3]),
		batch, ext, "record status check", 4)
	if err != nil {
		return CheckStep{}, err
	}
	now, err := readApplied(res, head, "record status check of "+ext)
	switch {
	case err != nil:
		return CheckStep{}, err
	case now == nil:
		return d.step, nil
	}
	// As if read after the other write: skip or stale, else a conflict.
	if step, ask := (Snapshot{Payout: Payout{State: now.state, Seq: now.seq}}).PreCheck(seq); !ask {
		return step, nil
	}
	return CheckStep{}, fmt.Errorf("ledger: status check %d of %s changed while the PSP was asked: %w", seq, ext,
		&ConflictError{ExternalID: ext, Found: Checking})
}

// unapplied is the payout as an apply script found it when it was not as
// the decision read it (nothing written): its state, the check sequence
// it awaits, and (outcome checks) whether it awaits its outcome.
type unapplied struct {
	state   State
	seq     int
	tracked bool
}

// readApplied reads the reply of an apply script (applyCheckScript,
// applyOutcomeScript): nil when it wrote the decision head (which it
// returns), else the payout as it stands: {'changed', state, seq, track}.
func readApplied(res, head []string, what string) (*unapplied, error) {
	if res[0] != "changed" {
		if len(res) < len(head) || !slices.Equal(res[:len(head)], head) {
			return nil, fmt.Errorf("ledger: %s: reply %q, decided %q", what, res, head)
		}
		return nil, nil
	}
	if len(res) < 4 {
		return nil, fmt.Errorf("ledger: %s: reply %q has %d elements, want 4", what, res, len(res))
	}
	n, err := replyInts(res, what, 2)
	if err != nil {
		return nil, err
	}
	return &unapplied{state: State(res[1]), seq: n[0], tracked: res[3] == "1"}, nil
}

// unixMilli is t in Unix milliseconds, 0 for the zero time (as the
// scripts store "none").
func unixMilli(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixMilli()
}

// Verdict is what a status answer says of a created order's outcome.
type Verdict string

// The verdicts of an outcome check.
const (
	VerdictPaid     Verdict = "paid"     // the PSP reports the money sent
	VerdictFailed   Verdict = "failed"   // the PSP reports it will not be paid
	VerdictPending  Verdict = "pending"  // any other status: not final yet
	VerdictNoAnswer Verdict = "noanswer" // a fault: nothing learned
)

// OutcomeAction is what follows a recorded outcome check.
type OutcomeAction string

// The answers of RecordOutcome.
const (
	OutcomeDone   OutcomeAction = "done"   // paid or failed (Step.State)
	OutcomeAgain  OutcomeAction = "again"  // enqueue outcome check Seq; Polls checks so far
	OutcomeReview OutcomeAction = "review" // window over: needs_review
	OutcomeStale  OutcomeAction = "stale"  // another check (Seq) is current: ensure it
	OutcomeSkip   OutcomeAction = "skip"   // the payout does not await an outcome (State)
)

// OutcomeStep is RecordOutcome's decision.
type OutcomeStep struct {
	Action OutcomeAction
	State  State
	Seq    int
	Polls  int
	Error  string // review: the error recorded with needs_review
}

// outcomeReviewNote is the error of a payout whose outcome window ended
// without a final status; last is the PSP's last status word, if known.
func outcomeReviewNote(last string) string {
	if last == "" {
		last = "(none)"
	}
	return "no final status from the PSP within the outcome window; last status " + last +
		"; ask the PSP whether the money was sent"
}

// RecordOutcome records the answer a to outcome check oseq of the payout
// read as s (Snapshot, before the PSP was asked), as decideOutcome decides,
// in one round trip: the write checks that the payout is still as read. A
// payout that moved meanwhile gets OutcomeSkip or OutcomeStale, as if read
// afterwards; one that changed otherwise under the same check is an
// ErrConflict.
func (l *Ledger) RecordOutcome(ctx context.Context, s Snapshot, oseq int, a OutcomeAnswer) (OutcomeStep, error) {
	d := decideOutcome(s, oseq, a)
	if !d.write {
		return d.step, nil
	}
	batch, ext := s.Batch, s.ExternalID
	head := []string{string(d.step.Action), "0", "0"}
	switch d.step.Action {
	case OutcomeDone:
		head[1] = string(d.step.State)
	case OutcomeAgain:
		head[1], head[2] = strconv.Itoa(d.step.Seq), strconv.Itoa(d.step.Polls)
	}
	res, err := replyOf(l.transition(ctx, applyOutcomeScript, batch, ext,
		s.OutcomeSeq, s.OutcomePolls, unixMilli(s.OutcomeDue),
		string(d.to), d.errText, a.PSPStatus, a.HTTPStatus, a.Reason,
		head[0], head[1], head[2]),
		batch, ext, "record outcome", 3)
	if err != nil {
		return OutcomeStep{}, err
	}
	now, err := readApplied(res, head, "record outcome of "+ext)
	switch {
	case err != nil:
		return OutcomeStep{}, err
	case now == nil:
		return d.step, nil
	}
	// As if read after the other write: skip or stale, else a conflict.
	read := Snapshot{Payout: Payout{State: now.state, Awaiting: now.tracked && now.state == Created, OutcomeSeq: now.seq}}
	if step, ask := read.PreOutcome(oseq); !ask {
		return step, nil
	}
	return OutcomeStep{}, fmt.Errorf("ledger: outcome check %d of %s changed while the PSP was asked: %w", oseq, ext,
		&ConflictError{ExternalID: ext, Found: Created})
}
