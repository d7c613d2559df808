package chaos

import (
	"encoding/json"
	"reflect"
	"testing"
	"time"

	"github.com/acme/payout/internal/ledger"
	"github.com/acme/payout/internal/lifecycle"
	"github.com/acme/payout/internal/notify"
)

func TestCheckEvents(t *testing.T) {
	ev := func(seq int64, from, to string) notify.Event {
		return notify.PayoutEvent(notify.PayoutChange{Batch: "b1", ExternalID: "PO-1", Seq: seq, Type: "payout." + to,
			From: from, To: to, At: time.Unix(1700000000, 0).UTC(), Amount: "10.00", Dest: "card 555555******4444"})
	}
	del := func(e notify.Event, answer int, verified bool) Delivery {
		b, _ := json.Marshal(e)
		return Delivery{ID: e.ID, Body: b, Answer: answer, Verified: verified}
	}
	e1, e2, e3 := ev(1, "", "queued"), ev(2, "queued", "submitting"), ev(3, "submitting", "created")
	e4 := ev(4, "created", "paid")
	paid := map[string]ledger.Payout{"PO-1": {Batch: "b1", ExternalID: "PO-1", Amount: "10.00", State: lifecycle.Paid}}
	for _, tc := range []struct {
		name string
		ds   []Delivery
		want EventCheck
	}{
		{"all, with a retry and a duplicate",
			[]Delivery{del(e1, 204, true), del(e2, 500, true), del(e2, 204, true), del(e3, 204, true), del(e3, 204, true), del(e4, 0, true), del(e4, 204, true)},
			EventCheck{Events: 4, Deliveries: 7, Retries: 2, Duplicates: 1}},
		{"a late answer", []Delivery{del(e1, 204, true), del(e2, 204, true), del(e3, 204, true), {ID: e4.ID, Body: del(e4, 204, true).Body, Answer: 204, Late: true, Verified: true}, del(e4, 204, true)},
			EventCheck{Events: 4, Deliveries: 5, Retries: 1, Duplicates: 1}},
		{"a gap", []Delivery{del(e1, 204, true), del(e3, 204, true), del(e4, 204, true)},
			EventCheck{Events: 3, Deliveries: 3, Missing: 1}},
		{"the final event missing", []Delivery{del(e1, 204, true), del(e2, 204, true), del(e3, 204, true)},
			EventCheck{Events: 3, Deliveries: 3, Missing: 1}},
		{"none", nil, EventCheck{Missing: 1}},
		{"refused by the verifier", []Delivery{del(e1, 204, true), del(e2, 204, true), del(e3, 204, true), del(e4, 401, false), del(e4, 204, true)},
			EventCheck{Events: 4, Deliveries: 5, Rejected: 1}},
		{"a broken chain", []Delivery{del(e1, 204, true), del(e2, 204, true), del(ev(3, "checking", "created"), 204, true), del(e4, 204, true)},
			EventCheck{Events: 4, Deliveries: 4, Mismatches: 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := CheckEvents(tc.ds, paid)
			got.Findings = nil
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("CheckEvents = %+v, want %+v", got, tc.want)
			}
		})
	}
}
