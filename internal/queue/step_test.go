package queue

import (
	"testing"
	"time"

	"github.com/acme/payout/internal/ledger"
	"github.com/acme/payout/internal/lifecycle"
	"github.com/acme/payout/jobs"
)

// openWithoutStep names every state of machine that is not final and for
// which NextStep gives no task, and a final state NextStep gives one for
// (only created awaiting its outcome may have one).
func openWithoutStep(machine []lifecycle.StateInfo) []string {
	var bad []string
	for _, s := range machine {
		p := ledger.Payout{Batch: "b", ExternalID: "E1", State: s.State, Creates: 1, Seq: 1, OutcomeSeq: 1}
		step, ok := NextStep(p)
		switch {
		case !s.Final && (!ok || step.ID() == ""):
			bad = append(bad, string(s.State)+": not final, but NextStep gives no task (add its case to NextStep)")
		case s.Final && ok:
			bad = append(bad, string(s.State)+": final, but NextStep gives "+step.ID()+" without awaiting an outcome")
		}
	}
	return bad
}

// TestEveryOpenStateHasAStep: every state of lifecycle.Machine that is not
// final has a task in NextStep, and a final one has none (a created payout
// awaiting its outcome has its outcome check). It fails naming the state.
func TestEveryOpenStateHasAStep(t *testing.T) {
	for _, bad := range openWithoutStep(lifecycle.Machine) {
		t.Error(bad)
	}
	if s, ok := NextStep(ledger.Payout{Batch: "b", ExternalID: "E1", State: lifecycle.Created, Awaiting: true, OutcomeSeq: 2}); !ok || s.ID() != jobs.OutcomeTaskID("E1", 2) {
		t.Errorf("created awaiting its outcome: %+v %v, want outcome check 2", s, ok)
	}
}

// TestAStateWithoutAStepIsNamed: the check above can fail, and names the
// state (a machine with a throwaway open state).
func TestAStateWithoutAStepIsNamed(t *testing.T) {
	machine := append(append([]lifecycle.StateInfo(nil), lifecycle.Machine...), lifecycle.StateInfo{State: "on_hold", Label: "on hold"})
	bad := openWithoutStep(machine)
	if len(bad) != 1 || bad[0][:len("on_hold:")] != "on_hold:" {
		t.Fatalf("findings %q, want one naming on_hold", bad)
	}
}

// TestNextStep pins the map from a payout to its task.
func TestNextStep(t *testing.T) {
	for _, c := range []struct {
		p        ledger.Payout
		id       string
		inFlight bool
	}{
		{ledger.Payout{State: lifecycle.Queued, Creates: 0}, "create:E1:1", false},
		{ledger.Payout{State: lifecycle.Queued, Creates: 2}, "create:E1:3", false},
		{ledger.Payout{State: lifecycle.Submitting, Creates: 2}, "create:E1:2", true},
		{ledger.Payout{State: lifecycle.Checking, Creates: 1, Seq: 4}, "status:E1:4", false},
		{ledger.Payout{State: lifecycle.Created, Awaiting: true, OutcomeSeq: 3}, "outcome:E1:3", false},
		{ledger.Payout{State: lifecycle.Created}, "", false},
		{ledger.Payout{State: lifecycle.NeedsReview, Seq: 5}, "", false},
		{ledger.Payout{State: lifecycle.Rejected}, "", false},
		{ledger.Payout{State: lifecycle.Scheduled, ReleaseAt: time.Unix(1798761600, 0)}, "release:E1:1798761600", false},
	} {
		c.p.Batch, c.p.ExternalID, c.p.Amount, c.p.Destination = "b", "E1", "1.00", "card 411111******1111"
		s, ok := NextStep(c.p)
		if ok != (c.id != "") || s.ID() != c.id || s.InFlight != c.inFlight {
			t.Errorf("%s: %+v %v, want %q in flight %v", c.p.State, s, ok, c.id, c.inFlight)
			continue
		}
		if !ok || s.Scheduler() {
			if _, err := s.task(); ok && err == nil {
				t.Errorf("%s: a release step built a task", c.p.State)
			}
			continue
		}
		task, err := s.task()
		if err != nil || task.ID != c.id || s.Batch != "b" || s.Destination != c.p.Destination {
			t.Errorf("%s: task %+v %v", c.p.State, task, err)
		}
	}
}
