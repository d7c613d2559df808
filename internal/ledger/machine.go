package ledger

import (
	"fmt"
	"path/filepath"
	"runtime"
	"sort"
	"strings"

	"github.com/redis/go-redis/v9"
)

// Role is who may trigger a transition.
type Role string

// The roles of the payout state machine. Each transition script runs as one
// of them (Role.script): it may make only the moves Transitions gives its role.
const (
	Loader     Role = "loader"     // registers the rows of a file (payout run, payout load)
	Worker     Role = "worker"     // create, status and outcome tasks
	Reconciler Role = "reconciler" // the sweep that repairs what a lost task left
	Person     Role = "person"     // an operator: payout cancel, discard, resolve, the UI
)

// Roles lists every role, in the order docs/design.md names them.
var Roles = []Role{Loader, Worker, Reconciler, Person}

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
	{State: Queued, Rank: 8, Label: "queued", Color: "#9e9e9e", Tint: "#eeeeee",
		Meaning: "registered; a create task waits (none while the batch awaits approval)"},
	{State: Submitting, Rank: 7, Label: "submitting", Color: "#1565c0", Tint: "#e1bee7",
		Meaning: "create request in flight: written **before** the POST"},
	{State: Checking, Rank: 6, Label: "checking", Color: "#6a1b9a", Tint: "#e1bee7",
		Meaning: "outcome of a create unknown; status checks scheduled"},
	{State: Created, Final: true, Rank: 2, Label: "created", Color: "#2e7d32", Tint: "#c8e6c9",
		Meaning: "the PSP has the order (`pspOrderId`, `pspStatus` recorded); with outcome tracking it awaits its outcome; final with `--track-outcome=false`"},
	{State: Paid, Final: true, Rank: 0, Label: "paid", Color: "#1b5e20", Tint: "#c8e6c9",
		Meaning: "the PSP reports the money sent"},
	{State: Failed, Final: true, Rank: 1, Label: "failed", Color: "#ad1457", Tint: "#ffcdd2",
		Meaning: "the PSP reports it will not be paid; its status word and reason kept (`payout report --failed-only` for a corrected retry file; a reason that says the destination is gone for good, `account closed` or `card expired`, is left out of it unless `--include-final`)"},
	{State: Rejected, Final: true, Rank: 3, Label: "rejected", Color: "#c62828", Tint: "#ffcdd2",
		Meaning: "the PSP refused the request (400/422) with a message"},
	{State: Cancelled, Final: true, Rank: 5, Label: "cancelled", Color: "#616161", Tint: "#cfd8dc",
		Meaning: "an operator stopped it before it was sent (`payout cancel`, `payout discard`)"},
	{State: NeedsReview, Final: true, Rank: 4, Label: "needs review", Color: "#ef6c00", Tint: "#ffe0b2",
		Meaning: "automatic resolution gave up, or a PSP answer contradicted a person's `--as rejected`; a person decides"},
}

// Transitions lists every move a payout may make, and who may make it.
// A script that tries any other move fails with a MACHINE error before it
// counts or audits anything (luaMove).
var Transitions = []Transition{
	{"", Queued, Loader, "a row of a file is registered"},
	{Queued, Submitting, Worker, "BeginCreate, before the POST"},
	{Queued, Cancelled, Person, "`payout cancel`, `payout discard`"},
	{Submitting, Created, Worker, "FinishCreate: the PSP has the order"},
	{Submitting, Rejected, Worker, "FinishCreate: the PSP refused it"},
	{Submitting, Checking, Worker, "FinishCreate: answer unknown; BeginCreate: a redelivered create whose answer was never recorded"},
	{Submitting, Checking, Reconciler, "InterruptSubmitting: its create task is gone"},
	{Submitting, Queued, Worker, "FinishCreate: provably not sent"},
	{Submitting, NeedsReview, Worker, "FinishCreate: gave up (`--max-create-retries` tries not sent)"},
	{Checking, Created, Worker, "RecordCheck found it; FinishCreate: a late definite answer to the same create"},
	{Checking, Rejected, Worker, "FinishCreate: a late definite answer to the same create"},
	{Checking, Queued, Worker, "RecordCheck: absence confirmed"},
	{Checking, NeedsReview, Worker, "RecordCheck: creates or status checks used up"},
	{Created, Paid, Worker, "RecordOutcome: the PSP reports it paid"},
	{Created, Failed, Worker, "RecordOutcome: the PSP reports it failed"},
	{Created, NeedsReview, Worker, "RecordOutcome: outcome window over"},
	{NeedsReview, Checking, Person, "`payout resolve --recheck`"},
	{NeedsReview, Created, Person, "`payout resolve --as created`"},
	{NeedsReview, Rejected, Person, "`payout resolve --as rejected`"},
	{Rejected, NeedsReview, Worker, "ContradictRejected: a PSP answer shows an order for a payout a person marked rejected"},
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

// luaMachine is the Lua prelude of a script that runs as role: ROLE, and
// MOVES, the moves role may make as one string constant,
// '|from>to|from>to|' (from empty for a registration). A constant costs
// nothing per call; may() looks a move up in it with a plain string.find,
// only when the script moves a payout.
func luaMachine(role Role) string {
	var keys []string
	for _, t := range Transitions {
		if t.By == role {
			keys = append(keys, fmt.Sprintf("%s>%s", t.From, t.To))
		}
	}
	sort.Strings(keys)
	return fmt.Sprintf("\nlocal ROLE = '%s'\nlocal MOVES = '|%s|'\n", role, strings.Join(keys, "|"))
}

// declaredScript is a script composed by Role.script, kept for the tests
// that check the scripts against the machine.
type declaredScript struct {
	at   string // file:line of its declaration
	role Role
	body string // the script's own text, without the preludes
}

// declaredScripts are every script Role.script composed.
var declaredScripts []declaredScript

// script composes a script that may change payouts as role r: the
// machine's prelude for r (luaMachine), luaMove, then body.
func (r Role) script(body string) *redis.Script {
	_, file, line, _ := runtime.Caller(1)
	declaredScripts = append(declaredScripts, declaredScript{at: fmt.Sprintf("%s:%d", filepath.Base(file), line), role: r, body: body})
	return redis.NewScript(luaMachine(r) + luaMove + body)
}
