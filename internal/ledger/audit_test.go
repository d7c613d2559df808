package ledger

import (
	"context"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/acme/payout/internal/decide"
	"github.com/acme/payout/internal/lifecycle"
)

// TestAuditTrail: every state change appends one entry with Redis time,
// actor and context; a replayed call appends nothing more; operator
// actions carry the operator's name; no card number is stored.
func TestAuditTrail(t *testing.T) {
	ctx := context.Background()
	ops := &fixedOps{id: "op-1"}
	l, _ := newTestLedger(t, withOpIDs(ops.op))
	w := l.As("worker-host:42")
	seed(t, l, "b", 2)
	w.BeginCreate(ctx, "b", "E1", 1)
	w.BeginCreate(ctx, "b", "E1", 1) // a replay: no second entry
	ops.id = "op-2"
	w.FinishCreate(ctx, "b", "E1", 1, decide.CreateResult{To: lifecycle.Checking, Error: "HTTP 502", HTTPStatus: 502})
	ops.id = "op-3"
	recordCheck(ctx, w, "b", "E1", 1, decide.CheckAnswer{Outcome: decide.Found, OrderID: "WD-1", HTTPStatus: 200}, decide.CheckPolicy{AbsentChecks: 2, MaxCreates: 1, MaxFaults: 1})
	ops.id = "op-4"
	if _, err := l.Cancel(ctx, "b", "E2", "carol", "duplicate"); err != nil {
		t.Fatal(err)
	}
	var got []string
	if err := l.Audit().Each(ctx, "b", "", func(e AuditEntry) error {
		if e.Time.IsZero() || time.Since(e.Time) > time.Hour*24*365*10 {
			t.Errorf("entry %s has time %v", e.ID, e.Time)
		}
		got = append(got, strings.Join([]string{e.Actor, e.ExternalID, e.From + ">" + e.To, e.Context["attempt"], e.Context["seq"], e.Context["http"], e.Context["note"]}, "|"))
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	want := []string{
		"worker-host:42|E1|queued>submitting|1|||",
		"worker-host:42|E1|submitting>checking|1||502|HTTP 502",
		"worker-host:42|E1|checking>created||1|200|",
		"carol|E2|queued>cancelled||||cancelled: duplicate",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("audit trail:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	var only []AuditEntry
	l.Audit().Each(ctx, "b", "E2", func(e AuditEntry) error { only = append(only, e); return nil })
	if len(only) != 1 || only[0].To != "cancelled" {
		t.Fatalf("filtered trail: %+v", only)
	}
	if err := l.Audit().Queue(ctx, "dave", "paused", "PSP maintenance"); err != nil {
		t.Fatal(err)
	}
	var global []AuditEntry
	l.Audit().Each(ctx, "", "", func(e AuditEntry) error { global = append(global, e); return nil })
	if len(global) != 1 || global[0].Actor != "dave" || global[0].To != "paused" || global[0].Context["note"] != "PSP maintenance" {
		t.Fatalf("global trail: %+v", global)
	}
}

// TestRawAuditEntry: the stored fields of an audit entry become its
// actor, payout, from, to and time; every other field is context.
func TestRawAuditEntry(t *testing.T) {
	for _, c := range []struct {
		name string
		raw  rawEntry
		want AuditEntry
	}{
		{
			name: "transition",
			raw: rawEntry{ID: "1700000000000-0", Fields: map[string]string{"t": "1700000000123", "actor": "w:1",
				"ext": "E1", "from": "queued", "to": "submitting", "attempt": "1"}},
			want: AuditEntry{ID: "1700000000000-0", Time: time.UnixMilli(1700000000123).UTC(), Actor: "w:1",
				ExternalID: "E1", From: "queued", To: "submitting", Context: map[string]string{"attempt": "1"}},
		},
		{
			name: "no context",
			raw:  rawEntry{ID: "2-0", Fields: map[string]string{"t": "2", "actor": "dave", "ext": "", "from": "", "to": "paused"}},
			want: AuditEntry{ID: "2-0", Time: time.UnixMilli(2).UTC(), Actor: "dave", To: "paused"},
		},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := c.raw.entry(); !reflect.DeepEqual(got, c.want) {
				t.Fatalf("Entry() = %+v, want %+v", got, c.want)
			}
		})
	}
}
