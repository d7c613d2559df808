package approval

import (
	"errors"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/acme/payout/internal/access"
	"github.com/acme/payout/internal/money"
)

var update = flag.Bool("update", false, "rewrite testdata/bad.golden")

func amt(t *testing.T, s string) money.Amount {
	t.Helper()
	a, err := money.Parse(s, 18)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func TestParseRule(t *testing.T) {
	for _, tc := range []struct {
		line string
		want string // Rule.String, "" for an error
	}{
		{"total >= 50000: 2 approver", "total >= 50000: 2 approver"},
		{"TOTAL   >=   50000.00 :  2   Approvers", "total >= 50000: 2 approver"},
		{"row >= 10000.5: 2 admin", "row >= 10000.5: 2 admin"},
		{"destination Card: 1 operator", "destination card: 1 operator"},
		{"destination phone: 3 approver", "destination phone: 3 approver"},
		{"any: 1 maker", "any: 1 maker"},
		{"total >= 0.000000000000000001: 1 approver", "total >= 0.000000000000000001: 1 approver"},
		{"total => 5: 1 approver", ""},
		{"total >= 5", ""},
		{"any: 1 viewer", ""},
		{"any: 1 nobody", ""},
		{"destination iban: 1 approver", ""},
	} {
		r, err := ParseRule(tc.line)
		switch {
		case tc.want == "" && err == nil:
			t.Errorf("%q: read as %q, want an error", tc.line, r)
		case tc.want != "" && err != nil:
			t.Errorf("%q: %v", tc.line, err)
		case tc.want != "" && r.String() != tc.want:
			t.Errorf("%q: read as %q, want %q", tc.line, r, tc.want)
		}
	}
}

// The strictest matching rule applies; between equals the earlier line.
func TestMatch(t *testing.T) {
	set, err := Parse("rules.conf", strings.NewReader(`# finance's rules
destination phone: 1 operator
total >= 50000: 2 approver
row >= 10000: 2 admin
total >= 1000000: 3 approver
`))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		f    Facts
		want string // Source, "" for none
		n    int
		role access.Role
	}{
		{"small card batch", Facts{Total: amt(t, "100"), Largest: amt(t, "60"), Cards: 2}, "", 0, ""},
		{"phone", Facts{Total: amt(t, "100"), Largest: amt(t, "60"), Phones: 1}, "rules.conf:2", 1, access.Operator},
		{"total just under", Facts{Total: amt(t, "49999.99"), Largest: amt(t, "9999.99"), Cards: 9}, "", 0, ""},
		{"total exactly", Facts{Total: amt(t, "50000.00"), Largest: amt(t, "100"), Cards: 9}, "rules.conf:3", 2, access.Approver},
		{"row and total tie: earlier line", Facts{Total: amt(t, "60000"), Largest: amt(t, "10000"), Cards: 9}, "rules.conf:3", 2, access.Approver},
		{"row alone", Facts{Total: amt(t, "20000"), Largest: amt(t, "10000"), Cards: 2}, "rules.conf:4", 2, access.Admin},
		{"phone and a large total: strictest", Facts{Total: amt(t, "60000"), Largest: amt(t, "100"), Phones: 600}, "rules.conf:3", 2, access.Approver},
		{"the largest", Facts{Total: amt(t, "1000000"), Largest: amt(t, "100000"), Phones: 1}, "rules.conf:5", 3, access.Approver},
	} {
		r, ok := set.Match(tc.f)
		if ok != (tc.want != "") || r.Source != tc.want || r.N != tc.n || r.Role != tc.role {
			t.Errorf("%s: matched %q (%v) from %q, want %d %s from %q", tc.name, r, ok, r.Source, tc.n, tc.role, tc.want)
		}
	}
	back, err := Decode(set.Encode())
	if err != nil || back.Encode() != set.Encode() || len(back.Rules) != 4 {
		t.Fatalf("decode(encode) = %v, %v", back, err)
	}
}

// A wrong file is refused whole, every wrong line listed as FILE:LINE.
func TestParseErrorsGolden(t *testing.T) {
	f, err := os.Open(filepath.Join("testdata", "bad.rules"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	_, err = Parse("bad.rules", f)
	var fe *FileError
	if !errors.As(err, &fe) || !errors.Is(err, ErrRules) {
		t.Fatalf("err = %v, want a *FileError", err)
	}
	got := err.Error() + "\n"
	golden := filepath.Join("testdata", "bad.golden")
	if *update {
		if err := os.WriteFile(golden, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	if got != string(want) {
		t.Errorf("errors differ from %s (-update to rewrite):\n%s", golden, got)
	}
	if len(fe.Lines) != 14 {
		t.Errorf("%d lines listed, want 14", len(fe.Lines))
	}
}
