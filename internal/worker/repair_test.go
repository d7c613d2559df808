package worker

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/acme/payout/internal/lifecycle"
	"github.com/acme/payout/internal/psp"
	"github.com/acme/payout/internal/reconcile"
	"github.com/acme/payout/internal/sandbox"
	"github.com/acme/payout/jobs"
)

// sweepingConfig runs the reconciler every 200 ms with a short grace, and
// schedules status checks an hour out so that only a repair can bring a
// payout whose task was removed to its end within the test.
func sweepingConfig() Config {
	c := fastConfig()
	c.Reconcile = reconcile.Config{Interval: 200 * time.Millisecond, Grace: 100 * time.Millisecond}
	return c
}

// TestOperatorRemovesTasks deletes or archives a payout's task as an
// operator would in the web UI, after the reconciler's first sweep. Before
// the reconciler, each of these payouts stayed open forever.
func TestOperatorRemovesTasks(t *testing.T) {
	tests := []struct {
		name   string
		force  sandbox.Force
		task   func(ext string) string
		remove func(h *harness, id string) error
		want   lifecycle.State
		posts  int
	}{
		{
			name:  "status check deleted",
			force: sandbox.Force{Status: 500, Store: true, Op: sandbox.OpWithdrawalCreate},
			task:  func(ext string) string { return jobs.StatusTaskID(ext, 1) },
			remove: func(h *harness, id string) error {
				return h.insp.DeleteTask(jobs.Queue, id)
			},
			want: lifecycle.Created, posts: 1,
		},
		{
			name:  "status check archived",
			force: sandbox.Force{Status: 502, Store: true, Op: sandbox.OpWithdrawalCreate},
			task:  func(ext string) string { return jobs.StatusTaskID(ext, 1) },
			remove: func(h *harness, id string) error {
				return h.insp.ArchiveTask(jobs.Queue, id)
			},
			want: lifecycle.Created, posts: 1,
		},
		{
			name:  "retrying create archived",
			force: sandbox.Force{Status: 429, RetryAfter: "3600", Op: sandbox.OpWithdrawalCreate},
			task:  func(ext string) string { return jobs.CreateTaskID(ext, 1) },
			remove: func(h *harness, id string) error {
				return h.insp.ArchiveTask(jobs.Queue, id)
			},
			want: lifecycle.Created, posts: 2,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			cfg := sweepingConfig()
			cfg.StatusDelay = time.Hour
			h := newHarness(t, cfg, sandbox.Config{})
			h.force(tt.force)
			ids := h.add(visa)
			if err := h.ledger.FinishBatch(context.Background(), h.batch); err != nil { // as the loader does
				t.Fatal(err)
			}
			id := tt.task(ids[0])
			h.start()
			h.waitFor("task "+id+" waiting", 10*time.Second, func() bool {
				info, err := h.insp.GetTaskInfo(jobs.Queue, id)
				return err == nil && (info.State.String() == "scheduled" || info.State.String() == "retry")
			})
			// Remove it only after a sweep found it live: a later sweep,
			// not the first, must restore it (the lease of each sweep
			// expires after one interval).
			h.waitFor("a sweep while the task is live", 10*time.Second, func() bool {
				return strings.Contains(h.logs.String(), `"message":"reconciler sweep"`)
			})
			if err := tt.remove(h, id); err != nil {
				t.Fatal(err)
			}
			// The restored task is due at once (status) or after its
			// backoff (create); both end within the deadline.
			h.waitFinal(20 * time.Second)
			if p := h.payout(ids[0]); p.State != tt.want {
				t.Fatalf("state %s (%q), want %s\nlogs:\n%s", p.State, p.Error, tt.want, h.logs.Tail(30))
			}
			h.assertOrders(ids[0], tt.posts, 1)
		})
	}
}

// otherOrderPSP answers every status query with a 200 about another
// order: another externalId and amount.
type otherOrderPSP struct{ PSP }

func (o otherOrderPSP) CheckWithdrawal(ctx context.Context, want psp.Expect) psp.Result {
	return want.Check(psp.Result{Op: psp.OpWithdrawalStatus, Outcome: psp.Created, HTTPStatus: 200, Sent: true,
		Order: psp.Order{OrderID: "WD-someone-else", ExternalID: "NOT-" + want.ExternalID, Amount: "999.00", Status: "Created"}})
}

// TestStatusAnswerAboutAnotherOrderIsNoProof: a 200 naming another
// externalId was recorded as created before; now it is a check without an
// answer, and the payout ends in needs_review, never created.
func TestStatusAnswerAboutAnotherOrderIsNoProof(t *testing.T) {
	t.Parallel()
	cfg := fastConfig()
	cfg.Policy.MaxFaults = 2
	h := newHarness(t, cfg, sandbox.Config{})
	h.psp = otherOrderPSP{h.psp}
	h.force(sandbox.Force{Status: 503, Op: sandbox.OpWithdrawalCreate})
	ids := h.add(visa)
	h.start()
	h.waitFinal(20 * time.Second)
	p := h.payout(ids[0])
	if p.State != lifecycle.NeedsReview || p.OrderID != "" {
		t.Fatalf("state %s order %q, want needs_review without an order", p.State, p.OrderID)
	}
	if !strings.Contains(h.logs.String(), "psp_status_mismatch") {
		t.Error("no alert logged")
	}
}
