package loader

import (
	"context"
	"os"
	"path/filepath"
	"testing"
)

// TestSpoolResumedFileItsRunLoaded: a loader killed after it loaded a file
// (its batch awaits approval) but before moving it to done/ leaves it in
// processing/; the next run finds the batch of that very file and moves
// the file to done/, not to failed/ as a duplicate of itself.
func TestSpoolResumedFileItsRunLoaded(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	dir := t.TempDir()
	for _, d := range []string{Inbox, Processing} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o750); err != nil {
			t.Fatal(err)
		}
	}
	writeFile(t, filepath.Join(dir, Processing), "good.csv", goodCSV)
	opts := Options{Approval: Approval{Required: true, By: "alice"}}
	if res, err := f.ld.LoadFile(ctx, filepath.Join(dir, Processing, "good.csv"), opts); err != nil || !res.Loaded {
		t.Fatalf("the killed run's load: %+v %v", res, err)
	}
	if _, err := f.ld.Spool(ctx, dir, SpoolOptions{Delivery: DeliveryRename, Load: opts}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, Done, "good.csv")); err != nil {
		t.Errorf("the file its killed run loaded is not in done/: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, Outbox, "good.csv.errors.csv")); err == nil {
		t.Error("an errors file was written for the file its killed run loaded")
	}
}
