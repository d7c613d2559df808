package card

import (
	"errors"
	"strings"
	"testing"
)

func TestNormalize(t *testing.T) {
	tests := []struct {
		in, want, wantErr string
	}{
		{"4111111111111111", "4111111111111111", ""},
		{"4111 1111 1111 1111", "4111111111111111", ""},
		{"4111-1111-1111-1111", "4111111111111111", ""},
		{"5555555555554444", "5555555555554444", ""},
		{"4111111111111112", "", "Luhn"},
		{"41111111111", "", "12 to 19 digits"},
		{"41111111111111111111", "", "12 to 19 digits"},
		{"4111x111111111111", "", "only digits"},
		{"", "", "12 to 19 digits"},
	}
	for _, tt := range tests {
		got, err := Normalize(tt.in)
		if tt.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) || !errors.Is(err, ErrInvalid) {
				t.Errorf("Normalize(%q) err = %v, want %q", tt.in, err, tt.wantErr)
			}
			if err != nil && len(tt.in) >= 12 && strings.Contains(err.Error(), tt.in) {
				t.Errorf("error %q leaks the full number", err)
			}
			continue
		}
		if err != nil || got != tt.want {
			t.Errorf("Normalize(%q) = %q, %v; want %q", tt.in, got, err, tt.want)
		}
	}
}

func TestCheckDigit(t *testing.T) {
	for _, tc := range []struct{ body, want string }{
		{"411111111111111", "1"}, // 4111111111111111
		{"555555555555444", "4"}, // 5555555555554444
		{"401288888888188", "1"}, // 4012888888881881
	} {
		if got := CheckDigit(tc.body); string(rune('0'+got)) != tc.want {
			t.Errorf("CheckDigit(%s) = %d, want %s", tc.body, got, tc.want)
		}
	}
}

func TestMask(t *testing.T) {
	tests := []struct{ in, want string }{
		{"4111111111111111", "411111******1111"},
		{"4111 1111 1111 1111", "411111******1111"},
		{"4111111111111111111", "411111*********1111"},
		{"411111111111", "4111*****111"},
		{"378282246310005", "378282*****0005"},
		{"1234", "1**4"},
		{"", ""},
		{"abc", "****"},
	}
	for _, tt := range tests {
		if got := Mask(tt.in); got != tt.want {
			t.Errorf("Mask(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestScrub(t *testing.T) {
	in := "card 4111111111111111 declined; ref 12345; card 4111-1111-1111-1111."
	got := Scrub(in)
	want := "card 411111******1111 declined; ref 12345; card 411111******1111."
	if got != want {
		t.Errorf("Scrub = %q, want %q", got, want)
	}
}

// TestScrubNumericIDs: numeric ids of 12 or more digits that fail the Luhn
// check are ids, not cards (issue #38): they are shown as they are.
func TestScrubNumericIDs(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"payout 100000000001 failed", "payout 100000000001 failed"},
		{"ext 2026112600000000001", "ext 2026112600000000001"},
		{"ids 1000000000001-1000000000002", "ids 1000000000001-1000000000002"},
		{"card 5500000000000004", "card 550000******0004"},
		{"card 5500 0000 0000 0005", "card 550000******0005"}, // a mistyped card, in groups of four
		{"card number: 5500000000000005", "card number: 550000******0005"},
		{"order 5500000000000005", "order 5500000000000005"},
		{"1000 0000 0001", "1000*****001"}, // written in groups of four, as a card is

		{"378282246310005", "378282*****0005"},
	} {
		if got := Scrub(tc.in); got != tc.want {
			t.Errorf("Scrub(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func FuzzMaskNeverShowsTheWhole(f *testing.F) {
	f.Add("4111111111111111")
	f.Add("4111 1111 1111 1111 111")
	f.Fuzz(func(t *testing.T, s string) {
		m := Mask(s)
		visible := 0
		for i := 0; i < len(m); i++ {
			if m[i] != '*' {
				visible++
			}
		}
		if visible > 10 {
			t.Fatalf("Mask(%q) = %q shows %d digits", s, m, visible)
		}
		if d, err := Normalize(s); err == nil && strings.Contains(Scrub("x "+s+" y"), d) {
			t.Fatalf("Scrub leaves %q visible", d)
		}
	})
}
