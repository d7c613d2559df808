package payfile

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/acme/payout/internal/proof/testenv/golden"
)

func readDict(t *testing.T, name string) *Dictionary {
	t.Helper()
	d, err := ReadDictionary(filepath.Join("testdata", "dictionary", name))
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// TestDictionaries checks testdata/dictionary/operators.csv with the
// operator and bank dictionaries beside it against operators.golden:
// exact matches pass (once trimmed), near misses are refused with a "did
// you mean".
func TestDictionaries(t *testing.T) {
	ops, banks := readDict(t, "operators.txt"), readDict(t, "banks.txt")
	if ops.Len() != 5 || !ops.Has("MTS") || ops.Has("Mts") {
		t.Fatalf("operators.txt read as %d names: %v", ops.Len(), ops.sorted)
	}
	path := filepath.Join("testdata", "dictionary", "operators.csv")
	sum, got := fullListing(t, path, Options{TelecomOperators: ops, BankNames: banks})
	golden.CheckString(t, filepath.Join("testdata", "dictionary", "operators.golden"), got)
	if len(sum.Warnings) != 0 {
		t.Errorf("warnings with a dictionary: %q", sum.Warnings)
	}
}

// TestNoOperatorDictionary: without a dictionary, any operator passes as
// before, with one warning per file that has telecom rows, and none for a
// file of cards only.
func TestNoOperatorDictionary(t *testing.T) {
	in := "externalId,amount,telecomOperator,cardNumber\nA,1,Mts,\nB,1,MTS-Russia,\nC,1,,4111111111111111\n"
	sum, errs := collect(t, in, Options{})
	if len(errs) != 0 || sum.ValidRows != 3 {
		t.Fatalf("errors %q, summary %+v", errs, sum)
	}
	if len(sum.Warnings) != 1 || sum.Warnings[0] != WarnNoOperatorDictionary || !strings.Contains(sum.Warnings[0], "--telecom-operators") {
		t.Errorf("warnings %q", sum.Warnings)
	}
	sum, _ = collect(t, "externalId,amount,cardNumber\nC,1,4111111111111111\n", Options{})
	if len(sum.Warnings) != 0 {
		t.Errorf("warnings for a file without operators: %q", sum.Warnings)
	}
	// A bankName column is allowed only with a bank dictionary.
	_, errs = collect(t, "externalId,amount,cardNumber,bankName\nC,1,4111111111111111,VTB\n", Options{})
	if len(errs) == 0 || !strings.Contains(errs[0], `column "bankName" is a destination property sent to the PSP: it is allowed only with`) {
		t.Errorf("bankName without --bank-names: %q", errs)
	}
}

func TestDictionaryRefusals(t *testing.T) {
	for _, tt := range []struct {
		names []string
		want  string
	}{
		{nil, "no names"},
		{[]string{"", "  "}, "no names"},
		{[]string{"MTS", "Bee\u200bline"}, "non-printable"},
	} {
		if _, err := NewDictionary("x.txt", tt.names); !errors.Is(err, ErrBadOptions) || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("NewDictionary(%q): %v, want %q", tt.names, err, tt.want)
		}
	}
	d, err := NewDictionary("ops.txt", []string{"MTS", "MTS", " Beeline "})
	if err != nil || d.Len() != 2 || !d.Has("Beeline") {
		t.Fatalf("%v %v", d, err)
	}
	if _, err := ReadDictionary(filepath.Join("testdata", "dictionary", "missing.txt")); err == nil {
		t.Error("a missing dictionary file is accepted")
	}
	// Each (the loading pass) refuses the same rows as Check.
	ops := readDict(t, "operators.txt")
	err = Each(context.Background(), "f.csv", strings.NewReader("externalId,amount,telecomOperator\nA,1,Mts\n"),
		Options{TelecomOperators: ops}, nil, func(Row) error { return nil })
	var pe Error
	if !errors.As(err, &pe) || pe.Column != ColTelecomOperator || !strings.Contains(pe.Message, `did you mean "MTS"`) {
		t.Errorf("Each: %v", err)
	}
}
