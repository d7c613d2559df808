package payfile

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/acme/payout/internal/card"
	"github.com/acme/payout/internal/extid"
	"github.com/acme/payout/internal/money"
)

// fuzzOptions picks the options of a fuzz run from mode's bits.
func fuzzOptions(mode uint8) Options {
	o := Options{MaxAmount: money.MustParse("1000000")}
	if mode&1 != 0 {
		o.MaxLineBytes = 256
	}
	if mode&2 != 0 {
		o.ExtraColumns = []string{"phoneNumber", "region"}
	}
	if mode&4 != 0 {
		o.Scale = 3
	}
	if mode&8 != 0 {
		o.MaxExternalIDLen = 8
	}
	return o
}

// fullCard returns the digits of the first run of s (as card.Scrub reads
// them: card.Runs) that is a 12-19 digit Luhn-valid card number, or "".
func fullCard(s string) string {
	for run := range card.Runs(s) {
		if d := run.Digits(); len(d) >= card.MinDigits && len(d) <= card.MaxDigits && card.Luhn(d) {
			return d
		}
	}
	return ""
}

func TestFullCard(t *testing.T) {
	for s, want := range map[string]string{
		"card 4111111111111111 x": "4111111111111111",
		"4111-1111-1111-1111":     "4111111111111111",
		"411111******1111":        "",
		"4111111111111112":        "",
		"line 12, column 5":       "",
		"x 378282246310005":       "378282246310005",
		"41111111111111111":       "",
		"4111.1111.1111.1111":     "4111111111111111",
		"４１１１１１１１１１１１１１１１": "4111111111111111",
	} {
		if got := fullCard(s); got != want {
			t.Errorf("fullCard(%q) = %q, want %q", s, got, want)
		}
	}
}

// FuzzCheck feeds arbitrary bytes to Check and Each. Invariants: no panic,
// every error is placed (line >= 1) and explained, no error shows a full
// card number, the row accounting adds up, and Each yields exactly the
// valid rows and their total.
func FuzzCheck(f *testing.F) {
	for _, pattern := range []string{"testdata/bad/*.csv", "../../samples/*.csv"} {
		files, _ := filepath.Glob(pattern)
		for _, path := range files {
			data, err := os.ReadFile(path)
			if err != nil {
				f.Fatal(err)
			}
			f.Add(data, uint8(0))
		}
	}
	f.Add([]byte(generate(20, map[int]bool{7: true})), uint8(0))
	f.Add([]byte("externalId,amount,telecomOperator,phoneNumber,region\nA,1.234,MTS,+7,77\nB,2,MTS,,\n"), uint8(6))
	f.Add([]byte(hdr+"ABCDEFGHIJ,1,,MTS\n\"x\ny\",1,,MTS\n"), uint8(9))
	f.Add([]byte("Payouts\n\nexternalId;amount;cardNumber;notes;Pay date\nPO-1;1;4111111111111111;PO-4111111111111111;x\npo-1;2;5555555555554444;;\n"), uint8(0))
	f.Add([]byte(hdr+"PO-caf\u00e9,1,,MTS\nPO-cafe\u0301,1,,MTS 4111 1111 1111 1111\nPO-Case,1,,MTS\nPO-CASE,2,,MTS\n"), uint8(0))
	f.Add([]byte("externalId,amount,telecomOperator,phoneNumber,amout\nA,1,MTS,+380501234567,1\n"), uint8(2))
	// Numbers in scientific notation, as Excel saves long numbers to CSV,
	// and a total row under the payouts.
	f.Add([]byte("externalId;amount;cardNumber\nPO-1;1,5E+03;6.75964982643845E+018\nPO-2;1;4.11111111111111e15\nИтого:;1;\n"), uint8(0))
	f.Add([]byte("Title\n,\nexternalId,amount,telecomOperator\nPO-1,1e-2,MTS\nGrand total,1,\n"), uint8(4))

	f.Fuzz(func(t *testing.T, data []byte, mode uint8) {
		opts := fuzzOptions(mode)
		ctx := context.Background()
		var errs []Error
		sum, err := Check(ctx, "fuzz.csv", bytes.NewReader(data), opts, func(e Error) { errs = append(errs, e) })
		if err != nil {
			t.Fatalf("Check returned %v on an in-memory file", err)
		}
		for _, e := range errs {
			if e.Line < 1 || e.Message == "" || e.Column == "" || e.Kind < KindHeader || e.Kind > KindEmpty {
				t.Errorf("malformed error %+v", e)
			}
			if c := fullCard(e.String()); c != "" {
				t.Errorf("error shows a full card number: %q", e.String())
			}
			if e.Column != ColumnHeader && e.Column != ColumnFile && !sum.IsBad(e.Line) {
				t.Errorf("error on line %d, which is not in BadLines %v: %v", e.Line, sum.BadLines, e)
			}
		}
		if sum.Errors != len(errs) {
			t.Errorf("Summary.Errors %d, %d reported", sum.Errors, len(errs))
		}
		if sum.Rows != sum.ValidRows+len(sum.BadLines) {
			t.Errorf("rows %d != valid %d + bad %d", sum.Rows, sum.ValidRows, len(sum.BadLines))
		}
		if !slices.IsSorted(sum.BadLines) || len(slices.Compact(slices.Clone(sum.BadLines))) != len(sum.BadLines) {
			t.Errorf("BadLines not strictly ascending: %v", sum.BadLines)
		}
		if len(errs) == 0 && (sum.ValidRows != sum.Rows || sum.Aborted) {
			t.Errorf("no error but summary %+v", sum)
		}

		n, total := 0, money.Zero
		lastLine := 0
		keys := map[string]int{}
		err = Each(ctx, "fuzz.csv", bytes.NewReader(data), opts, sum.IsBad, func(r Row) error {
			n++
			total = total.Add(r.Amount)
			if r.Line <= lastLine || r.ExternalID == "" || (r.CardNumber == "") == (r.TelecomOperator == "") {
				t.Errorf("bad row %+v after line %d", r, lastLine)
			}
			lastLine = r.Line
			// Look-alike ids are one id: a valid row's key is unique (in a
			// file not refused as a whole: duplicates are not looked for
			// after an abort).
			if first, dup := keys[extid.Key(r.ExternalID)]; dup && !sum.Aborted {
				t.Errorf("line %d: %q is the id of line %d", r.Line, r.ExternalID, first)
			}
			keys[extid.Key(r.ExternalID)] = r.Line
			// A card number only in cardNumber.
			others := append([]string{r.ExternalID, r.TelecomOperator, r.Amount.String()}, r.Info...)
			for _, v := range others {
				if m := cardIn(v, CardPrefixesIIN, false); m != "" {
					t.Errorf("line %d holds card %s outside cardNumber: %q", r.Line, m, v)
				}
			}
			for _, p := range r.Extra {
				if m := cardIn(p.Value, CardPrefixesIIN, p.Key == ColPhoneNumber); m != "" {
					t.Errorf("line %d holds card %s in %s", r.Line, m, p.Key)
				}
				if slices.Contains(sum.Info, p.Key) {
					t.Errorf("line %d: informational column %s among the PSP properties", r.Line, p.Key)
				}
			}
			if r.Info != nil && len(r.Info) != len(sum.Info) {
				t.Errorf("line %d: %d informational values, %d columns", r.Line, len(r.Info), len(sum.Info))
			}
			return nil
		})
		if sum.Aborted {
			return // the file is refused as a whole; Each may stop anywhere
		}
		if err != nil {
			t.Fatalf("Each on a checked file: %v", err)
		}
		if n != sum.ValidRows || total.Cmp(sum.Total) != 0 {
			t.Errorf("Each gave %d rows totalling %s, Check said %d rows totalling %s", n, total, sum.ValidRows, sum.Total)
		}
	})
}
