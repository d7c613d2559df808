package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/acme/payout/internal/decide"
	"github.com/acme/payout/internal/ledger"
	"github.com/acme/payout/internal/lifecycle"
	"github.com/acme/payout/internal/money"
	"github.com/acme/payout/internal/operator"
	"github.com/acme/payout/internal/view"
	"github.com/acme/payout/jobs"
	"github.com/alicebob/miniredis/v2"
	"github.com/alicebob/miniredis/v2/server"
	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"
)

// awaitingFixture is batch "b" of three payouts loaded by alice, awaiting
// approval, on an embedded Redis.
func awaitingFixture(t *testing.T) (*ledger.Ledger, *redis.Client, string) {
	t.Helper()
	return awaitingOn(t, miniredis.RunT(t))
}

// awaitingOn is awaitingFixture on mr, for a test that makes mr misbehave.
func awaitingOn(t *testing.T, mr *miniredis.Miniredis) (*ledger.Ledger, *redis.Client, string) {
	t.Helper()
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	t.Cleanup(func() { rdb.Close() })
	l := ledger.New(rdb)
	if _, _, err := l.BeginBatch(ctx, ledger.Batch{ID: "b", File: "f.csv", LoadedAt: time.Now(), Rows: 3, Total: money.MustParse("30.00"), Scale: 2, LoadedBy: "alice"}); err != nil {
		t.Fatal(err)
	}
	var ps []ledger.NewPayout
	for i, ext := range []string{"P1", "P2", "P3"} {
		ps = append(ps, ledger.NewPayout{Line: i + 2, ExternalID: ext, Amount: money.MustParse("10.00"), Telecom: "MTS", Destination: "telecom MTS"})
	}
	if _, err := l.Register(ctx, "b", ps, 2); err != nil {
		t.Fatal(err)
	}
	if err := l.Controls().HoldBatch(ctx, "b", "approval required"); err != nil {
		t.Fatal(err)
	}
	return l, rdb, "redis://" + mr.Addr()
}

func runMain(t *testing.T, env map[string]string, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	code := Main(context.Background(), args, nil, &out, &errb, func(k string) string { return env[k] })
	return code, out.String(), errb.String()
}

func TestApproveDiscardCancel(t *testing.T) {
	ctx := context.Background()
	t.Run("approve needs an operator, honours four eyes, then hands the batch over", func(t *testing.T) {
		l, rdb, url := awaitingFixture(t)
		withAccount(osAccount{"1000", "alice"}, func() {
			if code, _, errs := runMain(t, nil, "approve", "--redis", url, "--by", "bob", "b"); code != ExitUsage || !strings.Contains(errs, "--by bob: this command runs as alice") {
				t.Fatalf("alice approving with --by bob: %d %s", code, errs)
			}
		})
		if code, _, errs := runMain(t, map[string]string{"PAYOUT_OPERATOR": "alice"}, "approve", "--redis", url, "--four-eyes", "b"); code != ExitRejected || !strings.Contains(errs, "four-eyes") {
			t.Fatalf("the loader approves with --four-eyes: %d %s", code, errs)
		}
		if code, _, errs := runMain(t, nil, "approve", "--redis", url, "--by", "bob", "--note", "two\nlines", "b"); code != ExitUsage || !strings.Contains(errs, "control character") {
			t.Fatalf("a note with a newline: %d %s", code, errs)
		}
		code, out, errs := runMain(t, nil, "approve", "--redis", url, "--four-eyes", "--by", "bob", "--note", "checked against the export", "b")
		if code != ExitOK || !strings.Contains(out, "approved by bob: 3 payouts") {
			t.Fatalf("approve: %d %s %s", code, out, errs)
		}
		if b, _ := l.Batch(ctx, "b"); b.Note != "approved: checked against the export" {
			t.Fatalf("the approval's note: %q", b.Note)
		}
		info, err := asynq.NewInspectorFromRedisClient(rdb).GetQueueInfo(jobs.Queue)
		if err != nil || info.Pending != 3 {
			t.Fatalf("pending creates after approval: %+v %v", info, err)
		}
		if b, _ := l.Batch(ctx, "b"); b.Phase != lifecycle.PhaseLoaded || b.DecidedBy != "bob" {
			t.Fatalf("batch %+v", b)
		}
	})
	t.Run("approve whose creates cannot be enqueued stands and exits 0", func(t *testing.T) {
		mr := miniredis.RunT(t)
		l, _, url := awaitingOn(t, mr)
		// Every command naming one of Asynq's keys (its enqueue script
		// among them) fails; the ledger's commands, which name none, do not.
		var refused atomic.Int32
		mr.Server().SetPreHook(func(c *server.Peer, cmd string, args ...string) bool {
			if slices.ContainsFunc(args, func(a string) bool { return strings.HasPrefix(a, "asynq:") }) {
				refused.Add(1)
				c.WriteError("ERR injected: the queue is down")
				return true
			}
			return false
		})
		code, out, errs := runMain(t, nil, "approve", "--redis", url, "--log-format", "json", "--by", "bob", "b")
		if code != ExitOK || !strings.Contains(out, "batch b (f.csv) approved by bob: total 30.00; "+operator.LeftToReconciler) {
			t.Fatalf("approve with the queue down: %d %q %q", code, out, errs)
		}
		if refused.Load() == 0 || slices.ContainsFunc(mr.Keys(), func(k string) bool { return strings.HasPrefix(k, "asynq:") }) {
			t.Fatalf("the enqueue did not meet the failing queue (%d refused): the test proves nothing", refused.Load())
		}
		warned := false
		for _, line := range strings.Split(strings.TrimSpace(errs), "\n") {
			var m map[string]any
			if json.Unmarshal([]byte(line), &m) != nil {
				continue
			}
			if m["level"] == "warn" && m["batch"] == "b" && m["by"] == "bob" &&
				m["message"] == "batch approved; "+operator.LeftToReconciler &&
				strings.Contains(fmt.Sprint(m["error"]), "injected: the queue is down") {
				warned = true
			}
		}
		if !warned {
			t.Fatalf("no warning naming the batch, the operator and the enqueue error:\n%s", errs)
		}
		if b, _ := l.Batch(ctx, "b"); b.Phase != lifecycle.PhaseLoaded || b.DecidedBy != "bob" {
			t.Fatalf("batch after the approval: %+v", b)
		}
		code, _, errs = runMain(t, nil, "approve", "--redis", url, "--by", "bob", "b")
		if code != ExitRejected || !strings.Contains(errs, "not approved") {
			t.Fatalf("second approve: %d %q", code, errs)
		}
	})
	t.Run("discard cancels everything", func(t *testing.T) {
		l, _, url := awaitingFixture(t)
		if code, _, _ := runMain(t, nil, "discard", "--redis", url, "--by", "carol", "b"); code != ExitUsage {
			t.Fatalf("discard without --note: %d", code)
		}
		code, out, _ := runMain(t, nil, "discard", "--redis", url, "--by", "carol", "--note", "wrong month", "b")
		if code != ExitOK || !strings.Contains(out, "3 payouts cancelled") {
			t.Fatalf("discard: %d %s", code, out)
		}
		if c, _ := view.New(l.Redis()).Counts(ctx, "b"); c.Rows[lifecycle.Cancelled] != 3 {
			t.Fatalf("counts %+v", c.Rows)
		}
		if code, _, _ := runMain(t, nil, "approve", "--redis", url, "--by", "bob", "b"); code != ExitRejected {
			t.Fatalf("approve after discard: %d", code)
		}
	})
	t.Run("cancel some; one already sent is reported", func(t *testing.T) {
		l, _, url := awaitingFixture(t)
		if _, err := l.Controls().Approve(ctx, "b", ledger.Approval{By: "bob"}); err != nil {
			t.Fatal(err)
		}
		if b, _ := l.BeginCreate(ctx, "b", "P3", 1); b.Action != decide.Proceed {
			t.Fatal("begin P3")
		}
		code, out, errs := runMain(t, nil, "cancel", "--redis", url, "--by", "carol", "--note", "duplicate", "b", "P1", "P3")
		if code != ExitRejected || !strings.Contains(out, "1 payouts cancelled") || !strings.Contains(errs, "not cancelled: payout P3 is submitting, not queued") {
			t.Fatalf("cancel: %d %q %q", code, out, errs)
		}
		p, _ := l.Get(ctx, "b", "P1")
		if p.State != lifecycle.Cancelled || p.ResolvedBy != "carol" {
			t.Fatalf("P1 %+v", p)
		}
	})
}

// TestFourEyesPolicy: a batch loaded under --four-eyes refuses its loader
// on payout approve whatever flags the approver passes, and goes with a
// second person; --four-eyes on load needs --by.
func TestFourEyesPolicy(t *testing.T) {
	url := "redis://" + miniredis.RunT(t).Addr()
	file := filepath.Join(t.TempDir(), "p.csv")
	if err := os.WriteFile(file, []byte("externalId,amount,telecomOperator\nFE-1,10.50,MTS\nFE-2,20.00,MTS\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	base := []string{"--redis", url, "--log-level", "error"}
	withAccount(osAccount{"1000", "alice"}, func() {
		if code, _, errs := runMain(t, nil, append([]string{"load", "--insecure-plaintext", "--allow-volatile-redis", "--approval", "required", "--four-eyes", "--by", "bob", file}, base...)...); code != ExitUsage || !strings.Contains(errs, "runs as alice") {
			t.Fatalf("alice loading with --by bob: exit %d\n%s", code, errs)
		}
	})
	if code, out, errs := runMain(t, nil, append([]string{"load", "--insecure-plaintext", "--allow-volatile-redis", "--approval", "required", "--four-eyes", "--by", "alice", file}, base...)...); code != ExitOK {
		t.Fatalf("load: exit %d\n%s%s", code, out, errs)
	}
	for _, args := range [][]string{{"--by", "alice"}, {"--by", "Alice", "--four-eyes=false"}, {"--by", "alice", "--four-eyes"}} {
		code, out, errs := runMain(t, nil, append(append([]string{"approve"}, args...), append(base, file)...)...)
		if code != ExitRejected || !strings.Contains(errs, "not approved") || !strings.Contains(errs, "second person") {
			t.Fatalf("approve %v by the loader: exit %d\n%s%s", args, code, out, errs)
		}
	}
	// The env variable of the deployment cannot lift it either.
	if code, _, errs := runMain(t, map[string]string{"PAYOUT_FOUR_EYES": "false"}, append([]string{"approve", "--by", "alice"}, append(base, file)...)...); code != ExitRejected {
		t.Fatalf("approve with PAYOUT_FOUR_EYES=false by the loader: exit %d\n%s", code, errs)
	}
	code, out, errs := runMain(t, nil, append([]string{"approve", "--by", "bob"}, append(base, file)...)...)
	if code != ExitOK || !strings.Contains(out, "approved by bob") {
		t.Fatalf("approve by bob: exit %d\n%s%s", code, out, errs)
	}
}

// TestStatusShowsPhase: payout status names the phase of a batch held for
// approval in its text (detail and table) as in --json, with the reason
// and who loaded it; approved and discarded batches likewise.
func TestStatusShowsPhase(t *testing.T) {
	_, rdb, url := awaitingFixture(t)
	base := []string{"--redis", url, "--log-level", "error"}
	status := func(args ...string) string {
		t.Helper()
		code, out, errs := runMain(t, nil, append(append([]string{"status"}, args...), base...)...)
		if code != ExitOK {
			t.Fatalf("status %v: exit %d\n%s%s", args, code, out, errs)
		}
		return out
	}
	if out := status("b"); !strings.Contains(out, "phase     awaiting approval (approval required; loaded by alice)\n") {
		t.Errorf("status b:\n%s", out)
	}
	if out := status(); !strings.Contains(out, "awaiting approval") || !strings.Contains(out, "PHASE") {
		t.Errorf("status:\n%s", out)
	}
	var v struct {
		Phase       string `json:"phase"`
		PhaseCode   string `json:"phaseCode"`
		PhaseLabel  string `json:"phaseLabel"`
		PhaseReason string `json:"phaseReason"`
		LoadedBy    string `json:"loadedBy"`
	}
	if err := json.Unmarshal([]byte(status("--json", "b")), &v); err != nil {
		t.Fatal(err)
	}
	if v.Phase != lifecycle.PhaseAwaiting || v.PhaseCode != "awaiting_approval" || v.PhaseLabel != "awaiting approval" ||
		v.PhaseReason != "approval required; loaded by alice" || v.LoadedBy != "alice" {
		t.Errorf("status --json: %+v", v)
	}
	if _, err := ledger.New(rdb).Controls().Discard(context.Background(), "b", "bob", "wrong month"); err != nil {
		t.Fatal(err)
	}
	if out := status("b"); !strings.Contains(out, "phase     discarded (discarded by bob: wrong month)\n") {
		t.Errorf("status b after discard:\n%s", out)
	}
}
