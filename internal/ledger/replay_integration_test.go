//go:build integration

package ledger

import (
	"context"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/acme/payout/internal/decide"
	"github.com/acme/payout/internal/lifecycle"
	"github.com/acme/payout/internal/proof/redisfault"
	"github.com/acme/payout/internal/proof/testenv/redistest"
	"github.com/redis/go-redis/v9"
)

// The replies of transition scripts lost on the wire, for real: a
// redisfault proxy in front of a redis-server runs the first EVALSHA (or
// EVAL) of the script under test, throws its reply away and cuts the
// connection. go-redis then decides what the caller sees:
//
//   - a plain client with the default MaxRetries re-sends the command on a
//     new connection (shouldRetry: io.EOF is retried, and so is a read
//     timeout of a command without its own timeout; a context deadline is
//     not). The re-sent script carries the same operation id and gets the
//     first run's decision back: the caller never sees the loss.
//   - the autopipeliner replays the command of the lost batch the same way.
//   - a client with retries off (MaxRetries -1), or a loss past go-redis's
//     last retry, returns the error to the ledger, which sends the same
//     call again under the SAME operation id (Ledger.transition): the
//     first run's decision comes back, and the caller never sees the loss
//     either. (Before transition retried, the caller got the error, its
//     task retried, and a new BeginCreate judged the payout afresh: a
//     status check for a create never sent.)

// replayConn is how the ledger under test reaches the proxy.
type replayConn struct {
	name string
	// open returns the ledger's client on opt (already pointed at the proxy).
	open func(t *testing.T, opt *redis.Options) redis.UniversalClient
	// lossSeen: go-redis hands the cut connection to the ledger as an
	// error (the ledger then retries under the same operation id).
	lossSeen bool
}

var replayConns = []replayConn{
	{name: "retries", open: func(t *testing.T, opt *redis.Options) redis.UniversalClient {
		c := redis.NewClient(opt) // default MaxRetries (3)
		t.Cleanup(func() { c.Close() })
		return c
	}},
	{name: "autopipeline", open: func(t *testing.T, opt *redis.Options) redis.UniversalClient {
		c := redis.NewClient(opt)
		t.Cleanup(func() { c.Close() })
		ap, err := c.AutoPipeline() // as payout worker --redis-pipeline
		if err != nil {
			t.Fatal(err)
		}
		return ap
	}},
	{name: "no-retries", lossSeen: true, open: func(t *testing.T, opt *redis.Options) redis.UniversalClient {
		o := *opt
		o.MaxRetries = -1
		c := redis.NewClient(&o)
		t.Cleanup(func() { c.Close() })
		return c
	}},
}

// replayCase is one transition: prepare brings payout E1 to the state the
// transition starts from (on a client without faults), call runs it and
// describes its decision.
type replayCase struct {
	name    string
	script  *redis.Script
	prepare func(ctx context.Context, t *testing.T, l *Ledger, batch string)
	call    func(ctx context.Context, l *Ledger, batch string) (string, error)
	want    string            // the decision of one run
	state   lifecycle.State   // E1's state after one transition
	fields  map[string]string // E1's hash fields after one transition
}

func mustDo(t *testing.T, what string, err error) {
	t.Helper()
	if err != nil {
		t.Fatalf("prepare: %s: %v", what, err)
	}
}

func begin(ctx context.Context, t *testing.T, l *Ledger, batch string, attempt int) {
	t.Helper()
	_, err := l.BeginCreate(ctx, batch, "E1", attempt)
	mustDo(t, "begin create", err)
}

func toChecking(ctx context.Context, t *testing.T, l *Ledger, batch string) {
	t.Helper()
	begin(ctx, t, l, batch, 1)
	_, err := l.FinishCreate(ctx, batch, "E1", 1, decide.CreateResult{To: lifecycle.Checking})
	mustDo(t, "finish create to checking", err)
}

func callBegin(attempt int) func(ctx context.Context, l *Ledger, batch string) (string, error) {
	return func(ctx context.Context, l *Ledger, batch string) (string, error) {
		b, err := l.BeginCreate(ctx, batch, "E1", attempt)
		return fmt.Sprintf("%s seq=%d %s", b.Action, b.Seq, b.Payout.State), err
	}
}

func callFinish(r decide.CreateResult) func(ctx context.Context, l *Ledger, batch string) (string, error) {
	return func(ctx context.Context, l *Ledger, batch string) (string, error) {
		f, err := l.FinishCreate(ctx, batch, "E1", 1, r)
		return fmt.Sprintf("%s seq=%d", f.State, f.Seq), err
	}
}

func callCheck(a decide.CheckAnswer, p decide.CheckPolicy) func(ctx context.Context, l *Ledger, batch string) (string, error) {
	return func(ctx context.Context, l *Ledger, batch string) (string, error) {
		s, err := recordCheck(ctx, l, batch, "E1", 1, a, p)
		return fmt.Sprintf("%s seq=%d attempt=%d wait=%s faults=%d", s.Action, s.Seq, s.Attempt, s.Wait, s.Faults), err
	}
}

func toAwaitingOutcome(ctx context.Context, t *testing.T, l *Ledger, batch string) {
	t.Helper()
	begin(ctx, t, l, batch, 1)
	_, err := l.FinishCreate(ctx, batch, "E1", 1, decide.CreateResult{To: lifecycle.Created, OrderID: "ord-1", PSPStatus: "Created", OutcomeWindow: time.Hour})
	mustDo(t, "finish create to created, awaiting its outcome", err)
}

func callOutcome(v decide.Verdict, status string) func(ctx context.Context, l *Ledger, batch string) (string, error) {
	return func(ctx context.Context, l *Ledger, batch string) (string, error) {
		s, err := recordOutcome(ctx, l, batch, "E1", 1, v, status, "", 200)
		return fmt.Sprintf("%s state=%s seq=%d polls=%d", s.Action, s.State, s.Seq, s.Polls), err
	}
}

var replayCases = []replayCase{
	{
		name: "BeginCreate proceed", script: beginCreateScript,
		prepare: func(context.Context, *testing.T, *Ledger, string) {},
		call:    callBegin(1), want: "proceed seq=0 submitting",
		state: lifecycle.Submitting, fields: map[string]string{"creates": "1", "seq": ""},
	},
	{
		name: "BeginCreate check", script: beginCreateScript,
		prepare: func(ctx context.Context, t *testing.T, l *Ledger, b string) { begin(ctx, t, l, b, 1) },
		call:    callBegin(1), want: "check seq=1 checking",
		state: lifecycle.Checking, fields: map[string]string{"creates": "1", "seq": "1"},
	},
	{
		name: "FinishCreate queued within the retry budget", script: finishCreateScript,
		prepare: func(ctx context.Context, t *testing.T, l *Ledger, b string) { begin(ctx, t, l, b, 1) },
		call:    callFinish(decide.CreateResult{To: lifecycle.Queued, Error: "429", MaxTries: 3}), want: "queued seq=0",
		state: lifecycle.Queued, fields: map[string]string{"creates": "0", "tries": "1", "seq": ""},
	},
	{
		name: "FinishCreate queued past the retry budget", script: finishCreateScript,
		prepare: func(ctx context.Context, t *testing.T, l *Ledger, b string) {
			begin(ctx, t, l, b, 1)
			_, err := l.FinishCreate(ctx, b, "E1", 1, decide.CreateResult{To: lifecycle.Queued, Error: "429", MaxTries: 1})
			mustDo(t, "first refused try", err)
			begin(ctx, t, l, b, 1)
		},
		call: callFinish(decide.CreateResult{To: lifecycle.Queued, Error: "429", MaxTries: 1, Tries: 1}), want: "needs_review seq=0",
		state: lifecycle.NeedsReview, fields: map[string]string{"creates": "1", "tries": "2"},
	},
	{
		name: "FinishCreate checking", script: finishCreateScript,
		prepare: func(ctx context.Context, t *testing.T, l *Ledger, b string) { begin(ctx, t, l, b, 1) },
		call:    callFinish(decide.CreateResult{To: lifecycle.Checking, Error: "timeout"}), want: "checking seq=1",
		state: lifecycle.Checking, fields: map[string]string{"creates": "1", "seq": "1"},
	},
	{
		name: "FinishCreate created", script: finishCreateScript,
		prepare: func(ctx context.Context, t *testing.T, l *Ledger, b string) { begin(ctx, t, l, b, 1) },
		call:    callFinish(decide.CreateResult{To: lifecycle.Created, OrderID: "ord-1", PSPStatus: "accepted"}), want: "created seq=0",
		state: lifecycle.Created, fields: map[string]string{"creates": "1", "order": "ord-1", "seq": ""},
	},
	{
		name: "RecordCheck again after a miss", script: applyCheckScript, prepare: toChecking,
		call: callCheck(decide.CheckAnswer{Outcome: decide.Missing},
			decide.CheckPolicy{AbsentChecks: 2, AbsentSpacing: time.Minute, MaxCreates: 2, MaxFaults: 3}),
		want:  "again seq=2 attempt=0 wait=1m0s faults=0",
		state: lifecycle.Checking, fields: map[string]string{"seq": "2", "misses": "1", "faults": "0"},
	},
	{
		name: "RecordCheck again after no answer", script: applyCheckScript, prepare: toChecking,
		call: callCheck(decide.CheckAnswer{Outcome: decide.NoAnswer, Message: "503"},
			decide.CheckPolicy{AbsentChecks: 2, AbsentSpacing: time.Minute, MaxCreates: 2, MaxFaults: 3}),
		want:  "again seq=2 attempt=0 wait=1s faults=1",
		state: lifecycle.Checking, fields: map[string]string{"seq": "2", "misses": "0", "faults": "1"},
	},
	{
		name: "RecordCheck recreate", script: applyCheckScript, prepare: toChecking,
		call: callCheck(decide.CheckAnswer{Outcome: decide.Missing},
			decide.CheckPolicy{AbsentChecks: 1, AbsentSpacing: time.Minute, MaxCreates: 2, MaxFaults: 3}),
		want:  "recreate seq=0 attempt=2 wait=0s faults=0",
		state: lifecycle.Queued, fields: map[string]string{"seq": "1", "misses": "1", "creates": "1"},
	},
	{
		name: "RecordCheck review", script: applyCheckScript, prepare: toChecking,
		call: callCheck(decide.CheckAnswer{Outcome: decide.Missing},
			decide.CheckPolicy{AbsentChecks: 1, AbsentSpacing: time.Minute, MaxCreates: 1, MaxFaults: 3}),
		want:  "review seq=0 attempt=0 wait=0s faults=0",
		state: lifecycle.NeedsReview, fields: map[string]string{"seq": "1", "misses": "1", "creates": "1"},
	},
	{
		name: "RecordCheck done", script: applyCheckScript, prepare: toChecking,
		call: callCheck(decide.CheckAnswer{Outcome: decide.Found, OrderID: "ord-9", PSPStatus: "paid"},
			decide.CheckPolicy{AbsentChecks: 2, AbsentSpacing: time.Minute, MaxCreates: 2, MaxFaults: 3}),
		want:  "done seq=0 attempt=0 wait=0s faults=0",
		state: lifecycle.Created, fields: map[string]string{"seq": "1", "order": "ord-9", "creates": "1"},
	},
	{
		name: "RecordOutcome again", script: applyOutcomeScript, prepare: toAwaitingOutcome,
		call: callOutcome(decide.VerdictPending, "Processing"), want: "again state= seq=2 polls=1",
		state: lifecycle.Created, fields: map[string]string{"oseq": "2", "opolls": "1", "track": "1", "pspstatus": "Processing"},
	},
	{
		name: "RecordOutcome paid", script: applyOutcomeScript, prepare: toAwaitingOutcome,
		call: callOutcome(decide.VerdictPaid, "Paid"), want: "done state=paid seq=0 polls=0",
		state: lifecycle.Paid, fields: map[string]string{"oseq": "1", "track": "0", "pspstatus": "Paid"},
	},
}

// TestLostReplyOfEveryTransition runs every transition through a proxy
// that loses the reply of its first run, over EVALSHA (script cached) and
// over EVAL (script cache flushed: go-redis's Run falls back to EVAL after
// NOSCRIPT), on each replayConn. The caller must get the decision of the
// first run, and the payout must show exactly one transition.
func TestLostReplyOfEveryTransition(t *testing.T) {
	ctx := context.Background()
	opt, err := redis.ParseURL(redistest.New(t))
	if err != nil {
		t.Fatal(err)
	}
	direct := redis.NewClient(opt)
	t.Cleanup(func() { direct.Close() })
	setup := New(direct)

	n := 0
	for _, conn := range replayConns {
		for _, cmd := range []string{"EVALSHA", "EVAL"} {
			for _, tc := range replayCases {
				n++
				batch := "rb" + strconv.Itoa(n)
				t.Run(conn.name+"/"+cmd+"/"+tc.name, func(t *testing.T) {
					seed(t, setup, batch, 1)
					tc.prepare(ctx, t, setup, batch)
					// The call under test is the first run of its script
					// by this command: cached for EVALSHA, flushed for EVAL.
					if cmd == "EVALSHA" {
						mustDo(t, "script load", tc.script.Load(ctx, direct).Err())
					} else {
						mustDo(t, "script flush", direct.ScriptFlush(ctx).Err())
					}
					p, err := redisfault.Start(redisfault.Config{Upstream: opt.Addr, Rules: []redisfault.Rule{
						{Commands: []string{cmd}, SHA: tc.script.Hash(), Every: 1, Max: 1}}})
					if err != nil {
						t.Fatal(err)
					}
					t.Cleanup(func() { p.Close() })
					po := *opt
					po.Addr = p.Addr()
					op := "op-" + batch
					l := New(conn.open(t, &po), withOpIDs(func() string { return op }))

					got, err := tc.call(ctx, l, batch)
					if p.Drops() != 1 {
						t.Fatalf("proxy dropped %d replies, want 1 (matches %d)", p.Drops(), p.RuleMatches(0))
					}
					if err != nil {
						t.Fatalf("%s returned %v after one lost reply; want the first run's decision %q", conn.name, err, tc.want)
					}
					if got != tc.want {
						t.Fatalf("decision %q, want the first run's %q", got, tc.want)
					}
					assertOneTransition(ctx, t, setup, batch, tc.state, tc.fields)
				})
			}
		}
	}
}

// assertOneTransition checks E1's state and fields and the batch counters
// (one payout of 10.25: 1025 units).
func assertOneTransition(ctx context.Context, t *testing.T, l *Ledger, batch string, want lifecycle.State, fields map[string]string) {
	t.Helper()
	mustState(t, l, batch, "E1", want)
	h, err := l.rdb.HGetAll(ctx, payoutKey(batch, "E1")).Result()
	if err != nil {
		t.Fatal(err)
	}
	for f, v := range fields {
		if h[f] != v {
			t.Errorf("field %s = %q, want %q (one transition)", f, h[f], v)
		}
	}
	c, err := l.counts(ctx, batch)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range lifecycle.States {
		rows, units := int64(0), int64(0)
		if s == want {
			rows, units = 1, 1025
		}
		if c.Rows[s] != rows || c.Units[s] != units {
			t.Errorf("counts of %s: %d rows, %d units; want %d, %d", s, c.Rows[s], c.Units[s], rows, units)
		}
	}
}
