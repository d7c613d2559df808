package cli

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/acme/payout/internal/ledger"
	"github.com/acme/payout/internal/money"
	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
)

// TestInterruptedLoadStatusAndDiscard: a batch left loading with no load
// lock shows as "loading, interrupted" in payout status (table, detail,
// --json); payout discard abandons it, cancelling its payouts and
// releasing its claims (registered or not), and says how many.
func TestInterruptedLoadStatusAndDiscard(t *testing.T) {
	mr := miniredis.RunT(t)
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	t.Cleanup(func() { rdb.Close() })
	ctx := context.Background()
	l := ledger.New(rdb)
	if _, _, err := l.BeginBatch(ctx, ledger.Batch{ID: "b-int", File: "big.csv", LoadedAt: time.Now(), Rows: 3, Total: money.MustParse("3"), Scale: 2}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := l.Claims().ClaimTaken(ctx, "b-int", []string{"I-1", "I-2", "I-3"}); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Register(ctx, "b-int", []ledger.NewPayout{{Line: 2, ExternalID: "I-1", Amount: money.MustParse("1"), Telecom: "MTS"}}, 2); err != nil {
		t.Fatal(err)
	}
	run := func(args ...string) (int, string) {
		var stdout, stderr bytes.Buffer
		code := Main(ctx, append([]string{args[0], "--redis", "redis://" + mr.Addr()}, args[1:]...), nil, &stdout, &stderr,
			func(string) string { return "" })
		return code, stdout.String() + stderr.String()
	}
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"status"}, "loading, interrupted"},
		{[]string{"status", "b-int"}, "no payment is sent: load the same file again"},
		{[]string{"status", "--json", "b-int"}, `"phaseCode": "loading_interrupted"`},
		{[]string{"status", "b-int"}, "phase     loading, interrupted"},
		{[]string{"status", "--json", "b-int"}, `"interrupted": true`},
		{[]string{"status", "--json", "b-int"}, `"state": "loading, interrupted"`},
	} {
		if code, out := run(tt.args...); code != ExitOK || !strings.Contains(out, tt.want) {
			t.Errorf("%v: exit %d, want %q in\n%s", tt.args, code, tt.want, out)
		}
	}
	// A load at work (its lock held) is neither interrupted nor discarded.
	if ok, err := l.Locks().LockLoad(ctx, "b-int", "a-loader", time.Minute); !ok || err != nil {
		t.Fatalf("lock: %v %v", ok, err)
	}
	if code, out := run("status", "b-int"); code != ExitOK || strings.Contains(out, "interrupted") {
		t.Fatalf("status of a load at work: exit %d\n%s", code, out)
	}
	if code, out := run("discard", "--by", "alice", "--note", "wrong file", "b-int"); code != ExitRejected || !strings.Contains(out, "not discarded") {
		t.Fatalf("discard of a load at work: exit %d\n%s", code, out)
	}
	if err := l.Locks().UnlockLoad(ctx, "b-int", "a-loader"); err != nil {
		t.Fatal(err)
	}
	code, out := run("discard", "--by", "alice", "--note", "wrong file", "b-int")
	want := "interrupted load of batch b-int discarded by alice: 1 payouts cancelled, 3 externalId claims released"
	if code != ExitOK || !strings.Contains(out, want) {
		t.Fatalf("discard: exit %d, want %q in\n%s", code, want, out)
	}
	if owners, err := l.Claims().Owners(ctx, "other", []string{"I-1", "I-2", "I-3"}); err != nil || len(owners) != 0 {
		t.Fatalf("claims left after the discard: %v %v", owners, err)
	}
	if code, out := run("status", "b-int"); code != ExitOK || strings.Contains(out, "interrupted") {
		t.Fatalf("status after the discard: exit %d\n%s", code, out)
	}
}
