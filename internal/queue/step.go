package queue

import (
	"fmt"
	"strconv"
	"time"

	"github.com/acme/payout/internal/ledger"
	"github.com/acme/payout/internal/lifecycle"
	"github.com/acme/payout/jobs"
)

// Kind is what a step asks a worker to do: one task type of the contract.
type Kind string

// The kinds of step, one per task type of package jobs.
const (
	Create  Kind = jobs.TypeWithdrawalCreate  // create the order at the PSP (attempt N)
	Status  Kind = jobs.TypeWithdrawalStatus  // ask whether a create reached the PSP (check N)
	Outcome Kind = jobs.TypeWithdrawalOutcome // follow a created order to paid or failed (check N)
	Verify  Kind = jobs.TypeWithdrawalVerify  // ask about a payout a person marked rejected (second N)
	Watch   Kind = jobs.TypeWithdrawalWatch   // ask again about a paid payout under watch (second N)
	// Release moves a scheduled payout to queued when its release time
	// comes (N: that time, Unix seconds). It is no Asynq task: the
	// ledger's due index (ledger.Schedule), written in the same script as
	// the move to scheduled, reminds the workers' releaser (package
	// schedule); Add and Remind refuse it, the reconciler leaves it.
	Release Kind = "schedule:release"
)

// Step is the task that reminds a worker of a payout's next step.
type Step struct {
	Kind              Kind
	Batch, ExternalID string
	// N numbers the step: the create attempt, the status or outcome check,
	// the Unix second of a verification (jobs.VerifyTaskID).
	N int
	// Amount and Destination are display fields of the payload (the
	// destination masked).
	Amount, Destination string
	// After: the task runs no sooner than this after it is enqueued.
	After time.Duration
	// Due: a watch check that runs only while the watch's next check is
	// still due then (the sweep's, jobs.WatchPayload.DueMS); zero: at
	// once (a callback's).
	Due time.Time
	// InFlight: the step is under way (a submitting payout's create, whose
	// request may have reached the PSP). It is never enqueued again: when
	// its task is lost the ledger moves the payout first
	// (ledger.InterruptSubmitting), and the step of where it lands follows.
	InFlight bool
}

// NextStep is the one map from a payout's state in the ledger to the task
// that must exist for it (ok false: none, the payout waits for a person or
// is done):
//
//	queued      the create of the next attempt (Creates+1)
//	submitting  the create in flight (Creates), InFlight
//	checking    status check Seq
//	created     outcome check OutcomeSeq while it awaits its outcome
//	held        none: a person releases it (to queued: its create) or cancels it
//	scheduled   its release at ReleaseAt (the releaser's, not a task: Scheduler)
//
// The worker, the reconciler, the loader and the operator's commands all
// ask it; TestEveryOpenStateHasAStep fails when a state of lifecycle.Machine
// that is not final has no step here. After is left zero: how long to wait
// is the caller's.
func NextStep(p ledger.Payout) (Step, bool) {
	s := Step{Batch: p.Batch, ExternalID: p.ExternalID, Amount: p.Amount, Destination: p.Destination}
	switch {
	case p.State == lifecycle.Scheduled:
		s.Kind, s.N = Release, int(p.ReleaseAt.Unix())
	case p.State == lifecycle.Queued:
		s.Kind, s.N = Create, p.Creates+1
	case p.State == lifecycle.Submitting:
		s.Kind, s.N, s.InFlight = Create, p.Creates, true
	case p.State == lifecycle.Checking:
		s.Kind, s.N = Status, p.Seq
	case p.State == lifecycle.Created && p.Awaiting:
		s.Kind, s.N = Outcome, p.OutcomeSeq
	default:
		return Step{}, false
	}
	return s, true
}

// Scheduler reports whether s is the releaser's, not a task (Release).
func (s Step) Scheduler() bool { return s.Kind == Release }

// NextOpen is NextStep of an open payout as a sweep reads it.
func NextOpen(p ledger.OpenPayout) (Step, bool) {
	return NextStep(ledger.Payout{
		Batch: p.Batch, ExternalID: p.ExternalID, State: p.State, Creates: p.Creates, Seq: p.Seq,
		Awaiting: p.State == lifecycle.Created, OutcomeSeq: p.OutcomeSeq,
		Amount: p.Amount, Destination: p.Destination, UpdatedAt: p.UpdatedAt,
	})
}

// VerifyStep is the verification a PSP callback about p asks for at Unix
// second at (p was marked rejected by a person): not a step of the state
// machine, a question the callback raised (worker.HandleVerify).
func VerifyStep(p ledger.Payout, at int64) Step {
	return Step{Kind: Verify, Batch: p.Batch, ExternalID: p.ExternalID, N: int(at)}
}

// WatchStep is the watch check of the paid payout p now, for a PSP
// callback that named it: not a step of the state machine (paid is
// final), the watch's own question (worker.HandleWatch).
func WatchStep(p ledger.Payout, now int64) Step {
	return Step{Kind: Watch, Batch: p.Batch, ExternalID: p.ExternalID, N: int(now)}
}

// DueWatchStep is the watch check of the paid payout p due at due (its
// score in the batch's watch zset), found by the watch sweep
// (ledger.DueWatches): it runs only while that check is still due (Due).
func DueWatchStep(p ledger.Payout, due time.Time) Step {
	return Step{Kind: Watch, Batch: p.Batch, ExternalID: p.ExternalID, N: int(due.Unix()), Due: due}
}

// In returns s to run no sooner than d after it is enqueued.
func (s Step) In(d time.Duration) Step {
	s.After = d
	return s
}

// ID is the task ID of s (jobs.CreateTaskID and the others).
func (s Step) ID() string {
	switch s.Kind {
	case Create:
		return jobs.CreateTaskID(s.ExternalID, s.N)
	case Status:
		return jobs.StatusTaskID(s.ExternalID, s.N)
	case Outcome:
		return jobs.OutcomeTaskID(s.ExternalID, s.N)
	case Verify:
		return jobs.VerifyTaskID(s.ExternalID, int64(s.N))
	case Watch:
		return jobs.WatchTaskID(s.ExternalID, int64(s.N))
	case Release:
		return "release:" + s.ExternalID + ":" + strconv.Itoa(s.N)
	}
	return ""
}

// task builds s's task with the contract's constructors: the only caller
// of them in payout.
func (s Step) task() (jobs.Task, error) {
	switch s.Kind {
	case Create:
		return jobs.NewCreateTask(jobs.CreatePayload{Batch: s.Batch, ExternalID: s.ExternalID, Attempt: s.N,
			Amount: s.Amount, Destination: s.Destination})
	case Status:
		return jobs.NewStatusTask(jobs.StatusPayload{Batch: s.Batch, ExternalID: s.ExternalID, Seq: s.N,
			Amount: s.Amount, Destination: s.Destination}, s.After)
	case Outcome:
		return jobs.NewOutcomeTask(jobs.OutcomePayload{Batch: s.Batch, ExternalID: s.ExternalID, Seq: s.N,
			Amount: s.Amount, Destination: s.Destination}, s.After)
	case Verify:
		return jobs.NewVerifyTask(jobs.VerifyPayload{Batch: s.Batch, ExternalID: s.ExternalID}, int64(s.N))
	case Watch:
		w := jobs.WatchPayload{Batch: s.Batch, ExternalID: s.ExternalID}
		if !s.Due.IsZero() {
			w.DueMS = s.Due.UnixMilli()
		}
		return jobs.NewWatchTask(w, int64(s.N))
	case Release:
		return jobs.Task{}, fmt.Errorf("queue: %s is the releaser's (the ledger's due index), not a task", s.ID())
	}
	return jobs.Task{}, fmt.Errorf("queue: step of unknown kind %q", s.Kind)
}
