package worker

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/acme/payout/internal/decide"
	"github.com/acme/payout/internal/ledger"
	"github.com/acme/payout/internal/ledger/keys"
	"github.com/acme/payout/internal/lifecycle"
	"github.com/acme/payout/internal/psp"
	"github.com/acme/payout/internal/queue"
	"github.com/acme/payout/internal/sandbox"
	"github.com/acme/payout/internal/vault"
	"github.com/acme/payout/jobs"
	"github.com/hibiken/asynq"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"
)

// orderIDOnlyPSP is a PSP whose status path knows only its own order ids:
// every query by externalId answers 404.
type orderIDOnlyPSP struct{ PSP }

func (o orderIDOnlyPSP) WithdrawalStatus(ctx context.Context, id string) psp.Result {
	if !strings.HasPrefix(id, "WD-") {
		return psp.Result{Op: psp.OpWithdrawalStatus, Outcome: psp.NotFound, HTTPStatus: 404, Sent: true, Message: "HTTP 404"}
	}
	return o.PSP.WithdrawalStatus(ctx, id)
}

func (o orderIDOnlyPSP) CheckWithdrawal(ctx context.Context, want psp.Expect) psp.Result {
	if want.OrderID == "" {
		return psp.Result{Op: psp.OpWithdrawalStatus, Outcome: psp.NotFound, HTTPStatus: 404, Sent: true, Message: "HTTP 404", ByExternalID: true}
	}
	return o.PSP.CheckWithdrawal(ctx, want)
}

// TestUntrustedExternalIDLookupNeverRecreates: against a PSP that cannot
// find orders by externalId, 404s are not taken as absence; the payout
// whose create was ambiguous ends in needs_review after one create, never
// a second.
func TestUntrustedExternalIDLookupNeverRecreates(t *testing.T) {
	t.Parallel()
	cfg := fastConfig()
	cfg.TrustStatusByExternal = false
	cfg.Policy.MaxFaults = 3
	h := newHarness(t, cfg, sandbox.Config{})
	h.psp = orderIDOnlyPSP{h.psp}
	h.force(sandbox.Force{Status: 502, Store: true, Op: sandbox.OpWithdrawalCreate})
	ids := h.add(visa)
	h.start()
	h.waitFinal(30 * time.Second)
	p := h.payout(ids[0])
	if p.State != lifecycle.NeedsReview || p.Creates != 1 || !strings.Contains(p.Error, "not trusted") {
		t.Fatalf("payout %s after %d creates (%q), want needs_review after 1", p.State, p.Creates, p.Error)
	}
	h.assertOrders(ids[0], 1, 1)
}

// TestLookupVerifiedByACreatedPayout: once the PSP has found an order it
// created by its externalId, 404s by externalId count as misses.
func TestLookupVerifiedByACreatedPayout(t *testing.T) {
	t.Parallel()
	cfg := fastConfig()
	cfg.TrustStatusByExternal = false
	h := newHarness(t, cfg, sandbox.Config{})
	ids := h.add(visa)
	h.start()
	h.waitFinal(10 * time.Second)
	h.force(sandbox.Force{Status: 423, Op: sandbox.OpWithdrawalCreate}) // refused: nothing stored
	h.batch = "second"
	ids2 := h.add(visa)
	h.waitFinal(30 * time.Second)
	if p := h.payout(ids2[0]); p.State != lifecycle.Created || p.Creates != 2 {
		t.Fatalf("payout %s after %d creates (%q), want created by the second", p.State, p.Creates, p.Error)
	}
	_ = ids
}

// TestStatusTaskEnsuresTheRecreate: a worker that died right after absence
// was confirmed (payout queued for attempt 2, its create task never
// enqueued) is repaired by the redelivered status task.
func TestStatusTaskEnsuresTheRecreate(t *testing.T) {
	t.Parallel()
	h := newHarness(t, fastConfig(), sandbox.Config{})
	ids := h.add(visa)
	ctx := context.Background()
	if err := h.insp.DeleteTask(jobs.Queue, jobs.CreateTaskID(ids[0], 1)); err != nil {
		t.Fatal(err)
	}
	h.ledger.BeginCreate(ctx, h.batch, ids[0], 1)
	h.ledger.FinishCreate(ctx, h.batch, ids[0], 1, decide.CreateResult{To: lifecycle.Checking})
	pol := decide.CheckPolicy{AbsentChecks: 1, MaxCreates: 3, MaxFaults: 3}
	_, snap, err := h.ledger.Snapshot(ctx, h.batch, ids[0])
	if err != nil {
		t.Fatal(err)
	}
	if s, err := h.ledger.RecordCheck(ctx, snap, 1, decide.CheckAnswer{Outcome: decide.Missing}, pol); err != nil || s.Action != decide.CheckRecreate {
		t.Fatalf("setup: %+v %v", s, err)
	}
	w := h.worker(h.rdb, h.ledger, h.cfg, testLogger(h))
	task, _ := queue.Step{Kind: queue.Status, Batch: h.batch, ExternalID: ids[0], N: 1}.AsynqTask(time.Now())
	if err := w.HandleStatus(ctx, task); err != nil {
		t.Fatal(err)
	}
	if _, err := h.insp.GetTaskInfo(jobs.Queue, jobs.CreateTaskID(ids[0], 2)); err != nil {
		t.Fatalf("create task of attempt 2 not enqueued: %v", err)
	}
}

// TestRetryBudgetLivesInTheLedger: deferrals and non-failures never archive
// a task (Asynq would, once its retry count is used up); the budget of
// creates that did not reach the PSP is counted in the ledger and ends in
// needs_review with the reason.
func TestRetryBudgetLivesInTheLedger(t *testing.T) {
	t.Parallel()
	cfg := fastConfig()
	cfg.MaxCreateRetries = 1
	h := newHarness(t, cfg, sandbox.Config{})
	h.force(sandbox.Force{Status: 429, RetryAfter: "1", Op: sandbox.OpWithdrawalCreate})
	ids := h.add(visa, visa)
	h.start()
	h.waitFinal(20 * time.Second)
	for _, ext := range ids {
		if p := h.payout(ext); p.State != lifecycle.Created {
			t.Fatalf("%s: %s (%q), want created", ext, p.State, p.Error)
		}
	}
	// Now a PSP that never takes the request: two 429s exhaust a budget of 1.
	h.force(sandbox.Force{Status: 429, RetryAfter: "1", Count: 5, Op: sandbox.OpWithdrawalCreate})
	h.batch = "second"
	ids2 := h.add(visa)
	h.waitFinal(20 * time.Second)
	p := h.payout(ids2[0])
	if p.State != lifecycle.NeedsReview || !strings.Contains(p.Error, "nothing was sent") {
		t.Fatalf("payout %s (%q), want needs_review", p.State, p.Error)
	}
	h.assertOrders(ids2[0], 2, 0)
	h.assertArchived(ids2[0])
}

// TestUnopenableCardIsOnePayoutsProblem: a ciphertext that does not open
// (damaged) sends that payout to review and lets the others go on; a
// worker without the key stops itself and leaves the payout as it was
// (never marked submitting) and the queue unpaused for the workers that
// hold it (on the code before, it paused the queue for everyone).
func TestUnopenableCardIsOnePayoutsProblem(t *testing.T) {
	t.Parallel()
	h := newHarness(t, fastConfig(), sandbox.Config{})
	ids := h.add(visa, visa)
	ctx := context.Background()
	key := keys.Payout(h.batch, ids[0])
	sealed, _ := h.rdb.HGet(ctx, key, "sealed").Result()
	h.rdb.HSet(ctx, key, "sealed", sealed[:len(sealed)-4]+"AAAA")
	h.start()
	h.waitFinal(10 * time.Second)
	if p := h.payout(ids[0]); p.State != lifecycle.NeedsReview {
		t.Fatalf("damaged: %s", p.State)
	}
	if p := h.payout(ids[1]); p.State != lifecycle.Created {
		t.Fatalf("healthy: %s", p.State)
	}
	if h.paused() {
		t.Fatal("one damaged row paused the queue")
	}
	h.stop()

	other, _ := vault.NewKeyring(mustKey(t))
	h2 := newHarness(t, fastConfig(), sandbox.Config{})
	h2.add(visa)
	h2.ring = other // the worker holds a key that never sealed anything
	h2.expectStop = true
	h2.start()
	h2.waitFor("the worker to stop itself", 10*time.Second, h2.selfStopped)
	if !errors.Is(h2.runErr, ErrStopped) || !strings.Contains(h2.runErr.Error(), "does not hold") {
		t.Fatalf("Run: %v", h2.runErr)
	}
	if h2.paused() {
		t.Fatal("a worker without the key paused the queue")
	}
	p := h2.payout("PO-1")
	if p.State != lifecycle.Queued || p.Creates != 0 || p.Error != "" {
		t.Fatalf("unknown key: payout %s, creates %d, error %q; want queued as it was", p.State, p.Creates, p.Error)
	}
	info, err := h2.insp.GetTaskInfo(jobs.Queue, jobs.CreateTaskID("PO-1", 1))
	if err != nil || info.State == asynq.TaskStateArchived || info.State == asynq.TaskStateCompleted {
		t.Fatalf("create task: %v, %v; want it live for another worker", info, err)
	}
	h2.assertOrders("PO-1", 0, 0)
}

func mustKey(t *testing.T) string {
	k, err := vault.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// TestUnknownBeginDecisionSendsNothing: a begin-create decision the worker
// does not know fails closed: handled (nothing sent) and not retried.
func TestUnknownBeginDecisionSendsNothing(t *testing.T) {
	w := &Worker{}
	for _, action := range []decide.BeginAction{"", "bogus"} {
		handled, err := w.createWithoutSending(context.Background(), ledger.Begin{Action: action}, zerolog.Nop())
		if !handled || !errors.Is(err, asynq.SkipRetry) {
			t.Errorf("action %q: handled %v, err %v; want handled and SkipRetry", action, handled, err)
		}
	}
	if handled, err := w.createWithoutSending(context.Background(), ledger.Begin{Action: decide.Proceed}, zerolog.Nop()); handled || err != nil {
		t.Errorf("proceed: handled %v, err %v; want the create sent", handled, err)
	}
}

// TestStatusTaskNotCurrentAsksNothing: a status task that is not the
// payout's current, due check (decide.Snapshot.PreCheck) never reaches the
// PSP and changes nothing in the ledger. An early one is deferred until its
// check is due on Redis's clock; a stale one makes sure the current check
// is enqueued (one for a payout no longer checking:
// TestStatusTaskEnsuresTheRecreate).
func TestStatusTaskNotCurrentAsksNothing(t *testing.T) {
	t.Parallel()
	h := newHarness(t, fastConfig(), sandbox.Config{})
	ids := h.add(visa)
	ext := ids[0]
	ctx := context.Background()
	if err := h.insp.DeleteTask(jobs.Queue, jobs.CreateTaskID(ext, 1)); err != nil {
		t.Fatal(err)
	}
	h.ledger.BeginCreate(ctx, h.batch, ext, 1)
	h.ledger.FinishCreate(ctx, h.batch, ext, 1, decide.CreateResult{To: lifecycle.Checking})
	// One check without an answer: check 2 is due an hour later.
	pol := decide.CheckPolicy{AbsentChecks: 2, MaxCreates: 2, MaxFaults: 5, FaultDelay: time.Hour, FaultDelayMax: time.Hour}
	_, snap, err := h.ledger.Snapshot(ctx, h.batch, ext)
	if err != nil {
		t.Fatal(err)
	}
	if s, err := h.ledger.RecordCheck(ctx, snap, 1, decide.CheckAnswer{Outcome: decide.NoAnswer, Message: "HTTP 503"}, pol); err != nil || s.Action != decide.CheckAgain {
		t.Fatalf("setup: %+v %v", s, err)
	}
	before := h.payout(ext)
	reg := prometheus.NewRegistry()
	cfg := h.cfg
	cfg.Metrics = NewMetrics(reg)
	w := h.worker(h.rdb, h.ledger, cfg, testLogger(h))
	handle := func(seq int) error {
		task, _ := queue.Step{Kind: queue.Status, Batch: h.batch, ExternalID: ext, N: seq}.AsynqTask(time.Now())
		return w.HandleStatus(ctx, task)
	}

	var d *deferral
	if err := handle(2); !errors.As(err, &d) || d.after < 59*time.Minute || d.after > time.Hour {
		t.Fatalf("status check 2, due in an hour: %v, want a deferral of about an hour", err)
	}
	if _, err := h.insp.GetTaskInfo(jobs.Queue, jobs.StatusTaskID(ext, 2)); err == nil {
		t.Fatal("an early status check enqueued its own check")
	}
	if got := deferredCount(t, reg, "status_not_due"); got != 1 {
		t.Errorf("payout_deferred_total{reason=status_not_due} = %v after one early task, want 1", got)
	}
	if err := handle(1); err != nil {
		t.Fatalf("stale status check 1: %v", err)
	}
	if _, err := h.insp.GetTaskInfo(jobs.Queue, jobs.StatusTaskID(ext, 2)); err != nil {
		t.Fatalf("stale status check 1 did not make sure check 2 is enqueued: %v", err)
	}
	if got := h.sbx.Stats().StatusQueries; got != 0 {
		t.Errorf("the PSP was asked %d times; want 0", got)
	}
	if after := h.payout(ext); after.State != before.State || after.Seq != before.Seq || after.Faults != before.Faults || !after.CheckDue.Equal(before.CheckDue) {
		t.Errorf("payout changed: %s seq %d faults %d due %s, was %s seq %d faults %d due %s",
			after.State, after.Seq, after.Faults, after.CheckDue, before.State, before.Seq, before.Faults, before.CheckDue)
	}
}

// deferredCount is payout_deferred_total's value for reason in reg.
func deferredCount(t *testing.T, reg *prometheus.Registry, reason string) float64 {
	t.Helper()
	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range fams {
		if f.GetName() != "payout_deferred_total" {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "reason" && l.GetValue() == reason {
					return m.GetCounter().GetValue()
				}
			}
		}
	}
	return 0
}

// TestOutcomeTaskNotCurrentAsksNothing: an outcome task that is not the
// payout's current outcome check (decide.Snapshot.PreOutcome) never reaches
// the PSP and changes nothing in the ledger. A stale one makes sure the
// current check is enqueued; one for a payout that no longer awaits its
// outcome ends.
func TestOutcomeTaskNotCurrentAsksNothing(t *testing.T) {
	t.Parallel()
	h := newHarness(t, trackingConfig(time.Hour, 2*time.Hour), sandbox.Config{})
	ids := h.add(visa, visa)
	ctx := context.Background()
	for i, ext := range ids {
		if err := h.insp.DeleteTask(jobs.Queue, jobs.CreateTaskID(ext, 1)); err != nil {
			t.Fatal(err)
		}
		window := time.Hour // the first awaits its outcome, the second does not
		if i == 1 {
			window = 0
		}
		h.ledger.BeginCreate(ctx, h.batch, ext, 1)
		if fin, err := h.ledger.FinishCreate(ctx, h.batch, ext, 1, decide.CreateResult{To: lifecycle.Created, OrderID: "WD-" + ext, OutcomeWindow: window}); err != nil || fin.Awaiting != (i == 0) {
			t.Fatalf("setup %s: %+v %v", ext, fin, err)
		}
	}
	// One pending answer: outcome check 2 of the first is current.
	_, snap, err := h.ledger.Snapshot(ctx, h.batch, ids[0])
	if err != nil {
		t.Fatal(err)
	}
	if s, err := h.ledger.RecordOutcome(ctx, snap, 1, decide.OutcomeAnswer{Verdict: decide.VerdictPending, PSPStatus: "Processing"}); err != nil || s.Action != decide.OutcomeAgain {
		t.Fatalf("setup: %+v %v", s, err)
	}
	before := []ledger.Payout{h.payout(ids[0]), h.payout(ids[1])}
	w := h.worker(h.rdb, h.ledger, h.cfg, testLogger(h))
	handle := func(ext string, seq int) error {
		task, _ := queue.Step{Kind: queue.Outcome, Batch: h.batch, ExternalID: ext, N: seq}.AsynqTask(time.Now())
		return w.HandleOutcome(ctx, task)
	}

	if _, err := h.insp.GetTaskInfo(jobs.Queue, jobs.OutcomeTaskID(ids[0], 2)); err == nil {
		t.Fatal("setup: outcome check 2 is already enqueued")
	}
	if err := handle(ids[0], 1); err != nil {
		t.Fatalf("stale outcome check 1: %v", err)
	}
	if _, err := h.insp.GetTaskInfo(jobs.Queue, jobs.OutcomeTaskID(ids[0], 2)); err != nil {
		t.Fatalf("stale outcome check 1 did not make sure check 2 is enqueued: %v", err)
	}
	if err := handle(ids[1], 1); err != nil {
		t.Fatalf("outcome check of a payout not awaiting its outcome: %v", err)
	}
	if _, err := h.insp.GetTaskInfo(jobs.Queue, jobs.OutcomeTaskID(ids[1], 2)); err == nil {
		t.Fatal("an outcome check of a payout not awaiting its outcome enqueued another")
	}
	if got := h.sbx.Stats().StatusQueries; got != 0 {
		t.Errorf("the PSP was asked %d times; want 0", got)
	}
	for i, ext := range ids {
		if after := h.payout(ext); after.State != before[i].State || after.OutcomeSeq != before[i].OutcomeSeq || after.OutcomePolls != before[i].OutcomePolls {
			t.Errorf("%s changed: %s oseq %d polls %d, was %s oseq %d polls %d", ext,
				after.State, after.OutcomeSeq, after.OutcomePolls, before[i].State, before[i].OutcomeSeq, before[i].OutcomePolls)
		}
	}
}
