package ui_test

import (
	"context"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/acme/payout/internal/approval"
	"github.com/acme/payout/internal/ledger"
	"github.com/acme/payout/internal/lifecycle"
	"github.com/acme/payout/internal/loader"
	"github.com/acme/payout/internal/proof/testenv/fakeredis"
	"github.com/acme/payout/internal/proof/uitest"
	"github.com/acme/payout/internal/queue"
	"github.com/acme/payout/internal/ui"
	"github.com/acme/payout/internal/vault"
)

// TestApproveOfferUnderRule: under an approval rule asking for two
// approvers, neither the person who loaded the batch nor a person who
// approved it already is offered Approve, on the batch page, the list
// of batches and the review, and each is told why; another person is.
func TestApproveOfferUnderRule(t *testing.T) {
	rdb := fakeredis.Working(t)
	h, err := ui.New(uitest.Config(t, rdb, uitest.Options{Users: ui.NamedLogins(t)}))
	if err != nil {
		t.Fatal(err)
	}
	one := &env{t: t, rdb: rdb, led: ledger.New(rdb), h: h}
	alice, bob := one.as("alice", ui.AlicePass), one.as("bob", ui.BobPass)

	rules, err := approval.Parse("rules.conf", strings.NewReader("any: 2 approver\n"))
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(t.TempDir(), "ruled.csv")
	if err := os.WriteFile(p, []byte(threeRows), 0o600); err != nil {
		t.Fatal(err)
	}
	ld := loader.New(one.led, queue.New(rdb), vault.Ephemeral(), zerolog.Nop())
	res, err := ld.LoadFile(context.Background(), p, loader.Options{Approval: loader.Approval{By: "alice", Rules: rules, Expiry: 24 * time.Hour}})
	if err != nil || res.Held == "" {
		t.Fatalf("load: %v %+v", err, res)
	}
	id := res.Batch
	offered := `href="/batches/` + id + `/approve"`

	type want struct {
		offered bool
		why     string
	}
	check := func(who string, e *env, w want) {
		t.Helper()
		for _, page := range []string{"/batches/" + id, "/batches", "/batches/" + id + "/approve"} {
			body := e.get(page, 200)
			if page == "/batches/"+id+"/approve" {
				if got := strings.Contains(body, `id="approve-confirm"`); got != w.offered {
					t.Errorf("%s, %s: confirm offered %v, want %v", who, page, got, w.offered)
				}
			} else if got := strings.Contains(body, offered); got != w.offered {
				t.Errorf("%s, %s: Approve offered %v, want %v", who, page, got, w.offered)
			}
			if w.why != "" && !strings.Contains(body, w.why) {
				t.Errorf("%s, %s: not told %q", who, page, w.why)
			}
		}
	}

	check("alice, who loaded it", alice, want{why: "you loaded this batch: under its approval rule (any: 2 approver (rules.conf:1)) other people must approve it"})
	check("bob", bob, want{offered: true})

	tok := bob.token("/batches/" + id + "/approve")
	if w := bob.post("/batches/"+id+"/approve", url.Values{"csrf": {tok}, "confirm": {"yes"}}); w.Code != 200 || !strings.Contains(w.Body.String(), "1 of 2 approvals: bob") {
		t.Fatalf("bob's approval: %d\n%s", w.Code, w.Body.String())
	}
	check("bob, who approved", bob, want{why: "you approved this batch already (1 of 2 approvals: bob): another person must approve it"})
	check("alice, after bob", alice, want{why: "you loaded this batch"})
	if ph := one.phase(id); ph != lifecycle.PhaseAwaiting {
		t.Fatalf("after one approval of two: %s", ph)
	}
}
