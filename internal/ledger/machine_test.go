package ledger

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/acme/payout/internal/decide"
	"github.com/acme/payout/internal/lifecycle"
	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
)

// checkLuaMoves runs move() as every role for every pair of states (and a
// registration) and checks that exactly the moves Allowed gives that role
// pass: the Lua table luaMachine builds is the Go table. A refused move
// must leave the counters untouched.
func checkLuaMoves(t *testing.T, rdb redis.UniversalClient) {
	ctx := context.Background()
	const body = `
local from = ARGV[1]
if from == '' then from = nil end
move(KEYS[1], from, ARGV[2], '7')
return 1
`
	froms := []lifecycle.State{""}
	for _, s := range lifecycle.Machine {
		froms = append(froms, s.State)
	}
	for _, r := range lifecycle.Roles {
		s := redis.NewScript(luaMachine(r) + luaMove + body)
		for _, from := range froms {
			for _, to := range lifecycle.States {
				key := fmt.Sprintf("machine:{t}:%s:%s:%s", r, from, to)
				err := s.Run(ctx, rdb, []string{key}, string(from), string(to)).Err()
				allowed := lifecycle.Allowed(from, to, r)
				switch {
				case allowed && err != nil:
					t.Errorf("%s: %q -> %s refused: %v", r, from, to, err)
				case !allowed && (err == nil || !strings.Contains(err.Error(), "MACHINE")):
					t.Errorf("%s: %q -> %s = %v, want a MACHINE error", r, from, to, err)
				case !allowed:
					if n, _ := rdb.Exists(ctx, key).Result(); n != 0 {
						t.Errorf("%s: refused %q -> %s still counted", r, from, to)
					}
				}
			}
		}
	}
}

func TestLuaMovesAreTheTable(t *testing.T) {
	m := miniredis.RunT(t)
	rdb := redis.NewClient(&redis.Options{Addr: m.Addr()})
	t.Cleanup(func() { rdb.Close() })
	checkLuaMoves(t, rdb)
}

// Where the scripts name payout states: a move's literal end, the state an
// HSET writes, a target assigned or passed on, a comparison of a state, a
// counter.
var (
	luaMoveRE    = regexp.MustCompile(`move\([^,]+,\s*(?:'(\w*)'|[\w\[\]]+),\s*(?:'(\w*)'|\w+)`)
	luaWriteRE   = regexp.MustCompile(`'state',\s*'(\w*)'|\bto(?:,\s*\w+)*\s*=\s*'(\w*)'|leave\('(\w*)'`)
	luaCompareRE = regexp.MustCompile(`(?:\bst|\bto|h\[1\])\s*[~=]=\s*'(\w*)'`)
	luaCounterRE = regexp.MustCompile(`'[nu]:(\w*)'`)
	luaFetchRE   = regexp.MustCompile(`fetch\([^)]*\)`)
)

// TestScriptsNameOnlyTheirMoves reads every script composed by script(role, body):
// each state it names is declared, each state it writes is the end of a
// move its role may make, and each move between two named states is one
// its role may make. That no path of a script makes another move is
// enforced when it runs (move() refuses it), and TestEveryTransitionIsMade
// makes every move of the table through the scripts.
func TestScriptsNameOnlyTheirMoves(t *testing.T) {
	// awaiting: the counter of created payouts awaiting their outcome;
	// watched: of paid payouts under watch (watch.go).
	known := map[string]bool{"awaiting": true, "watched": true}
	for _, s := range lifecycle.Machine {
		known[string(s.State)] = true
	}
	into, outOf := map[lifecycle.Role]map[lifecycle.State]bool{}, map[lifecycle.Role]map[lifecycle.State]bool{}
	for _, tr := range lifecycle.Transitions {
		if into[tr.By] == nil {
			into[tr.By], outOf[tr.By] = map[lifecycle.State]bool{}, map[lifecycle.State]bool{}
		}
		into[tr.By][tr.To], outOf[tr.By][tr.From] = true, true
	}
	found := map[lifecycle.Role]int{}
	for _, s := range declaredScripts {
		// fetch names the fields it reads ('state', 'units', ...).
		s.body = luaFetchRE.ReplaceAllString(s.body, "")
		for _, m := range luaMoveRE.FindAllStringSubmatch(s.body, -1) {
			found[s.role]++
			from, to := lifecycle.State(m[1]), lifecycle.State(m[2])
			switch {
			case m[1] != "" && m[2] != "" && !lifecycle.Allowed(from, to, s.role):
				t.Errorf("%s (%s): %s names the move %s -> %s, which the table does not give %s", s.at, s.role, m[0], from, to, s.role)
			case m[1] != "" && !outOf[s.role][from]:
				t.Errorf("%s (%s): %s: no move of the table leaves %q by %s", s.at, s.role, m[0], from, s.role)
			case m[2] != "" && !into[s.role][to]:
				t.Errorf("%s (%s): %s: no move of the table takes a payout to %q by %s", s.at, s.role, m[0], to, s.role)
			}
		}
		for _, m := range luaWriteRE.FindAllStringSubmatch(s.body, -1) {
			found[s.role]++
			to := lifecycle.State(m[1] + m[2] + m[3])
			if !into[s.role][to] {
				t.Errorf("%s (%s): %s: no move of the table takes a payout to %q by %s", s.at, s.role, m[0], to, s.role)
			}
		}
		for _, re := range []*regexp.Regexp{luaCompareRE, luaCounterRE} {
			for _, m := range re.FindAllStringSubmatch(s.body, -1) {
				found[s.role]++
				if !known[m[1]] {
					t.Errorf("%s (%s): %s names %q, not a state of the table", s.at, s.role, m[0], m[1])
				}
			}
		}
	}
	for _, r := range lifecycle.Roles {
		if found[r] == 0 {
			t.Errorf("found no move or state write in the scripts of %s: the patterns no longer match the scripts", r)
		}
	}
}

// transitionCase brings payout E1 of batch b to From, then makes the move
// as its role through the ledger's API.
type transitionCase struct {
	setup func(t *testing.T, l *Ledger, clk *fakeClock) // from a registered (queued) payout to From
	move  func(t *testing.T, l *Ledger, clk *fakeClock) error
}

var machineWindow = time.Hour

func machineMust(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// reachScheduled schedules E1 for a release time that has come.
func reachScheduled(t *testing.T, l *Ledger, c *fakeClock) {
	_, err := l.Schedule().PutLocked(context.Background(), "b", "", []Scheduled{{ExternalID: "E1", At: c.t.Add(-time.Minute)}})
	machineMust(t, err)
}

func reachSubmitting(t *testing.T, l *Ledger, _ *fakeClock) {
	_, err := l.BeginCreate(context.Background(), "b", "E1", 1)
	machineMust(t, err)
}

func reachChecking(t *testing.T, l *Ledger, clk *fakeClock) {
	reachSubmitting(t, l, clk)
	_, err := l.FinishCreate(context.Background(), "b", "E1", 1, decide.CreateResult{To: lifecycle.Checking})
	machineMust(t, err)
}

func reachCreated(t *testing.T, l *Ledger, clk *fakeClock) {
	reachSubmitting(t, l, clk)
	_, err := l.FinishCreate(context.Background(), "b", "E1", 1, decide.CreateResult{To: lifecycle.Created, OrderID: "WD-1", OutcomeWindow: machineWindow})
	machineMust(t, err)
}

func reachReview(t *testing.T, l *Ledger, clk *fakeClock) {
	reachSubmitting(t, l, clk)
	_, err := l.FinishCreate(context.Background(), "b", "E1", 1, decide.CreateResult{To: lifecycle.NeedsReview, Error: "gave up"})
	machineMust(t, err)
}

func viaFinish(to lifecycle.State) func(*testing.T, *Ledger, *fakeClock) error {
	return func(_ *testing.T, l *Ledger, _ *fakeClock) error {
		_, err := l.FinishCreate(context.Background(), "b", "E1", 1, decide.CreateResult{To: to, OrderID: "WD-1", Error: "e"})
		return err
	}
}

func viaCheck(o decide.CheckOutcome) func(*testing.T, *Ledger, *fakeClock) error {
	return func(_ *testing.T, l *Ledger, _ *fakeClock) error {
		_, err := recordCheck(context.Background(), l, "b", "E1", 1, decide.CheckAnswer{Outcome: o, OrderID: "WD-1"},
			decide.CheckPolicy{AbsentChecks: 1, MaxCreates: 2, MaxFaults: 1})
		return err
	}
}

func viaOutcome(v decide.Verdict, after time.Duration) func(*testing.T, *Ledger, *fakeClock) error {
	return func(_ *testing.T, l *Ledger, clk *fakeClock) error {
		clk.add(after)
		_, err := recordOutcome(context.Background(), l, "b", "E1", 1, v, "S", "r", 200)
		return err
	}
}

// backToLoading puts batch b back in phase loading, where the loader
// holds rows over the velocity limit.
func backToLoading(t *testing.T, l *Ledger, _ *fakeClock) {
	machineMust(t, l.rdb.HSet(context.Background(), metaKey("b"), "phase", lifecycle.PhaseLoading).Err())
}

func reachHeld(t *testing.T, l *Ledger, c *fakeClock) {
	backToLoading(t, l, c)
	machineMust(t, mustMove(l.HoldOverVelocity(context.Background(), "b", "E1", "over the recipient velocity limit", "tag")))
	machineMust(t, l.rdb.HSet(context.Background(), metaKey("b"), "phase", lifecycle.PhaseLoaded).Err())
}

// mustMove is the error of a move that reports whether it moved.
func mustMove(moved bool, err error) error {
	if err == nil && !moved {
		return errors.New("not moved")
	}
	return err
}

var machineResolution = Resolution{By: "alice", Note: "checked with the PSP"}

// transitionCases makes every move of Transitions, keyed "from>to by".
var transitionCases = map[string]transitionCase{
	">queued by loader": {move: func(*testing.T, *Ledger, *fakeClock) error { return nil }},
	"queued>submitting by worker": {move: func(t *testing.T, l *Ledger, c *fakeClock) error {
		_, err := l.BeginCreate(context.Background(), "b", "E1", 1)
		return err
	}},
	"queued>cancelled by person": {move: func(t *testing.T, l *Ledger, c *fakeClock) error {
		_, err := l.Cancel(context.Background(), "b", "E1", "alice", "wrong account")
		return err
	}},
	"queued>scheduled by loader": {move: func(t *testing.T, l *Ledger, c *fakeClock) error {
		_, err := l.Schedule().PutLocked(context.Background(), "b", "", []Scheduled{{ExternalID: "E1", At: c.t.Add(time.Hour)}})
		return err
	}},
	"scheduled>queued by worker": {setup: reachScheduled, move: func(t *testing.T, l *Ledger, c *fakeClock) error {
		r, _, err := l.Schedule().Release(context.Background(), "b", "E1")
		if err == nil && r != Released {
			err = fmt.Errorf("release: %s", r)
		}
		return err
	}},
	"scheduled>cancelled by person": {setup: reachScheduled, move: func(t *testing.T, l *Ledger, c *fakeClock) error {
		_, err := l.Cancel(context.Background(), "b", "E1", "alice", "not this month")
		return err
	}},
	"queued>cancelled by reconciler": {move: func(t *testing.T, l *Ledger, c *fakeClock) error {
		_, err := l.cancelWith(context.Background(), cancelExpiredScript, "b", "E1", ExpiryActor, "batch discarded: approval expired after 7 days")
		return err
	}},
	"submitting>created by worker":      {setup: reachSubmitting, move: viaFinish(lifecycle.Created)},
	"submitting>rejected by worker":     {setup: reachSubmitting, move: viaFinish(lifecycle.Rejected)},
	"submitting>checking by worker":     {setup: reachSubmitting, move: viaFinish(lifecycle.Checking)},
	"submitting>queued by worker":       {setup: reachSubmitting, move: viaFinish(lifecycle.Queued)},
	"submitting>needs_review by worker": {setup: reachSubmitting, move: viaFinish(lifecycle.NeedsReview)},
	"submitting>checking by reconciler": {setup: reachSubmitting, move: func(t *testing.T, l *Ledger, c *fakeClock) error {
		_, ok, err := l.InterruptSubmitting(context.Background(), "b", "E1", 1, 0)
		if err == nil && !ok {
			err = errors.New("not interrupted")
		}
		return err
	}},
	"checking>created by worker":      {setup: reachChecking, move: viaCheck(decide.Found)},
	"checking>rejected by worker":     {setup: reachChecking, move: viaFinish(lifecycle.Rejected)},
	"checking>queued by worker":       {setup: reachChecking, move: viaCheck(decide.Missing)},
	"checking>needs_review by worker": {setup: reachChecking, move: viaCheck(decide.NoAnswer)},
	"created>paid by worker":          {setup: reachCreated, move: viaOutcome(decide.VerdictPaid, 0)},
	"created>failed by worker":        {setup: reachCreated, move: viaOutcome(decide.VerdictFailed, 0)},
	"created>needs_review by worker":  {setup: reachCreated, move: viaOutcome(decide.VerdictPending, 2*machineWindow)},
	"needs_review>checking by person": {setup: reachReview, move: func(t *testing.T, l *Ledger, c *fakeClock) error {
		_, err := l.Recheck(context.Background(), "b", "E1", machineResolution)
		return err
	}},
	"needs_review>created by person": {setup: reachReview, move: func(t *testing.T, l *Ledger, c *fakeClock) error {
		_, err := l.resolveAsCreated(context.Background(), "b", "E1", "WD-1", "", machineResolution)
		return err
	}},
	"needs_review>rejected by person": {setup: reachReview, move: func(t *testing.T, l *Ledger, c *fakeClock) error {
		_, err := l.ResolveAsRejected(context.Background(), "b", "E1", machineResolution)
		return err
	}},
	"queued>held by loader": {setup: backToLoading, move: func(t *testing.T, l *Ledger, c *fakeClock) error {
		return mustMove(l.HoldOverVelocity(context.Background(), "b", "E1", "over the recipient velocity limit", "tag"))
	}},
	"held>queued by person": {setup: reachHeld, move: func(t *testing.T, l *Ledger, c *fakeClock) error {
		_, err := l.Release(context.Background(), "b", "E1", "alice", "known supplier")
		return err
	}},
	"held>cancelled by person": {setup: reachHeld, move: func(t *testing.T, l *Ledger, c *fakeClock) error {
		_, err := l.Cancel(context.Background(), "b", "E1", "alice", "not ours")
		return err
	}},
	"rejected>needs_review by worker": {setup: func(t *testing.T, l *Ledger, c *fakeClock) {
		reachReview(t, l, c)
		if _, err := l.ResolveAsRejected(context.Background(), "b", "E1", machineResolution); err != nil {
			t.Fatal(err)
		}
	}, move: func(t *testing.T, l *Ledger, c *fakeClock) error {
		return l.ContradictRejected(context.Background(), "b", "E1", Contradiction{OrderID: "WD-1", PSPStatus: "Paid", Note: "contradicted"})
	}},
}

// TestEveryTransitionIsMade makes every move of the table through the
// ledger's API, as its role, and checks the payout's state and the
// counters after it. A move added to the table needs its case here.
func TestEveryTransitionIsMade(t *testing.T) {
	for _, tr := range lifecycle.Transitions {
		name := fmt.Sprintf("%s>%s by %s", tr.From, tr.To, tr.By)
		t.Run(name, func(t *testing.T) {
			tc, ok := transitionCases[name]
			if !ok {
				t.Fatalf("no case makes the move %s: add one to transitionCases", name)
			}
			l, clk := newTestLedger(t)
			seed(t, l, "b", 1)
			if tc.setup != nil {
				tc.setup(t, l, clk)
			}
			if tr.From != "" {
				mustState(t, l, "b", "E1", tr.From)
			}
			// The payout's 'entered' field before the move, made older
			// than any time the move can stamp (a registration has none:
			// a queued payout's age is its batch's).
			if tr.From != "" {
				machineMust(t, l.rdb.HSet(context.Background(), payoutKey("b", "E1"), "entered", 1).Err())
			}
			machineMust(t, tc.move(t, l, clk))
			mustState(t, l, "b", "E1", tr.To)
			c, err := l.counts(context.Background(), "b")
			machineMust(t, err)
			if c.Rows[tr.To] != 1 || c.Total() != 1 {
				t.Errorf("counts after the move: %+v", c.Rows)
			}
			// The console's index per state followed the move.
			if kept, err := stateIndexKept(context.Background(), l, "b"); err != nil || !kept {
				t.Errorf("index per state after the move: kept %v, %v", kept, err)
			}
			if tr.To != lifecycle.Queued {
				// E1 is on line 2 of the file (seed): its score.
				if score, err := l.rdb.ZScore(context.Background(), stateIndexKey("b", tr.To), "E1").Result(); err != nil || score != 2 {
					t.Errorf("index of %s: E1 scored %v, %v; want its line, 2", tr.To, score, err)
				}
			}
			if tr.From != "" {
				// The move stamped when the payout entered its state.
				at, err := l.rdb.HGet(context.Background(), payoutKey("b", "E1"), "entered").Int64()
				if err != nil || at <= 1 {
					t.Errorf("entered = %d, %v; want the move's time", at, err)
				}
			}
		})
	}
	for name := range transitionCases {
		found := false
		for _, tr := range lifecycle.Transitions {
			found = found || name == fmt.Sprintf("%s>%s by %s", tr.From, tr.To, tr.By)
		}
		if !found {
			t.Errorf("case %s makes a move the table does not have", name)
		}
	}
}

// TestRefusedMoveWritesNothing: a target the table does not allow, given
// to a script that takes its target from its arguments, is refused before
// anything is written.
func TestRefusedMoveWritesNothing(t *testing.T) {
	tests := []struct {
		name  string
		setup func(*testing.T, *Ledger, *fakeClock)
		move  func(*testing.T, *Ledger, *fakeClock) error
		want  string
	}{
		{"finish create to paid", reachSubmitting, viaFinish(lifecycle.Paid), "MACHINE"},
		{"finish create to cancelled", reachSubmitting, viaFinish(lifecycle.Cancelled), "MACHINE"},
		{"finish create to two states", reachSubmitting, viaFinish("created|submitting>rejected"), "MACHINE"},
		{"resolve to paid", reachReview, func(_ *testing.T, l *Ledger, _ *fakeClock) error {
			_, err := l.resolve(context.Background(), "b", "E1", lifecycle.Paid, "", "", machineResolution, false)
			return err
		}, "bad target"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l, clk := newTestLedger(t)
			ctx := context.Background()
			seed(t, l, "b", 1)
			tt.setup(t, l, clk)
			before, _ := l.Get(ctx, "b", "E1")
			audit, _ := l.Audit().Len(ctx, "b")
			err := tt.move(t, l, clk)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("move = %v, want an error with %q", err, tt.want)
			}
			after, _ := l.Get(ctx, "b", "E1")
			if after.State != before.State || after.UpdatedAt != before.UpdatedAt || after.Error != before.Error {
				t.Errorf("payout changed: %+v -> %+v", before, after)
			}
			if n, _ := l.Audit().Len(ctx, "b"); n != audit {
				t.Errorf("audit entries %d -> %d", audit, n)
			}
			c, _ := l.counts(ctx, "b")
			if c.Rows[before.State] != 1 || c.Total() != 1 {
				t.Errorf("counts moved: %+v", c.Rows)
			}
		})
	}
}
