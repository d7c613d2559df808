package payfile

import (
	"context"
	"strings"
	"testing"

	"github.com/acme/payout/internal/card"
)

// cardSeparators are the ways of joining the digit groups of a card number
// that the card scan must see through (card.Runs).
var cardSeparators = []string{
	"", " ", "  ", ".", "..", "-", "--", "/", "_", ". ", "/ ",
	"\u00a0", "\u202f", "\u3000", // no-break, narrow no-break, ideographic space
	"\u2013", "\u2212", "\uff0d", "\uff0e", "\uff0f", "\uff3f", // en dash, minus, full-width - . / _
	"\u200b", "\u00ad", // zero-width space, soft hyphen
}

// cardDigitForms write a digit in a Unicode script.
var cardDigitForms = []struct {
	name string
	zero rune
}{{"ascii", '0'}, {"full-width", 0xff10}, {"arabic-indic", 0x0660}, {"devanagari", 0x0966}, {"math-bold", 0x1d7ce}}

// writeCard writes the ASCII digits pan in groups of four joined by sep,
// each digit counted from zero.
func writeCard(pan, sep string, zero rune) string {
	var b strings.Builder
	for i := 0; i < len(pan); i++ {
		if i > 0 && i%4 == 0 {
			b.WriteString(sep)
		}
		b.WriteRune(zero + rune(pan[i]-'0'))
	}
	return b.String()
}

func TestCardInSeparatorsAndDigits(t *testing.T) {
	for _, pan := range []string{"4111111111111111", "5555555555554444", "2200123456789019", "378282246310005", "6221261234567890129"} {
		for _, form := range cardDigitForms {
			for _, sep := range cardSeparators {
				// Found as in the ASCII form grouped by single spaces (a
				// stretch of its groups may be found first).
				want := cardIn(writeCard(pan, " ", '0'), CardPrefixesIIN, false)
				if sep == "" {
					want = card.Mask(pan)
				}
				if want == "" {
					t.Fatalf("no card in %s", pan)
				}
				w := writeCard(pan, sep, form.zero)
				for _, in := range []string{w, "PO-" + w, "card " + w + ". of Ivanov", "MTS" + w, "+7 " + w} {
					for _, phone := range []bool{false, true} {
						if got := cardIn(in, CardPrefixesIIN, phone); got != want {
							t.Errorf("%s %q: cardIn(%q, phone %v) = %q, want %q", form.name, sep, in, phone, got, want)
						}
					}
				}
			}
			// Three separators, a tab or a line break end a run: groups
			// of four are no card.
			for _, sep := range []string{"   ", "...", " - ", "\t", "\n", ", "} {
				if in := writeCard(pan, sep, form.zero); cardIn(in, CardPrefixesAny, false) != "" {
					t.Errorf("cardIn(%q) finds a card in groups of four", in)
				}
			}
		}
	}
}

// The false-positive rules stay whatever the separators and digits.
func TestCardInFalsePositiveRules(t *testing.T) {
	for _, tt := range []struct {
		in       string
		prefixes CardPrefixes
		phone    bool
		want     string
	}{
		{"40817810099910004312", CardPrefixesIIN, false, ""},                        // 20 digits: not searched inside
		{"４０８１７８１００９９９１０００４３１２", CardPrefixesAny, false, ""},                        // the same, full-width
		{"40817810099910004312.4111", CardPrefixesAny, false, ""},                   // a 20-digit group is not joined into a card
		{"1000000000000008", CardPrefixesIIN, false, ""},                            // UATP prefix
		{"1000.0000.0000.0008", CardPrefixesIIN, false, ""},                         // the same, dotted
		{"1000.0000.0000.0008", CardPrefixesAny, false, "100000******0008"},         //
		{"+380501234567", CardPrefixesIIN, true, ""},                                // a phone number
		{"+380.50.123.45.67", CardPrefixesIIN, true, ""},                            // the same, dotted
		{"+３８０５０１２３４５６７", CardPrefixesIIN, true, ""},                                // the same, full-width
		{"+380.50.123.45.67", CardPrefixesIIN, false, "3805*****567"},               // not in phoneNumber
		{"+4111.1111.1111.1111", CardPrefixesIIN, true, "411111******1111"},         // 16 digits: no phone
		{"PO-2026.11.26-00123", CardPrefixesAny, false, ""},                         // a date id: 13 digits, not Luhn
		{"invoice 2026/11/26, 1 500.00 RUB", CardPrefixesAny, false, ""},            //
		{"PO_2026_4111_1111_1111_1111", CardPrefixesIIN, false, "411111******1111"}, // every stretch of groups
	} {
		if got := cardIn(tt.in, tt.prefixes, tt.phone); got != tt.want {
			t.Errorf("cardIn(%q, %v, %v) = %q, want %q", tt.in, tt.prefixes, tt.phone, got, tt.want)
		}
	}
}

// A row with a card number written with another separator in externalId,
// telecomOperator, phoneNumber or an informational column is refused, and
// no message shows the number.
func TestCheckRefusesSeparatedCards(t *testing.T) {
	for _, w := range []string{"4111.1111.1111.1111", "4111/1111/1111/1111", "4111_1111_1111_1111", "4111  1111  1111  1111", "４１１１１１１１１１１１１１１１"} {
		in := "externalId,amount,cardNumber,telecomOperator,phoneNumber,notes\n" +
			"PO-" + w + ",1,,MTS,,\n" +
			"PO-2,1,,MTS " + w + ",,\n" +
			"PO-3,1,,MTS,+7 " + w + ",\n" +
			"PO-4,1,4111111111111111,,,paid to " + w + "\n" +
			"PO-5,1,,MTS,+79161234567,ok\n"
		var errs []string
		sum, err := Check(context.Background(), "f.csv", strings.NewReader(in), Options{}, func(e Error) { errs = append(errs, e.String()) })
		if err != nil {
			t.Fatal(err)
		}
		if sum.ValidRows != 1 || len(errs) != 4 {
			t.Errorf("%s: %d valid rows, errors %q; want 1 valid row and 4 errors", w, sum.ValidRows, errs)
		}
		for _, e := range errs {
			if !strings.Contains(e, "holds a card number (411111******1111)") || strings.Contains(e, w) {
				t.Errorf("%s: error %q", w, e)
			}
		}
	}
}

// FuzzCardIn: a Luhn-valid number of 12 to 19 digits, written with any of
// the separators and digit forms, anywhere in a field, is found by the card
// scan (with --card-prefixes any; with schemes when it begins like one).
func FuzzCardIn(f *testing.F) {
	f.Add([]byte("411111111111111"), []byte{3, 0, 33, 70}, "PO-", "")
	f.Add([]byte("22001234567890"), []byte{1}, "", " of Ivanov")
	f.Add([]byte("3782822463100050"), []byte{200, 7, 100}, "x", "x")
	f.Fuzz(func(t *testing.T, body, layout []byte, before, after string) {
		if len(body) < card.MinDigits-1 {
			return
		}
		n := card.MinDigits - 1 + int(body[0])%(card.MaxDigits-card.MinDigits+1)
		d := make([]byte, 0, n+1)
		for i := range n {
			d = append(d, '0'+body[i%len(body)]%10)
		}
		pan := string(append(d, byte('0'+card.CheckDigit(string(d)))))
		var b strings.Builder
		for i := range len(pan) {
			l := byte(0)
			if len(layout) > 0 {
				l = layout[i%len(layout)]
			}
			if i > 0 {
				b.WriteString(cardSeparators[int(l)%len(cardSeparators)])
			}
			b.WriteRune(cardDigitForms[int(l/32)%len(cardDigitForms)].zero + rune(pan[i]-'0'))
		}
		// The card stands apart: a letter on either side ends its run.
		in := before + "x" + b.String() + "x" + after
		if cardIn(in, CardPrefixesAny, false) == "" {
			t.Fatalf("cardIn(%q) misses %s", in, card.Mask(pan))
		}
		if schemePrefix(pan) && cardIn(in, CardPrefixesIIN, false) == "" {
			t.Fatalf("cardIn(%q, schemes) misses %s", in, card.Mask(pan))
		}
	})
}
