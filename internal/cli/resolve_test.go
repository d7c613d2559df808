package cli

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/acme/payout/internal/decide"
	"github.com/acme/payout/internal/ledger"
	"github.com/acme/payout/internal/lifecycle"
	"github.com/acme/payout/internal/money"
	"github.com/acme/payout/jobs"
	"github.com/alicebob/miniredis/v2"
	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"
)

// reviewFixture is a batch "b" on an embedded Redis with payouts R1 and R2
// in needs_review (status checks 0 and 1 used) and C1 created.
func reviewFixture(t *testing.T) (*ledger.Ledger, string) {
	t.Helper()
	ctx := context.Background()
	mr := miniredis.RunT(t)
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	t.Cleanup(func() { rdb.Close() })
	l := ledger.New(rdb)
	if _, _, err := l.BeginBatch(ctx, ledger.Batch{ID: "b", File: "f.csv", LoadedAt: time.Now(), Rows: 3, Total: money.MustParse("30.75"), Scale: 2}); err != nil {
		t.Fatal(err)
	}
	var ps []ledger.NewPayout
	for i, ext := range []string{"R1", "R2", "C1"} {
		ps = append(ps, ledger.NewPayout{Line: i + 2, ExternalID: ext, Amount: money.MustParse("10.25"), Destination: "card 411111******1111", Sealed: "4111111111111111"})
	}
	if _, err := l.Register(ctx, "b", ps, 2); err != nil {
		t.Fatal(err)
	}
	if err := l.FinishBatch(ctx, "b"); err != nil {
		t.Fatal(err)
	}
	finish := func(ext string, r decide.CreateResult) decide.Finished {
		t.Helper()
		if b, err := l.BeginCreate(ctx, "b", ext, 1); err != nil || b.Action != decide.Proceed {
			t.Fatalf("begin %s: %+v %v", ext, b, err)
		}
		f, err := l.FinishCreate(ctx, "b", ext, 1, r)
		if err != nil {
			t.Fatalf("finish %s: %v", ext, err)
		}
		return f
	}
	finish("R1", decide.CreateResult{To: lifecycle.NeedsReview, Error: "PSP unreachable"})
	f := finish("R2", decide.CreateResult{To: lifecycle.Checking, Error: "HTTP 502"})
	policy := decide.CheckPolicy{AbsentChecks: 2, AbsentSpacing: time.Minute, MaxCreates: 1, MaxFaults: 1}
	_, snap, err := l.Snapshot(ctx, "b", "R2")
	if err != nil {
		t.Fatal(err)
	}
	if s, err := l.RecordCheck(ctx, snap, f.Seq, decide.CheckAnswer{Outcome: decide.NoAnswer, Message: "HTTP 503"}, policy); err != nil || s.Action != decide.CheckReview {
		t.Fatalf("R2 to review: %+v %v", s, err)
	}
	finish("C1", decide.CreateResult{To: lifecycle.Created, OrderID: "WD-1"})
	return l, "redis://" + mr.Addr()
}

func TestResolve(t *testing.T) {
	ctx := context.Background()
	tests := []struct {
		name      string
		args      []string
		env       map[string]string
		want      int
		ext       string          // payout to look at afterwards
		state     lifecycle.State // its state then
		order     string
		by        string
		statusSeq int    // a status task with this seq must be enqueued
		outcome   bool   // outcome check 1 must be enqueued
		noPSP     bool   // no PSP configured
		stdout    string // part of stdout
		stderr    string // part of stderr
	}{
		{name: "missing note", args: []string{"b", "R1", "--as", "rejected", "--by", "alice"},
			want: ExitUsage, ext: "R1", state: lifecycle.NeedsReview, stderr: "not resolved: every operator action records who took it and, for a resolve, a note saying why"},
		{name: "both actions", args: []string{"b", "R1", "--recheck", "--as", "rejected", "--note", "n", "--by", "a"},
			want: ExitUsage, ext: "R1", state: lifecycle.NeedsReview, stderr: "not both"},
		{name: "no action", args: []string{"b", "R1", "--note", "n", "--by", "a"},
			want: ExitUsage, ext: "R1", state: lifecycle.NeedsReview, stderr: "--recheck"},
		{name: "created without order id", args: []string{"b", "R1", "--as", "created", "--note", "n", "--by", "a"},
			want: ExitUsage, ext: "R1", state: lifecycle.NeedsReview, stderr: "needs the PSP's order id"},
		{name: "as created", args: []string{"b", "R1", "--as", "created", "--psp-order", "WD-77", "--note", "seen in the back office"},
			env:  map[string]string{"PAYOUT_OPERATOR": "alice"},
			want: ExitOK, ext: "R1", state: lifecycle.Created, order: "WD-77", by: "alice", outcome: true,
			stdout: "payout R1: needs review -> created by alice: seen in the back office (PSP order WD-77, PSP status Processing); outcome check 1 enqueued"},
		{name: "as created, an order the PSP does not have", args: []string{"b", "R1", "--as", "created", "--psp-order", "WD-404", "--note", "typo", "--by", "alice"},
			want: ExitRejected, ext: "R1", state: lifecycle.NeedsReview, stderr: "the PSP has no order under order WD-404 (HTTP 404)"},
		{name: "as created, another payout's order", args: []string{"b", "R1", "--as", "created", "--psp-order", "WD-88", "--note", "wrong row", "--by", "alice"},
			want: ExitRejected, ext: "R1", state: lifecycle.NeedsReview, stderr: "is not about payout R1"},
		{name: "as created without a PSP", args: []string{"b", "R1", "--as", "created", "--psp-order", "WD-77", "--note", "n", "--by", "alice"}, noPSP: true,
			want: ExitUsage, ext: "R1", state: lifecycle.NeedsReview, stderr: "asks the PSP first"},
		{name: "as rejected, the PSP holds an order", args: []string{"b", "R2", "--as", "rejected", "--note", "never sent", "--by", "alice"},
			want: ExitRejected, ext: "R2", state: lifecycle.NeedsReview, stderr: "the PSP holds order WD-88 (status Paid) for payout R2"},
		{name: "as rejected", args: []string{"b", "R1", "--as", "rejected", "--note", "closed account", "--by", "bob"},
			env:  map[string]string{"PAYOUT_OPERATOR": "alice"}, // the flag wins
			want: ExitOK, ext: "R1", state: lifecycle.Rejected, by: "bob", stdout: "needs review -> rejected by bob"},
		{name: "recheck enqueues the status check", args: []string{"b", "R2", "--recheck", "--note", "PSP is back", "--by", "alice"},
			want: ExitOK, ext: "R2", state: lifecycle.Checking, by: "alice", statusSeq: 2, stdout: "status check 2 enqueued"},
		{name: "not in needs_review", args: []string{"b", "C1", "--as", "rejected", "--note", "n", "--by", "a"},
			want: ExitRejected, ext: "C1", state: lifecycle.Created, order: "WD-1", stderr: "not resolved: payout C1 is created, not needs review"},
		{name: "unknown payout", args: []string{"b", "NOPE", "--recheck", "--note", "n", "--by", "a"},
			want: ExitUsage, stderr: "not resolved: batch b has no payout NOPE"},
		{name: "unknown batch", args: []string{"zz", "R1", "--recheck", "--note", "n", "--by", "a"},
			want: ExitUsage, ext: "R1", state: lifecycle.NeedsReview, stderr: "neither a file nor a known batch"},
		{name: "list", args: []string{"b"},
			want: ExitOK, ext: "R1", state: lifecycle.NeedsReview, stdout: "R2  line 3  card 411111******1111  10.25  status unknown after 1 status checks"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l, url := reviewFixture(t)
			var out, errb bytes.Buffer
			args := append([]string{"resolve", "--redis", url, "--log-level", "error"}, tt.args...)
			psp := fakePSP(t, map[string]fakeOrder{
				"WD-77": {ExternalID: "R1", OrderID: "WD-77", Status: "Processing", Amount: "10.25"},
				"WD-88": {ExternalID: "R2", OrderID: "WD-88", Status: "Paid", Amount: "10.25"},
				"R2":    {ExternalID: "R2", OrderID: "WD-88", Status: "Paid", Amount: "10.25"},
			})
			getenv := func(k string) string {
				if v, ok := psp[k]; ok && !tt.noPSP {
					return v
				}
				return tt.env[k]
			}
			got := Main(ctx, args, nil, &out, &errb, getenv)
			if got != tt.want {
				t.Fatalf("exit %d, want %d\nstdout: %s\nstderr: %s", got, tt.want, out.String(), errb.String())
			}
			if !strings.Contains(out.String(), tt.stdout) || !strings.Contains(errb.String(), tt.stderr) {
				t.Errorf("stdout %q\nstderr %q\nwant %q and %q in them", out.String(), errb.String(), tt.stdout, tt.stderr)
			}
			if strings.Contains(out.String()+errb.String(), "4111111111111111") {
				t.Error("a full card number was printed")
			}
			if tt.ext != "" {
				p, err := l.Get(ctx, "b", tt.ext)
				if err != nil {
					t.Fatal(err)
				}
				if p.State != tt.state || p.OrderID != tt.order || p.ResolvedBy != tt.by {
					t.Errorf("%s is %s order %q by %q, want %s %q %q", tt.ext, p.State, p.OrderID, p.ResolvedBy, tt.state, tt.order, tt.by)
				}
			}
			opt, err := redis.ParseURL(url)
			if err != nil {
				t.Fatal(err)
			}
			rdb := redis.NewClient(opt)
			t.Cleanup(func() { rdb.Close() })
			insp := asynq.NewInspectorFromRedisClient(rdb)
			// A status task is due within the second (asynq keeps whole
			// seconds): pending or scheduled.
			queued := func() int {
				pending, _ := insp.ListPendingTasks(jobs.Queue)
				scheduled, _ := insp.ListScheduledTasks(jobs.Queue)
				return len(pending) + len(scheduled)
			}
			if tt.outcome {
				info, err := insp.GetTaskInfo(jobs.Queue, jobs.OutcomeTaskID(tt.ext, 1))
				if err != nil || info.Type != jobs.TypeWithdrawalOutcome || queued() != 1 {
					t.Fatalf("outcome check 1 of %s: %+v %v (%d tasks)", tt.ext, info, err, queued())
				}
				return
			}
			if tt.statusSeq == 0 {
				if n := queued(); n != 0 {
					t.Errorf("%d tasks enqueued, want none", n)
				}
				return
			}
			info, err := insp.GetTaskInfo(jobs.Queue, jobs.StatusTaskID(tt.ext, tt.statusSeq))
			if err != nil {
				t.Fatalf("status task %d: %v", tt.statusSeq, err)
			}
			p, err := jobs.DecodeStatus(info.Payload)
			if err != nil || info.Type != jobs.TypeWithdrawalStatus || p.Seq != tt.statusSeq || p.Batch != "b" || p.ExternalID != tt.ext {
				t.Fatalf("task %s %+v %v", info.Type, p, err)
			}
			if n := queued(); n != 1 {
				t.Errorf("%d tasks enqueued, want the one status check", n)
			}
		})
	}
}

// TestNeedReviewWords: the list of payout resolve BATCH ends with the count
// in words that agree with it (it read "1 payout need review").
func TestNeedReviewWords(t *testing.T) {
	for _, c := range []struct {
		n    int
		want string
	}{
		{1, "1 payout needs review"},
		{2, "2 payouts need review"},
		{12, "12 payouts need review"},
	} {
		if got := needReview(c.n); got != c.want {
			t.Errorf("needReview(%d) = %q, want %q", c.n, got, c.want)
		}
	}
	l, _ := reviewFixture(t)
	var out bytes.Buffer
	if err := listReview(context.Background(), &out, l, "b"); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "2 payouts need review: payout resolve b EXTERNALID") {
		t.Errorf("list of batch b:\n%s", out.String())
	}
}
