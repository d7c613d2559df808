package payfile

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/acme/payout/internal/money"
	"github.com/acme/payout/internal/proof/testenv/golden"
)

// sampleOptions are the options samples/README.md states the samples are
// checked with.
var sampleOptions = Options{MaxAmount: money.MustParse("1000000.00")}

const samplesDir = "../../samples"

// TestSampleErrors checks samples/payouts-errors.csv against its expected
// listing (go test -update rewrites it).
func TestSampleErrors(t *testing.T) {
	path := filepath.Join(samplesDir, "payouts-errors.csv")
	sum, got := listing(t, path, sampleOptions, 5*time.Second)
	golden.CheckString(t, filepath.Join(samplesDir, "payouts-errors.expected.txt"), got)
	if sum.Aborted {
		t.Errorf("the sample of row errors is refused as a whole: %+v", sum)
	}
	// It holds valid rows among the bad ones, so a partial load has work.
	if sum.ValidRows < 2 || sum.Rows != sum.ValidRows+len(sum.BadLines) {
		t.Errorf("summary %+v", sum)
	}
}

// TestSamplesValid checks that the good samples have no error and that Each
// gives all their rows.
func TestSamplesValid(t *testing.T) {
	for _, name := range []string{"payouts-good.csv", "payouts-excel-export.csv"} {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(samplesDir, name)
			sum, got := listing(t, path, sampleOptions, 5*time.Second)
			if got != "" {
				t.Fatalf("errors in a valid sample:\n%s", got)
			}
			f, err := os.Open(path)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			cards, telecoms, total := 0, 0, money.Zero
			err = Each(context.Background(), name, f, sampleOptions, sum.IsBad, func(r Row) error {
				if r.CardNumber != "" {
					cards++
				} else {
					telecoms++
				}
				total = total.Add(r.Amount)
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			if cards == 0 || telecoms == 0 || cards+telecoms != sum.Rows || sum.Rows < 10 || total.Cmp(sum.Total) != 0 {
				t.Errorf("%d card rows, %d telecom rows, total %s; summary %+v", cards, telecoms, total, sum)
			}
		})
	}
}

// TestExcelSampleIsAnExcelExport guards the properties the Excel sample is
// there to show, so that no editor quietly "fixes" them.
func TestExcelSampleIsAnExcelExport(t *testing.T) {
	data, err := os.ReadFile(filepath.Join(samplesDir, "payouts-excel-export.csv"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.HasPrefix(data, []byte("\xEF\xBB\xBFExternal ID;Amount;Card Number;Telecom Operator\r\n")) {
		t.Errorf("no BOM or not the Excel header: %q", data[:min(len(data), 60)])
	}
	if bytes.Count(data, []byte("\n")) != bytes.Count(data, []byte("\r\n")) {
		t.Error("not all line ends are CRLF")
	}
	sum, _ := listing(t, filepath.Join(samplesDir, "payouts-excel-export.csv"), sampleOptions, 5*time.Second)
	if sum.Delimiter != ';' {
		t.Errorf("delimiter %q", sum.Delimiter)
	}
}
