package decide

import (
	"fmt"
	"time"

	"github.com/acme/payout/internal/lifecycle"
)

// Snapshot is a decision's input: what a status or outcome check decides
// from, the payout's state, counters and due times as stored, and Redis's
// clock when they were read (the ledger's Snapshot reads both in one
// call). The ledger's RecordCheck and RecordOutcome compare the stored
// payout with it before they write.
type Snapshot struct {
	Batch      string
	ExternalID string
	State      lifecycle.State
	Creates    int // create requests begun (attempt number of the latest)
	Seq        int // status checks scheduled
	Misses     int // consecutive 404s counted toward confirmed absence
	// LastMiss is when the last counted 404 was recorded (Redis's clock;
	// zero: none in this checking episode).
	LastMiss time.Time
	Faults   int // status checks without an answer in this checking episode
	// CheckDue is when status check Seq is due on Redis's clock (zero: at
	// once); an earlier run records nothing.
	CheckDue  time.Time
	PSPStatus string // the PSP's last status word
	// Awaiting: created, and the workers follow the order to its outcome
	// (status query OutcomeSeq is due; needs review after OutcomeDue).
	Awaiting     bool
	OutcomeSeq   int
	OutcomePolls int // outcome checks answered without a final status
	OutcomeDue   time.Time
	// Watch is the watch of a paid payout (Watch, watch.go).
	Watch WatchState
	// Now is Redis's clock when the payout was read (the same atomic
	// call), in whole milliseconds (the resolution of every time the
	// scripts store).
	Now time.Time
}

// Finish decides the move of a create's classified answer r: the
// state it asks for, with its error, except a try that provably did not
// reach the PSP (To queued, MaxTries > 0): it is counted (tries, else 0),
// and once such tries exceed MaxTries the payout needs review instead,
// with TriesNote.
func Finish(r CreateResult) (to lifecycle.State, note string, tries int) {
	if r.To != lifecycle.Queued || r.MaxTries <= 0 {
		return r.To, r.Error, 0
	}
	tries = r.Tries + 1
	if tries > r.MaxTries {
		return lifecycle.NeedsReview, TriesNote(r.MaxTries, r.Error), tries
	}
	return lifecycle.Queued, r.Error, tries
}

// PreCheck tells whether status check seq of the payout s is to be asked
// now (ask), and if not, why (step): the payout is not checking
// (CheckSkip), checks another seq (CheckStale, step.Seq the current one),
// or the check is not due before step.Wait on Redis's clock (CheckEarly).
// The worker calls it before it asks the PSP; Check, with the answer,
// the same way.
func (s Snapshot) PreCheck(seq int) (step CheckStep, ask bool) {
	switch {
	case s.State != lifecycle.Checking:
		return CheckStep{Action: CheckSkip, Seq: s.Seq}, false
	case seq != s.Seq:
		return CheckStep{Action: CheckStale, Seq: s.Seq}, false
	case s.Now.Before(s.CheckDue):
		return CheckStep{Action: CheckEarly, Seq: s.Seq, Wait: s.CheckDue.Sub(s.Now)}, false
	}
	return CheckStep{}, true
}

// CheckDecision is what recording a status check's answer does: decided in
// Go by Check from the payout as read and the answer, written by
// the ledger's applyCheckScript only if the payout is still as read.
type CheckDecision struct {
	Step CheckStep // RecordCheck's answer; its head is the replay memo
	// Write is false when nothing is recorded: the payout is not checking
	// (skip), checks another seq (stale), or the check is not due (early).
	Write bool
	// To is the state the payout leaves checking for; "" when it stays
	// checking and status check step.Seq is due step.Wait after the write
	// (Redis's clock).
	To lifecycle.State
	// ErrText is the error kept with the payout, unless KeepError: the
	// stored one stays.
	ErrText   string
	KeepError bool
	Misses    int  // 404s counted toward confirmed absence, this one included
	CountMiss bool // this 404 is counted: lastmiss is stamped (Redis's clock)
	Faults    int  // checks without an answer in this checking episode
}

// Check decides what the answer a to status check seq of the payout
// s makes of it, under policy p, at s.Now (Redis's clock when s was read,
// before the PSP was asked: a counted 404 needs s.Now - LastMiss >= D, and
// the write stamps a later time, so counted misses are at least D apart).
//
//	not checking                 skip
//	checking another seq         stale
//	not found, before CheckDue   early: nothing recorded
//	found                        created; awaits its outcome if p.OutcomeWindow > 0
//	404                          counted if none is, or the last counted is D old;
//	                             K counted: queued for create Creates+1 while
//	                             Creates < M, else needs_review; otherwise
//	                             check seq+1 when the next 404 could count
//	no answer                    N in a row: needs_review; otherwise check
//	                             seq+1 after FaultDelay doubling per fault,
//	                             at most FaultDelayMax
func Check(s Snapshot, seq int, a CheckAnswer, p CheckPolicy) CheckDecision {
	// An order found is proof even before the check is due: only a 404 or
	// no answer waits for CheckDue.
	if step, ask := s.PreCheck(seq); !ask && !(step.Action == CheckEarly && a.Outcome == Found) {
		return CheckDecision{Step: step}
	}
	d := CheckDecision{Write: true, Misses: s.Misses, Faults: s.Faults}
	leave := func(to lifecycle.State, step CheckStep) CheckDecision {
		d.To, d.Step, d.ErrText = to, step, step.Error
		return d
	}
	again := func(faults int, wait time.Duration) CheckDecision {
		d.Step = CheckStep{Action: CheckAgain, Seq: seq + 1, Faults: faults, Wait: wait}
		return d
	}
	switch a.Outcome {
	case Found:
		return leave(lifecycle.Created, CheckStep{Action: CheckDone, Awaiting: p.OutcomeWindow.Milliseconds() > 0})
	case Missing:
		last := s.LastMiss
		if last.IsZero() || s.Now.Sub(last) >= p.AbsentSpacing {
			d.Misses, d.CountMiss, last = d.Misses+1, true, s.Now
		}
		if d.Misses >= p.AbsentChecks {
			if s.Creates < p.MaxCreates {
				return leave(lifecycle.Queued, CheckStep{Action: CheckRecreate, Attempt: s.Creates + 1, Error: p.recreateNote()})
			}
			return leave(lifecycle.NeedsReview, CheckStep{Action: CheckReview, Error: p.absentNote()})
		}
		d.KeepError = true
		return again(0, p.AbsentSpacing-s.Now.Sub(last))
	}
	d.Faults++
	if d.Faults >= p.MaxFaults {
		return leave(lifecycle.NeedsReview, CheckStep{Action: CheckReview, Error: p.faultNote(a.Message)})
	}
	wait, ceiling := p.faultDelays()
	for i := 2; i <= d.Faults && wait < ceiling; i++ {
		wait = min(2*wait, ceiling)
	}
	d.ErrText = a.Message
	return again(d.Faults, wait)
}

// OutcomeDecision is what recording an outcome check's answer does:
// decided in Go by Outcome, written by the ledger's applyOutcomeScript only if
// the payout is still as read.
type OutcomeDecision struct {
	Step OutcomeStep // RecordOutcome's answer; its head is the replay memo
	// Write is false when nothing is recorded: the payout does not await
	// an outcome (skip) or awaits another check (stale).
	Write bool
	// To is the state the payout leaves created for; "" when it stays
	// created and outcome check step.Seq comes next.
	To      lifecycle.State
	ErrText string // the error kept with To
}

// PreOutcome tells whether outcome check oseq of the payout s is to be
// asked now (ask), and if not, why (step): the payout does not await its
// outcome (OutcomeSkip, step.State its state) or awaits another check
// (OutcomeStale, step.Seq the current one). The worker calls it before it
// asks the PSP; Outcome, with the answer, the same way.
func (s Snapshot) PreOutcome(oseq int) (step OutcomeStep, ask bool) {
	switch {
	case s.State != lifecycle.Created || !s.Awaiting:
		return OutcomeStep{Action: OutcomeSkip, State: s.State}, false
	case oseq != s.OutcomeSeq:
		return OutcomeStep{Action: OutcomeStale, Seq: s.OutcomeSeq}, false
	}
	return OutcomeStep{}, true
}

// Outcome decides what the answer a to outcome check oseq of the
// payout s makes of it, at s.Now (Redis's clock when s was read, before
// the PSP was asked: a window that ends while the PSP answers is over at
// the next check).
//
//	not created, or not awaiting  skip
//	awaiting another check        stale
//	paid, failed                  that state, the reason kept
//	else, at or past OutcomeDue   needs_review (the last status word named)
//	else                          outcome check oseq+1
func Outcome(s Snapshot, oseq int, a OutcomeAnswer) OutcomeDecision {
	if step, ask := s.PreOutcome(oseq); !ask {
		return OutcomeDecision{Step: step}
	}
	switch a.Verdict {
	case VerdictPaid, VerdictFailed:
		to := lifecycle.State(a.Verdict)
		return OutcomeDecision{Write: true, To: to, ErrText: a.Reason, Step: OutcomeStep{Action: OutcomeDone, State: to}}
	}
	if !s.Now.Before(s.OutcomeDue) {
		last := a.PSPStatus
		if last == "" {
			last = s.PSPStatus
		}
		note := outcomeReviewNote(last)
		return OutcomeDecision{Write: true, To: lifecycle.NeedsReview, ErrText: note,
			Step: OutcomeStep{Action: OutcomeReview, State: lifecycle.NeedsReview, Error: note}}
	}
	return OutcomeDecision{Write: true, Step: OutcomeStep{Action: OutcomeAgain, Seq: oseq + 1, Polls: s.OutcomePolls + 1}}
}

// CreateResult is the classified answer of a create request.
type CreateResult struct {
	To        lifecycle.State // created, rejected, checking, queued (not sent) or needs_review
	OrderID   string
	PSPStatus string
	Error     string
	// MaxTries, with To queued, counts this as a try that provably did not
	// reach the PSP; past MaxTries such tries the payout goes to
	// needs_review instead, with TriesNote as its error. 0: not counted
	// (paused queue, breaker).
	MaxTries int
	// Tries, with MaxTries, is the payout's count of such tries as
	// the ledger's BeginCreate read it (Begin.Payout.Tries); the write checks it.
	Tries int
	// OutcomeWindow, with To created, makes the payout await its outcome
	// (paid or failed) for that long; 0: created is final.
	OutcomeWindow time.Duration
	HTTPStatus    int // of the answer, for the audit trail (0: none)
}

// Finished is what FinishCreate did.
type Finished struct {
	State lifecycle.State // the payout's new state
	Seq   int             // the status check to enqueue, when lifecycle.State is checking
	// Awaiting: State is created and the payout awaits its outcome:
	// outcome check 1 is due.
	Awaiting bool
	Error    string // the error recorded with the state
}

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

// OutcomeStep is RecordOutcome's decision.
type OutcomeStep struct {
	Action OutcomeAction
	State  lifecycle.State
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
