package payfile

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/acme/payout/internal/money"
	"github.com/xuri/excelize/v2"
)

// writeSheet writes rows (text cells, "" left empty) on a sheet named
// Payouts of a new workbook at path.
func writeSheet(t *testing.T, path string, rows [][]string) {
	t.Helper()
	f := excelize.NewFile()
	defer f.Close()
	if err := f.SetSheetName("Sheet1", "Payouts"); err != nil {
		t.Fatal(err)
	}
	for i, r := range rows {
		for j, v := range r {
			if v == "" {
				continue
			}
			cell, _ := excelize.CoordinatesToCellName(j+1, i+1)
			if err := f.SetCellStr("Payouts", cell, v); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := f.SaveAs(path); err != nil {
		t.Fatal(err)
	}
}

// TestWorkbookTitles: a workbook's title rows above the header are found
// by the rule of CSV files (titleRow, MaxTitleRows) and named sheet!row.
func TestWorkbookTitles(t *testing.T) {
	hdr := []string{"externalId", "amount", "telecomOperator"}
	po := []string{"PO-1", "1.00", "MTS"}
	tests := []struct {
		name     string
		rows     [][]string
		errs     []string
		warnings []string
		header   int
	}{
		{"one title", [][]string{{"Payouts for March 2024"}, {}, hdr, po}, nil,
			[]string{"row Payouts!1 above the header row (row Payouts!3) taken as a title and skipped"}, 3},
		{"two titles of two cells", [][]string{{"Payouts", "March"}, {"", "ACME Ltd"}, hdr, po}, nil,
			[]string{"rows Payouts!1-2 above the header row (row Payouts!3) taken as a title and skipped"}, 3},
		{"no title", [][]string{hdr, po}, nil, nil, 1},
		{"title of three cells", [][]string{{"Payouts", "March", "2024"}, hdr, po},
			[]string{"t.xlsx:Payouts!1: header: no known column name: is the header row missing, or a title row above it (more than 2 cells)? Expected " + (&config{allowed: []string{ColExternalID, ColAmount, ColCardNumber, ColTelecomOperator, ColPhoneNumber}}).expected()}, nil, 0},
		{"title then a bad header", [][]string{{"Payouts"}, {"externalId", "amout", "telecomOperator"}, po},
			[]string{`t.xlsx:Payouts!2: header: unknown column "amout": did you mean "amount"? (allowed: externalId, amount, cardNumber, telecomOperator, phoneNumber; other columns are kept as information, but not one named so close to a known one) (row Payouts!1 above it taken as a title)`,
				`t.xlsx:Payouts!2: header: missing required column amount (allowed: externalId, amount, cardNumber, telecomOperator, phoneNumber) (row Payouts!1 above it taken as a title)`}, nil, 0},
		{"titles only", [][]string{{"Payouts"}, {}, {"March"}},
			[]string{"t.xlsx:Payouts!1: header: no header row after rows Payouts!1, Payouts!3 taken as a title: expected " + (&config{allowed: []string{ColExternalID, ColAmount, ColCardNumber, ColTelecomOperator, ColPhoneNumber}}).expected()}, nil, 0},
		// As in a CSV file: a row of 2 cells above the header is taken as a
		// title, and the warning names it.
		{"two cells above the header", [][]string{{"PO-1", "1.00"}, hdr, po}, nil,
			[]string{"row Payouts!1 above the header row (row Payouts!2) taken as a title and skipped"}, 2},
		{"too many titles", append(append(make([][]string, 0, 13), repeatRows([]string{"title"}, 11)...), hdr, po),
			[]string{"t.xlsx:Payouts!11: header: no known column name: is the header row missing, or a title row above it (more than 2 cells)? Expected " + (&config{allowed: []string{ColExternalID, ColAmount, ColCardNumber, ColTelecomOperator, ColPhoneNumber}}).expected() + " (rows Payouts!1-10 above it taken as a title)"}, nil, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "t.xlsx")
			writeSheet(t, path, tt.rows)
			sum, errs, err := collectFile(t, path)
			if err != nil {
				t.Fatal(err)
			}
			if got, want := strings.Join(errs, "\n"), strings.Join(tt.errs, "\n"); got != want {
				t.Errorf("errors\n%s\nwant\n%s", got, want)
			}
			var warnings []string
			for _, w := range sum.Warnings {
				if w != WarnNoOperatorDictionary {
					warnings = append(warnings, w)
				}
			}
			if got, want := strings.Join(warnings, "\n"), strings.Join(tt.warnings, "\n"); got != want {
				t.Errorf("warnings\n%s\nwant\n%s", got, want)
			}
			if tt.errs == nil && (sum.HeaderLine != tt.header || sum.ValidRows != 1) {
				t.Errorf("header line %d, valid rows %d; want %d, 1", sum.HeaderLine, sum.ValidRows, tt.header)
			}
		})
	}
}

// TestTotalRow: a total row under the payouts is refused as such, in a
// CSV file and in a workbook.
func TestTotalRow(t *testing.T) {
	want := `has no destination and externalId "Total": a total row, not a payout; delete it`
	_, errs := collect(t, "externalId,amount,cardNumber\nPO-1,1.00,4111111111111111\nTotal,1.00,\n", Options{})
	if len(errs) != 1 || !strings.Contains(errs[0], "f.csv:3: row: "+want) {
		t.Errorf("csv: %q", errs)
	}
	path := filepath.Join(t.TempDir(), "t.xlsx")
	writeSheet(t, path, [][]string{{"externalId", "amount", "cardNumber"}, {"PO-1", "1.00", "4111111111111111"}, {"Grand total:", "1.00"}})
	_, errs, err := collectFile(t, path)
	if err != nil {
		t.Fatal(err)
	}
	if len(errs) != 1 || !strings.Contains(errs[0], `t.xlsx:Payouts!3: row: has no destination and externalId "Grand total:": a total row`) {
		t.Errorf("xlsx: %q", errs)
	}
	for _, id := range []string{"Total", "TOTAL", "Итого", "Sub-total", "sum:"} {
		if !totalLabel(id) {
			t.Errorf("totalLabel(%q) = false", id)
		}
	}
	for _, id := range []string{"PO-1", "Totally", "summer"} {
		if totalLabel(id) {
			t.Errorf("totalLabel(%q) = true", id)
		}
	}
}

func repeatRows(r []string, n int) [][]string {
	out := make([][]string, n)
	for i := range out {
		out[i] = r
	}
	return out
}

// TestCSVScientific: a card number or an amount that a spreadsheet wrote
// to a CSV file in scientific notation is named as such, without its
// digits, in every amount format.
func TestCSVScientific(t *testing.T) {
	const cardMsg = "holds a number in scientific notation (%s), as a spreadsheet shows a long number in a column not formatted as Text: the card number's last digits are lost; format the cardNumber column as Text and type or paste the card numbers again"
	const amountMsg = "holds a number in scientific notation (%s), not an amount: format the amount column as Number with the amount's decimals, or as Text, and check the values"
	tests := []struct {
		name, in string
		opts     Options
		want     string
	}{
		{"card as Excel exports it", "externalId,amount,cardNumber\nPO-1,1.00,6.75964982643845E+018\n", Options{}, "f.csv:2: cardNumber: " + fmt.Sprintf(cardMsg, "6.7…E+018")},
		{"card of 16 digits", "externalId,amount,cardNumber\nPO-1,1.00,4.11111111111111E+15\n", Options{}, "f.csv:2: cardNumber: " + fmt.Sprintf(cardMsg, "4.1…E+15")},
		{"card short mantissa", "externalId,amount,cardNumber\nPO-1,1.00, 4.1E+15 \n", Options{}, "f.csv:2: cardNumber: " + fmt.Sprintf(cardMsg, "4.1E+15")},
		{"card, semicolons", "externalId;amount;cardNumber\nPO-1;1,5;5.55555555555544E+15\n", Options{AmountFormat: money.Comma}, "f.csv:2: cardNumber: " + fmt.Sprintf(cardMsg, "5.5…E+15")},
		{"amount", "externalId,amount,cardNumber\nPO-1,1.5E+03,4111111111111111\n", Options{}, "f.csv:2: amount: " + fmt.Sprintf(amountMsg, "1.5E+03")},
		{"amount lower case", "externalId,amount,cardNumber\nPO-1,2e3,4111111111111111\n", Options{}, "f.csv:2: amount: " + fmt.Sprintf(amountMsg, "2e3")},
		{"long amount", "externalId,amount,cardNumber\nPO-1,4.11111111111111E+15,4111111111111111\n", Options{AmountFormat: money.DotComma}, "f.csv:2: amount: " + fmt.Sprintf(amountMsg, "4.1…E+15")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, errs := collect(t, tt.in, tt.opts)
			if len(errs) != 1 || errs[0] != tt.want {
				t.Fatalf("errors %q\nwant %q", errs, tt.want)
			}
			if strings.Contains(errs[0], "4111") || strings.Contains(errs[0], "6759") || strings.Contains(errs[0], "5555") || strings.Contains(errs[0], "*") {
				t.Errorf("message shows the digits: %s", errs[0])
			}
		})
	}
	// Not scientific: the usual messages.
	_, errs := collect(t, "externalId,amount,cardNumber\nPO-1,1.00,4111-1111-1111-111E\n", Options{})
	if len(errs) != 1 || strings.Contains(errs[0], "scientific") {
		t.Errorf("%q", errs)
	}
}
