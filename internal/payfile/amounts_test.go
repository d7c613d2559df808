package payfile

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/acme/payout/internal/money"
	"github.com/acme/payout/internal/testenv/golden"
)

// fullListing is the golden form of a checked file: its errors, one a
// line, then a summary line and, for every valid row as Each gives it, its
// line, externalId, amount (canonical form, scale 2) and destination.
func fullListing(t *testing.T, path string, opts Options) (Summary, string) {
	t.Helper()
	sum, errs := listing(t, path, opts, 10*time.Second)
	var b strings.Builder
	b.WriteString(errs)
	fmt.Fprintf(&b, "-- %d rows, %d valid, total %s\n", sum.Rows, sum.ValidRows, sum.Total.StringFixed(2))
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	total := money.Zero
	err = Each(context.Background(), filepath.Base(path), f, opts, sum.IsBad, func(r Row) error {
		total = total.Add(r.Amount)
		fmt.Fprintf(&b, "%d %s %s %s\n", r.Line, r.ExternalID, r.Amount.StringFixed(2), r.Destination())
		return nil
	})
	if err != nil {
		t.Fatalf("Each: %v", err)
	}
	if total.Cmp(sum.Total) != 0 {
		t.Errorf("Each's rows total %s, Check's %s", total, sum.Total)
	}
	return sum, b.String()
}

// TestAmountFormats checks testdata/amounts/FORMAT.csv, read with
// --amount-format FORMAT, against FORMAT.golden: each file holds the
// format's accepted forms and the near misses it refuses.
func TestAmountFormats(t *testing.T) {
	for _, f := range money.Formats {
		t.Run(f.String(), func(t *testing.T) {
			path := filepath.Join("testdata", "amounts", f.String()+".csv")
			_, got := fullListing(t, path, Options{AmountFormat: f})
			golden.CheckString(t, strings.TrimSuffix(path, ".csv")+".golden", got)
		})
	}
}

// TestSampleCommaExport checks samples/payouts-excel-comma.csv, a
// spreadsheet's semicolon export with decimal commas, against its expected
// result: refused as a whole under the default format, every row loaded
// under --amount-format comma.
func TestSampleCommaExport(t *testing.T) {
	path := filepath.Join(samplesDir, "payouts-excel-comma.csv")
	opts := sampleOptions
	opts.AmountFormat = money.Comma
	sum, comma := fullListing(t, path, opts)
	if sum.ValidRows != sum.Rows || sum.Rows < 10 || sum.Delimiter != ';' {
		t.Errorf("with --amount-format comma: summary %+v", sum)
	}
	sum, plain := fullListing(t, path, sampleOptions)
	if sum.ValidRows == 0 || sum.ValidRows == sum.Rows || strings.Count(plain, "--amount-format comma") != sum.Rows-sum.ValidRows {
		t.Errorf("with the default format: every row with a comma must be refused naming --amount-format: %+v\n%s", sum, plain)
	}
	golden.CheckString(t, filepath.Join(samplesDir, "payouts-excel-comma.expected.txt"),
		"== payout load --amount-format comma\n"+comma+"== payout load (the default, --amount-format plain)\n"+plain)
}
