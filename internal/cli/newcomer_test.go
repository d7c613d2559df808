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

// TestDryRunWithoutRedis: payout load --dry-run with no Redis given checks
// the file on an in-memory ledger and says so, rather than failing on (or
// silently using) 127.0.0.1:6379; a command given no --redis names the
// default it uses.
func TestDryRunWithoutRedis(t *testing.T) {
	code, out, errs := runMain(t, nil, "load", "--dry-run", "--log-level", "error", "../../samples/payouts-good.csv")
	if code != ExitOK || !strings.Contains(out, "payouts-good.csv: valid: 20 rows, total 24917.54") ||
		!strings.Contains(errs, "no Redis given (--redis or PAYOUT_REDIS): the dry run checks the files on their own") || strings.Contains(errs, "6379") {
		t.Fatalf("dry run without Redis: exit %d\n%s%s", code, out, errs)
	}
	// Given in the environment, the Redis is used (and named).
	url := "redis://" + miniredis.RunT(t).Addr()
	code, _, errs = runMain(t, map[string]string{"PAYOUT_REDIS": url}, "load", "--dry-run", "--log-level", "error", "../../samples/payouts-good.csv")
	if code != ExitOK || strings.Contains(errs, "no Redis given") || !strings.Contains(errs, "payout load: Redis 127.0.0.1:") || strings.Contains(errs, "the default") {
		t.Fatalf("dry run with PAYOUT_REDIS: exit %d\n%s", code, errs)
	}
	// Any other command on the default Redis says it is the default.
	_, _, errs = runMain(t, nil, "status", "--log-level", "error", "nope")
	if !strings.Contains(errs, "payout status: Redis 127.0.0.1:6379, database 0 (the default: neither --redis nor PAYOUT_REDIS given)") {
		t.Errorf("status on the default Redis:\n%s", errs)
	}
}
