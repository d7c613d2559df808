package ledger

import (
	"context"
	"fmt"
	"strconv"
	"time"
)

// BeginAction is what a create task must do, as decided by BeginCreate.
type BeginAction string

// The answers of BeginCreate.
const (
	Proceed      BeginAction = "proceed" // the payout is now submitting: send the create
	CheckNow     BeginAction = "check"   // a create of this attempt may have been sent: moved to checking, enqueue status check Seq
	EnsureStatus BeginAction = "ensure"  // already checking: make sure status check Seq is enqueued
	Skip         BeginAction = "skip"    // final, or the task is stale: nothing to do
)

// Begin is BeginCreate's decision and the payout as it stands after it.
type Begin struct {
	Action BeginAction
	Seq    int
	Payout Payout
}

// BeginCreate moves a payout from queued to submitting for create attempt
// attempt, BEFORE the request is sent. A payout found in submitting with the
// same attempt is moved to checking instead: that request may have reached
// the PSP, so it must never be sent again.
func (l *Ledger) BeginCreate(ctx context.Context, batch, ext string, attempt int) (Begin, error) {
	res, err := l.transition(ctx, beginCreateScript,
		[]string{l.payoutKey(batch, ext), l.countsKey(batch)}, attempt).StringSlice()
	if err != nil {
		return Begin{}, fmt.Errorf("ledger: begin create of %s: %w", ext, err)
	}
	if res[0] == "missing" {
		return Begin{}, fmt.Errorf("payout %s of batch %s: %w", ext, batch, ErrNotFound)
	}
	seq, _ := strconv.Atoi(res[1])
	return Begin{Action: BeginAction(res[0]), Seq: seq, Payout: parsePayout(batch, pairs(res[2:]))}, nil
}

// CreateResult is the classified answer of a create request.
type CreateResult struct {
	To        State // created, rejected, checking, queued (not sent) or needs_review
	OrderID   string
	PSPStatus string
	Error     string
	// MaxTries, with To queued, counts this as a try that provably did not
	// reach the PSP; past MaxTries such tries the payout goes to
	// needs_review instead. 0: not counted (paused queue, breaker).
	MaxTries int
}

// Finished is what FinishCreate did.
type Finished struct {
	State State // the payout's new state
	Seq   int   // the status check to enqueue, when State is checking
}

// FinishCreate records the answer to create attempt attempt. A
// *ConflictError means another delivery of the task already decided.
func (l *Ledger) FinishCreate(ctx context.Context, batch, ext string, attempt int, r CreateResult) (Finished, error) {
	res, err := l.transition(ctx, finishCreateScript,
		[]string{l.payoutKey(batch, ext), l.countsKey(batch)},
		attempt, string(r.To), "", r.OrderID, r.PSPStatus, r.Error, r.MaxTries).StringSlice()
	if err != nil {
		return Finished{}, fmt.Errorf("ledger: finish create of %s: %w", ext, err)
	}
	switch res[0] {
	case "ok":
		seq, _ := strconv.Atoi(res[1])
		return Finished{State: State(res[2]), Seq: seq}, nil
	case "missing":
		return Finished{}, fmt.Errorf("payout %s of batch %s: %w", ext, batch, ErrNotFound)
	}
	return Finished{}, &ConflictError{ExternalID: ext, Found: State(res[1])}
}

// CheckOutcome is what a status query told.
type CheckOutcome string

// Status query outcomes.
const (
	Found    CheckOutcome = "found"    // the PSP has the order
	Missing  CheckOutcome = "missing"  // the PSP answered 404
	NoAnswer CheckOutcome = "noanswer" // a fault: nothing learned
)

// CheckPolicy bounds the resolution of an ambiguous create.
type CheckPolicy struct {
	AbsentChecks  int           // K: consecutive 404s that confirm absence
	AbsentSpacing time.Duration // D: minimum time between counted 404s
	MaxCreates    int           // M: creates in all, the first included
	MaxFaults     int           // N: status checks without an answer before needs_review
}

// CheckAction is what follows a recorded status check.
type CheckAction string

// The answers of RecordCheck.
const (
	CheckDone     CheckAction = "done"     // created
	CheckAgain    CheckAction = "again"    // enqueue status check Seq after Wait (misses) or a backoff for Faults
	CheckRecreate CheckAction = "recreate" // absence confirmed: enqueue create Attempt
	CheckReview   CheckAction = "review"   // needs_review
	CheckStale    CheckAction = "stale"    // another check (Seq) is current: ensure it is enqueued
	CheckSkip     CheckAction = "skip"     // the payout is not checking any more
)

// CheckStep is RecordCheck's decision.
type CheckStep struct {
	Action  CheckAction
	Seq     int
	Attempt int
	Wait    time.Duration
	Faults  int
}

// CheckAnswer is the result of a status query.
type CheckAnswer struct {
	Outcome   CheckOutcome
	OrderID   string
	PSPStatus string
	Message   string
}

// RecordCheck records the answer to status check seq and decides what
// follows, under policy p.
func (l *Ledger) RecordCheck(ctx context.Context, batch, ext string, seq int, a CheckAnswer, p CheckPolicy) (CheckStep, error) {
	res, err := l.transition(ctx, recordCheckScript,
		[]string{l.payoutKey(batch, ext), l.countsKey(batch)},
		seq, string(a.Outcome), "", a.OrderID, a.PSPStatus,
		p.AbsentChecks, p.AbsentSpacing.Milliseconds(), p.MaxCreates, p.MaxFaults, a.Message).StringSlice()
	if err != nil {
		return CheckStep{}, fmt.Errorf("ledger: record status check of %s: %w", ext, err)
	}
	v, _ := strconv.Atoi(res[1])
	x, _ := strconv.ParseInt(res[2], 10, 64)
	step := CheckStep{Action: CheckAction(res[0])}
	switch step.Action {
	case "missing":
		return CheckStep{}, fmt.Errorf("payout %s of batch %s: %w", ext, batch, ErrNotFound)
	case CheckAgain:
		step.Seq = v
		if a.Outcome == Missing {
			step.Wait = time.Duration(x) * time.Millisecond
		} else {
			step.Faults = int(x)
		}
	case CheckRecreate:
		step.Attempt = v
	case CheckStale, CheckSkip:
		step.Seq = v
	}
	return step, nil
}
