package card

import (
	"strings"
	"testing"
	"unicode"
)

// separators are the ways of joining the digit groups of a card number
// that Runs (and so Scrub and the payfile card scan) must see through.
var separators = []string{
	" ", "  ", ".", "..", "-", "--", "/", "_",
	"\u00a0", "\u202f", "\u2009", "\u3000", // no-break, narrow no-break, thin, ideographic space
	"\u2010", "\u2013", "\u2014", "\u2212", "\uff0d", // hyphen, en dash, em dash, minus, full-width hyphen-minus
	"\uff0e", "\uff0f", "\uff3f", // full-width . / _
	". ", "/ ", "\u200b", "\u00ad", "\u200b\u200b\u200b-", // invisible ones are not counted
}

// notJoined are separators that end a run.
var notJoined = []string{" - ", "...", "   ", "\t", "\n", "\r\n", ",", ":", "|", "a"}

// digitForms write the digit d in a Unicode script.
var digitForms = map[string]func(d byte) string{
	"ascii":        func(d byte) string { return string(rune('0' + d)) },
	"full-width":   func(d byte) string { return string(rune(0xff10 + rune(d))) },
	"arabic-indic": func(d byte) string { return string(rune(0x0660 + rune(d))) },
	"devanagari":   func(d byte) string { return string(rune(0x0966 + rune(d))) },
	"math-bold":    func(d byte) string { return string(rune(0x1d7ce + rune(d))) },
}

// written writes the ASCII digits pan in groups of four joined by sep,
// each digit in form.
func written(pan, sep string, form func(byte) string) string {
	var b strings.Builder
	for i := 0; i < len(pan); i++ {
		if i > 0 && i%4 == 0 {
			b.WriteString(sep)
		}
		b.WriteString(form(pan[i] - '0'))
	}
	return b.String()
}

func TestScrubSeparatorsAndDigits(t *testing.T) {
	for _, pan := range []string{"4111111111111111", "378282246310005", "2200123456789019", "4111111111111111110"} {
		want := Mask(pan)
		for name, form := range digitForms {
			for _, sep := range separators {
				in := "card " + written(pan, sep, form) + ". declined"
				got := Scrub(in)
				if !strings.Contains(got, "card "+want+". declined") {
					t.Errorf("%s %q: Scrub(%q) = %q, want %s in it", name, sep, in, got, want)
				}
				if strings.Contains(got, pan) {
					t.Errorf("Scrub(%q) = %q shows the card", in, got)
				}
			}
			for _, sep := range notJoined {
				in := written(pan, sep, form)
				if got := Scrub(in); got != in {
					t.Errorf("%s %q: Scrub(%q) = %q, want it unchanged (groups of 4 are no card)", name, sep, in, got)
				}
			}
		}
	}
}

func TestScrubKeepsTheRest(t *testing.T) {
	for in, want := range map[string]string{
		"":                                 "",
		"no digits":                        "no digits",
		"ref 12345, 2026-11-26 10:20":      "ref 12345, 2026-11-26 10:20",
		"amount 1500.00 of 12345678.90":    "amount 1500.00 of 12345678.90",
		"12345678901":                      "12345678901",
		"123456789015":                     "1234*****015", // 12 digits, Luhn-valid
		"123456789012":                     "123456789012", // fails Luhn: an id, no card
		"order 20261126000123456 paid":     "order 20261126000123456 paid",
		"4111111111111111 0042":            "411111**********0042", // a card beside a number
		"12345678901234567890":             "123456**********7890", // one group past 19 digits
		"4111.1111.1111.1111.":             "411111******1111.",
		"x4111_1111_1111_1111y":            "x411111******1111y",
		"a 4111 1111 1111 1111\nb 12":      "a 411111******1111\nb 12",
		"4111111111111111\n12":             "411111******1111\n12",
		"１２３":                              "１２３",
		"café 4111-1111-1111-1111 ünï\xff": "café 411111******1111 ünï\xff",
	} {
		if got := Scrub(in); got != want {
			t.Errorf("Scrub(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestRuns(t *testing.T) {
	var got []string
	s := "PO-2026/11 - ４１..11\u200b22x7"
	for r := range Runs(s) {
		got = append(got, strings.Join(r.Groups, "|")+"@"+s[r.Start:r.End])
	}
	want := []string{"2026|11@2026/11", "41|11|22@４１..11\u200b22", "7@7"}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("Runs(%q) = %q, want %q", s, got, want)
	}
}

func TestDigitValue(t *testing.T) {
	// DigitValue relies on every range of unicode.Nd being whole blocks of
	// ten digits from zero to nine.
	for _, rg := range unicode.Nd.R16 {
		if rg.Stride != 1 || (rg.Hi-rg.Lo+1)%10 != 0 {
			t.Errorf("unicode.Nd range %+v is not blocks of ten", rg)
		}
	}
	for _, rg := range unicode.Nd.R32 {
		if rg.Stride != 1 || (rg.Hi-rg.Lo+1)%10 != 0 {
			t.Errorf("unicode.Nd range %+v is not blocks of ten", rg)
		}
	}
	for r, want := range map[rune]int{'0': 0, '9': 9, '３': 3, '٧': 7, '९': 9, '𝟗': 9, '𝟘': 0, 'a': -1, '²': -1, '½': -1, '十': -1, '.': -1} {
		if got := DigitValue(r); got != want {
			t.Errorf("DigitValue(%q) = %d, want %d", r, got, want)
		}
	}
}

// FuzzScrubHidesEveryCard: a Luhn-valid card number, written in any digit
// form with any separators between its digits, between any texts, is never
// shown by Scrub, and Scrub leaves no run of 12 or more digits.
func FuzzScrubHidesEveryCard(f *testing.F) {
	f.Add([]byte("411111111111111"), []byte{0, 0, 0, 1}, "card ", ".")
	f.Add([]byte("37828224631000"), []byte{5, 17, 3, 9}, "", "")
	f.Add([]byte("220012345678901"), []byte{2, 30, 4}, "12.", "-34")
	f.Fuzz(func(t *testing.T, body, layout []byte, before, after string) {
		pan, text := fuzzCard(body, layout)
		if pan == "" {
			return
		}
		out := Scrub(before + text + after)
		for r := range Runs(out) {
			d := r.Digits()
			if strings.Contains(d, pan) || len(d) >= MinDigits {
				t.Fatalf("Scrub(%q) = %q shows %q", before+text+after, out, d)
			}
		}
	})
}

// fuzzCard makes a Luhn-valid card number of 12 to 19 digits from body and
// writes it with the separators and digit forms layout chooses; "" when
// body is too short.
func fuzzCard(body, layout []byte) (pan, text string) {
	if len(body) < MinDigits-1 {
		return "", ""
	}
	n := MinDigits - 1 + int(body[0])%(MaxDigits-MinDigits+1)
	d := make([]byte, 0, n+1)
	for i := range n {
		d = append(d, '0'+body[i%len(body)]%10)
	}
	d = append(d, byte('0'+CheckDigit(string(d))))
	pan = string(d)
	forms := []func(byte) string{digitForms["ascii"], digitForms["full-width"], digitForms["arabic-indic"], digitForms["devanagari"], digitForms["math-bold"]}
	seps := append([]string{""}, separators...)
	var b strings.Builder
	for i := range len(pan) {
		var l byte
		if len(layout) > 0 {
			l = layout[i%len(layout)]
		}
		if i > 0 {
			b.WriteString(seps[int(l)%len(seps)])
		}
		b.WriteString(forms[int(l/32)%len(forms)](pan[i] - '0'))
	}
	return pan, b.String()
}
