package chaos

import (
	"bytes"
	"encoding/csv"
	"fmt"
	"math/rand/v2"
	"strings"

	"github.com/acme/payout/internal/card"
	"github.com/acme/payout/internal/money"
	"github.com/acme/payout/internal/sandbox"
)

// Magic says why the PSP sandbox must refuse a row, if it must.
type Magic string

// The rows the sandbox refuses on purpose, so that rejected > 0.
const (
	NotMagic      Magic = ""
	MagicDeclined Magic = "declined-card"  // sandbox.DeclinedCard: 422
	MagicRefused  Magic = "refused-amount" // sandbox.RefusedAmount: 400
)

const (
	magicPeriod         = 200  // one row of each magic kind per this many rows
	declinedOffset      = 17   // row index (mod magicPeriod) of a declined card
	refusedOffset       = 113  // row index (mod magicPeriod) of a refused amount
	telecomShare        = 0.15 // rows paid to a telecom operator
	groupedShare        = 0.08 // card numbers written grouped ("4111 1111 ..." or with dashes)
	minMinor            = 100  // smallest amount: 1.00
	maxMinor            = 500000
	refusedMinor        = 1313 // 13.13, never drawn for an ordinary row
	generatedCardDigits = 16
)

var header = []string{"externalId", "amount", "cardNumber", "telecomOperator"}

var telecoms = []string{"MTS", "Beeline", "Megafon", "Tele2"}

// cardPrefixes are issuer prefixes of common test numbers.
var cardPrefixes = []string{"4", "51", "52", "53", "54", "55", "2221", "6011", "35"}

// Row is one generated payout and what the PSP must end up holding for it.
type Row struct {
	File       string
	ExternalID string
	Amount     money.Amount
	AmountText string // as written in the file
	Card       string // full digits; "" for a telecom payout
	CardText   string // as written in the file (maybe grouped)
	Telecom    string
	Magic      Magic
}

// MaskedDestination is the destination as the sandbox stores it: the
// masked card number or the telecom operator.
func (r Row) MaskedDestination() (key, value string) {
	if r.Card != "" {
		return "cardNumber", card.Mask(r.Card)
	}
	return "telecomOperator", r.Telecom
}

// PayoutFile is one generated CSV file.
type PayoutFile struct {
	Name string
	Rows []Row
}

// CSV renders the file with the canonical header.
func (f PayoutFile) CSV() []byte {
	var b bytes.Buffer
	w := csv.NewWriter(&b)
	_ = w.Write(header)
	for _, r := range f.Rows {
		_ = w.Write([]string{r.ExternalID, r.AmountText, r.CardText, r.Telecom})
	}
	w.Flush()
	return b.Bytes()
}

// Generate makes rows payouts split over files files. Card numbers are
// Luhn-valid, distinct and never the sandbox's magic card except in the
// declined rows; amounts are never the magic amount except in the refused
// rows. runID makes the externalIds and file names unique to the run; the
// letters F and R keep the id's digits in short runs, since an id of
// digit groups such as CH-226756-01-000006 (runID is hex, sometimes all
// digits) may pass the loader's card-number scan and refuse its file.
func Generate(rng *rand.Rand, runID string, rows, files int) []PayoutFile {
	out := make([]PayoutFile, files)
	used := map[string]bool{sandbox.DeclinedCard: true}
	for f := range out {
		out[f].Name = fmt.Sprintf("chaos-%s-%02d.csv", runID, f+1)
	}
	for i := 0; i < rows; i++ {
		f := i * files / rows // contiguous, even split
		r := Row{File: out[f].Name, ExternalID: fmt.Sprintf("CH-%s-F%02d-R%06d", runID, f+1, i+1)}
		minor := minMinor + rng.Int64N(maxMinor-minMinor+1)
		if minor == refusedMinor {
			minor++
		}
		switch i % magicPeriod {
		case declinedOffset:
			r.Magic = MagicDeclined
		case refusedOffset:
			r.Magic = MagicRefused
			minor = refusedMinor
		}
		r.AmountText = amountText(minor, rng)
		r.Amount = money.MustParse(r.AmountText)
		switch {
		case r.Magic == MagicDeclined:
			r.Card = sandbox.DeclinedCard
		case rng.Float64() < telecomShare:
			r.Telecom = telecoms[rng.IntN(len(telecoms))]
		default:
			for r.Card == "" || used[r.Card] {
				r.Card = luhnCard(rng, cardPrefixes[rng.IntN(len(cardPrefixes))], generatedCardDigits)
			}
			used[r.Card] = true
		}
		r.CardText = r.Card
		if r.Card != "" && rng.Float64() < groupedShare {
			sep := " "
			if rng.IntN(2) == 0 {
				sep = "-"
			}
			r.CardText = group(r.Card, sep)
		}
		out[f].Rows = append(out[f].Rows, r)
	}
	return out
}

// amountText writes minor units (cents) with 2, 1 or 0 decimals, as a
// person's spreadsheet would.
func amountText(minor int64, rng *rand.Rand) string {
	units, cents := minor/100, minor%100
	switch {
	case cents == 0 && rng.IntN(2) == 0:
		return fmt.Sprintf("%d", units)
	case cents%10 == 0 && rng.IntN(2) == 0:
		return fmt.Sprintf("%d.%d", units, cents/10)
	}
	return fmt.Sprintf("%d.%02d", units, cents)
}

// luhnCard draws a card number of n digits starting with prefix whose last
// digit makes it Luhn-valid.
func luhnCard(rng *rand.Rand, prefix string, n int) string {
	b := []byte(prefix)
	for len(b) < n-1 {
		b = append(b, byte('0'+rng.IntN(10)))
	}
	for d := byte('0'); d <= '9'; d++ {
		if c := string(append(b, d)); card.Luhn(c) {
			return c
		}
	}
	panic("unreachable: one check digit in ten is right")
}

// group writes digits in groups of four.
func group(digits, sep string) string {
	var parts []string
	for i := 0; i < len(digits); i += 4 {
		parts = append(parts, digits[i:min(i+4, len(digits))])
	}
	return strings.Join(parts, sep)
}
