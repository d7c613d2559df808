package payfile

import (
	"strings"
	"testing"

	"github.com/shopspring/decimal"

	"github.com/acme/payout/internal/card"
)

func TestShortDecimal(t *testing.T) {
	for in, want := range map[string]string{
		"1500.5":              "1500.5",
		"12345678901":         "12345678901",
		"0.30000000000000004": "0.30000... with 17 decimal places",
		"-0.1000000000000001": "-0.10000... with 16 decimal places",
		"1234.5678901234":     "1234.56... with 10 decimal places",
		"4111111111111111":    "4.1…E+15",
		"411111111111":        "4.1…E+11",
		"-4111111111111111":   "-4.1…E+15",
		"1234567.12345":       "1.2…E+6 with 5 decimal places",
	} {
		if got := shortDecimal(decimal.RequireFromString(in)); got != want {
			t.Errorf("shortDecimal(%s) = %q, want %q", in, got, want)
		}
	}
}

// A long number cell in any column is refused with a message that shows
// at most the first 6 digits of the number: a card number typed as a
// number into an extra column must not be shown by its first 10 digits
// (card.Scrub lets fewer than 12 through).
func TestNumberCellMessageHidesTheDigits(t *testing.T) {
	c, err := Options{}.config()
	if err != nil {
		t.Fatal(err)
	}
	_, _, problem := c.textOfCell("notes", xcell{kind: cellNumber, hasValue: true, raw: "4111111111111111", format: "General", formatKnown: true})
	if !strings.Contains(problem, "holding 4.1…E+15 under the number format") {
		t.Errorf("a 16-digit number cell in notes: %q", problem)
	}
	for _, raw := range []string{"4111111111111111", "5555555555554444", "411111111111111", "4111111111.111111", "0.4111111111111111", "1234567890123", "4.11111111111111E+15"} {
		for _, col := range []string{"notes", ColExternalID, ColTelecomOperator, ColPhoneNumber, ColAmount, ColCardNumber} {
			for _, format := range []string{"General", "0", "0.00", "#,##0", "@"} {
				// A number short enough is taken as its text (and then
				// searched for a card number): only the messages count.
				_, _, problem := c.textOfCell(col, xcell{kind: cellNumber, hasValue: true, raw: raw, format: format, formatKnown: true})
				for run := range card.Runs(problem) {
					if d := run.Digits(); len(d) > maxShownDigits {
						t.Errorf("%s %q %s: the message shows %s: %s", col, format, raw, d, problem)
					}
				}
			}
		}
	}
}
