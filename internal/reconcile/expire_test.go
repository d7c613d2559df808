package reconcile

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/acme/payout/internal/access"
	"github.com/acme/payout/internal/ledger"
	"github.com/acme/payout/internal/lifecycle"
	"github.com/acme/payout/internal/money"
	"github.com/acme/payout/internal/notify"
	"github.com/acme/payout/jobs"
	"github.com/rs/zerolog"
)

// holdExpiring adds batch id of n payouts, loaded by alice and held under
// a two-approver rule whose request expires after expiry.
func (f *fixture) holdExpiring(id string, n int, expiry time.Duration) {
	f.t.Helper()
	ctx := context.Background()
	if _, _, err := f.ledger.BeginBatch(ctx, ledger.Batch{ID: id, File: id + ".csv", LoadedAt: f.now, Total: money.Zero, Scale: 2, LoadedBy: "alice"}); err != nil {
		f.t.Fatal(err)
	}
	if ok, err := f.ledger.Locks().LockLoad(ctx, id, "o", time.Minute); err != nil || !ok {
		f.t.Fatalf("lock: %v %v", ok, err)
	}
	if err := f.ledger.SetBatchFigures(ctx, id, "o", ledger.Figures{Rows: int64(n), Total: money.MustParse("3.00"), Hold: "approval rule any: 2 approver",
		Need: 2, Role: "approver", Rule: "any: 2 approver (rules.conf:1)"}); err != nil {
		f.t.Fatal(err)
	}
	var ps []ledger.NewPayout
	for i := 1; i <= n; i++ {
		ps = append(ps, ledger.NewPayout{Line: i + 1, ExternalID: id + "-" + string(rune('A'+i-1)), Amount: money.MustParse("1.00"), Destination: "card 411111******1111"})
	}
	if _, err := f.ledger.Register(ctx, id, ps, 2); err != nil {
		f.t.Fatal(err)
	}
	if err := f.ledger.Controls().HoldBatchFor(ctx, id, "approval rule any: 2 approver", expiry); err != nil {
		f.t.Fatal(err)
	}
}

// A batch whose approval request expired is discarded by the sweep with
// its reason, every payout cancelled, batch_expired emitted, and no task
// of it in Asynq; one approved in time is left alone; a dry run only
// says what it would discard.
func TestSweepDiscardsExpiredApprovals(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t, 1)
	f.holdExpiring("old", 3, 7*24*time.Hour)
	f.holdExpiring("kept", 2, 7*24*time.Hour)
	s := New(f.rdb, f.ledger, Config{}, zerolog.Nop())
	s.Notify = notify.NewEmitter(f.rdb, []string{"http://127.0.0.1:9/hook"})
	every := access.Of(access.Approver)
	for _, by := range []string{"bob", "carol"} {
		if _, err := f.ledger.Controls().Approve(ctx, "kept", ledger.Approval{By: by, Roles: every}); err != nil {
			t.Fatal(err)
		}
	}
	f.advance(7*24*time.Hour - time.Minute)
	if rep, err := s.Sweep(ctx, false); err != nil || len(rep.Expired) != 0 {
		t.Fatalf("before the expiry: %+v %v", rep.Expired, err)
	}
	f.advance(time.Minute)
	rep, err := s.Sweep(ctx, true)
	if err != nil || len(rep.Expired) != 1 || rep.Expired[0].Done {
		t.Fatalf("dry run: %+v %v", rep.Expired, err)
	}
	if b, _ := f.ledger.Batch(ctx, "old"); b.Phase != lifecycle.PhaseAwaiting {
		t.Fatalf("a dry run discarded it: %s", b.Phase)
	}
	rep, err = s.Sweep(ctx, false)
	if err != nil || len(rep.Expired) != 1 || rep.Expired[0].Batch != "old" || rep.Expired[0].Cancelled != 3 {
		t.Fatalf("sweep: %+v %v", rep.Expired, err)
	}
	b, err := f.ledger.Batch(ctx, "old")
	if err != nil || b.Phase != lifecycle.PhaseDiscarded || b.Note != "approval expired after 7 days" {
		t.Fatalf("expired batch: %s %q %v", b.Phase, b.Note, err)
	}
	for _, ext := range []string{"old-A", "old-B", "old-C"} {
		if p, err := f.ledger.Get(ctx, "old", ext); err != nil || p.State != lifecycle.Cancelled {
			t.Errorf("%s: %s %v", ext, p.State, err)
		}
		for attempt := 1; attempt <= 2; attempt++ {
			if st := f.taskState(jobs.CreateTaskID(ext, attempt)); st != "none" {
				t.Errorf("%s has a create task (%s)", ext, st)
			}
		}
	}
	if kept, _ := f.ledger.Batch(ctx, "kept"); kept.Phase != lifecycle.PhaseLoaded {
		t.Errorf("the batch approved in time is %s", kept.Phase)
	}
	tasks, err := f.insp.ListPendingTasks(notify.Queue)
	if err != nil || len(tasks) != 1 || !containsAll(string(tasks[0].Payload), "batch_expired", "approval expired after 7 days") {
		t.Fatalf("notifications: %d %v", len(tasks), err)
	}
	if rep, err := s.Sweep(ctx, false); err != nil || len(rep.Expired) != 0 {
		t.Fatalf("a second sweep: %+v %v", rep.Expired, err)
	}
}

func containsAll(s string, parts ...string) bool {
	for _, p := range parts {
		if !strings.Contains(s, p) {
			return false
		}
	}
	return true
}
