package ledger

import (
	"time"

	"github.com/acme/payout/internal/decide"
	"github.com/acme/payout/internal/lifecycle"
)

// decideFinish decides the move of a create's classified answer r: the
// state it asks for, with its error, except a try that provably did not
// reach the PSP (To queued, MaxTries > 0): it is counted (tries, else 0),
// and once such tries exceed MaxTries the payout needs review instead,
// with TriesNote.
func decideFinish(r CreateResult) (to lifecycle.State, note string, tries int) {
	if r.To != lifecycle.Queued || r.MaxTries <= 0 {
		return r.To, r.Error, 0
	}
	tries = r.Tries + 1
	if tries > r.MaxTries {
		return lifecycle.NeedsReview, decide.TriesNote(r.MaxTries, r.Error), tries
	}
	return lifecycle.Queued, r.Error, tries
}

// PreCheck tells whether status check seq of the payout s is to be asked
// now (ask), and if not, why (step): the payout is not checking
// (CheckSkip), checks another seq (CheckStale, step.Seq the current one),
// or the check is not due before step.Wait on Redis's clock (CheckEarly).
// The worker calls it before it asks the PSP; decideCheck, with the answer,
// the same way.
func (s Snapshot) PreCheck(seq int) (step decide.CheckStep, ask bool) {
	switch {
	case s.State != lifecycle.Checking:
		return decide.CheckStep{Action: decide.CheckSkip, Seq: s.Seq}, false
	case seq != s.Seq:
		return decide.CheckStep{Action: decide.CheckStale, Seq: s.Seq}, false
	case s.Now.Before(s.CheckDue):
		return decide.CheckStep{Action: decide.CheckEarly, Seq: s.Seq, Wait: s.CheckDue.Sub(s.Now)}, false
	}
	return decide.CheckStep{}, true
}

// checkDecision is what recording a status check's answer does: decided in
// Go by decideCheck from the payout as read and the answer, written by
// applyCheckScript only if the payout is still as read.
type checkDecision struct {
	step decide.CheckStep // RecordCheck's answer; its head is the replay memo
	// write is false when nothing is recorded: the payout is not checking
	// (skip), checks another seq (stale), or the check is not due (early).
	write bool
	// to is the state the payout leaves checking for; "" when it stays
	// checking and status check step.Seq is due step.Wait after the write
	// (Redis's clock).
	to lifecycle.State
	// errText is the error kept with the payout, unless keepError: the
	// stored one stays.
	errText   string
	keepError bool
	misses    int  // 404s counted toward confirmed absence, this one included
	countMiss bool // this 404 is counted: lastmiss is stamped (Redis's clock)
	faults    int  // checks without an answer in this checking episode
}

// decideCheck decides what the answer a to status check seq of the payout
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
func decideCheck(s Snapshot, seq int, a decide.CheckAnswer, p CheckPolicy) checkDecision {
	// An order found is proof even before the check is due: only a 404 or
	// no answer waits for CheckDue.
	if step, ask := s.PreCheck(seq); !ask && !(step.Action == decide.CheckEarly && a.Outcome == decide.Found) {
		return checkDecision{step: step}
	}
	d := checkDecision{write: true, misses: s.Misses, faults: s.Faults}
	leave := func(to lifecycle.State, step decide.CheckStep) checkDecision {
		d.to, d.step, d.errText = to, step, step.Error
		return d
	}
	again := func(faults int, wait time.Duration) checkDecision {
		d.step = decide.CheckStep{Action: decide.CheckAgain, Seq: seq + 1, Faults: faults, Wait: wait}
		return d
	}
	switch a.Outcome {
	case decide.Found:
		return leave(lifecycle.Created, decide.CheckStep{Action: decide.CheckDone, Awaiting: p.OutcomeWindow.Milliseconds() > 0})
	case decide.Missing:
		last := s.LastMiss
		if last.IsZero() || s.Now.Sub(last) >= p.AbsentSpacing {
			d.misses, d.countMiss, last = d.misses+1, true, s.Now
		}
		if d.misses >= p.AbsentChecks {
			if s.Creates < p.MaxCreates {
				return leave(lifecycle.Queued, decide.CheckStep{Action: decide.CheckRecreate, Attempt: s.Creates + 1, Error: p.recreateNote()})
			}
			return leave(lifecycle.NeedsReview, decide.CheckStep{Action: decide.CheckReview, Error: p.absentNote()})
		}
		d.keepError = true
		return again(0, p.AbsentSpacing-s.Now.Sub(last))
	}
	d.faults++
	if d.faults >= p.MaxFaults {
		return leave(lifecycle.NeedsReview, decide.CheckStep{Action: decide.CheckReview, Error: p.faultNote(a.Message)})
	}
	wait, ceiling := p.faultDelays()
	for i := 2; i <= d.faults && wait < ceiling; i++ {
		wait = min(2*wait, ceiling)
	}
	d.errText = a.Message
	return again(d.faults, wait)
}

// outcomeDecision is what recording an outcome check's answer does:
// decided in Go by decideOutcome, written by applyOutcomeScript only if
// the payout is still as read.
type outcomeDecision struct {
	step OutcomeStep // RecordOutcome's answer; its head is the replay memo
	// write is false when nothing is recorded: the payout does not await
	// an outcome (skip) or awaits another check (stale).
	write bool
	// to is the state the payout leaves created for; "" when it stays
	// created and outcome check step.Seq comes next.
	to      lifecycle.State
	errText string // the error kept with to
}

// PreOutcome tells whether outcome check oseq of the payout s is to be
// asked now (ask), and if not, why (step): the payout does not await its
// outcome (OutcomeSkip, step.State its state) or awaits another check
// (OutcomeStale, step.Seq the current one). The worker calls it before it
// asks the PSP; decideOutcome, with the answer, the same way.
func (s Snapshot) PreOutcome(oseq int) (step OutcomeStep, ask bool) {
	switch {
	case s.State != lifecycle.Created || !s.Awaiting:
		return OutcomeStep{Action: decide.OutcomeSkip, State: s.State}, false
	case oseq != s.OutcomeSeq:
		return OutcomeStep{Action: decide.OutcomeStale, Seq: s.OutcomeSeq}, false
	}
	return OutcomeStep{}, true
}

// decideOutcome decides what the answer a to outcome check oseq of the
// payout s makes of it, at s.Now (Redis's clock when s was read, before
// the PSP was asked: a window that ends while the PSP answers is over at
// the next check).
//
//	not created, or not awaiting  skip
//	awaiting another check        stale
//	paid, failed                  that state, the reason kept
//	else, at or past OutcomeDue   needs_review (the last status word named)
//	else                          outcome check oseq+1
func decideOutcome(s Snapshot, oseq int, a decide.OutcomeAnswer) outcomeDecision {
	if step, ask := s.PreOutcome(oseq); !ask {
		return outcomeDecision{step: step}
	}
	switch a.Verdict {
	case decide.VerdictPaid, decide.VerdictFailed:
		to := lifecycle.State(a.Verdict)
		return outcomeDecision{write: true, to: to, errText: a.Reason, step: OutcomeStep{Action: decide.OutcomeDone, State: to}}
	}
	if !s.Now.Before(s.OutcomeDue) {
		last := a.PSPStatus
		if last == "" {
			last = s.PSPStatus
		}
		note := outcomeReviewNote(last)
		return outcomeDecision{write: true, to: lifecycle.NeedsReview, errText: note,
			step: OutcomeStep{Action: decide.OutcomeReview, State: lifecycle.NeedsReview, Error: note}}
	}
	return outcomeDecision{write: true, step: OutcomeStep{Action: decide.OutcomeAgain, Seq: oseq + 1, Polls: s.OutcomePolls + 1}}
}
