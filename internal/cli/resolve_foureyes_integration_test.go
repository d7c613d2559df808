//go:build integration

package cli

import (
	"context"
	"os/user"
	"strings"
	"testing"
	"time"

	"github.com/acme/payout/internal/decide"
	"github.com/acme/payout/internal/identity"
	"github.com/acme/payout/internal/ledger"
	"github.com/acme/payout/internal/lifecycle"
	"github.com/acme/payout/internal/money"
	"github.com/acme/payout/internal/proof/testenv/gobuild"
	"github.com/acme/payout/internal/proof/testenv/redistest"
	"github.com/redis/go-redis/v9"
)

// TestResolveFourEyesThroughTheBinary (issue 38, item 5): on a batch
// loaded under four-eyes, payout resolve --as created run by the OS user
// is only proposed; the same user again is refused (exit 1) and nothing
// moves; a second person (SUDO_USER through sudo, believed from root
// only) giving the same decision carries it out.
func TestResolveFourEyesThroughTheBinary(t *testing.T) {
	bin := gobuild.Binary(t, "github.com/acme/payout/cmd/payout")
	url := redistest.StartConfig(t, redistest.Config{AOF: true}).URL()
	u, err := user.Current()
	if err != nil {
		t.Fatal(err)
	}
	me, err := identity.Canonical(u.Username)
	if err != nil {
		t.Fatal(err)
	}
	if me == "bob" {
		t.Fatal("this test needs an OS user other than bob")
	}
	opt, err := redis.ParseURL(url)
	if err != nil {
		t.Fatal(err)
	}
	rdb := redis.NewClient(opt)
	t.Cleanup(func() { rdb.Close() })
	ctx := context.Background()
	l := ledger.New(rdb)
	if _, _, err := l.BeginBatch(ctx, ledger.Batch{ID: "fe", File: "fe.csv", LoadedAt: time.Now(), Rows: 1, Total: money.MustParse("10.25"), Scale: 2,
		FourEyes: true, LoadedBy: "carol"}); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Register(ctx, "fe", []ledger.NewPayout{{Line: 2, ExternalID: "R1", Amount: money.MustParse("10.25"), Destination: "telecom MTS"}}, 2); err != nil {
		t.Fatal(err)
	}
	if err := l.FinishBatch(ctx, "fe"); err != nil {
		t.Fatal(err)
	}
	if _, err := l.BeginCreate(ctx, "fe", "R1", 1); err != nil {
		t.Fatal(err)
	}
	if _, err := l.FinishCreate(ctx, "fe", "R1", 1, decide.CreateResult{To: lifecycle.NeedsReview, Error: "PSP unreachable"}); err != nil {
		t.Fatal(err)
	}
	pspEnv := fakePSP(t, map[string]fakeOrder{"WD-77": {ExternalID: "R1", OrderID: "WD-77", Status: "Processing", Amount: "10.25"}})
	env := []string{"PAYOUT_PSP_URL=" + pspEnv["PAYOUT_PSP_URL"], "PAYOUT_PSP_TOKEN=" + pspEnv["PAYOUT_PSP_TOKEN"]}
	args := []string{"resolve", "--redis", url, "--log-level", "error", "fe", "R1", "--as", "created", "--psp-order", "WD-77", "--note", "in the back office"}
	state := func() ledger.Payout {
		t.Helper()
		p, err := l.Get(ctx, "fe", "R1")
		if err != nil {
			t.Fatal(err)
		}
		return p
	}

	code, out, errs := identityBin(t, bin, env, args...)
	if p := state(); code != ExitOK || !strings.Contains(out, "mark created (PSP order WD-77), proposed by "+me) || p.State != lifecycle.NeedsReview || p.Proposal == nil {
		t.Fatalf("first person: exit %d, R1 %s %+v\n%s%s", code, p.State, p.Proposal, out, errs)
	}
	code, out, errs = identityBin(t, bin, env, args...)
	if p := state(); code != ExitRejected || !strings.Contains(errs, "second person") || p.State != lifecycle.NeedsReview {
		t.Fatalf("the same person again: exit %d, R1 %s\n%s%s", code, p.State, out, errs)
	}
	code, out, errs = identityBin(t, bin, append(env, "SUDO_USER=bob"), args...)
	p := state()
	if u.Uid != "0" {
		// SUDO_USER is believed from root only: the same person again.
		if code != ExitRejected || p.State != lifecycle.NeedsReview {
			t.Fatalf("SUDO_USER=bob from %s (not root): exit %d, R1 %s\n%s%s", me, code, p.State, out, errs)
		}
		return
	}
	if code != ExitOK || p.State != lifecycle.Created || p.ResolvedBy != "bob" || p.OrderID != "WD-77" || !strings.Contains(out, "proposed by "+me) {
		t.Fatalf("bob through sudo: exit %d, R1 %s by %s\n%s%s", code, p.State, p.ResolvedBy, out, errs)
	}
}
