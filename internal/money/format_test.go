package money

import (
	"errors"
	"strings"
	"testing"
)

func TestParseIn(t *testing.T) {
	tests := []struct {
		in      string
		f       Format
		want    string
		wantErr string
	}{
		{"1500,50", Comma, "1500.5", ""},
		{"1 200,00", Comma, "1200", ""},
		{"1\u00A0200,00", Comma, "1200", ""},
		{"1\u202F200,05", Comma, "1200.05", ""},
		{"12 345 678,9", Comma, "12345678.9", ""},
		{"75", Comma, "75", ""},
		{"0,01", Comma, "0.01", ""},
		{"1.200,00", Comma, "", "'.', which the comma format does not use"},
		{"1500.50", Comma, "", "'.', which the comma format does not use"},
		{"1 20,00", Comma, "", "grouped wrongly"},
		{"1 2000,00", Comma, "", "grouped wrongly"},
		{"1234 567", Comma, "", "grouped wrongly"},
		{" 200,00", Comma, "", "grouped wrongly"},
		{"1 200\u00A0300,00", Comma, "", "mixes a space and a no-break space"},
		{"1,5,0", Comma, "", "',' after the decimals"},
		{"1,505", Comma, "", "more than 2 decimal places"},
		{",5", Comma, "", "digits before the ','"},
		{"5,", Comma, "", "digits after the ','"},
		{"-5,00", Comma, "", "must be positive"},
		{"0,00", Comma, "", "greater than zero"},
		{"1e3", Comma, "", "not a decimal number in the comma format"},
		{"", Comma, "", "is empty"},
		{"1 000 000 000 000 000,00", Comma, "", "integer digits"},
		{"1.500,50", CommaDot, "1500.5", ""},
		{"1500,50", CommaDot, "1500.5", ""},
		{"1.5", CommaDot, "", "grouped wrongly"},
		{"1 500,50", CommaDot, "", "a space, which the comma-dot format does not use"},
		{"1,500.50", DotComma, "1500.5", ""},
		{"1,500", DotComma, "1500", ""},
		{"1500,5", DotComma, "", "grouped wrongly"},
		{"1500.50", Plain, "1500.5", ""},
		{"1500,50", Plain, "", "decimal separator"},
	}
	for _, tt := range tests {
		t.Run(tt.f.String()+"/"+tt.in, func(t *testing.T) {
			got, err := ParseIn(tt.in, 2, tt.f)
			if tt.wantErr != "" {
				if err == nil {
					t.Fatalf("ParseIn(%q, %s) = %s, want error containing %q", tt.in, tt.f, got, tt.wantErr)
				}
				var pe *ParseError
				if !errors.Is(err, ErrInvalid) || !errors.As(err, &pe) || pe.Input != tt.in {
					t.Errorf("error %#v: not a ParseError quoting the input", err)
				}
				if !strings.Contains(err.Error(), tt.wantErr) {
					t.Errorf("error %q does not contain %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("ParseIn(%q, %s): %v", tt.in, tt.f, err)
			}
			if got.String() != tt.want {
				t.Errorf("ParseIn(%q, %s) = %s, want %s", tt.in, tt.f, got, tt.want)
			}
		})
	}
}

func TestParseFormat(t *testing.T) {
	for _, f := range Formats {
		got, err := ParseFormat(f.String())
		if err != nil || got != f {
			t.Errorf("ParseFormat(%q) = %v, %v", f.String(), got, err)
		}
		// Every format reads its own example as 1500.50.
		a, err := ParseIn(f.Example(), 2, f)
		if err != nil || a.String() != "1500.5" {
			t.Errorf("%s: example %q gives %v, %v", f, f.Example(), a, err)
		}
	}
	if _, err := ParseFormat("Comma"); err == nil || !strings.Contains(err.Error(), "comma-dot (1.500,50)") {
		t.Errorf("ParseFormat(Comma): %v", err)
	}
}

// FuzzParseComma checks the comma format: whatever it accepts is positive,
// within the scale, and the same amount as its digits read plainly once the
// grouping is removed and the decimal comma made a point.
func FuzzParseComma(f *testing.F) {
	for _, s := range []string{"1500,50", "1 200,00", "1\u00A0200,00", "1.200,00", "1,2,3", "", ",", "0,00", "12 34,5", "999 999 999 999 999,99"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		a, err := ParseIn(s, 2, Comma)
		if err != nil {
			var pe *ParseError
			if !errors.As(err, &pe) || pe.Input != s {
				t.Fatalf("error %v of %q is not a ParseError quoting the input", err, s)
			}
			return
		}
		if !a.Decimal().IsPositive() || a.Decimal().Exponent() < -2 {
			t.Fatalf("accepted %q as %s", s, a)
		}
		plain := strings.NewReplacer(" ", "", "\u00A0", "", "\u202F", "", ",", ".").Replace(s)
		want, err := Parse(plain, 2)
		if err != nil || want.Cmp(a) != 0 {
			t.Fatalf("%q gives %s, but its digits %q read plainly give %s, %v", s, a, plain, want, err)
		}
		if strings.ContainsAny(s, ".'") {
			t.Fatalf("accepted %q, which has a '.' or an apostrophe", s)
		}
		back, err := ParseIn(strings.Replace(a.String(), ".", ",", 1), 2, Comma)
		if err != nil || back.Cmp(a) != 0 {
			t.Fatalf("%s written back with a comma does not parse: %v", a, err)
		}
	})
}
