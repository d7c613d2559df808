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
	// Hold: the payout is queued but its batch is not loaded (a load not
	// completed, awaiting approval, discarded): nothing changed, nothing
	// may be sent; Begin.Phase says the batch's phase.
	Hold BeginAction = "hold"
)

// Begin is BeginCreate's decision and the payout as it stands after it.
type Begin struct {
	Action BeginAction
	Seq    int
	Phase  string // with Hold: the batch's phase ("" when it has no metadata)
	Payout Payout
}

// beginKeys are the keys of beginCreateScript.
func beginKeys(batch, ext string) []string {
	return []string{payoutKey(batch, ext), countsKey(batch), auditKey(batch), metaKey(batch)}
}

// parseBegin reads beginCreateScript's reply.
func parseBegin(batch string, res []string) Begin {
	seq, _ := strconv.Atoi(res[1])
	b := Begin{Action: BeginAction(res[0]), Seq: seq}
	rest := res[2:]
	if b.Action == Hold && len(rest)%2 == 1 {
		b.Phase, rest = rest[0], rest[1:]
	}
	b.Payout = parsePayout(batch, pairs(rest))
	return b
}

// BeginCreate moves a payout from queued to submitting for create attempt
// attempt, BEFORE the request is sent. A payout found in submitting with the
// same attempt is moved to checking instead: that request may have reached
// the PSP, so it must never be sent again. A queued payout of a batch that
// is not loaded is held (Hold): no create before the whole batch is
// registered (and approved, where approval applies).
func (l *Ledger) BeginCreate(ctx context.Context, batch, ext string, attempt int) (Begin, error) {
	res, err := l.transitionKeys(ctx, beginCreateScript, beginKeys(batch, ext), attempt).StringSlice()
	if err != nil {
		return Begin{}, fmt.Errorf("ledger: begin create of %s: %w", ext, err)
	}
	if res[0] == "missing" {
		return Begin{}, fmt.Errorf("payout %s of batch %s: %w", ext, batch, ErrNotFound)
	}
	return parseBegin(batch, res), nil
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
	// OutcomeWindow, with To created, makes the payout await its outcome
	// (paid or failed) for that long; 0: created is final.
	OutcomeWindow time.Duration
	HTTPStatus    int // of the answer, for the audit trail (0: none)
}

// Finished is what FinishCreate did.
type Finished struct {
	State State // the payout's new state
	Seq   int   // the status check to enqueue, when State is checking
}

// FinishCreate records the answer to create attempt attempt. A
// *ConflictError means another delivery of the task already decided.
func (l *Ledger) FinishCreate(ctx context.Context, batch, ext string, attempt int, r CreateResult) (Finished, error) {
	res, err := l.transition(ctx, finishCreateScript, batch, ext,
		attempt, string(r.To), r.OutcomeWindow.Milliseconds(), r.OrderID, r.PSPStatus, r.Error, r.MaxTries, r.HTTPStatus).StringSlice()
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
	// OutcomeWindow: a payout found created awaits its outcome for that
	// long (0: created is final).
	OutcomeWindow time.Duration
	// FaultDelay and FaultDelayMax space the checks after a check without
	// an answer: FaultDelay doubling per fault, at most FaultDelayMax
	// (defaults 1s and 5m), on Redis's clock.
	FaultDelay    time.Duration
	FaultDelayMax time.Duration
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
	Action  CheckAction
	Seq     int
	Attempt int
	Wait    time.Duration // again, early: until the check is due (Redis time)
	Faults  int
}

// CheckAnswer is the result of a status query.
type CheckAnswer struct {
	Outcome    CheckOutcome
	OrderID    string
	PSPStatus  string
	Message    string
	HTTPStatus int // for the audit trail (0: no answer)
}

// RecordCheck records the answer to status check seq and decides what
// follows, under policy p.
func (l *Ledger) RecordCheck(ctx context.Context, batch, ext string, seq int, a CheckAnswer, p CheckPolicy) (CheckStep, error) {
	base, max := p.FaultDelay, p.FaultDelayMax
	if base <= 0 {
		base = time.Second
	}
	if max < base {
		max = 5 * time.Minute
	}
	res, err := l.transition(ctx, recordCheckScript, batch, ext,
		seq, string(a.Outcome), p.OutcomeWindow.Milliseconds(), a.OrderID, a.PSPStatus,
		p.AbsentChecks, p.AbsentSpacing.Milliseconds(), p.MaxCreates, p.MaxFaults, a.Message,
		base.Milliseconds(), max.Milliseconds(), a.HTTPStatus).StringSlice()
	if err != nil {
		return CheckStep{}, fmt.Errorf("ledger: record status check of %s: %w", ext, err)
	}
	v, _ := strconv.Atoi(res[1])
	faults, _ := strconv.Atoi(res[2])
	wait, _ := strconv.ParseInt(res[3], 10, 64)
	step := CheckStep{Action: CheckAction(res[0])}
	switch step.Action {
	case "missing":
		return CheckStep{}, fmt.Errorf("payout %s of batch %s: %w", ext, batch, ErrNotFound)
	case CheckAgain:
		step.Seq, step.Faults, step.Wait = v, faults, time.Duration(wait)*time.Millisecond
	case CheckEarly:
		step.Seq, step.Wait = v, time.Duration(wait)*time.Millisecond
	case CheckRecreate:
		step.Attempt = v
	case CheckStale, CheckSkip:
		step.Seq = v
	}
	return step, nil
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
}

// RecordOutcome records outcome check oseq of a created payout that awaits
// its outcome: the verdict, the PSP's status word and, for a failure, its
// reason. Past the payout's outcome window (Redis time) without a final
// status, the payout needs review.
func (l *Ledger) RecordOutcome(ctx context.Context, batch, ext string, oseq int, v Verdict, pspStatus, reason string, httpStatus int) (OutcomeStep, error) {
	res, err := l.transition(ctx, recordOutcomeScript, batch, ext, oseq, string(v), pspStatus, reason, httpStatus).StringSlice()
	if err != nil {
		return OutcomeStep{}, fmt.Errorf("ledger: record outcome of %s: %w", ext, err)
	}
	step := OutcomeStep{Action: OutcomeAction(res[0])}
	switch step.Action {
	case "missing":
		return OutcomeStep{}, fmt.Errorf("payout %s of batch %s: %w", ext, batch, ErrNotFound)
	case OutcomeDone:
		step.State = State(res[1])
	case OutcomeReview:
		step.State = NeedsReview
	case OutcomeAgain:
		step.Seq, _ = strconv.Atoi(res[1])
		step.Polls, _ = strconv.Atoi(res[2])
	case OutcomeStale:
		step.Seq, _ = strconv.Atoi(res[1])
	case OutcomeSkip:
		step.State = State(res[1])
	}
	return step, nil
}
