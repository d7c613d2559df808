package results_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/acme/payout/internal/decide"
	"github.com/acme/payout/internal/lifecycle"
	"github.com/acme/payout/internal/loader"
	"github.com/acme/payout/internal/report"
	"github.com/acme/payout/internal/results"
)

// TestArchiveKeepsInfoAndLookalikes: a batch's informational columns are
// in its archive's report, and a look-alike of an archived externalId
// (another case) is refused within the window, naming the batch.
func TestArchiveKeepsInfoAndLookalikes(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t)
	long := strings.TrimSpace(strings.Repeat("a long note, ", 8)) // 103 bytes: two hash fields
	path := filepath.Join(f.in, "notes.csv")
	if err := os.WriteFile(path, []byte("externalId,amount,cardNumber,notes,Pay date\nN-1,1.25,4111111111111111,\""+long+"\",2026-11-30\nN-2,2.50,4111111111111111,,\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	res, err := f.ld.LoadFile(ctx, path, loader.Options{})
	if err != nil || !res.Loaded {
		t.Fatalf("load: %+v %v", res, err)
	}
	for _, ext := range []string{"N-1", "N-2"} {
		if _, err := f.led.BeginCreate(ctx, res.Batch, ext, 1); err != nil {
			t.Fatal(err)
		}
		if _, err := f.led.FinishCreate(ctx, res.Batch, ext, 1, decide.CreateResult{To: lifecycle.Rejected, Error: "card blocked", PSPStatus: "rejected"}); err != nil {
			t.Fatal(err)
		}
	}
	f.drain(res.Batch)
	f.age(31 * day)
	out, err := results.Archive(ctx, f.led, f.opts())
	if err != nil || len(out) != 1 || out[0].Claims != 2 {
		t.Fatalf("archive: %+v %v", out, err)
	}
	var rep bytes.Buffer
	if _, err := results.WriteArchived(out[0].Archive, "csv", &rep, report.CSVOptions{}); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(rep.String(), "\n")
	if !strings.HasSuffix(lines[0], ",notes,Pay date") || !strings.HasSuffix(lines[1], ",\""+long+"\",2026-11-30") || !strings.HasSuffix(lines[2], ",,") {
		t.Fatalf("archived report:\n%s", rep.String())
	}

	other := filepath.Join(f.in, "other.csv")
	if err := os.WriteFile(other, []byte("externalId,amount,cardNumber\nn-1,9,4111111111111111\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	res, err = f.ld.LoadFile(ctx, other, loader.Options{})
	if err != nil || res.Loaded || len(res.Errors) != 1 || !strings.Contains(res.Errors[0].Message, out[0].Batch) {
		t.Fatalf("look-alike of an archived id: %+v %v", res, err)
	}
}
