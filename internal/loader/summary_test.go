package loader

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestFinalBatchWritesItsSummary: the spool's result file of a final batch
// is a clean table, and its summary and reconciliation are in
// FILE.summary.txt beside it.
func TestFinalBatchWritesItsSummary(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	dir := t.TempDir()
	os.MkdirAll(filepath.Join(dir, Inbox), 0o750)
	writeFile(t, filepath.Join(dir, Inbox), "good.csv", goodCSV)
	res, err := f.ld.Spool(ctx, dir, SpoolOptions{Delivery: DeliveryRename, Load: Options{Approval: Approval{Required: true, By: "alice"}}})
	if err != nil || len(res.Files) != 1 {
		t.Fatalf("spool: %+v %v", res, err)
	}
	if _, err := f.led.Controls().Discard(ctx, res.Files[0].Batch, "bob", "wrong month"); err != nil {
		t.Fatal(err)
	}
	if res, err = f.ld.Spool(ctx, dir, SpoolOptions{Delivery: DeliveryRename}); err != nil || len(res.Reports) != 1 {
		t.Fatalf("second spool run: %+v %v", res, err)
	}
	result, err := os.ReadFile(filepath.Join(dir, Outbox, "good.csv.result.csv"))
	if err != nil {
		t.Fatal(err)
	}
	if lines := strings.Split(strings.TrimSuffix(string(result), "\n"), "\n"); len(lines) != 4 || strings.Contains(string(result), "#") {
		t.Errorf("result file is not a header and 3 rows:\n%s", result)
	}
	sum, err := os.ReadFile(filepath.Join(dir, Outbox, "good.csv.summary.txt"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(sum), "cancelled                    3") || !strings.Contains(string(sum), "reconciled: ") {
		t.Errorf("summary file:\n%s", sum)
	}
}
