package cli

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/acme/payout/internal/decide"
	"github.com/acme/payout/internal/ledger"
	"github.com/acme/payout/internal/lifecycle"
	"github.com/acme/payout/internal/view"
)

// TestHistoryCountsStatusChecks: payout history of a batch and of a payout
// ends with how many status checks the workers made, the ones that changed
// nothing (and so have no entry) included.
func TestHistoryCountsStatusChecks(t *testing.T) {
	ctx := context.Background()
	mr := miniredis.RunT(t)
	url := "redis://" + mr.Addr()
	env := map[string]string{"PAYOUT_LOG_LEVEL": "error"}
	if code, out, errs := runMain(t, env, "load", "--redis", url, "--insecure-plaintext", "--allow-volatile-redis", "../../samples/payouts-good.csv"); code != ExitOK {
		t.Fatalf("load: %d %s%s", code, out, errs)
	}
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	t.Cleanup(func() { rdb.Close() })
	l := ledger.New(rdb)
	ids, err := view.New(l.Redis()).BatchIDs(ctx)
	if err != nil || len(ids) != 1 {
		t.Fatalf("batches: %v %v", ids, err)
	}
	b, ext := ids[0], "PO-2026-11-0001"
	if _, err := l.BeginCreate(ctx, b, ext, 1); err != nil {
		t.Fatal(err)
	}
	if _, err := l.FinishCreate(ctx, b, ext, 1, decide.CreateResult{To: lifecycle.Checking}); err != nil {
		t.Fatal(err)
	}
	policy := decide.CheckPolicy{AbsentChecks: 5, AbsentSpacing: time.Millisecond, MaxCreates: 2, MaxFaults: 9}
	for seq := 1; seq <= 3; seq++ {
		// Check seq+1 is due AbsentSpacing after check seq on Redis's
		// clock (miniredis: the wall clock); one asked earlier records
		// nothing (CheckEarly) and is asked again, as a worker would.
		deadline := time.Now().Add(10 * time.Second)
		for {
			_, s, err := l.Snapshot(ctx, b, ext)
			if err != nil {
				t.Fatal(err)
			}
			step, err := l.RecordCheck(ctx, s, seq, decide.CheckAnswer{Outcome: decide.Missing, HTTPStatus: 404}, policy)
			if err != nil {
				t.Fatalf("check %d: %v", seq, err)
			}
			if step.Action != decide.CheckEarly {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("check %d still early after 10s", seq)
			}
			time.Sleep(step.Wait)
		}
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"history", b, ext}, "status checks: 3 of payout PO-2026-11-0001"},
		{[]string{"history", b}, "status checks: 3 for the batch's payouts"},
		{[]string{"history", b, "PO-2026-11-0002"}, "status checks: 0 of payout PO-2026-11-0002"},
	} {
		code, out, errs := runMain(t, env, append(tc.args, "--redis", url)...)
		if code != ExitOK || !strings.Contains(out, tc.want) {
			t.Errorf("%v: exit %d, want %q:\n%s%s", tc.args, code, tc.want, out, errs)
		}
	}
}
