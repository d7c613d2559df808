package chaos

import (
	"errors"
	"fmt"
	"strings"
	"time"
)

// Figures are the one-line result of a run.
type Figures struct {
	Payouts int // rows generated and loaded
	// Created counts the payouts whose order the PSP created (whatever
	// its outcome); Paid and Failed those that reached that outcome.
	Created     int
	Paid        int
	Failed      int
	Rejected    int
	NeedsReview int
	Ambiguous   int // payouts that went through checking (ledger seq > 0)

	WorkerKills    int
	RedisRestarts  int
	TokenRotations int
	// H2Resets counts create streams reset after the sandbox stored the
	// order; RedisReplyDrops replies of the workers' Redis scripts lost
	// after they ran; TasksDeleted tasks deleted or archived through the
	// web UI; Repaired steps the workers restored (reconciler sweeps and
	// handlers finding a due step without a live task), from their logs.
	H2Resets        int
	RedisReplyDrops int
	TasksDeleted    int
	Repaired        int
	// InterruptedLoads counts loader runs killed in the middle of a file
	// (and completed by a later run); OrphanedTasks active tasks whose
	// lease entry the suite removed (hibiken/asynq#1051).
	InterruptedLoads int
	OrphanedTasks    int
	// ForgedCallbacks counts the callbacks the suite forged and a worker
	// answered: a wrong or missing secret (refused 401, or a mismatch),
	// an unknown order, a false status for a real payout.
	ForgedCallbacks int
	// Approved counts the batches the suite approved mid-run, Cancelled
	// the payouts an operator cancelled before they were sent.
	Approved  int
	Cancelled int

	// Duplicates counts orders beyond one per created payout, plus every
	// order of a payout that is not created, plus orders of unknown
	// externalIds.
	Duplicates int
	// Lost counts rows missing from the ledger, payouts not final at the
	// end, and created payouts without an order at the PSP.
	Lost int
	// OutcomeMismatches counts created payouts whose end state is not
	// their order's final status at the PSP (paid, failed with its
	// reason, or created without a lifecycle), and created payouts sent
	// to review by the outcome window.
	OutcomeMismatches int
	// Leaks counts places where a full card number or a secret appeared.
	Leaks int
	// Mismatches counts disagreements of the books: an order with another
	// amount, destination or id than the ledger's, a row with an outcome
	// it cannot have (an ordinary row rejected, a magic row created), a
	// batch report that does not reconcile, a missing result file.
	Mismatches int
	// AuditMismatches counts disagreements of the outbox audit files with
	// the ledger (see Verdict.AuditMismatches).
	AuditMismatches int

	// The payout events (Config.Events; EventsChecked): distinct events
	// and POSTs the webhook receiver got, deliveries of an event it had
	// accepted already and after a failed one, and what CheckEvents
	// found (EventCheck).
	EventsChecked    bool
	Events           int
	EventDeliveries  int
	EventDuplicates  int
	EventRetries     int
	EventsMissing    int
	EventMismatches  int
	VerifierRejected int

	// The file submitted through the API (Config.APISubmit; APIChecked):
	// the POSTs the submitter sent, the faults the proxy injected, and
	// the batches of that file at the end (exactly 1).
	APIChecked  bool
	APIRequests int
	APIFaults   int
	APIBatches  int

	Elapsed time.Duration
}

// String is the figures line.
func (f Figures) String() string {
	var ev string
	if f.EventsChecked {
		ev = fmt.Sprintf(" events=%d event_deliveries=%d event_duplicates=%d event_retries=%d events_missing=%d event_mismatches=%d verifier_rejected=%d",
			f.Events, f.EventDeliveries, f.EventDuplicates, f.EventRetries, f.EventsMissing, f.EventMismatches, f.VerifierRejected)
	}
	if f.APIChecked {
		ev += fmt.Sprintf(" api_requests=%d api_faults=%d api_batches=%d", f.APIRequests, f.APIFaults, f.APIBatches)
	}
	return fmt.Sprintf("payouts=%d created=%d paid=%d failed=%d rejected=%d needs_review=%d ambiguous=%d worker_kills=%d redis_restarts=%d token_rotations=%d h2_resets=%d redis_reply_drops=%d tasks_deleted=%d interrupted_loads=%d orphaned_tasks=%d repaired=%d forged_callbacks=%d approved=%d cancelled=%d duplicates=%d lost=%d outcome_mismatches=%d leaks=%d mismatches=%d audit_mismatches=%d%s elapsed=%s",
		f.Payouts, f.Created, f.Paid, f.Failed, f.Rejected, f.NeedsReview, f.Ambiguous, f.WorkerKills, f.RedisRestarts, f.TokenRotations,
		f.H2Resets, f.RedisReplyDrops, f.TasksDeleted, f.InterruptedLoads, f.OrphanedTasks, f.Repaired, f.ForgedCallbacks, f.Approved, f.Cancelled, f.Duplicates, f.Lost, f.OutcomeMismatches, f.Leaks, f.Mismatches, f.AuditMismatches, ev, f.Elapsed.Round(100*time.Millisecond))
}

// ErrUnsafe is matched (errors.Is) by the error of a run that found
// duplicates, lost payouts, outcome mismatches, leaks, mismatches or audit
// mismatches.
var ErrUnsafe = errors.New("chaos: the run broke a promise")

// ErrHarness is matched by the error of a run that could not be carried
// out as planned (a process that would not start, a command that failed).
var ErrHarness = errors.New("chaos: harness failure")

// Err returns nil when nothing unsafe was found, else an error matching
// ErrUnsafe that names what was.
func (f Figures) Err() error {
	var bad []string
	for _, c := range []struct {
		name string
		n    int
	}{{"duplicates", f.Duplicates}, {"lost", f.Lost}, {"outcome_mismatches", f.OutcomeMismatches}, {"leaks", f.Leaks}, {"mismatches", f.Mismatches}, {"audit_mismatches", f.AuditMismatches},
		{"events_missing", f.EventsMissing}, {"event_mismatches", f.EventMismatches}, {"verifier_rejected", f.VerifierRejected}} {
		if c.n != 0 {
			bad = append(bad, fmt.Sprintf("%s=%d", c.name, c.n))
		}
	}
	if f.APIChecked && f.APIBatches != 1 {
		bad = append(bad, fmt.Sprintf("api_batches=%d", f.APIBatches))
	}
	if len(bad) == 0 {
		return nil
	}
	return fmt.Errorf("%w: %s", ErrUnsafe, strings.Join(bad, " "))
}
