package loader

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/acme/payout/internal/notify"
)

// TestSpoolNotifies: a batch held for approval and a batch that became
// final (here: discarded) each queue one delivery, with the ids of their
// facts; the final one carries the summary of the result file.
func TestSpoolNotifies(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t)
	f.ld.Notify = notify.NewEmitter(f.rdb, []string{"http://receiver.test/hook"})
	dir := t.TempDir()
	res, err := f.ld.Spool(ctx, dir, SpoolOptions{Delivery: DeliveryRename, Load: Options{Approval: Approval{Required: true, By: "alice"}}})
	if err != nil || len(res.Files) != 0 {
		t.Fatalf("empty spool: %+v %v", res, err)
	}
	writeFile(t, dir+"/inbox", "a.csv", goodCSV)
	res, err = f.ld.Spool(ctx, dir, SpoolOptions{Delivery: DeliveryRename, Load: Options{Approval: Approval{Required: true, By: "alice"}}})
	if err != nil || len(res.Files) != 1 || res.Files[0].Held == "" {
		t.Fatalf("spool: %+v %v", res, err)
	}
	batch := res.Files[0].Batch
	events := func() map[string]notify.Event {
		tasks, err := f.insp.ListPendingTasks(notify.Queue)
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]notify.Event{}
		for _, ti := range tasks {
			var p struct{ Body notify.Event }
			if err := json.Unmarshal(ti.Payload, &p); err != nil {
				t.Fatal(err)
			}
			out[p.Body.ID] = p.Body
		}
		return out
	}
	held := notify.AwaitingApproval(batch, "")
	if ev, ok := events()[held.ID]; !ok || ev.Type != notify.BatchAwaitingApproval || ev.Reason != "approval required" || len(events()) != 1 {
		t.Fatalf("after the hold: %+v", events())
	}
	if _, err := f.led.Controls().Discard(ctx, batch, "bob", "wrong file"); err != nil {
		t.Fatal(err)
	}
	if res, err = f.ld.Spool(ctx, dir, SpoolOptions{Delivery: DeliveryRename}); err != nil || len(res.Reports) != 1 {
		t.Fatalf("final: %+v %v", res, err)
	}
	ev, ok := events()[notify.Final(batch, nil).ID]
	if !ok || ev.Type != notify.BatchFinal {
		t.Fatalf("after the final report: %+v", events())
	}
	sum, _ := json.Marshal(ev.Summary)
	var s struct {
		Rows       int  `json:"rows"`
		Reconciled bool `json:"reconciled"`
		Final      bool `json:"final"`
	}
	if err := json.Unmarshal(sum, &s); err != nil || s.Rows != 3 || !s.Reconciled || !s.Final {
		t.Fatalf("summary %s", sum)
	}
}
