package cli

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/acme/payout/internal/lifecycle"
)

// Issue 38, item 5: under four-eyes (--four-eyes, PAYOUT_FOUR_EYES) payout
// resolve --as created or --as rejected needs a second person: the first
// one's decision is proposed and nothing moves, the same person again is
// refused, another person with the same decision carries it out. A
// recheck needs nobody else.
func TestResolveFourEyes(t *testing.T) {
	ctx := context.Background()
	l, url := reviewFixture(t)
	psp := fakePSP(t, map[string]fakeOrder{
		"WD-77": {ExternalID: "R1", OrderID: "WD-77", Status: "Processing", Amount: "10.25"},
	})
	run := func(who string, args ...string) (int, string, string) {
		t.Helper()
		var out, errb bytes.Buffer
		args = append([]string{"resolve", "--redis", url, "--log-level", "error", "--by", who}, args...)
		getenv := func(k string) string {
			if k == "PAYOUT_FOUR_EYES" {
				return "true"
			}
			return psp[k]
		}
		code := Main(ctx, args, nil, &out, &errb, getenv)
		return code, out.String(), errb.String()
	}
	created := []string{"b", "R1", "--as", "created", "--psp-order", "WD-77", "--note", "seen in the back office"}
	steps := []struct {
		who    string
		args   []string
		want   int
		state  lifecycle.State
		stdout string
		stderr string
	}{
		{"alice", created, ExitOK, lifecycle.NeedsReview, "payout R1: mark created (PSP order WD-77), proposed by alice at ", ""},
		{"alice", []string{"b"}, ExitOK, lifecycle.NeedsReview, "[created proposed by alice, awaiting a second person]", ""},
		{"alice", created, ExitRejected, lifecycle.NeedsReview, "", "alice proposed marking it created and is waiting for a second person"},
		{"bob", created, ExitOK, lifecycle.Created, "needs review -> created by bob: seen in the back office (proposed by alice: four-eyes) (PSP order WD-77, PSP status Processing)", ""},
	}
	for i, s := range steps {
		code, out, errs := run(s.who, s.args...)
		if code != s.want || !strings.Contains(out, s.stdout) || !strings.Contains(errs, s.stderr) {
			t.Fatalf("step %d (%s): exit %d, want %d\nstdout %q\nstderr %q\nwant %q and %q in them", i, s.who, code, s.want, out, errs, s.stdout, s.stderr)
		}
		if p, err := l.Get(ctx, "b", "R1"); err != nil || p.State != s.state {
			t.Fatalf("step %d: R1 is %s (%v), want %s", i, p.State, err, s.state)
		}
	}
	// A recheck decides no money: one person is enough.
	if code, out, errs := run("alice", "b", "R2", "--recheck", "--note", "PSP is back"); code != ExitOK || !strings.Contains(out, "status check 2 enqueued") {
		t.Fatalf("recheck: exit %d\n%s\n%s", code, out, errs)
	}
}
