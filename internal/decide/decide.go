// Package decide decides what a payout does with a PSP answer, without
// Redis: the answers a worker brings (CreateResult, CheckAnswer,
// OutcomeAnswer), the payout as read (Snapshot), the budgets (CheckPolicy),
// the pure decisions (Finish, Check, Outcome) and the steps the ledger's
// transitions answer (BeginAction, Finished, CheckStep, OutcomeStep), so
// that the worker and the ledger speak of a decision in the same words and
// the ledger's scripts only write what was decided here.
package decide

import (
	"fmt"
	"time"
)

// BeginAction is what a create task must do, as decided by the
// ledger's BeginCreate.
type BeginAction string

// The answers of the ledger's BeginCreate.
const (
	Proceed      BeginAction = "proceed" // the payout is now submitting: send the create
	CheckNow     BeginAction = "check"   // a create of this attempt may have been sent: moved to checking, enqueue status check Seq
	EnsureStatus BeginAction = "ensure"  // already checking: make sure status check Seq is enqueued
	Skip         BeginAction = "skip"    // final, or the task is stale: nothing to do
	// Hold: the payout is queued but its batch is not loaded (a load not
	// completed, awaiting approval, discarded): nothing changed, nothing
	// may be sent; ledger.Begin.Phase says the batch's phase.
	Hold BeginAction = "hold"
	// Foreign: the payout is queued, its batch loaded, but its card
	// number is sealed with a data key this ledger's worker does not hold
	// (ledger.OpeningKeys): nothing changed, nothing may be sent; Begin.KeyID
	// names the key.
	Foreign BeginAction = "foreign"
)

// TriesNote is the error of a payout whose budget of maxTries tries that
// provably did not reach the PSP is used up (the last one answered msg).
func TriesNote(maxTries int, msg string) string {
	return fmt.Sprintf("PSP did not take the request after %d tries (nothing was sent): %s", maxTries+1, msg)
}

// CheckOutcome is what a status query told.
type CheckOutcome string

// Status query outcomes.
const (
	Found    CheckOutcome = "found"    // the PSP has the order
	Missing  CheckOutcome = "missing"  // the PSP answered 404 (not: no such payout, which is ledger.ErrNotFound)
	NoAnswer CheckOutcome = "noanswer" // a fault: nothing learned
)

// CheckAction is what follows a recorded status check.
type CheckAction string

// The answers of the ledger's RecordCheck.
const (
	CheckDone     CheckAction = "done"     // created
	CheckAgain    CheckAction = "again"    // enqueue status check Seq after Wait (misses) or a backoff for Faults
	CheckRecreate CheckAction = "recreate" // absence confirmed: enqueue create Attempt
	CheckReview   CheckAction = "review"   // needs_review
	CheckEarly    CheckAction = "early"    // check Seq is not due yet (Wait): nothing recorded
	CheckStale    CheckAction = "stale"    // another check (Seq) is current: ensure it is enqueued
	CheckSkip     CheckAction = "skip"     // the payout is not checking any more
)

// CheckStep is the ledger's RecordCheck's decision.
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

// The answers of the ledger's RecordOutcome.
const (
	OutcomeDone   OutcomeAction = "done"   // paid or failed (Step.State)
	OutcomeAgain  OutcomeAction = "again"  // enqueue outcome check Seq; Polls checks so far
	OutcomeReview OutcomeAction = "review" // window over: needs_review
	OutcomeStale  OutcomeAction = "stale"  // another check (Seq) is current: ensure it
	OutcomeSkip   OutcomeAction = "skip"   // the payout does not await an outcome (State)
)

// OutcomeAnswer is what an outcome check learned of a created order.
type OutcomeAnswer struct {
	Verdict    Verdict
	PSPStatus  string // the PSP's status word ("": none; the stored one stays)
	Reason     string // with VerdictFailed: why, kept as the payout's error
	HTTPStatus int    // for the audit trail (0: no answer)
}
