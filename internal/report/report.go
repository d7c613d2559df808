package report

import (
	"errors"
	"fmt"
	"iter"
	"slices"
	"strings"
	"time"

	"github.com/acme/payout/internal/card"
	"github.com/acme/payout/internal/lifecycle"
	"github.com/acme/payout/internal/money"
	"github.com/shopspring/decimal"
)

// states lists the ledger's states (lifecycle.States) as the rows carry them,
// in the order summaries show them: final states first, then the ones
// still in progress.
var states = func() []string {
	out := make([]string, len(lifecycle.States))
	for i, st := range lifecycle.States {
		out[i] = string(st)
	}
	return out
}()

// isFinal reports whether a payout in this state needs no more automatic
// processing of its create (lifecycle.State.Final). A created payout awaiting
// its outcome (Row.Awaiting) is in a final state but not done: see
// Summary.Final.
func isFinal(state string) bool { return lifecycle.State(state).Final() }

// The outcome groups finance reads (package documentation, "Outcome
// groups"): every row is in exactly one, so that their amounts add up to
// the file's total.
const (
	GroupPaid = "paid" // the PSP reported the money sent
	// GroupReturned: paid, then the PSP reported the money came back.
	// paid is what left for good; paid + returned is what was ever sent.
	GroupReturned = "returned"
	GroupFailed   = "failed"   // the PSP failed the order: will not be paid
	GroupPending  = "pending"  // in flight, or created and awaiting its outcome
	GroupNotSent  = "not_sent" // never became an order: rejected, cancelled, or provably never sent
	GroupUnknown  = "unknown"  // may have been sent, the outcome is not known: ask the PSP
)

// Groups lists the outcome groups in the order summaries show them.
var Groups = []string{GroupPaid, GroupReturned, GroupFailed, GroupPending, GroupNotSent, GroupUnknown}

// GroupMeaning says in a few words what each group means to finance.
var GroupMeaning = map[string]string{
	GroupPaid:     "money sent",
	GroupReturned: "money sent, then came back (returned, reversed, refunded, chargeback)",
	GroupFailed:   "will not be paid: the PSP failed the order",
	GroupPending:  "in progress or awaiting the PSP's outcome",
	GroupNotSent:  "never sent: rejected, cancelled or no order at the PSP",
	GroupUnknown:  "may have been sent: ask the PSP",
}

// notSentReasons start the error of a payout the workers moved to
// needs_review after proving that no order exists at the PSP (the create
// never reached it, or the PSP confirmed the absence after every create).
// A needs_review payout with any other error, or with a PSP order id, may
// have been paid and is in GroupUnknown.
var notSentReasons = []string{
	"PSP did not take the request after ",             // retries exhausted; nothing was sent
	"PSP has no order after ",                         // absence confirmed after the last create
	"cannot build the PSP request (nothing was sent)", // request never built
}

// GroupOf returns the outcome group of a row.
// An open state (lifecycle.State.Open) is pending; a state this does not
// name is unknown: the money may have left.
func GroupOf(r Row) string {
	if lifecycle.State(r.State).Open() {
		return GroupPending
	}
	switch r.State {
	case string(lifecycle.Paid):
		return GroupPaid
	case string(lifecycle.Returned):
		return GroupReturned
	case string(lifecycle.Failed):
		return GroupFailed
	case string(lifecycle.Created):
		if r.Awaiting {
			return GroupPending
		}
		// Accepted by the PSP, outcome not followed (--track-outcome=false).
		return GroupUnknown
	case string(lifecycle.Rejected), string(lifecycle.Cancelled):
		return GroupNotSent
	case string(lifecycle.Held):
		return GroupPending // a person may still release it
	case string(lifecycle.NeedsReview):
		if r.PSPOrderID == "" {
			for _, p := range notSentReasons {
				if strings.HasPrefix(r.Error, p) {
					return GroupNotSent
				}
			}
		}
		return GroupUnknown
	}
	return GroupUnknown
}

// noState labels, in summaries, the rows whose state is empty.
const noState = "(no state)"

// Row is one payout of a batch as it is reported.
type Row struct {
	Line        int          // line number in the payout file
	ExternalID  string       // the payer's reference of the payout
	Amount      money.Amount // amount as loaded
	Destination string       // masked card number
	State       string       // ledger state
	PSPOrderID  string       // order id at the PSP, when known
	PSPStatus   string       // last status reported by the PSP
	Attempts    int          // create requests sent
	Error       string       // why the payout is rejected or needs review
	UpdatedAt   time.Time    // last state change; zero when unknown
	// ResolvedBy and ResolutionNote tell which operator resolved the
	// payout out of needs_review, and why; empty when none did.
	ResolvedBy     string
	ResolutionNote string
	// Awaiting: created, and the workers follow the order to paid or
	// failed; the outcome is pending.
	Awaiting bool
	// Info holds the row's values of the file's informational columns
	// (Batch.InfoColumns), as written; missing trailing values are empty.
	Info []string
}

// Batch describes the payout file a batch was loaded from.
type Batch struct {
	ID       string       // batch id
	File     string       // name of the payout file
	LoadedAt time.Time    // when the file was loaded
	Rows     int          // number of payout rows in the file
	Total    money.Amount // sum of the file's amounts, as loaded
	// Scale is the number of decimal places amounts are written with
	// (money.DefaultScale for most currencies, 0 for currencies without
	// minor units). Amounts with more decimals are written exactly anyway.
	Scale int
	// InfoColumns name the payout file's informational columns (notes, a
	// pay date...), carried into the result file beside each row.
	InfoColumns []string
}

// StateTotal is the number of rows in a state and the sum of their amounts.
type StateTotal struct {
	State  string
	Rows   int
	Amount money.Amount
}

// GroupTotal is the number of rows in an outcome group and the sum of their
// amounts.
type GroupTotal struct {
	Group  string
	Rows   int
	Amount money.Amount
}

// Summary totals a batch by state and reconciles it with the file.
type Summary struct {
	ByState []StateTotal // the known states in the order of states, then unknown states by name
	// Awaiting are the created rows awaiting their outcome (part of the
	// created state and of GroupPending).
	Awaiting StateTotal
	// ByGroup are the outcome groups in the order of Groups; GroupsTotal
	// is the sum of their amounts.
	ByGroup     []GroupTotal
	GroupsTotal money.Amount
	Rows        int          // rows reported
	Total       money.Amount // sum of the amounts of the rows reported
	FileRows    int          // rows in the file as loaded (Batch.Rows)
	FileTotal   money.Amount // total of the file as loaded (Batch.Total)
	Reconciled  bool         // Rows == FileRows and Total == GroupsTotal == FileTotal, exactly
	Final       bool         // every row is in a final state and none awaits its outcome
	Scale       int          // decimal places of amounts (Batch.Scale)
}

// ErrOrder is matched, via errors.Is, by every OrderError.
var ErrOrder = errors.New("rows not in strictly increasing line order")

// OrderError tells that a row came after a row with the same or a later line
// number: the rows were not sorted, or a line was reported twice.
type OrderError struct {
	Batch    string
	Line     int
	Previous int
}

func (e *OrderError) Error() string {
	what := "comes after line"
	if e.Line == e.Previous {
		what = "is repeated after line"
	}
	return fmt.Sprintf("report of batch %s: line %d %s %d", e.Batch, e.Line, what, e.Previous)
}

// Is lets errors.Is(err, ErrOrder) match.
func (e *OrderError) Is(target error) bool { return target == ErrOrder }

// FromSlice adapts a slice of rows to the row source the writers take.
func FromSlice(rows []Row) iter.Seq2[Row, error] {
	return func(yield func(Row, error) bool) {
		for _, r := range rows {
			if !yield(r, nil) {
				return
			}
		}
	}
}

// Tally accumulates a Summary one row at a time. Its memory does not grow
// with the number of rows. The zero value is not usable; use NewTally.
type Tally struct {
	batch    Batch
	known    []StateTotal
	other    map[string]*StateTotal
	groups   []GroupTotal
	awaiting StateTotal
	rows     int
}

// NewTally starts an empty summary of batch b.
func NewTally(b Batch) *Tally {
	t := &Tally{batch: b, known: make([]StateTotal, len(states)), groups: make([]GroupTotal, len(Groups)),
		awaiting: StateTotal{State: string(lifecycle.Created), Amount: money.Zero}}
	for i, s := range states {
		t.known[i] = StateTotal{State: s, Amount: money.Zero}
	}
	for i, g := range Groups {
		t.groups[i] = GroupTotal{Group: g, Amount: money.Zero}
	}
	return t
}

// Add counts a row.
func (t *Tally) Add(r Row) {
	t.rows++
	g := GroupOf(r)
	for i := range t.groups {
		if t.groups[i].Group == g {
			t.groups[i].Rows++
			t.groups[i].Amount = t.groups[i].Amount.Add(r.Amount)
		}
	}
	if r.State == string(lifecycle.Created) && r.Awaiting {
		t.awaiting.Rows++
		t.awaiting.Amount = t.awaiting.Amount.Add(r.Amount)
	}
	for i := range t.known {
		if t.known[i].State == r.State {
			t.known[i].Rows++
			t.known[i].Amount = t.known[i].Amount.Add(r.Amount)
			return
		}
	}
	state := r.State
	if state == "" {
		state = noState
	}
	if t.other == nil {
		t.other = make(map[string]*StateTotal)
	}
	st := t.other[state]
	if st == nil {
		st = &StateTotal{State: state, Amount: money.Zero}
		t.other[state] = st
	}
	st.Rows++
	st.Amount = st.Amount.Add(r.Amount)
}

// Summary returns the totals of the rows added so far.
func (t *Tally) Summary() Summary {
	s := Summary{
		ByState:   make([]StateTotal, 0, len(t.known)+len(t.other)),
		Rows:      t.rows,
		Total:     money.Zero,
		FileRows:  t.batch.Rows,
		FileTotal: t.batch.Total,
		Final:     len(t.other) == 0 && t.awaiting.Rows == 0,
		Scale:     t.batch.Scale,
		Awaiting:  t.awaiting,
		ByGroup:   slices.Clone(t.groups),
	}
	s.ByState = append(s.ByState, t.known...)
	for _, st := range t.known {
		if !isFinal(st.State) && st.Rows > 0 {
			s.Final = false
		}
	}
	others := make([]StateTotal, 0, len(t.other))
	for _, st := range t.other {
		others = append(others, *st)
	}
	slices.SortFunc(others, func(a, b StateTotal) int {
		switch {
		case a.State < b.State:
			return -1
		case a.State > b.State:
			return 1
		}
		return 0
	})
	s.ByState = append(s.ByState, others...)
	for _, st := range s.ByState {
		s.Total = s.Total.Add(st.Amount)
	}
	s.GroupsTotal = money.Zero
	for _, g := range s.ByGroup {
		s.GroupsTotal = s.GroupsTotal.Add(g.Amount)
	}
	s.Reconciled = s.Rows == s.FileRows && s.Total.Cmp(s.FileTotal) == 0 && s.GroupsTotal.Cmp(s.FileTotal) == 0
	return s
}

// Summarize totals the rows of batch b. It stops at the first error of the
// row source and returns it wrapped.
func Summarize(b Batch, rows iter.Seq2[Row, error]) (Summary, error) {
	t := NewTally(b)
	for r, err := range rows {
		if err != nil {
			return Summary{}, sourceError(b, err)
		}
		t.Add(r)
	}
	return t.Summary(), nil
}

func sourceError(b Batch, err error) error {
	return fmt.Errorf("report of batch %s: reading rows: %w", b.ID, err)
}

// orderCheck refuses rows whose line does not increase strictly.
type orderCheck struct {
	batch string
	prev  int
	seen  bool
}

func (c *orderCheck) next(line int) error {
	if c.seen && line <= c.prev {
		return &OrderError{Batch: c.batch, Line: line, Previous: c.prev}
	}
	c.prev, c.seen = line, true
	return nil
}

// formatAmount writes a exactly, with scale decimal places unless that would
// drop non-zero digits.
func formatAmount(a money.Amount, scale int) string { return formatDecimal(a.Decimal(), scale) }

// formatDecimal writes d exactly, with scale decimal places unless that
// would drop non-zero digits.
func formatDecimal(d decimal.Decimal, scale int) string {
	if scale < 0 {
		scale = 0
	}
	if d.Exponent() >= -int32(scale) || d.Equal(d.Truncate(int32(scale))) {
		return d.StringFixed(int32(scale))
	}
	return d.String()
}

// formatTime writes t in RFC 3339, UTC, to the second; "" for the zero time.
func formatTime(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format(time.RFC3339)
}

// scrub masks card numbers in free text; it allocates only when it must.
func scrub(s string) string {
	digits := 0
	for i := 0; i < len(s); i++ {
		if s[i] >= '0' && s[i] <= '9' {
			digits++
		}
	}
	if digits < card.MinDigits {
		return s
	}
	return card.Scrub(s)
}
