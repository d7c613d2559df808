package worker

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/acme/payout/internal/decide"
	"github.com/acme/payout/internal/lifecycle"
	"github.com/acme/payout/internal/money"
	"github.com/acme/payout/internal/psp"
	"github.com/acme/payout/internal/sandbox"
	"github.com/acme/payout/jobs"
)

const visa = "4111111111111111"

// TestCreateOutcomes covers every row of docs/design.md's "Outcome of a create"
// table: the ledger state reached, the creates the PSP received and the
// orders it stored.
func TestCreateOutcomes(t *testing.T) {
	tests := []struct {
		name   string
		card   string
		force  []sandbox.Force
		want   lifecycle.State
		posts  int // creates received by the PSP
		stored int // orders stored by the PSP
		errHas string
	}{
		{name: "200 created", card: visa, want: lifecycle.Created, posts: 1, stored: 1},
		{name: "400 rejected", card: visa, force: []sandbox.Force{{Status: 400, Op: sandbox.OpWithdrawalCreate}}, want: lifecycle.Rejected, posts: 1, stored: 0, errHas: "400"},
		{name: "422 declined card rejected", card: sandbox.DeclinedCard, want: lifecycle.Rejected, posts: 1, stored: 0, errHas: "declined"},
		{name: "429 retried after Retry-After", card: visa, force: []sandbox.Force{{Status: 429, RetryAfter: "1", Op: sandbox.OpWithdrawalCreate}}, want: lifecycle.Created, posts: 2, stored: 1},
		{name: "423 refused: checked, absent, created again", card: visa, force: []sandbox.Force{{Status: 423, Op: sandbox.OpWithdrawalCreate}}, want: lifecycle.Created, posts: 2, stored: 1},
		{name: "500 after storing: found by status", card: visa, force: []sandbox.Force{{Status: 500, Store: true, Op: sandbox.OpWithdrawalCreate}}, want: lifecycle.Created, posts: 1, stored: 1},
		{name: "499 after storing", card: visa, force: []sandbox.Force{{Status: 499, Store: true, Op: sandbox.OpWithdrawalCreate}}, want: lifecycle.Created, posts: 1, stored: 1},
		{name: "502 after storing", card: visa, force: []sandbox.Force{{Status: 502, Store: true, Op: sandbox.OpWithdrawalCreate}}, want: lifecycle.Created, posts: 1, stored: 1},
		{name: "503 without storing: absent, created again", card: visa, force: []sandbox.Force{{Status: 503, Op: sandbox.OpWithdrawalCreate}}, want: lifecycle.Created, posts: 2, stored: 1},
		{name: "timeout after storing", card: visa, force: []sandbox.Force{{Fault: sandbox.FaultHang, Store: true, Op: sandbox.OpWithdrawalCreate}}, want: lifecycle.Created, posts: 1, stored: 1},
		{name: "connection dropped after storing", card: visa, force: []sandbox.Force{{Fault: sandbox.FaultDrop, Store: true, Op: sandbox.OpWithdrawalCreate}}, want: lifecycle.Created, posts: 1, stored: 1},
		{name: "unparsable 200 after storing", card: visa, force: []sandbox.Force{{Fault: sandbox.FaultGarbage200, Store: true, Op: sandbox.OpWithdrawalCreate}}, want: lifecycle.Created, posts: 1, stored: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			h := newHarness(t, fastConfig(), sandbox.Config{})
			for _, f := range tt.force {
				h.force(f)
			}
			ids := h.add(tt.card)
			h.start()
			h.waitFinal(20 * time.Second)
			p := h.payout(ids[0])
			if p.State != tt.want {
				t.Fatalf("state %s, want %s (error %q)\nlogs:\n%s", p.State, tt.want, p.Error, h.logs.Tail(30))
			}
			if tt.errHas != "" && !strings.Contains(p.Error, tt.errHas) {
				t.Errorf("error %q does not mention %q", p.Error, tt.errHas)
			}
			if tt.want == lifecycle.Created && p.OrderID == "" {
				t.Error("created without a PSP order id")
			}
			h.assertOrders(ids[0], tt.posts, tt.stored)
			if strings.Contains(h.logs.String(), tt.card) {
				t.Error("logs hold the full card number")
			}
		})
	}
}

// TestDialErrorRetriesTheCreate: a request that never left (connection
// refused) is retried as a create, not turned into a status check.
func TestDialErrorRetriesTheCreate(t *testing.T) {
	t.Parallel()
	h := newHarness(t, fastConfig(), sandbox.Config{})
	// The create that reaches the PSP gets a generous timeout: the
	// harness's 500 ms, on a machine busy with -race and parallel tests,
	// once timed out, and the status checks it then needed are what this
	// test says a dial error must not cause.
	good := h.newClient(h.url, 10*time.Second)
	h.psp = &flakyPSP{PSP: good, first: h.newClient(closedPortURL(t), time.Second), failures: 2}
	ids := h.add(visa)
	h.start()
	h.waitFinal(20 * time.Second)
	if p := h.payout(ids[0]); p.State != lifecycle.Created || p.Creates != 1 || p.Seq != 0 {
		t.Fatalf("payout %+v: want created by attempt 1 with no status check", p)
	}
	h.assertOrders(ids[0], 1, 1)
}

// flakyPSP sends the first creates through a client that cannot connect.
type flakyPSP struct {
	PSP
	first    PSP
	failures int
}

func (f *flakyPSP) CreateWithdrawal(ctx context.Context, r psp.WithdrawalRequest) psp.Result {
	if f.failures > 0 {
		f.failures--
		return f.first.CreateWithdrawal(ctx, r)
	}
	return f.PSP.CreateWithdrawal(ctx, r)
}

// TestAuthFaultRecheckedBeforeAnyPause: a refusal of our credentials is
// rechecked with a fresh read of the token. A single refusal the recheck
// does not reproduce counts as a try, and the payout goes on; a refusal
// the recheck confirms stops this worker alone (a stale token, a wrong
// path) and leaves the queue and the payout as they were; only one
// confirmed by a second worker pauses the queue, as before. On the code
// before, every one of them paused the queue.
func TestAuthFaultRecheckedBeforeAnyPause(t *testing.T) {
	for _, tc := range []struct {
		name      string
		sbxToken  string // the token the PSP takes ("": the worker's)
		status    int    // forced on the first create (0: none)
		elsewhere bool   // a second worker reported a refusal
		want      string // created, stopped, paused
	}{
		{"401 once, token accepted on recheck", "", 401, false, "created"},
		{"403 once, token accepted on recheck", "", 403, false, "created"},
		{"404 on create (path), alone", "", 404, false, "stopped"},
		{"405 on create (path), alone", "", 405, false, "stopped"},
		{"stale token, alone", "rotated-token", 0, false, "stopped"},
		{"stale token, confirmed by a second worker", "rotated-token", 0, true, "paused"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			cfg := fastConfig()
			cfg.MaxCreateRetries = 1
			h := newHarness(t, cfg, sandbox.Config{Token: tc.sbxToken})
			if tc.status != 0 {
				h.force(sandbox.Force{Status: tc.status, Op: sandbox.OpWithdrawalCreate})
			}
			if tc.elsewhere {
				h.authFaultElsewhere()
			}
			ids := h.add(visa)
			h.expectStop = tc.want == "stopped"
			h.start()
			switch tc.want {
			case "created":
				h.waitFinal(20 * time.Second)
				p := h.payout(ids[0])
				if p.State != lifecycle.Created || p.Tries != 1 {
					t.Fatalf("payout %s after %d tries, want created after 1 refused try (%s)", p.State, p.Tries, p.Error)
				}
				h.assertOrders(ids[0], 2, 1)
			case "stopped":
				h.waitFor("the worker to stop itself", 10*time.Second, h.selfStopped)
				if !errors.Is(h.runErr, ErrStopped) || !strings.Contains(h.logs.String(), "WORKER STOPPING ITSELF") {
					t.Fatalf("Run: %v", h.runErr)
				}
			case "paused":
				h.waitFor("queue paused", 10*time.Second, h.paused)
				// The refused create is recorded right after the pause.
				h.waitFor("payout back to queued", 5*time.Second, func() bool { return h.payout(ids[0]).State == lifecycle.Queued })
			}
			if got := h.paused(); got != (tc.want == "paused") {
				t.Errorf("queue paused: %v", got)
			}
			if tc.want != "created" {
				if p := h.payout(ids[0]); p.State != lifecycle.Queued || p.Creates != 0 || p.Tries != 0 {
					t.Errorf("payout %s, creates %d, tries %d; want queued as it was", p.State, p.Creates, p.Tries)
				}
				h.assertOrders(ids[0], 1, 0) // refused: nothing stored
			}
		})
	}
}

// TestStatusOutcomes covers docs/design.md's "Outcome of a status check" table.
func TestStatusOutcomes(t *testing.T) {
	t.Run("404 K times confirms absence; at most M creates, then needs_review", func(t *testing.T) {
		t.Parallel()
		cfg := fastConfig()
		cfg.Policy.MaxCreates = 3
		h := newHarness(t, cfg, sandbox.Config{Faults: sandbox.Faults{PRefuse: 1}})
		ids := h.add(visa)
		h.start()
		h.waitFinal(30 * time.Second)
		p := h.payout(ids[0])
		if p.State != lifecycle.NeedsReview || p.Creates != 3 {
			t.Fatalf("payout %s after %d creates, want needs_review after 3 (%s)", p.State, p.Creates, p.Error)
		}
		h.assertOrders(ids[0], 3, 0)
		h.assertArchived(ids[0])
	})
	t.Run("status lag: 404s closer than D do not confirm absence", func(t *testing.T) {
		t.Parallel()
		cfg := fastConfig()
		cfg.Policy.AbsentSpacing = time.Second
		h := newHarness(t, cfg, sandbox.Config{Faults: sandbox.Faults{StatusLag: 700 * time.Millisecond}})
		h.force(sandbox.Force{Status: 502, Store: true, Op: sandbox.OpWithdrawalCreate})
		ids := h.add(visa)
		h.start()
		h.waitFinal(20 * time.Second)
		if p := h.payout(ids[0]); p.State != lifecycle.Created || p.Creates != 1 {
			t.Fatalf("payout %s after %d creates, want created by the first", p.State, p.Creates)
		}
		h.assertOrders(ids[0], 1, 1)
	})
	t.Run("401 on status pauses once confirmed; resume resolves", func(t *testing.T) {
		t.Parallel()
		h := newHarness(t, fastConfig(), sandbox.Config{})
		h.force(sandbox.Force{Status: 500, Store: true, Op: sandbox.OpWithdrawalCreate})
		// The query and the recheck's are refused; a second worker did too.
		h.force(sandbox.Force{Status: 401, Count: 2, Op: sandbox.OpWithdrawalStatus})
		h.authFaultElsewhere()
		ids := h.add(visa)
		h.start()
		h.waitFor("queue paused", 10*time.Second, h.paused)
		if p := h.payout(ids[0]); p.State != lifecycle.Checking {
			t.Fatalf("state %s while paused, want checking", p.State)
		}
		if err := h.insp.UnpauseQueue(jobs.Queue); err != nil {
			t.Fatal(err)
		}
		h.waitFinal(20 * time.Second)
		if p := h.payout(ids[0]); p.State != lifecycle.Created {
			t.Fatalf("state %s, want created", p.State)
		}
		h.assertOrders(ids[0], 1, 1)
	})
	t.Run("faults on every check: needs_review after N, archived with the reason", func(t *testing.T) {
		t.Parallel()
		cfg := fastConfig()
		cfg.Policy.MaxFaults = 3
		h := newHarness(t, cfg, sandbox.Config{})
		h.force(sandbox.Force{Status: 500, Store: true, Op: sandbox.OpWithdrawalCreate})
		h.force(sandbox.Force{Status: 503, Count: 3, Op: sandbox.OpWithdrawalStatus})
		ids := h.add(visa)
		h.start()
		h.waitFinal(30 * time.Second)
		p := h.payout(ids[0])
		if p.State != lifecycle.NeedsReview || !strings.Contains(p.Error, "status unknown") {
			t.Fatalf("payout %s (%q), want needs_review with the reason", p.State, p.Error)
		}
		h.assertOrders(ids[0], 1, 1) // the order exists: a person must look
		h.assertArchived(ids[0])
	})
}

// TestRedeliveredCreateNeverPostsAgain: a payout left in submitting (the
// worker died after writing it, before or during the POST) is resolved by
// status checks; the redelivered create task sends nothing.
func TestRedeliveredCreateNeverPostsAgain(t *testing.T) {
	t.Parallel()
	h := newHarness(t, fastConfig(), sandbox.Config{})
	ids := h.add(visa, visa)
	ctx := context.Background()
	// PO-1 died before its request left; PO-2 died after the PSP stored it.
	for _, ext := range ids {
		if b, err := h.ledger.BeginCreate(ctx, h.batch, ext, 1); err != nil || b.Action != decide.Proceed {
			t.Fatalf("begin %s: %+v %v", ext, b, err)
		}
	}
	h.force(sandbox.Force{Fault: sandbox.FaultHang, Store: true, Op: sandbox.OpWithdrawalCreate})
	r := h.newClient(h.url, 100*time.Millisecond).CreateWithdrawal(ctx, psp.WithdrawalRequest{ExternalID: ids[1], Amount: money.MustParse("10.50"),
		Properties: []psp.Property{{Key: "cardNumber", Value: visa}}})
	if r.Outcome.String() != "ambiguous" {
		t.Fatalf("setup create: %v", r.Outcome)
	}
	h.start()
	h.waitFinal(20 * time.Second)
	for _, ext := range ids {
		if p := h.payout(ext); p.State != lifecycle.Created {
			t.Fatalf("%s: %s, want created", ext, p.State)
		}
	}
	h.assertOrders(ids[0], 1, 1) // sent once, by the create after confirmed absence
	h.assertOrders(ids[1], 1, 1) // sent once, by the dead worker
	if p := h.payout(ids[0]); p.Creates != 2 {
		t.Errorf("PO-1 creates = %d, want 2 (the unsent attempt counts)", p.Creates)
	}
}

// assertArchived waits for the task of ext to be archived with a
// needs-review reason (the ledger changes a moment before Asynq archives).
func (h *harness) assertArchived(ext string) {
	h.t.Helper()
	h.waitFor("archived task of "+ext, 10*time.Second, func() bool {
		tasks, err := h.insp.ListArchivedTasks(jobs.Queue)
		if err != nil {
			return false
		}
		for _, ti := range tasks {
			if strings.Contains(ti.ID, ":"+ext+":") && strings.Contains(ti.LastErr, "needs review") {
				return true
			}
		}
		return false
	})
}

// TestUnsafeSkipSubmittingCheckPostsAgain: the deliberately broken worker of
// the proof of safety (UnsafeSkipSubmittingCheck) does what
// TestRedeliveredCreateNeverPostsAgain forbids: the redelivered create of a
// payout the PSP already stored POSTs again.
func TestUnsafeSkipSubmittingCheckPostsAgain(t *testing.T) {
	t.Parallel()
	cfg := fastConfig()
	cfg.Unsafe = UnsafeSkipSubmittingCheck()
	h := newHarness(t, cfg, sandbox.Config{})
	ids := h.add(visa)
	ctx := context.Background()
	if b, err := h.ledger.BeginCreate(ctx, h.batch, ids[0], 1); err != nil || b.Action != decide.Proceed {
		t.Fatalf("begin %s: %+v %v", ids[0], b, err)
	}
	h.force(sandbox.Force{Fault: sandbox.FaultHang, Store: true, Op: sandbox.OpWithdrawalCreate})
	r := h.newClient(h.url, 100*time.Millisecond).CreateWithdrawal(ctx, psp.WithdrawalRequest{ExternalID: ids[0], Amount: money.MustParse("10.50"),
		Properties: []psp.Property{{Key: "cardNumber", Value: visa}}})
	if r.Outcome.String() != "ambiguous" {
		t.Fatalf("setup create: %v", r.Outcome)
	}
	h.start()
	h.waitFor("a second create of "+ids[0], 20*time.Second, func() bool {
		return h.sbx.Stats().CreatesByExternalID[ids[0]] >= 2
	})
}
