package loader

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestFinalBatchWritesItsAuditTrail: a spool batch held for approval and
// then discarded is final; the next spool run writes its result file and,
// beside it, the audit trail: the hold, the discard and every cancelled
// payout, with who did it, and no card number.
func TestFinalBatchWritesItsAuditTrail(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	dir := t.TempDir()
	os.MkdirAll(filepath.Join(dir, Inbox), 0o750)
	writeFile(t, filepath.Join(dir, Inbox), "good.csv", goodCSV)
	res, err := f.ld.Spool(ctx, dir, SpoolOptions{Delivery: DeliveryRename, Load: Options{Approval: Approval{Required: true, By: "alice"}}})
	if err != nil || len(res.Files) != 1 || res.Files[0].Held == "" {
		t.Fatalf("spool: %+v %v", res, err)
	}
	if n, err := f.led.Controls().Discard(ctx, res.Files[0].Batch, "bob", "wrong month"); err != nil || n != 3 {
		t.Fatalf("discard: %d %v", n, err)
	}
	res, err = f.ld.Spool(ctx, dir, SpoolOptions{Delivery: DeliveryRename})
	if err != nil || len(res.Reports) != 1 {
		t.Fatalf("second spool run: %+v %v", res, err)
	}
	b, err := os.ReadFile(filepath.Join(dir, Outbox, "good.csv.audit.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	text := string(b)
	lines := strings.Split(strings.TrimSpace(text), "\n")
	if len(lines) != 5 {
		t.Fatalf("%d audit lines, want 5 (hold, discard, 3 cancels):\n%s", len(lines), text)
	}
	for _, want := range []string{`"to":"awaiting_approval"`, `"actor":"alice"`, `"to":"discarded"`, `"actor":"bob"`, `"to":"cancelled"`} {
		if !strings.Contains(text, want) {
			t.Errorf("audit trail lacks %s:\n%s", want, text)
		}
	}
	for _, pan := range []string{"4111111111111111", "4111 1111 1111 1111", "5555555555554444"} {
		if strings.Contains(text, pan) {
			t.Fatalf("audit trail holds a card number")
		}
	}
}
