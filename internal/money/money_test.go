package money

import (
	"errors"
	"strings"
	"testing"
)

func TestParse(t *testing.T) {
	tests := []struct {
		in      string
		scale   int
		want    string
		wantErr string
	}{
		{"10", 2, "10", ""},
		{"10.5", 2, "10.5", ""},
		{"10.50", 2, "10.5", ""},
		{"0.01", 2, "0.01", ""},
		{"007.10", 2, "7.1", ""},
		{"999999999999999.99", 2, "999999999999999.99", ""},
		{"", 2, "", "is empty"},
		{"1e3", 2, "", "not a plain decimal"},
		{"NaN", 2, "", "not a plain decimal"},
		{"Inf", 2, "", "not a plain decimal"},
		{"-5", 2, "", "must be positive"},
		{"+5", 2, "", "not a plain decimal"},
		{"0", 2, "", "greater than zero"},
		{"0.00", 2, "", "greater than zero"},
		{"1,000.00", 2, "", "thousands separator"},
		{"10,5", 2, "", "decimal separator"},
		{"12.345", 2, "", "more than 2 decimal places"},
		{"12.345", 3, "12.345", ""},
		{".5", 2, "", "digits before"},
		{"5.", 2, "", "digits after"},
		{"1.2.3", 2, "", "not a plain decimal"},
		{" 5", 2, "", "not a plain decimal"},
		{"1000000000000000", 2, "", "integer digits"},
		{"٣", 2, "", "not a plain decimal"},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := Parse(tt.in, tt.scale)
			if tt.wantErr != "" {
				if err == nil {
					t.Fatalf("Parse(%q) = %s, want error containing %q", tt.in, got, tt.wantErr)
				}
				if !errors.Is(err, ErrInvalid) {
					t.Errorf("error %v does not match ErrInvalid", err)
				}
				if !strings.Contains(err.Error(), tt.wantErr) {
					t.Errorf("error %q does not contain %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("Parse(%q): %v", tt.in, err)
			}
			if got.String() != tt.want {
				t.Errorf("Parse(%q) = %s, want %s", tt.in, got, tt.want)
			}
		})
	}
}

func TestMinorRoundTrip(t *testing.T) {
	for _, s := range []string{"0.01", "10.5", "123456789012.34"} {
		a, err := Parse(s, 2)
		if err != nil {
			t.Fatal(err)
		}
		b := FromMinor(a.Minor(2), 2)
		if a.Cmp(b) != 0 {
			t.Errorf("%s -> %d -> %s", s, a.Minor(2), b)
		}
	}
	if got := MustParse("10.5").StringFixed(2); got != "10.50" {
		t.Errorf("StringFixed = %s", got)
	}
}

func TestSumIsExact(t *testing.T) {
	// 0.1 added ten times is exactly 1 with decimals, not with float64.
	sum := Zero
	for i := 0; i < 10; i++ {
		sum = sum.Add(MustParse("0.1"))
	}
	if sum.Cmp(MustParse("1")) != 0 {
		t.Fatalf("sum = %s, want 1", sum)
	}
}

func FuzzParse(f *testing.F) {
	for _, s := range []string{"1", "0.01", "1e3", "NaN", "-5", "1,000.00", "12.345", "", ".", "99999999999999999999"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		a, err := Parse(s, 2)
		if err != nil {
			return
		}
		if !a.Decimal().IsPositive() {
			t.Fatalf("accepted non-positive %q", s)
		}
		if a.Decimal().Exponent() < -2 {
			t.Fatalf("accepted %q with more than 2 decimals", s)
		}
		back, err := Parse(a.String(), 2)
		if err != nil || back.Cmp(a) != 0 {
			t.Fatalf("canonical form %q of %q does not parse back: %v", a.String(), s, err)
		}
		if FromMinor(a.Minor(2), 2).Cmp(a) != 0 {
			t.Fatalf("minor units round trip of %q failed", s)
		}
	})
}

func TestFixed(t *testing.T) {
	for _, tt := range []struct {
		in    string
		scale int
		want  string
	}{
		{"2775.5", 2, "2775.50"}, {"11474.1", 2, "11474.10"}, {"10", 2, "10.00"}, {"10", 0, "10"}, {"10.5", 0, "10.5"},
		{"0.125", 2, "0.125"}, {"1.50", 3, "1.500"}, {"7", -1, "7"},
	} {
		if got := MustParse(tt.in).Fixed(tt.scale); got != tt.want {
			t.Errorf("%s.Fixed(%d) = %q, want %q", tt.in, tt.scale, got, tt.want)
		}
		if got := FixedText(tt.in, tt.scale); got != tt.want {
			t.Errorf("FixedText(%q, %d) = %q, want %q", tt.in, tt.scale, got, tt.want)
		}
	}
	for _, s := range []string{"", "abc", "1e3"} {
		if got := FixedText(s, 2); got != s {
			t.Errorf("FixedText(%q) = %q, want it unchanged", s, got)
		}
	}
}

func TestCeiling(t *testing.T) {
	tests := []struct {
		scale        int
		ceiling, max string
	}{
		{0, "900719925474", "1000000000"},
		{2, "900719925474.09", "1000000000"},
		{4, "900719925474.0991", "1000000000"},
		{6, "9007199254.740991", "1000000000"},
		{8, "90071992.54740991", "90071992.54740991"},
	}
	for _, tt := range tests {
		if got := Ceiling(tt.scale).String(); got != tt.ceiling {
			t.Errorf("Ceiling(%d) = %s, want %s", tt.scale, got, tt.ceiling)
		}
		if got := DefaultMax(tt.scale).String(); got != tt.max {
			t.Errorf("DefaultMax(%d) = %s, want %s", tt.scale, got, tt.max)
		}
		if u, err := Ceiling(tt.scale).Units(max(tt.scale, SumScale)); err != nil || u > MaxUnits {
			t.Errorf("Ceiling(%d).Units = %d, %v", tt.scale, u, err)
		}
	}
	units := []struct {
		in    string
		scale int
		want  int64
		err   bool
	}{
		{"10.5", 2, 1050, false},
		{"10.00001", 4, 100001, false}, // rounded up, never under-counted
		{"900719925474.0991", 4, MaxUnits, false},
		{"900719925474.0992", 4, 0, true},
		{"1844674307370955.16", 4, 0, true}, // wrapped to a negative sum before
	}
	for _, tt := range units {
		a, err := ParseStored(tt.in)
		if err != nil {
			t.Fatal(err)
		}
		got, err := a.Units(tt.scale)
		if got != tt.want || (err != nil) != tt.err || (err != nil && !errors.Is(err, ErrCeiling)) {
			t.Errorf("%s.Units(%d) = %d, %v", tt.in, tt.scale, got, err)
		}
	}
	if _, err := Ceiling(2).AddChecked(MustParse("0.01"), Ceiling(2)); !errors.Is(err, ErrCeiling) {
		t.Errorf("AddChecked over the ceiling: %v", err)
	}
	for in, want := range map[string]string{"1844674307370955.16": "1844674307370955.16", "0": "0", "-1": "", "1e3": "", "": ""} {
		got, err := ParseStored(in)
		if (want == "") != (err != nil) || (err == nil && got.String() != want) {
			t.Errorf("ParseStored(%q) = %s, %v", in, got, err)
		}
	}
}
