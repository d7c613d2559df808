package ledger

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/acme/payout/internal/access"
	"github.com/acme/payout/internal/lifecycle"
	"github.com/acme/payout/internal/money"
)

// ruleBatch is a batch of n rows loaded by alice and held under the rule
// "total >= 50: 2 approver", its approval request expiring after expiry
// (0: never).
func ruleBatch(t *testing.T, l *Ledger, id string, n int, expiry time.Duration) {
	t.Helper()
	ctx := context.Background()
	if _, _, err := l.BeginBatch(ctx, Batch{ID: id, File: id + ".csv", LoadedAt: time.Now(), Total: money.Zero, Scale: 2, LoadedBy: "alice"}); err != nil {
		t.Fatal(err)
	}
	ok, err := l.Locks().LockLoad(ctx, id, "owner", time.Minute)
	if err != nil || !ok {
		t.Fatalf("lock: %v %v", ok, err)
	}
	if err := l.SetBatchFigures(ctx, id, "owner", Figures{Rows: int64(n), Total: money.MustParse("100.00"), Hold: "approval rule total >= 50: 2 approver",
		Need: 2, Role: string(access.Approver), Rule: "total >= 50: 2 approver (rules.conf:1)"}); err != nil {
		t.Fatal(err)
	}
	seedRows(t, l, id, n)
	if err := l.Controls().HoldBatchFor(ctx, id, "approval rule total >= 50: 2 approver", expiry); err != nil {
		t.Fatal(err)
	}
}

var approvers = access.Of(access.Approver)

// Two distinct approvers holding the rule's role: the loader, a person
// without the role and the same person twice are refused and not
// counted; the first approval leaves the batch waiting ("1 of 2
// approvals: bob"), the second moves it, once.
func TestTwoDistinctApprovers(t *testing.T) {
	ctx := context.Background()
	l, _ := newTestLedger(t)
	ruleBatch(t, l, "b", 2, 0)
	c := l.Controls()
	for _, tc := range []struct {
		name string
		a    Approval
		want error
	}{
		{"the maker", Approval{By: "alice", Roles: approvers}, ErrFourEyes},
		{"the maker, spelt otherwise", Approval{By: " ALICE ", Roles: approvers}, ErrFourEyes},
		{"without the role", Approval{By: "dave", Roles: access.Of(access.Operator, access.Maker)}, ErrApproverRole},
		{"a system", Approval{By: "system:spool(uid 1)", Roles: approvers}, ErrFourEyes},
	} {
		if _, err := c.Approve(ctx, "b", tc.a); !errors.Is(err, tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, err, tc.want)
		}
	}
	b, err := c.Approve(ctx, "b", Approval{By: "bob", Roles: approvers, Note: "checked"})
	if err != nil || b.Phase != lifecycle.PhaseAwaiting || b.ApprovalProgress() != "1 of 2 approvals: bob" {
		t.Fatalf("first approval: %q %s %v", b.ApprovalProgress(), b.Phase, err)
	}
	for _, by := range []string{"bob", "Bob"} {
		if _, err := c.Approve(ctx, "b", Approval{By: by, Roles: approvers}); !errors.Is(err, ErrAlreadyApproved) {
			t.Fatalf("bob again as %q: %v", by, err)
		}
	}
	if b, _ = l.Batch(ctx, "b"); b.Phase != lifecycle.PhaseAwaiting || len(b.Approvers) != 1 {
		t.Fatalf("after the refusals: %s, %+v", b.Phase, b.Approvers)
	}
	b, err = c.Approve(ctx, "b", Approval{By: "carol", Roles: approvers})
	if err != nil || b.Phase != lifecycle.PhaseLoaded || b.DecidedBy != "carol" || b.ApproverNames() != "bob, carol" {
		t.Fatalf("second approval: %+v %v", b, err)
	}
	if b.Approvers[0].Role != "approver" || b.Approvers[0].Note != "checked" {
		t.Errorf("approvals recorded: %+v", b.Approvers)
	}
	if _, err := c.Approve(ctx, "b", Approval{By: "erin", Roles: approvers}); !errors.Is(err, ErrNotAwaiting) {
		t.Fatalf("a third approval: %v", err)
	}
	audit := auditNotes(t, l, "b")
	want := []string{"approval 1 of 2 by bob (approver): checked", "approved (approval 2 of 2 by carol (approver))"}
	if !strings.Contains(audit, want[0]) || !strings.Contains(audit, want[1]) {
		t.Errorf("audit trail:\n%s\nwant %q", audit, want)
	}
}

// Many people approving at once: the batch moves once, by the second
// approval recorded, and the day's sum is counted once.
func TestConcurrentApprovalsMoveOnce(t *testing.T) {
	ctx := context.Background()
	l, _ := newTestLedger(t)
	ruleBatch(t, l, "b", 1, 0)
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		moved int
	)
	for _, by := range []string{"bob", "carol", "dave", "erin", "frank", "bob", "carol"} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			b, err := l.Controls().Approve(ctx, "b", Approval{By: by, Roles: approvers, DailyLimit: money.MustParse("150")})
			if err == nil && b.Phase == lifecycle.PhaseLoaded && b.DecidedBy == by {
				mu.Lock()
				moved++
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	b, _ := l.Batch(ctx, "b")
	if b.Phase != lifecycle.PhaseLoaded || len(b.Approvers) != 2 {
		t.Fatalf("after the race: %s with %+v", b.Phase, b.Approvers)
	}
	sum, err := l.rdb.Get(ctx, dailyKey(l.now())).Int64()
	if err != nil || sum != 100*10000 {
		t.Errorf("day's sum %d (%v), want 100.0000 once", sum, err)
	}
	// Only a call that saw its own approval move the batch counts.
	if moved > 1 {
		t.Errorf("%d approvals moved the batch", moved)
	}
}

// An approval request that expired: the approval is refused, the
// reconciler's ExpireBatch discards the batch with its reason and cancels
// every payout; a second call does nothing more.
func TestApprovalExpires(t *testing.T) {
	ctx := context.Background()
	l, clk := newTestLedger(t)
	ruleBatch(t, l, "b", 3, 7*24*time.Hour)
	c := l.Controls()
	if _, ok, err := c.ExpireBatch(ctx, "b"); ok || err != nil {
		t.Fatalf("expired before its time: %v %v", ok, err)
	}
	if _, err := c.Approve(ctx, "b", Approval{By: "bob", Roles: approvers}); err != nil {
		t.Fatal(err)
	}
	clk.add(7*24*time.Hour + time.Second)
	if _, err := c.Approve(ctx, "b", Approval{By: "carol", Roles: approvers}); !errors.Is(err, ErrExpired) {
		t.Fatalf("approval after the expiry: %v", err)
	}
	x, ok, err := c.ExpireBatch(ctx, "b")
	if err != nil || !ok || !x.Discarded || x.Cancelled != 3 {
		t.Fatalf("ExpireBatch = %+v %v %v", x, ok, err)
	}
	b := x.Batch
	if b.Phase != lifecycle.PhaseDiscarded || b.Note != "approval expired after 7 days" || b.DecidedBy != ExpiryActor || !b.ExpiredDiscard {
		t.Fatalf("expired batch: %+v", b)
	}
	for _, ext := range []string{"b-A", "b-B", "b-C"} {
		p := mustState(t, l, "b", ext, lifecycle.Cancelled)
		if !strings.Contains(p.Error, "approval expired after 7 days") {
			t.Errorf("%s: %q", ext, p.Error)
		}
	}
	if x, ok, err := c.ExpireBatch(ctx, "b"); !ok || err != nil || x.Discarded || x.Cancelled != 0 {
		t.Fatalf("second ExpireBatch = %+v %v %v", x, ok, err)
	}
	if !strings.Contains(auditNotes(t, l, "b"), "awaiting_approval>discarded approval expired after 7 days") {
		t.Errorf("audit trail:\n%s", auditNotes(t, l, "b"))
	}
}

// The last approval and the expiry racing at the moment of expiry:
// exactly one wins, many times over.
func TestApprovalRacesExpiry(t *testing.T) {
	ctx := context.Background()
	for i := range 20 {
		l, clk := newTestLedger(t)
		ruleBatch(t, l, "b", 2, time.Hour)
		if _, err := l.Controls().Approve(ctx, "b", Approval{By: "bob", Roles: approvers}); err != nil {
			t.Fatal(err)
		}
		if i%2 == 0 {
			clk.add(time.Hour) // expired: the expiry must win
		}
		var (
			wg       sync.WaitGroup
			approved bool
			expired  bool
		)
		wg.Add(2)
		go func() {
			defer wg.Done()
			b, err := l.Controls().Approve(ctx, "b", Approval{By: "carol", Roles: approvers})
			approved = err == nil && b.Phase == lifecycle.PhaseLoaded
		}()
		go func() {
			defer wg.Done()
			x, ok, err := l.Controls().ExpireBatch(ctx, "b")
			expired = err == nil && ok && x.Discarded
		}()
		wg.Wait()
		b, _ := l.Batch(ctx, "b")
		if approved == expired || (approved && b.Phase != lifecycle.PhaseLoaded) || (expired && b.Phase != lifecycle.PhaseDiscarded) {
			t.Fatalf("run %d: approved %v, expired %v, batch %s", i, approved, expired, b.Phase)
		}
		if expired != (i%2 == 0) {
			t.Fatalf("run %d: expired %v", i, expired)
		}
	}
}

// auditNotes is a batch's audit trail, one "from>to note" a line.
func auditNotes(t *testing.T, l *Ledger, id string) string {
	t.Helper()
	xs, err := l.rdb.XRange(context.Background(), auditKey(id), "-", "+").Result()
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	for _, x := range xs {
		b.WriteString(x.Values["from"].(string) + ">" + x.Values["to"].(string) + " " + x.Values["note"].(string) + "\n")
	}
	return b.String()
}
