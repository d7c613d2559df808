package operator_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
	"github.com/rs/zerolog"

	"github.com/acme/payout/internal/access"
	"github.com/acme/payout/internal/cli"
	"github.com/acme/payout/internal/decide"
	"github.com/acme/payout/internal/ledger"
	"github.com/acme/payout/internal/money"
	"github.com/acme/payout/internal/operator"
	"github.com/acme/payout/internal/psp"
	"github.com/acme/payout/internal/queue"
	"github.com/acme/payout/internal/ui"
	"github.com/acme/payout/internal/view"
)

// start is a starting state: batch b, loaded by bob.
type start func(t *testing.T, l *ledger.Ledger)

// awaiting: P1, P2 queued, the batch awaiting approval (four-eyes when
// fourEyes).
func awaiting(fourEyes bool) start {
	return func(t *testing.T, l *ledger.Ledger) {
		ctx := context.Background()
		if _, _, err := l.BeginBatch(ctx, ledger.Batch{ID: "b", File: "f.csv", LoadedAt: time.Now(), Rows: 2, Total: money.MustParse("20.00"),
			Scale: 2, LoadedBy: "bob", FourEyes: fourEyes}); err != nil {
			t.Fatal(err)
		}
		var ps []ledger.NewPayout
		for i, ext := range []string{"P1", "P2"} {
			ps = append(ps, ledger.NewPayout{Line: i + 2, ExternalID: ext, Amount: money.MustParse("10.00"), Telecom: "MTS", Destination: "telecom MTS"})
		}
		if _, err := l.Register(ctx, "b", ps, 2); err != nil {
			t.Fatal(err)
		}
		if err := l.Controls().HoldBatch(ctx, "b", "approval required"); err != nil {
			t.Fatal(err)
		}
	}
}

// approved: awaiting, then approved by carol, P2's create begun
// (submitting).
func approved(t *testing.T, l *ledger.Ledger) {
	awaiting(false)(t, l)
	ctx := context.Background()
	if _, err := l.Controls().Approve(ctx, "b", ledger.Approval{By: "carol"}); err != nil {
		t.Fatal(err)
	}
	if b, err := l.BeginCreate(ctx, "b", "P2", 1); err != nil || b.Action != decide.Proceed {
		t.Fatalf("begin P2: %+v %v", b, err)
	}
}

// held: P1 queued, P2 held over its recipient's velocity limit, the
// batch loaded.
func held(t *testing.T, l *ledger.Ledger) {
	ctx := context.Background()
	if _, _, err := l.BeginBatch(ctx, ledger.Batch{ID: "b", File: "f.csv", LoadedAt: time.Now(), Rows: 2, Total: money.MustParse("20.00"),
		Scale: 2, LoadedBy: "bob"}); err != nil {
		t.Fatal(err)
	}
	var ps []ledger.NewPayout
	for i, ext := range []string{"P1", "P2"} {
		ps = append(ps, ledger.NewPayout{Line: i + 2, ExternalID: ext, Amount: money.MustParse("10.00"), Telecom: "MTS", Destination: "telecom MTS"})
	}
	if _, err := l.Register(ctx, "b", ps, 2); err != nil {
		t.Fatal(err)
	}
	if moved, err := l.HoldOverVelocity(ctx, "b", "P2", "over the recipient velocity limit: telecom MTS has 5 payouts today, the limit is 5 a day", "tag"); err != nil || !moved {
		t.Fatalf("hold P2: %v %v", moved, err)
	}
	if err := l.FinishBatch(ctx, "b"); err != nil {
		t.Fatal(err)
	}
}

// review: R1, R2 in needs_review (four-eyes when fourEyes); with
// proposed, alice proposed marking R2 rejected.
func review(fourEyes, proposed bool) start {
	return func(t *testing.T, l *ledger.Ledger) {
		ctx := context.Background()
		operator.SeedReview(t, l, ledger.Batch{LoadedBy: "bob", FourEyes: fourEyes})
		if proposed {
			r, err := l.As("alice").ResolveAsRejected(ctx, "b", "R2", ledger.Resolution{By: "alice", Note: "closed account", FourEyes: true})
			if err != nil || !r.Proposed {
				t.Fatalf("proposal: %+v %v", r, err)
			}
		}
	}
}

// pausedQueue: the payout queue paused (by bob); with rolledBack, the
// ledger marked as gone back in time.
func pausedQueue(rolledBack bool) start {
	return func(t *testing.T, l *ledger.Ledger) {
		awaiting(false)(t, l)
		a := operator.New(rdbOf[l], nil, zerolog.Nop()).As(access.Principal{Name: "bob", Roles: access.Everyone})
		if _, err := a.Pause(context.Background(), operator.QueueSwitch{By: "bob", How: "setup"}); err != nil {
			t.Fatal(err)
		}
		if rolledBack {
			if err := l.RecordRollback(context.Background(), "epoch 7 seen, 5 found"); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// desk is the PSP's back office both sides ask: WD-77 is R1's order; it
// has none for R2.
func desk(t *testing.T) string {
	orders := map[string]map[string]string{
		"WD-77": {"externalId": "R1", "pspDepositOrderID": "WD-77", "status": "Processing", "amount": "10.25"},
		"R1":    {"externalId": "R1", "pspDepositOrderID": "WD-77", "status": "Processing", "amount": "10.25"},
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id, ok := strings.CutPrefix(r.URL.Path, psp.PathWithdrawalStatus)
		o, found := orders[id]
		if !ok || !found {
			http.Error(w, `{"message":"order not found"}`, http.StatusNotFound)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(o)
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

// command is one person's command as the CLI takes it and as the console
// does.
type command struct {
	name    string
	start   start
	who     string
	env     map[string]string // the deployment's policy (PAYOUT_FOUR_EYES)
	cli     []string          // after the command's name and --redis
	console func(ctx context.Context, u operator.UIControls) (string, error)
	want    error // the refusal's kind; nil: done
	nothing bool  // done, but nothing to do (no audit entry)
	// roles is the deployment's roles file (both sides read it: payout
	// --roles-file, the console's principal); "": none, everyone holds
	// every role but admin.
	roles string
}

// team is a roles file: vic views, mo makes, ann approves, otto operates.
const team = `person vic: viewer
person mo: maker
person ann: approver
person otto: operator
`

const token = "test-token-0123456789"

// TestCLIAndConsoleRunTheSameCommands drives every person's command once
// through the command line (cli.MainWith, as the person) and once through
// the console's controls (operator.UIControls, as the signed-in person),
// each from the same starting state on its own Redis, and compares what
// the ledger and the queue hold afterwards (every payout, the batch, both
// audit trails with their actors, the queue) and what each said: the same
// words, the same refusal (errors.Is its kind).
func TestCLIAndConsoleRunTheSameCommands(t *testing.T) {
	fourEyes := map[string]string{"PAYOUT_FOUR_EYES": "true"}
	decide := func(ext, by, action, note, order string) func(ctx context.Context, u operator.UIControls) (string, error) {
		return func(ctx context.Context, u operator.UIControls) (string, error) {
			return u.DecidePayout(ctx, "b", ext, ui.Decision{Action: action, By: by, Note: note, OrderID: order})
		}
	}
	dec := func(action, note, order string) func(ctx context.Context, u operator.UIControls) (string, error) {
		return decide("R1", "alice", action, note, order)
	}
	tests := []command{
		{name: "approve", start: awaiting(false), who: "alice", cli: []string{"b"},
			console: func(ctx context.Context, u operator.UIControls) (string, error) {
				return u.Approve(ctx, "b", "alice", "")
			}},
		{name: "approve/wrong state", start: approved, who: "alice", cli: []string{"b"}, want: operator.ErrWrongState,
			console: func(ctx context.Context, u operator.UIControls) (string, error) {
				return u.Approve(ctx, "b", "alice", "")
			}},
		{name: "approve/four-eyes, the loader", start: awaiting(true), who: "bob", cli: []string{"b"}, want: operator.ErrNeedsSecondPerson,
			console: func(ctx context.Context, u operator.UIControls) (string, error) {
				return u.Approve(ctx, "b", "bob", "")
			}},
		{name: "approve/note not recordable", start: awaiting(false), who: "alice", cli: []string{"--note", "ok\rbob approved", "b"}, want: operator.ErrIncomplete,
			console: func(ctx context.Context, u operator.UIControls) (string, error) {
				return u.Approve(ctx, "b", "alice", "ok\rbob approved")
			}},
		{name: "discard", start: awaiting(false), who: "alice", cli: []string{"--note", "wrong month", "b"},
			console: func(ctx context.Context, u operator.UIControls) (string, error) {
				return u.Discard(ctx, "b", "alice", "wrong month")
			}},
		{name: "discard/no note", start: awaiting(false), who: "alice", cli: []string{"b"}, want: operator.ErrIncomplete,
			console: func(ctx context.Context, u operator.UIControls) (string, error) {
				return u.Discard(ctx, "b", "alice", "")
			}},
		{name: "discard/wrong state", start: approved, who: "alice", cli: []string{"--note", "wrong month", "b"}, want: operator.ErrWrongState,
			console: func(ctx context.Context, u operator.UIControls) (string, error) {
				return u.Discard(ctx, "b", "alice", "wrong month")
			}},
		{name: "cancel", start: approved, who: "alice", cli: []string{"--note", "duplicate", "b", "P1"},
			console: func(ctx context.Context, u operator.UIControls) (string, error) {
				return u.DecidePayout(ctx, "b", "P1", ui.Decision{Action: ui.DecideCancel, By: "alice", Note: "duplicate"})
			}},
		{name: "cancel/wrong state, sent", start: approved, who: "alice", cli: []string{"--note", "duplicate", "b", "P2"}, want: operator.ErrWrongState,
			console: func(ctx context.Context, u operator.UIControls) (string, error) {
				return u.DecidePayout(ctx, "b", "P2", ui.Decision{Action: ui.DecideCancel, By: "alice", Note: "duplicate"})
			}},
		{name: "cancel/not found", start: approved, who: "alice", cli: []string{"--note", "duplicate", "b", "P9"}, want: operator.ErrNotFound,
			console: func(ctx context.Context, u operator.UIControls) (string, error) {
				return u.DecidePayout(ctx, "b", "P9", ui.Decision{Action: ui.DecideCancel, By: "alice", Note: "duplicate"})
			}},
		{name: "cancel/no note", start: approved, who: "alice", cli: []string{"b", "P1"}, want: operator.ErrIncomplete,
			console: func(ctx context.Context, u operator.UIControls) (string, error) {
				return u.DecidePayout(ctx, "b", "P1", ui.Decision{Action: ui.DecideCancel, By: "alice"})
			}},
		{name: "release", start: held, who: "alice", cli: []string{"--note", "known supplier", "b", "P2"},
			console: func(ctx context.Context, u operator.UIControls) (string, error) {
				return u.DecidePayout(ctx, "b", "P2", ui.Decision{Action: ui.DecideRelease, By: "alice", Note: "known supplier"})
			}},
		{name: "release/wrong state, not held", start: held, who: "alice", cli: []string{"--note", "known supplier", "b", "P1"}, want: operator.ErrWrongState,
			console: func(ctx context.Context, u operator.UIControls) (string, error) {
				return u.DecidePayout(ctx, "b", "P1", ui.Decision{Action: ui.DecideRelease, By: "alice", Note: "known supplier"})
			}},
		{name: "release/no note", start: held, who: "alice", cli: []string{"b", "P2"}, want: operator.ErrIncomplete,
			console: func(ctx context.Context, u operator.UIControls) (string, error) {
				return u.DecidePayout(ctx, "b", "P2", ui.Decision{Action: ui.DecideRelease, By: "alice"})
			}},
		{name: "cancel/held", start: held, who: "alice", cli: []string{"--note", "not ours", "b", "P2"},
			console: func(ctx context.Context, u operator.UIControls) (string, error) {
				return u.DecidePayout(ctx, "b", "P2", ui.Decision{Action: ui.DecideCancel, By: "alice", Note: "not ours"})
			}},
		{name: "resolve recheck", start: review(false, false), who: "alice", cli: []string{"b", "R1", "--recheck", "--note", "PSP is back"},
			console: dec(ui.DecideRecheck, "PSP is back", "")},
		{name: "resolve recheck/not found", start: review(false, false), who: "alice", cli: []string{"b", "R9", "--recheck", "--note", "PSP is back"}, want: operator.ErrNotFound,
			console: func(ctx context.Context, u operator.UIControls) (string, error) {
				return u.DecidePayout(ctx, "b", "R9", ui.Decision{Action: ui.DecideRecheck, By: "alice", Note: "PSP is back"})
			}},
		{name: "resolve recheck/wrong state", start: approved, who: "alice", cli: []string{"b", "P1", "--recheck", "--note", "PSP is back"}, want: operator.ErrWrongState,
			console: func(ctx context.Context, u operator.UIControls) (string, error) {
				return u.DecidePayout(ctx, "b", "P1", ui.Decision{Action: ui.DecideRecheck, By: "alice", Note: "PSP is back"})
			}},
		{name: "resolve created", start: review(false, false), who: "alice", cli: []string{"b", "R1", "--as", "created", "--psp-order", "WD-77", "--note", "seen"},
			console: dec(ui.DecideCreated, "seen", "WD-77")},
		{name: "resolve created/no order id", start: review(false, false), who: "alice", cli: []string{"b", "R1", "--as", "created", "--note", "seen"}, want: operator.ErrIncomplete,
			console: dec(ui.DecideCreated, "seen", "")},
		{name: "resolve created/the PSP has no such order", start: review(false, false), who: "alice", cli: []string{"b", "R1", "--as", "created", "--psp-order", "WD-404", "--note", "seen"},
			want: operator.ErrUnconfirmed, console: dec(ui.DecideCreated, "seen", "WD-404")},
		{name: "resolve created/four-eyes proposal", start: review(false, false), who: "alice", env: fourEyes,
			cli: []string{"b", "R1", "--as", "created", "--psp-order", "WD-77", "--note", "seen"}, console: dec(ui.DecideCreated, "seen", "WD-77")},
		{name: "resolve rejected", start: review(false, false), who: "alice", cli: []string{"b", "R2", "--as", "rejected", "--note", "closed account"},
			console: decide("R2", "alice", ui.DecideRejected, "closed account", "")},
		{name: "resolve rejected/the PSP holds an order", start: review(false, false), who: "alice", cli: []string{"b", "R1", "--as", "rejected", "--note", "closed account"},
			want: operator.ErrUnconfirmed, console: dec(ui.DecideRejected, "closed account", "")},
		{name: "resolve rejected/four-eyes, same person", start: review(true, true), who: "alice", cli: []string{"b", "R2", "--as", "rejected", "--note", "closed account"},
			want: operator.ErrNeedsSecondPerson, console: decide("R2", "alice", ui.DecideRejected, "closed account", "")},
		{name: "resolve rejected/four-eyes, second person", start: review(true, true), who: "carol", cli: []string{"b", "R2", "--as", "rejected", "--note", "closed account"},
			console: decide("R2", "carol", ui.DecideRejected, "closed account", "")},
		{name: "pause", start: awaiting(false), who: "alice", cli: []string{"--note", "queue payouts, in the web UI"},
			console: func(ctx context.Context, u operator.UIControls) (string, error) {
				return u.SwitchQueue(ctx, "alice", true)
			}},
		{name: "pause/already paused", start: pausedQueue(false), who: "alice", nothing: true, cli: []string{"--note", "queue payouts, in the web UI"},
			console: func(ctx context.Context, u operator.UIControls) (string, error) {
				return u.SwitchQueue(ctx, "alice", true)
			}},
		{name: "resume", start: pausedQueue(false), who: "alice", cli: []string{"--note", "queue payouts, in the web UI"},
			console: func(ctx context.Context, u operator.UIControls) (string, error) {
				return u.SwitchQueue(ctx, "alice", false)
			}},
		{name: "approve/forbidden, a viewer", start: awaiting(false), who: "vic", roles: team, cli: []string{"b"}, want: operator.ErrForbidden,
			console: func(ctx context.Context, u operator.UIControls) (string, error) {
				return u.Approve(ctx, "b", "vic", "")
			}},
		{name: "approve/forbidden, a maker", start: awaiting(false), who: "mo", roles: team, cli: []string{"b"}, want: operator.ErrForbidden,
			console: func(ctx context.Context, u operator.UIControls) (string, error) {
				return u.Approve(ctx, "b", "mo", "")
			}},
		{name: "approve/an approver", start: awaiting(false), who: "ann", roles: team, cli: []string{"b"},
			console: func(ctx context.Context, u operator.UIControls) (string, error) {
				return u.Approve(ctx, "b", "ann", "")
			}},
		{name: "discard/forbidden, an operator", start: awaiting(false), who: "otto", roles: team, cli: []string{"--note", "wrong month", "b"}, want: operator.ErrForbidden,
			console: func(ctx context.Context, u operator.UIControls) (string, error) {
				return u.Discard(ctx, "b", "otto", "wrong month")
			}},
		{name: "cancel/forbidden, an approver", start: approved, who: "ann", roles: team, cli: []string{"--note", "duplicate", "b", "P1"}, want: operator.ErrForbidden,
			console: func(ctx context.Context, u operator.UIControls) (string, error) {
				return u.DecidePayout(ctx, "b", "P1", ui.Decision{Action: ui.DecideCancel, By: "ann", Note: "duplicate"})
			}},
		{name: "cancel/an operator", start: approved, who: "otto", roles: team, cli: []string{"--note", "duplicate", "b", "P1"},
			console: func(ctx context.Context, u operator.UIControls) (string, error) {
				return u.DecidePayout(ctx, "b", "P1", ui.Decision{Action: ui.DecideCancel, By: "otto", Note: "duplicate"})
			}},
		{name: "resolve rejected/forbidden, a maker", start: review(false, false), who: "mo", roles: team, cli: []string{"b", "R2", "--as", "rejected", "--note", "closed account"},
			want: operator.ErrForbidden, console: decide("R2", "mo", ui.DecideRejected, "closed account", "")},
		{name: "pause/forbidden, someone the roles file names nowhere", start: awaiting(false), who: "zed", roles: team, cli: []string{"--note", "queue payouts, in the web UI"}, want: operator.ErrForbidden,
			console: func(ctx context.Context, u operator.UIControls) (string, error) {
				return u.SwitchQueue(ctx, "zed", true)
			}},
		{name: "resume/ledger rolled back", start: pausedQueue(true), who: "alice", cli: []string{"--note", "queue payouts, in the web UI"}, want: operator.ErrRolledBack,
			console: func(ctx context.Context, u operator.UIControls) (string, error) {
				return u.SwitchQueue(ctx, "alice", false)
			}},
	}
	pspURL := desk(t)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cliWords, cliState, cliErr := runCLI(t, tt, pspURL)
			consoleWords, consoleState, consoleErr := runConsole(t, tt, pspURL)
			if cliState != consoleState {
				t.Errorf("the ledger and queue differ\nafter the CLI:\n%s\nafter the console:\n%s", cliState, consoleState)
			}
			if tt.want == nil {
				if cliErr != nil || consoleErr != nil {
					t.Fatalf("refused: CLI %v, console %v", cliErr, consoleErr)
				}
				if !tt.nothing && !strings.Contains(cliState, "  "+tt.who+" ") {
					t.Errorf("no audit entry by %s:\n%s", tt.who, cliState)
				}
				if strings.Contains(cliState, "  "+tt.who+` as ""`) {
					t.Errorf("an audit entry by %s without the role they acted in:\n%s", tt.who, cliState)
				}
			} else {
				for side, err := range map[string]error{"CLI": cliErr, "console": consoleErr} {
					var r *operator.Refusal
					if !errors.Is(err, tt.want) || !errors.Is(err, operator.ErrRefused) || !errors.As(err, &r) {
						t.Errorf("%s: %v, want a refusal matching %v", side, err, tt.want)
					}
				}
				if !errors.Is(consoleErr, ui.ErrRefused) {
					t.Errorf("console: %v is not shown as a refusal", consoleErr)
				}
			}
			if untimed(cliWords) != untimed(consoleWords) {
				t.Errorf("the words differ\nCLI:     %q\nconsole: %q", cliWords, consoleWords)
			}
		})
	}
}

// runCLI runs tt's command line and returns what it said (stdout when
// done, else the refusal's words from stderr), its error and the state.
func runCLI(t *testing.T, tt command, pspURL string) (string, string, error) {
	rdb, l := fresh(t, tt.start)
	var out, errb bytes.Buffer
	verb, _, _ := strings.Cut(tt.name, " ")
	verb, _, _ = strings.Cut(verb, "/")
	args := append([]string{verb, "--redis", "redis://" + rdb.Options().Addr}, tt.cli...)
	env := []string{"PAYOUT_PSP_URL=" + pspURL, "PAYOUT_PSP_TOKEN=" + token}
	for k, v := range tt.env {
		env = append(env, k+"="+v)
	}
	if tt.roles != "" {
		file := filepath.Join(t.TempDir(), "roles")
		if err := os.WriteFile(file, []byte(tt.roles), 0o600); err != nil {
			t.Fatal(err)
		}
		env = append(env, "PAYOUT_ROLES_FILE="+file)
	}
	var err error
	code := cli.MainWith(context.Background(), args, nil, &out, &errb, env, cli.Hooks{
		Account: func() (string, string) { return "1000", tt.who },
		Done:    func(_ string, e error) { err = e },
	})
	if (code == cli.ExitOK) != (tt.want == nil) {
		t.Errorf("CLI exit %d\nstdout %s\nstderr %s", code, out.String(), errb.String())
	}
	words := strings.TrimSpace(out.String())
	if verb == "cancel" {
		words, _, _ = strings.Cut(words, "\n") // then the batch's tally
	}
	if err != nil {
		words = lastLine(errb.String())
		words = strings.TrimPrefix(words, "payout "+verb+": ")
	}
	return words, state(t, l), err
}

// runConsole runs tt's console action and returns what it said, its
// error and the state.
func runConsole(t *testing.T, tt command, pspURL string) (string, string, error) {
	rdb, l := fresh(t, tt.start)
	office, err := psp.New(psp.Config{BaseURL: pspURL, Token: psp.StaticToken(token), Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { office.Close() })
	u := operator.UIControls{Actions: operator.New(rdb, nil, zerolog.Nop()), PSP: office, FourEyes: tt.env["PAYOUT_FOUR_EYES"] == "true",
		OutcomeWindow: 24 * time.Hour}
	p := access.Principal{Name: tt.who, Roles: access.Everyone}
	if tt.roles != "" {
		m, err := access.Parse("roles", strings.NewReader(tt.roles))
		if err != nil {
			t.Fatal(err)
		}
		p.Roles = m.For(tt.who, nil)
	}
	words, err := tt.console(access.NewContext(context.Background(), p), u)
	if err != nil {
		words = err.Error()
	}
	return words, state(t, l), err
}

// rdbOf is the client of each ledger fresh made.
var rdbOf = map[*ledger.Ledger]*redis.Client{}

// fresh is a new Redis holding start.
func fresh(t *testing.T, start start) (*redis.Client, *ledger.Ledger) {
	mr := miniredis.RunT(t)
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	t.Cleanup(func() { rdb.Close() })
	l := ledger.New(rdb)
	rdbOf[l] = rdb
	start(t, l)
	return rdb, l
}

// state is what the ledger and the queue hold: the batch, every payout,
// both audit trails (actor, move, note) and the queue.
func state(t *testing.T, l *ledger.Ledger) string {
	ctx := context.Background()
	var b strings.Builder
	bt, err := l.Batch(ctx, "b")
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(&b, "batch %s decided by %q\n", bt.Phase, bt.DecidedBy)
	err = view.New(l.Redis()).Each(ctx, "b", func(p ledger.Payout) error {
		fmt.Fprintf(&b, "%s %s by %q order %q awaiting %v seq %d outcome %d", p.ExternalID, p.State, p.ResolvedBy, p.OrderID, p.Awaiting, p.Seq, p.OutcomeSeq)
		if q := p.Proposal; q != nil {
			fmt.Fprintf(&b, " proposed %s by %s", q.To, q.By)
		}
		b.WriteString("\n")
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, trail := range []string{"b", ""} {
		err := l.Audit().Each(ctx, trail, "", func(a ledger.AuditEntry) error {
			fmt.Fprintf(&b, "audit %q:  %s as %q %s %s->%s %s\n", trail, a.Actor, a.Role, a.ExternalID, a.From, a.To, a.Context["note"])
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	info, err := queue.New(rdbOf[l]).Info(ctx)
	if err != nil && !strings.Contains(err.Error(), "NOT_FOUND") {
		t.Fatal(err)
	}
	fmt.Fprintf(&b, "queue paused %v pending %d scheduled %d\n", info.Paused, info.Pending, info.Scheduled)
	return b.String()
}

// timestamp matches the time a proposal was made at.
var timestamp = regexp.MustCompile(`\d{4}-\d\d-\d\d \d\d:\d\d:\d\dZ`)

func untimed(s string) string { return timestamp.ReplaceAllString(s, "TIME") }

func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return lines[len(lines)-1]
}
