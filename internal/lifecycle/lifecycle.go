// Package lifecycle declares the payout state machine: the states a payout
// goes through, who may move it between them, and how people read each
// state. It is a table and nothing else: the ledger's compare-and-set
// scripts obey it (their Lua preludes are generated from Transitions), the
// queue maps its open states to tasks, and reports, pages and
// docs/design.md list its states in its order.
package lifecycle

import "strings"

// State of a payout.
type State string

// The states of the payout state machine (Machine).
const (
	// Scheduled: registered with a release time (a batch's --release-at, a
	// row's pay date); no task until the workers' releaser moves it to
	// queued when its time has come and its batch is approved.
	Scheduled   State = "scheduled"
	Queued      State = "queued"
	Submitting  State = "submitting"
	Checking    State = "checking"
	Created     State = "created"
	Rejected    State = "rejected"
	NeedsReview State = "needs_review"
	// Paid and Failed are the outcomes the PSP reports for a created order
	// when the worker follows orders to their outcome (--track-outcome):
	// until then a created payout is awaiting its outcome.
	Paid   State = "paid"
	Failed State = "failed"
	// Returned: a paid payout whose money came back (the PSP reported a
	// status of --psp-returned-statuses while the payout was watched after
	// paid, or a callback moved its watch check to now): final.
	Returned State = "returned"
	// Cancelled: an operator stopped the payout before it was sent
	// (payout cancel, or payout discard of a batch awaiting approval).
	Cancelled State = "cancelled"
	// Held: the loader registered the payout over its recipient's
	// velocity limit (--velocity-action hold): nothing is sent until a
	// person releases it (payout release: back to queued, then the
	// normal create) or cancels it.
	Held State = "held"
)

// Final reports whether no automatic step of the create path follows the
// state (Machine). A created payout whose outcome is followed is not done
// yet: see Counts.Awaiting and Payout.Awaiting.
func (s State) Final() bool { return finalStates[s] }

// Role is who may trigger a transition.
type Role string

// The roles of the payout state machine. Each of the ledger's transition scripts runs as
// one of them: it may make only the moves Transitions gives its role.
const (
	RoleLoader     Role = "loader"     // registers the rows of a file (payout run, payout load)
	RoleWorker     Role = "worker"     // create, status and outcome tasks
	RoleReconciler Role = "reconciler" // the sweep that repairs what a lost task left
	RolePerson     Role = "person"     // an operator: payout cancel, discard, resolve, the UI
)

// Roles lists every role, in the order docs/design.md names them.
var Roles = []Role{RoleLoader, RoleWorker, RoleReconciler, RolePerson}

// StateInfo describes one payout state of the machine.
type StateInfo struct {
	State State
	// Final: no automatic step of the create path follows (State.Final).
	// A created payout whose outcome is followed is final but not done.
	Final bool
	// Rank is the state's position in States: the order reports,
	// summaries and archives list states (final ones first).
	Rank int
	// Label is how people read the state (pages, legends).
	Label string
	// Color and Tint are the colours the pages give the state: Color for
	// its bar and dots, Tint for the background of its tags.
	Color, Tint string
	// Meaning is the state's line in docs/design.md.
	Meaning string
}

// Transition is one move a payout may make: from From to To, made by a
// script running as By.
type Transition struct {
	From State // "": the payout does not exist yet (registration)
	To   State
	By   Role
	// Note says when the move is made, for docs/design.md.
	Note string
}

// Machine lists every payout state in the order a payout goes through
// them (docs/design.md and the pages show them in this order). It and
// Transitions are the payout state machine: the only place it is declared.
// Everything else derives from them: States, State.Final, the moves every
// transition script may make (luaMachine), the state lists of reports,
// pages and the CLI, and the tables of docs/design.md
// (TestDesignDocStates). docs/design.md, "How to add a state", says what
// to edit.
var Machine = []StateInfo{
	{State: Scheduled, Rank: 11, Label: "scheduled", Color: "#00838f", Tint: "#b2ebf2",
		Meaning: "registered with a release time (`--release-at`, a pay date column); no task until the workers' releaser moves it to queued at that time, once its batch is approved"},
	{State: Queued, Rank: 9, Label: "queued", Color: "#9e9e9e", Tint: "#eeeeee",
		Meaning: "registered; a create task waits (none while the batch awaits approval)"},
	{State: Submitting, Rank: 8, Label: "submitting", Color: "#1565c0", Tint: "#e1bee7",
		Meaning: "create request in flight: written **before** the POST"},
	{State: Checking, Rank: 7, Label: "checking", Color: "#6a1b9a", Tint: "#e1bee7",
		Meaning: "outcome of a create unknown; status checks scheduled"},
	{State: Created, Final: true, Rank: 3, Label: "created", Color: "#2e7d32", Tint: "#c8e6c9",
		Meaning: "the PSP has the order (`pspOrderId`, `pspStatus` recorded); with outcome tracking it awaits its outcome; final with `--track-outcome=false`"},
	{State: Paid, Final: true, Rank: 0, Label: "paid", Color: "#1b5e20", Tint: "#c8e6c9",
		Meaning: "the PSP reports the money sent; watched for `--watch-window` (30 days) in case it comes back"},
	{State: Returned, Final: true, Rank: 1, Label: "returned", Color: "#4e342e", Tint: "#d7ccc8",
		Meaning: "paid, then the PSP reported the money came back (a status of `--psp-returned-statuses`: returned, reversed, refunded, chargeback); its status word, reason and time kept"},
	{State: Failed, Final: true, Rank: 2, Label: "failed", Color: "#ad1457", Tint: "#ffcdd2",
		Meaning: "the PSP reports it will not be paid; its status word and reason kept (`payout report --failed-only` for a corrected retry file; a reason that says the destination is gone for good, `account closed` or `card expired`, is left out of it unless `--include-final`)"},
	{State: Rejected, Final: true, Rank: 4, Label: "rejected", Color: "#c62828", Tint: "#ffcdd2",
		Meaning: "the PSP refused the request (400/422) with a message"},
	{State: Cancelled, Final: true, Rank: 6, Label: "cancelled", Color: "#616161", Tint: "#cfd8dc",
		Meaning: "an operator stopped it before it was sent (`payout cancel`, `payout discard`)"},
	{State: NeedsReview, Final: true, Rank: 5, Label: "needs review", Color: "#ef6c00", Tint: "#ffe0b2",
		Meaning: "automatic resolution gave up, or a PSP answer contradicted a person's `--as rejected`; a person decides"},
	{State: Held, Final: true, Rank: 10, Label: "held", Color: "#f9a825", Tint: "#fff9c4",
		Meaning: "registered over its recipient's velocity limit (`--velocity-action hold`): no task; a person releases it (`payout release`, then the normal create) or cancels it"},
}

// Transitions lists every move a payout may make, and who may make it.
// A script that tries any other move fails with a MACHINE error before it
// counts or audits anything (luaMove).
var Transitions = []Transition{
	{"", Queued, RoleLoader, "a row of a file is registered"},
	{Queued, Scheduled, RoleLoader, "Schedule: a row with a release time, before its batch is handed to the workers"},
	{Scheduled, Queued, RoleWorker, "Release: its release time came (Redis's clock) and its batch is loaded (approved)"},
	{Scheduled, Cancelled, RolePerson, "`payout cancel`, `payout discard` before its release"},
	{Queued, Submitting, RoleWorker, "BeginCreate, before the POST"},
	{Queued, Cancelled, RolePerson, "`payout cancel`, `payout discard`"},
	{Queued, Cancelled, RoleReconciler, "ExpireBatch: its batch's approval request expired (`--approval-expiry`)"},
	{Submitting, Created, RoleWorker, "FinishCreate: the PSP has the order"},
	{Submitting, Rejected, RoleWorker, "FinishCreate: the PSP refused it"},
	{Submitting, Checking, RoleWorker, "FinishCreate: answer unknown; BeginCreate: a redelivered create whose answer was never recorded"},
	{Submitting, Checking, RoleReconciler, "InterruptSubmitting: its create task is gone"},
	{Submitting, Queued, RoleWorker, "FinishCreate: provably not sent"},
	{Submitting, NeedsReview, RoleWorker, "FinishCreate: gave up (`--max-create-retries` tries not sent)"},
	{Checking, Created, RoleWorker, "RecordCheck found it; FinishCreate: a late definite answer to the same create"},
	{Checking, Rejected, RoleWorker, "FinishCreate: a late definite answer to the same create"},
	{Checking, Queued, RoleWorker, "RecordCheck: absence confirmed"},
	{Checking, NeedsReview, RoleWorker, "RecordCheck: creates or status checks used up"},
	{Created, Paid, RoleWorker, "RecordOutcome: the PSP reports it paid"},
	{Created, Failed, RoleWorker, "RecordOutcome: the PSP reports it failed"},
	{Created, NeedsReview, RoleWorker, "RecordOutcome: outcome window over"},
	{Paid, Returned, RoleWorker, "RecordWatch: a watch check (due, or moved to now by a PSP callback) finds a returned status"},
	{NeedsReview, Checking, RolePerson, "`payout resolve --recheck`"},
	{NeedsReview, Created, RolePerson, "`payout resolve --as created`"},
	{NeedsReview, Rejected, RolePerson, "`payout resolve --as rejected`"},
	{Rejected, NeedsReview, RoleWorker, "ContradictRejected: a PSP answer shows an order for a payout a person marked rejected"},
	{Queued, Held, RoleLoader, "HoldOverVelocity: the row is over its recipient's velocity limit, before the batch is loaded"},
	{Held, Queued, RolePerson, "`payout release`"},
	{Held, Cancelled, RolePerson, "`payout cancel`, `payout discard`"},
}

// States lists every state, final ones first, in the order reports show them
// (Machine's Rank).
var States = func() []State {
	out := make([]State, len(Machine))
	for _, s := range Machine {
		out[s.Rank] = s.State
	}
	return out
}()

// finalStates is the set of Machine's final states.
var finalStates = func() map[State]bool {
	m := map[State]bool{}
	for _, s := range Machine {
		if s.Final {
			m[s.State] = true
		}
	}
	return m
}()

// Info returns the state's entry in Machine, and whether it has one.
func (s State) Info() (StateInfo, bool) {
	for _, i := range Machine {
		if i.State == s {
			return i, true
		}
	}
	return StateInfo{}, false
}

// Open reports whether the state is one of Machine's and not final: an
// automatic step is still due (queued, submitting, checking). A created
// payout awaiting its outcome is open too, though its state is final: see
// Counts.Awaiting.
func (s State) Open() bool {
	i, ok := s.Info()
	return ok && !i.Final
}

// Label is how people read the state; an unknown state reads as itself.
func (s State) Label() string {
	if i, ok := s.Info(); ok {
		return i.Label
	}
	return strings.ReplaceAll(string(s), "_", " ")
}

// Allowed reports whether by may move a payout from from to to.
func Allowed(from, to State, by Role) bool {
	for _, t := range Transitions {
		if t.From == from && t.To == to && t.By == by {
			return true
		}
	}
	return false
}

// The phases of a batch, as its metadata in Redis records them: a batch
// is loading, then loaded (its rows handed to the workers) or awaiting
// approval, then discarded when refused, and archived at the end.
const (
	PhaseLoading   = "loading"           // rows are being registered; a rerun resumes
	PhaseLoaded    = "loaded"            // every row registered and handed to the workers
	PhaseAwaiting  = "awaiting_approval" // every row registered; no task until payout approve
	PhaseDiscarded = "discarded"         // refused at approval: every payout cancelled
)

// PhaseArchived is the phase an archived batch reports (the ledger's ArchivedBatch):
// its keys are gone, its files are in the archive folder.
const PhaseArchived = "archived"
