package loader

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestSpoolSaysOnceHowToDeclareTheAmountFormat: a spool file with decimal
// commas, read as plain, is refused with one error per amount and one file
// row naming the spool's --amount-format, not the option on every row.
func TestSpoolSaysOnceHowToDeclareTheAmountFormat(t *testing.T) {
	f := newFixture(t)
	dir := t.TempDir()
	in := filepath.Join(dir, Inbox)
	if err := os.MkdirAll(in, 0o750); err != nil {
		t.Fatal(err)
	}
	p := writeFile(t, in, "eu.csv", "externalId;amount;cardNumber;telecomOperator\nE-1;10,50;;MTS\nE-2;1 000,00;;MTS\n")
	age(t, p, 2*time.Minute)
	if _, err := f.ld.Spool(context.Background(), dir, SpoolOptions{Delivery: DeliveryRename, Settle: time.Minute}); err != nil {
		t.Fatal(err)
	}
	errs, err := os.ReadFile(filepath.Join(dir, Outbox, "eu.csv.errors.csv"))
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(errs), "--amount-format"); n != 1 {
		t.Errorf("--amount-format named %d times, want once:\n%s", n, errs)
	}
	if !strings.Contains(string(errs), "eu.csv,,file,\"2 amounts look written as another locale writes amounts") ||
		!strings.Contains(string(errs), "payout load --spool DIR --amount-format comma (1 500,50)") {
		t.Errorf("no file row with the hint:\n%s", errs)
	}
}
