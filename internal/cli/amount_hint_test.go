package cli

import (
	"strings"
	"testing"

	"github.com/alicebob/miniredis/v2"
)

// TestLoadSaysOnceHowToDeclareTheAmountFormat: payout load of a file with
// decimal commas under the default format refuses each such row and names
// --amount-format once, after the errors, not on every row.
func TestLoadSaysOnceHowToDeclareTheAmountFormat(t *testing.T) {
	url := "redis://" + miniredis.RunT(t).Addr()
	code, out, errs := runMain(t, nil, "load", "--redis", url, "--insecure-plaintext", "--allow-volatile-redis", "--log-level", "error",
		"--dry-run", "../../samples/payouts-excel-comma.csv")
	if code != ExitRejected {
		t.Fatalf("exit %d, want %d:\n%s%s", code, ExitRejected, out, errs)
	}
	if n := strings.Count(errs, "--amount-format"); n != 1 {
		t.Errorf("--amount-format named %d times, want once:\n%s", n, errs)
	}
	if want := "payouts-excel-comma.csv: hint: 10 amounts look written as another locale writes amounts, not plain (1500.50): declare the file's amount format with --amount-format comma (1 500,50)"; !strings.Contains(errs, want) {
		t.Errorf("no %q in:\n%s", want, errs)
	}
	if n := strings.Count(errs, ": amount: "); n != 10 {
		t.Errorf("%d amount errors, want 10:\n%s", n, errs)
	}
}
