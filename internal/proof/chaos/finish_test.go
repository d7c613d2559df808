package chaos

import (
	"compress/gzip"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/acme/payout/internal/ledger"
	"github.com/acme/payout/internal/lifecycle"
)

// TestReadArchived: an archived batch's payouts come from its archive; an
// archived batch whose archive is missing fails the run, naming the batch
// and the path, instead of dropping its payouts from the books.
func TestReadArchived(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "f.csv.B1.archive.jsonl.gz")
	f, err := os.Create(good)
	if err != nil {
		t.Fatal(err)
	}
	zw := gzip.NewWriter(f)
	_, err = zw.Write([]byte(`{"batch":{"id":"B1"},"counts":{"n:paid":"1"}}` + "\n" +
		`{"payout":{"ext":"E1","line":"2","amount":"1.00","state":"paid"}}` + "\n" +
		`{"end":{"payouts":"1"}}` + "\n"))
	if err != nil || zw.Close() != nil || f.Close() != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name    string
		archive string
		want    string // in the error; "" for none
	}{
		{"archive read", good, ""},
		{"archive missing", filepath.Join(dir, "gone.archive.jsonl.gz"), "gone.archive.jsonl.gz is missing"},
	} {
		t.Run(c.name, func(t *testing.T) {
			a := ledger.ArchivedBatch{Batch: ledger.Batch{ID: "B1"}, Archive: c.archive}
			payouts := map[string]ledger.Payout{}
			err := readArchived(a, payouts)
			if c.want == "" {
				if err != nil || payouts["E1"].State != lifecycle.Paid {
					t.Fatalf("readArchived = %v, payouts %v; want E1 paid", err, payouts)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "B1") || !errors.Is(err, os.ErrNotExist) {
				t.Fatalf("readArchived = %v; want an error naming batch B1 and %q", err, c.want)
			}
		})
	}
}
