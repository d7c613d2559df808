package ledger

import (
	"context"
	"strconv"
	"strings"
	"testing"

	"github.com/acme/payout/internal/decide"
	"github.com/acme/payout/internal/lifecycle"
)

// TestEveryMoveWritesItsEvent: each state change appends one event to the
// batch's outbox in the same script, numbered per payout; a replayed call
// writes none; the event holds the masked destination, never the sealed
// card number; AckOutbox deletes what was queued and the outbox with its
// last entry.
func TestEveryMoveWritesItsEvent(t *testing.T) {
	ctx := context.Background()
	ops := &fixedOps{id: "op-1"}
	l, _ := newTestLedger(t, withOpIDs(ops.op))
	seed(t, l, "b", 2)
	l.BeginCreate(ctx, "b", "E1", 1)
	l.BeginCreate(ctx, "b", "E1", 1) // a replay: no second event
	ops.id = "op-2"
	l.FinishCreate(ctx, "b", "E1", 1, decide.CreateResult{To: lifecycle.Checking, Error: "HTTP 502", HTTPStatus: 502})
	ops.id = "op-3"
	recordCheck(ctx, l, "b", "E1", 1, decide.CheckAnswer{Outcome: decide.Found, OrderID: "WD-1", HTTPStatus: 200}, decide.CheckPolicy{AbsentChecks: 2, MaxCreates: 1, MaxFaults: 1})
	ops.id = "op-4"
	if _, err := l.Cancel(ctx, "b", "E2", "carol", "duplicate"); err != nil {
		t.Fatal(err)
	}
	evs, err := l.Outbox(ctx, "b", 100)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range evs {
		got = append(got, strings.Join([]string{e.ExternalID, itoa(e.Seq), e.Type, string(e.From) + ">" + string(e.To), e.Amount, e.Destination}, "|"))
		if e.AtMillis == 0 || strings.Contains(e.Destination, "sealed") {
			t.Errorf("event %+v", e)
		}
	}
	want := []string{
		"E1|1|payout.submitting|queued>submitting|10.25|card 411111******1111",
		"E1|2|payout.checking|submitting>checking|10.25|card 411111******1111",
		"E1|3|payout.created|checking>created|10.25|card 411111******1111",
		"E2|1|payout.cancelled|queued>cancelled|10.25|card 411111******1111",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("outbox:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if bs, err := l.OutboxBatches(ctx); err != nil || len(bs) != 1 || bs[0] != "b" {
		t.Fatalf("OutboxBatches = %v, %v", bs, err)
	}
	if err := l.AckOutbox(ctx, "b", evs[0].StreamID, evs[1].StreamID); err != nil {
		t.Fatal(err)
	}
	if left, _ := l.Outbox(ctx, "b", 100); len(left) != 2 {
		t.Fatalf("after ack: %d left, want 2", len(left))
	}
	if err := l.AckOutbox(ctx, "b", evs[2].StreamID, evs[3].StreamID); err != nil {
		t.Fatal(err)
	}
	if bs, _ := l.OutboxBatches(ctx); len(bs) != 0 {
		t.Fatalf("OutboxBatches after the last ack = %v", bs)
	}
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

// TestEventTypesAreOneTable: every state of the machine has its event
// type, the Lua table is the Go table, and a state the table does not
// name (one being added, as returned was) gets payout.STATE.
func TestEventTypesAreOneTable(t *testing.T) {
	for _, st := range lifecycle.States {
		if got := EventType(st); !strings.HasPrefix(got, "payout.") {
			t.Errorf("EventType(%s) = %q", st, got)
		}
	}
	for st, typ := range map[lifecycle.State]string{
		lifecycle.Paid: "payout.paid", lifecycle.Failed: "payout.failed", lifecycle.Rejected: "payout.rejected",
		lifecycle.NeedsReview: "payout.needs_review", lifecycle.Cancelled: "payout.cancelled", lifecycle.Created: "payout.created",
		"returned": "payout.returned", "scheduled": "payout.scheduled",
	} {
		if got := EventType(st); got != typ {
			t.Errorf("EventType(%s) = %q, want %q", st, got, typ)
		}
	}
	lua := luaEventTypes()
	for st, typ := range EventTypes {
		if !strings.Contains(lua, `["`+string(st)+`"] = "`+typ+`"`) {
			t.Errorf("the Lua table lacks %s: %s", st, lua)
		}
	}
}
