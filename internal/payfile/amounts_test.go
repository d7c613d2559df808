package payfile

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/acme/payout/internal/money"
	"github.com/acme/payout/internal/proof/testenv/golden"
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
	if sum.ValidRows == 0 || sum.ValidRows == sum.Rows || sum.LocaleAmounts != sum.Rows-sum.ValidRows || strings.Contains(plain, "--amount-format") {
		t.Errorf("with the default format: every row with a comma must be refused and counted in LocaleAmounts, no row naming --amount-format: %+v\n%s", sum, plain)
	}
	// payout load says how to declare the format once, after the errors.
	hint := filepath.Base(path) + ": hint: " + AmountFormatHint(sum.LocaleAmounts, "--amount-format") + "\n"
	golden.CheckString(t, filepath.Join(samplesDir, "payouts-excel-comma.expected.txt"),
		"== payout load --amount-format comma\n"+comma+"== payout load (the default, --amount-format plain)\n"+plain+hint)
}

// TestAmountCeiling: with no MaxAmount a row above one billion is
// refused (issue 38: two rows of 922337153685477.58 were accepted and
// wrapped the sums), the ceiling is lower with 8 decimals, and a row that
// takes the file's total over the largest sum counted exactly is refused
// with its line (KindTotal). Errors are compared by line, column, kind and
// wording, not digits (messages mask long digit runs).
func TestAmountCeiling(t *testing.T) {
	const head = "externalId,amount,cardNumber\n"
	row := func(id, amount string) string { return id + "," + amount + ",4111111111111111\n" }
	type want struct {
		line int
		kind Kind
		msg  string
	}
	tests := []struct {
		name  string
		opts  Options
		file  string
		valid int
		total string
		errs  []want
	}{
		{"default ceiling", Options{}, head + row("W-1", "922337153685477.58") + row("W-2", "922337153685477.58") +
			row("W-3", "1000000000.00") + row("W-4", "1000000000.01"), 1, "1000000000",
			[]want{{2, KindField, "is above the maximum"}, {3, KindField, "is above the maximum"}, {5, KindField, "is above the maximum"}}},
		{"total over the ceiling", Options{MaxAmount: money.Ceiling(2)}, head + row("T-1", "500000000000.00") + row("T-2", "400000000000.00") +
			row("T-3", "719925474.09") + row("T-4", "0.01") + row("T-5", "0.01"), 3, "900719925474.09",
			[]want{{5, KindTotal, "takes the file's total from"}, {6, KindTotal, "over"}}},
		{"eight decimals", Options{Scale: 8}, head + row("E-1", "90071992.54740991") + row("E-2", "90071992.54740992"), 1, "90071992.54740991",
			[]want{{3, KindField, "is above the maximum"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sum, errs, err := Collect(context.Background(), "f.csv", strings.NewReader(tt.file), tt.opts)
			if err != nil {
				t.Fatal(err)
			}
			if sum.ValidRows != tt.valid || sum.Total.String() != tt.total {
				t.Errorf("%d valid, total %s; want %d, %s", sum.ValidRows, sum.Total, tt.valid, tt.total)
			}
			if len(errs) != len(tt.errs) {
				t.Fatalf("errors %v, want %d", errs, len(tt.errs))
			}
			for i, w := range tt.errs {
				e := errs[i]
				if e.Line != w.line || e.Column != ColAmount || e.Kind != w.kind || !strings.Contains(e.Message, w.msg) {
					t.Errorf("error %d: %s (kind %s), want line %d, amount, kind %s, %q", i, e.Error(), e.Kind, w.line, w.kind, w.msg)
				}
			}
		})
	}
	if _, err := (Options{MaxAmount: money.MustParse("900719925474.10")}).config(); !errors.Is(err, ErrBadOptions) {
		t.Errorf("a maximum above the ceiling: %v", err)
	}
}

// TestLocaleAmountsCounted: an amount written as another locale writes it,
// under the plain format, is refused with what is wrong with it alone; how
// to declare the format is the caller's to say once (Summary.LocaleAmounts),
// not a flag named on each of 200 rows that a browser user cannot pass.
func TestLocaleAmountsCounted(t *testing.T) {
	hdr := "externalId,amount,cardNumber,telecomOperator\n"
	tests := []struct {
		name   string
		file   string
		format money.Format
		want   int
	}{
		{"decimal commas under plain", hdr + "A1,\"12,50\",,MTS\nA2,\"1 000\",,MTS\nA3,\"1,000.00\",,MTS\n", money.Plain, 3},
		{"other errors are not counted", hdr + "A1,x,,MTS\nA2,-5,,MTS\nA3,12.345,,MTS\n", money.Plain, 0},
		{"a declared format says nothing of locales", hdr + "A1,\"1.000.000,5\",,MTS\nA2,\"12.50\",,MTS\n", money.Comma, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			sum, errs, err := Collect(context.Background(), "f.csv", strings.NewReader(tc.file), Options{AmountFormat: tc.format})
			if err != nil {
				t.Fatal(err)
			}
			if sum.LocaleAmounts != tc.want {
				t.Errorf("LocaleAmounts = %d, want %d (errors %v)", sum.LocaleAmounts, tc.want, errs)
			}
			for _, e := range errs {
				if strings.Contains(e.Message, "--amount-format") {
					t.Errorf("a row's error names the flag: %s", e)
				}
			}
		})
	}
	if got, want := AmountFormatHint(1, "--amount-format"), "1 amount looks written as another locale writes amounts, not plain (1500.50): declare the file's amount format with --amount-format comma (1 500,50), comma-dot (1.500,50) or dot-comma (1,500.50)"; got != want {
		t.Errorf("AmountFormatHint = %q, want %q", got, want)
	}
}
