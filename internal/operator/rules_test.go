package operator

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/acme/payout/internal/access"
	"github.com/acme/payout/internal/approval"
	"github.com/acme/payout/internal/ledger"
	"github.com/acme/payout/internal/lifecycle"
	"github.com/acme/payout/internal/loader"
	"github.com/acme/payout/internal/proof/testenv/fakeredis"
	"github.com/acme/payout/internal/queue"
	"github.com/acme/payout/internal/vault"
	"github.com/acme/payout/jobs"
	"github.com/hibiken/asynq"
	"github.com/rs/zerolog"
)

// A file over the rule's threshold, loaded by alice under --approval
// none: the rule holds it, records itself on the batch, and needs two
// distinct approvers of its role. alice, bob twice and a person without
// the role are refused or not counted; bob's approval is "1 of 2
// approvals: bob" with nothing enqueued; carol's is the second and hands
// every payout to the workers, once.
func TestApprovalRuleNeedsTwoApprovers(t *testing.T) {
	rdb := fakeredis.Working(t)
	a := &Actions{Ledger: ledger.New(rdb), Queue: queue.New(rdb), Log: zerolog.Nop()}
	ctx := context.Background()
	rules, err := approval.Parse("rules.conf", strings.NewReader("# finance\ntotal >= 50000: 2 approver\ndestination phone: 1 operator\n"))
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(t.TempDir(), "big.csv")
	if err := os.WriteFile(p, []byte("externalId,amount,cardNumber\nR-1,30000.00,4111 1111 1111 1111\nR-2,20000.00,5555 5555 5555 4444\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	ld := loader.New(a.Ledger, a.Queue, vault.Ephemeral(), zerolog.Nop())
	res, err := ld.LoadFile(ctx, p, loader.Options{Approval: loader.Approval{By: "alice", Rules: rules, Expiry: 7 * 24 * time.Hour}})
	if err != nil || res.Held != "approval rule total >= 50000: 2 approver (rules.conf:2)" {
		t.Fatalf("load: %v, held %q", err, res.Held)
	}
	b, _ := a.Ledger.Batch(ctx, res.Batch)
	if b.Need != 2 || b.NeedRole != "approver" || b.Rule != "total >= 50000: 2 approver (rules.conf:2)" || b.Expiry != 7*24*time.Hour || b.ExpiresAt.IsZero() {
		t.Fatalf("recorded on the batch: %+v", b)
	}
	approver := access.Of(access.Approver)
	for _, tc := range []struct {
		by    string
		roles access.Roles
		kind  error
	}{
		{"alice", approver, ErrNeedsSecondPerson},
		{"dave", access.Of(access.Operator), ErrForbidden}, // may not approve at all
	} {
		if _, err := a.As(access.Principal{Name: tc.by, Roles: tc.roles}).Approve(ctx, res.Batch, ledger.Approval{By: tc.by}); !errors.Is(err, ErrRefused) || !errors.Is(err, tc.kind) {
			t.Errorf("%s: %v, want %v", tc.by, err, tc.kind)
		}
	}
	r, err := a.As(access.Principal{Name: "bob", Roles: approver}).Approve(ctx, res.Batch, ledger.Approval{By: "bob"})
	if err != nil || !r.Pending || !strings.Contains(r.Words(), "1 of 2 approvals: bob") {
		t.Fatalf("bob: %q %v", r.Words(), err)
	}
	if _, err := a.As(access.Principal{Name: "bob", Roles: approver}).Approve(ctx, res.Batch, ledger.Approval{By: "bob"}); !errors.Is(err, ErrNeedsSecondPerson) {
		t.Fatalf("bob again: %v", err)
	}
	insp := asynq.NewInspectorFromRedisClient(rdb)
	if tasks, _ := insp.ListPendingTasks(jobs.Queue); len(tasks) != 0 {
		t.Fatalf("%d tasks before the second approval", len(tasks))
	}
	r, err = a.As(access.Principal{Name: "carol", Roles: approver}).Approve(ctx, res.Batch, ledger.Approval{By: "carol"})
	if err != nil || r.Pending || r.Handed != 2 || r.Batch.Phase != lifecycle.PhaseLoaded || r.Batch.ApproverNames() != "bob, carol" {
		t.Fatalf("carol: %q %+v %v", r.Words(), r, err)
	}
	if _, err := a.As(access.Principal{Name: "erin", Roles: approver}).Approve(ctx, res.Batch, ledger.Approval{By: "erin"}); !errors.Is(err, ErrWrongState) {
		t.Fatalf("a third approval: %v", err)
	}
	if tasks, _ := insp.ListPendingTasks(jobs.Queue); len(tasks) != 2 {
		t.Fatalf("%d tasks after the approvals, want 2", len(tasks))
	}
}
