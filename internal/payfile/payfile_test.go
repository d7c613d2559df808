package payfile

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/acme/payout/internal/money"
	"github.com/acme/payout/internal/psp"
)

// collect runs Collect on a string and returns the summary and the sorted
// error listing.
func collect(t *testing.T, in string, opts Options) (Summary, []string) {
	t.Helper()
	sum, errs, err := Collect(context.Background(), "f.csv", strings.NewReader(in), opts)
	if err != nil {
		t.Fatalf("Collect: %v", err)
	}
	out := make([]string, len(errs))
	for i, e := range errs {
		out[i] = e.String()
	}
	return sum, out
}

// rows returns the valid rows of in, as Each gives them after Check.
func rows(t *testing.T, in string, opts Options) []Row {
	t.Helper()
	sum, _ := collect(t, in, opts)
	var got []Row
	err := Each(context.Background(), "f.csv", strings.NewReader(in), opts, sum.IsBad, func(r Row) error {
		got = append(got, r)
		return nil
	})
	if err != nil {
		t.Fatalf("Each: %v", err)
	}
	return got
}

const hdr = "externalId,amount,cardNumber,telecomOperator\n"

func TestAccepted(t *testing.T) {
	type want struct {
		line        int
		id, amount  string
		dest, extra string
	}
	tests := []struct {
		name string
		in   string
		opts Options
		want []want
	}{
		{"plain", hdr + "PO-1,10.50,4111111111111111,\nPO-2,7,,MTS\n", Options{},
			[]want{{2, "PO-1", "10.50", "card 411111******1111", ""}, {3, "PO-2", "7", "telecom MTS", ""}}},
		{"no final newline", hdr + "PO-1,10.50,4111111111111111,", Options{},
			[]want{{2, "PO-1", "10.50", "card 411111******1111", ""}}},
		{"bom crlf semicolon excel header",
			"\uFEFFExternal ID;Amount;Card Number;Telecom Operator\r\nPO-1;1.5;4111 1111 1111 1111;\r\nPO-2;2;;Beeline\r\n", Options{},
			[]want{{2, "PO-1", "1.5", "card 411111******1111", ""}, {3, "PO-2", "2", "telecom Beeline", ""}}},
		{"header spellings", "external_id,AMOUNT,card-number\nPO-1,3,5555-5555-5555-4444\n", Options{},
			[]want{{2, "PO-1", "3", "card 555555******4444", ""}}},
		{"header spellings 2", "EXTERNAL-ID , Amount,  CardNumber\nPO-1,3,5555555555554444\n", Options{},
			[]want{{2, "PO-1", "3", "card 555555******4444", ""}}},
		{"columns in any order, telecom only", "Telecom_Operator,amount,externalId\nTele2,0.01,PO-9\n", Options{},
			[]want{{2, "PO-9", "0.01", "telecom Tele2", ""}}},
		{"spaces around fields", hdr + "  PO-1 ,  10.00 , 4012 8888 8888 1881 ,  \n", Options{},
			[]want{{2, "PO-1", "10.00", "card 401288******1881", ""}}},
		{"quoted fields", hdr + "\"PO-1\",\"12.00\",\"4111-1111-1111-1111\",\"\"\n", Options{},
			[]want{{2, "PO-1", "12.00", "card 411111******1111", ""}}},
		{"quoted field with delimiter and quotes", "externalId;amount;telecomOperator\n\"PO 1\";5;\"MTS; \"\"Plus\"\"\"\n", Options{},
			[]want{{2, "PO 1", "5", "telecom MTS; \"Plus\"", ""}}},
		{"blank lines and empty rows skipped", hdr + "\n\nPO-1,1,4111111111111111,\n,,,\n  , ,,\n\r\nPO-2,2,,MTS\n\n", Options{},
			[]want{{4, "PO-1", "1", "card 411111******1111", ""}, {8, "PO-2", "2", "telecom MTS", ""}}},
		{"blank lines before header", "\n\r\n" + hdr + "PO-1,1,,MTS\n", Options{},
			[]want{{4, "PO-1", "1", "telecom MTS", ""}}},
		{"multi-line quoted header cell keeps lines right",
			"\"External\nID\",\"Amount\",\"Card\r\nNumber\"\nPO-1,5,4111111111111111\nPO-2,6,5555555555554444\n", Options{},
			[]want{{4, "PO-1", "5", "card 411111******1111", ""}, {5, "PO-2", "6", "card 555555******4444", ""}}},
		{"extra column", "externalId,amount,telecomOperator,Phone Number\nPO-1,5,MTS,+79161234567\nPO-2,6,MTS,\n", Options{},
			[]want{{2, "PO-1", "5", "telecom MTS", "phoneNumber=+79161234567"}, {3, "PO-2", "6", "telecom MTS", ""}}},
		{"configured extra columns", "externalId,amount,telecomOperator,region,phone\nPO-1,5,MTS,77,+7916\n",
			Options{ExtraColumns: []string{"phone", "region"}},
			[]want{{2, "PO-1", "5", "telecom MTS", "phone=+7916 region=77"}}},
		{"scale 3", hdr + "PO-1,12.345,4111111111111111,\n", Options{Scale: 3},
			[]want{{2, "PO-1", "12.345", "card 411111******1111", ""}}},
		{"at the maximum", hdr + "PO-1,100.00,4111111111111111,\n", Options{MaxAmount: money.MustParse("100")},
			[]want{{2, "PO-1", "100.00", "card 411111******1111", ""}}},
		{"19-digit and 15-digit cards", hdr + "PO-1,1,6011000990139424,\nPO-2,1,378282246310005,\nPO-3,1,4111111111111111110,\n", Options{},
			[]want{{2, "PO-1", "1", "card 601100******9424", ""}, {3, "PO-2", "1", "card 378282*****0005", ""},
				{4, "PO-3", "1", "card 411111*********1110", ""}}},
		{"unicode id and spaces inside", hdr + "ПВ 2026-1,1,,МТС\n", Options{},
			[]want{{2, "ПВ 2026-1", "1", "telecom МТС", ""}}},
		{"id of maximal length", hdr + strings.Repeat("x", 64) + ",1,,MTS\n", Options{},
			[]want{{2, strings.Repeat("x", 64), "1", "telecom MTS", ""}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sum, errs := collect(t, tt.in, tt.opts)
			if len(errs) != 0 || sum.Aborted {
				t.Fatalf("errors %q, aborted %v", errs, sum.Aborted)
			}
			got := rows(t, tt.in, tt.opts)
			var gotW []want
			total := money.Zero
			for _, r := range got {
				var extra []string
				for _, p := range r.Extra {
					extra = append(extra, p.Key+"="+p.Value)
				}
				gotW = append(gotW, want{r.Line, r.ExternalID, r.Amount.String(), r.Destination(), strings.Join(extra, " ")})
				if i := len(gotW) - 1; i < len(tt.want) && money.MustParse(tt.want[i].amount).Cmp(r.Amount) == 0 {
					gotW[i].amount = tt.want[i].amount // the same amount, maybe written differently
				}
				total = total.Add(r.Amount)
			}
			if !slices.Equal(gotW, tt.want) {
				t.Errorf("rows\n got %v\nwant %v", gotW, tt.want)
			}
			if sum.Rows != len(tt.want) || sum.ValidRows != len(tt.want) || len(sum.BadLines) != 0 {
				t.Errorf("summary %+v", sum)
			}
			if sum.Total.Cmp(total) != 0 {
				t.Errorf("total %s, rows add up to %s", sum.Total, total)
			}
		})
	}
}

func TestRowValues(t *testing.T) {
	got := rows(t, "externalId;amount;cardNumber;telecomOperator;phoneNumber\nPO-1;10.5;4111-1111 1111-1111;;+7 916\nPO-2;3;;MTS;\n", Options{})
	if len(got) != 2 {
		t.Fatalf("%d rows", len(got))
	}
	if got[0].CardNumber != "4111111111111111" || got[0].TelecomOperator != "" {
		t.Errorf("row 1 destination %q %q", got[0].CardNumber, got[0].TelecomOperator)
	}
	wantExtra := []Property{{Key: "phoneNumber", Value: "+7 916"}}
	if !slices.Equal(got[0].Extra, wantExtra) {
		t.Errorf("extra properties %v", got[0].Extra)
	}
	if got[0].Amount.StringFixed(2) != "10.50" || got[0].Amount.Minor(2) != 1050 {
		t.Errorf("amount %s", got[0].Amount)
	}
	if got[1].TelecomOperator != "MTS" || got[1].CardNumber != "" || len(got[1].Extra) != 0 {
		t.Errorf("row 2 destination %q %q, extra %v", got[1].CardNumber, got[1].TelecomOperator, got[1].Extra)
	}
}

// TestColumnsAreThePSPKeys: the file's destination columns and the PSP's
// property keys are the same words, and a row's extra properties encode
// as the PSP's properties do (the loader stores them, the worker sends
// them as they are).
func TestColumnsAreThePSPKeys(t *testing.T) {
	if ColCardNumber != psp.KeyCardNumber || ColTelecomOperator != psp.KeyTelecomOperator {
		t.Errorf("columns %q %q, PSP keys %q %q", ColCardNumber, ColTelecomOperator, psp.KeyCardNumber, psp.KeyTelecomOperator)
	}
	b, err := json.Marshal([]Property{{Key: "phoneNumber", Value: "+7"}})
	if err != nil {
		t.Fatal(err)
	}
	var back []psp.Property
	if err := json.Unmarshal(b, &back); err != nil || !slices.Equal(back, []psp.Property{{Key: "phoneNumber", Value: "+7"}}) {
		t.Errorf("%s reads as %v, %v", b, back, err)
	}
}

func TestRefused(t *testing.T) {
	max := Options{MaxAmount: money.MustParse("1000.00")}
	tests := []struct {
		name string
		in   string
		opts Options
		want []string
	}{
		// Header.
		{"missing amount", "externalId,cardNumber\nPO-1,4111111111111111\n", Options{}, []string{
			"f.csv:1: header: missing required column amount (allowed: externalId, amount, cardNumber, telecomOperator, phoneNumber)"}},
		{"missing externalId", "amount,cardNumber\n1,4111111111111111\n", Options{ExtraColumns: []string{}}, []string{
			"f.csv:1: header: missing required column externalId (allowed: externalId, amount, cardNumber, telecomOperator)"}},
		{"missing destination", "externalId,amount,phoneNumber\nPO-1,1,+7\n", Options{}, []string{
			"f.csv:1: header: missing a destination column: cardNumber or telecomOperator"}},
		{"misspelt column", "externalId,amout,cardNumber,comment\nPO-1,1,4111111111111111,x\n", Options{}, []string{
			`f.csv:1: header: unknown column "amout": did you mean "amount"? (allowed: externalId, amount, cardNumber, telecomOperator, phoneNumber; other columns are kept as information, but not one named so close to a known one)`,
			"f.csv:1: header: missing required column amount (allowed: externalId, amount, cardNumber, telecomOperator, phoneNumber)"}},
		{"duplicate column", "External ID,amount,external_id,cardNumber\n", Options{}, []string{
			`f.csv:1: header: column 3 "external_id" repeats column 1 (externalId)`}},
		{"unnamed column", "externalId,amount,,cardNumber\n", Options{}, []string{
			"f.csv:1: header: column 3 has no name (allowed: externalId, amount, cardNumber, telecomOperator, phoneNumber; a column of notes needs a name too)"}},
		{"no header", "PO-1,10.00,4111111111111111\nPO-2,1,4111111111111111\n", Options{}, []string{
			"f.csv:1: header: no known column name: is the header row missing, or a title row above it (more than 2 cells)? Expected a header row naming the columns externalId, amount and cardNumber or telecomOperator (also allowed: phoneNumber; other columns are kept as information)"}},
		{"too many columns", "externalId,amount,cardNumber" + strings.Repeat(",x", 23) + "\n", Options{}, []string{
			"f.csv:1: header: has 26 columns, at most 25 are allowed: externalId, amount, cardNumber, telecomOperator, phoneNumber and 20 other columns kept as information"}},
		{"quote error in header", "externalId,am\"ount,cardNumber\nPO-1,1,4111111111111111\n", Options{}, []string{
			`f.csv:1: header: quote (") inside an unquoted field at column 14: quote the whole field and double the quotes inside it`}},
		// Empty.
		{"empty file", "", Options{}, []string{"f.csv:1: file: the file is empty"}},
		{"only blank lines and a BOM", "\uFEFF\n\r\n\n", Options{}, []string{"f.csv:1: file: the file is empty"}},
		{"header only", hdr, Options{}, []string{"f.csv:1: file: the file has a header but no data rows"}},
		{"header and empty rows", hdr + ",,,\n\n", Options{}, []string{"f.csv:1: file: the file has a header but no data rows"}},
		// externalId.
		{"empty externalId", hdr + ",1,4111111111111111,\n  ,2,4111111111111111,\n", Options{}, []string{
			"f.csv:2: externalId: is empty", "f.csv:3: externalId: is empty"}},
		{"long externalId", hdr + strings.Repeat("x", 65) + ",1,4111111111111111,\n", Options{}, []string{
			"f.csv:2: externalId: is 65 characters long, at most 64 are allowed"}},
		{"configured id length", hdr + "PO-123,1,4111111111111111,\n", Options{MaxExternalIDLen: 5}, []string{
			"f.csv:2: externalId: is 6 characters long, at most 5 are allowed"}},
		{"non-printable externalId", hdr + "PO\u00a01,1,4111111111111111,\nPO\u200b2,1,4111111111111111,\n\"PO\t3\",1,4111111111111111,\n", Options{}, []string{
			"f.csv:2: externalId: contains the non-printable character U+00A0 at position 3",
			"f.csv:3: externalId: contains the non-printable character U+200B at position 3",
			"f.csv:4: externalId: contains the non-printable character U+0009 at position 3"}},
		{"formula externalIds", hdr + "=1+2,1,,MTS\n+PO,1,,MTS\n-PO,1,,MTS\n@SUM(A1),1,,MTS\n\"\tPO\",1,,MTS\n\"\rPO\",1,,MTS\n", Options{}, []string{
			`f.csv:2: externalId: starts with "=", which a spreadsheet would run as a formula`,
			`f.csv:3: externalId: starts with "+", which a spreadsheet would run as a formula`,
			`f.csv:4: externalId: starts with "-", which a spreadsheet would run as a formula`,
			`f.csv:5: externalId: starts with "@", which a spreadsheet would run as a formula`,
			`f.csv:6: externalId: starts with "\t", which a spreadsheet would run as a formula`,
			`f.csv:7: externalId: starts with "\r", which a spreadsheet would run as a formula`}},
		{"duplicate externalIds", hdr + "PO-1,1,,MTS\nPO-2,1,,MTS\nPO-1,2,,MTS\nPO-2,x,,MTS\nPO-1,3,,MTS\n", Options{}, []string{
			`f.csv:4: externalId: "PO-1" already appears on line 2`,
			`f.csv:5: amount: "x" is not a plain decimal number (digits and one '.')`,
			`f.csv:5: externalId: "PO-2" already appears on line 3`,
			`f.csv:6: externalId: "PO-1" already appears on line 2`}},
		// A numeric externalId that fails Luhn is an id, shown as it is
		// (issue #38); one that passes is refused as a card number.
		{"numeric duplicate externalId is shown", hdr + "4111111111111112,1,,MTS\n4111111111111112,1,,MTS\n", Options{}, []string{
			`f.csv:3: externalId: "4111111111111112" already appears on line 2`}},
		// amount.
		{"amounts", hdr + "A1,1e3,,MTS\nA2,NaN,,MTS\nA3,-5,,MTS\nA4,0,,MTS\nA5,\"1,000.00\",,MTS\nA6,12.345,,MTS\nA7,,,MTS\nA8,.5,,MTS\nA9,5.,,MTS\nA10,0.00,,MTS\nA11,1 000,,MTS\nA12,+5,,MTS\n", Options{}, []string{
			`f.csv:2: amount: holds a number in scientific notation (1e3), not an amount: format the amount column as Number with the amount's decimals, or as Text, and check the values`,
			`f.csv:3: amount: "NaN" is not a plain decimal number (digits and one '.')`,
			`f.csv:4: amount: "-5" must be positive`,
			`f.csv:5: amount: "0" must be greater than zero`,
			`f.csv:6: amount: "1,000.00" use '.' as the decimal separator and no thousands separator`,
			`f.csv:7: amount: "12.345" has more than 2 decimal places`,
			`f.csv:8: amount: is empty`,
			`f.csv:9: amount: ".5" needs digits before the '.'`,
			`f.csv:10: amount: "5." needs digits after the '.'`,
			`f.csv:11: amount: "0.00" must be greater than zero`,
			`f.csv:12: amount: "1 000" is not a plain decimal number (digits and one '.')`,
			`f.csv:13: amount: "+5" is not a plain decimal number (digits and one '.')`}},
		{"whole units only", hdr + "A1,1.5,,MTS\n", Options{Scale: -1}, []string{
			`f.csv:2: amount: "1.5" has more than 0 decimal places`}},
		{"above maximum", hdr + "A1,1000.01,,MTS\nA2,25000,,MTS\n", max, []string{
			`f.csv:2: amount: "1000.01" is above the maximum 1000.00`,
			`f.csv:3: amount: "25000" is above the maximum 1000.00`}},
		// Destination.
		{"cards", hdr + "C1,1,41111111111,\nC2,1,4111111111111112,\nC3,1,4111-1111-1111-111X,\nC4,1,41111111111111111111,\n", Options{}, []string{
			"f.csv:2: cardNumber: 411******11 must have 12 to 19 digits, has 11",
			"f.csv:3: cardNumber: 411111******1112 fails the Luhn check (mistyped digit?)",
			"f.csv:4: cardNumber: 411111*****1111 must contain only digits, spaces or dashes",
			"f.csv:5: cardNumber: 411111**********1111 must have 12 to 19 digits, has 20"}},
		{"two destinations and none", hdr + "D1,1,4111111111111111,MTS\nD2,1,,\n", Options{}, []string{
			"f.csv:2: row: has both a cardNumber and a telecomOperator: give exactly one destination",
			"f.csv:3: row: has no destination: give a cardNumber or a telecomOperator"}},
		{"no destination, card column only", "externalId,amount,cardNumber\nD1,1,\n", Options{}, []string{
			"f.csv:2: row: has no destination: give a cardNumber or a telecomOperator"}},
		{"bad telecom and extra", "externalId,amount,telecomOperator,phoneNumber\nT1,1,=MTS,+7\nT2,1,\"M\nTS\",+7\nT3,1,MTS,\"+7\u00a0916\"\n", Options{}, []string{
			`f.csv:2: telecomOperator: starts with "=", which a spreadsheet would run as a formula`,
			"f.csv:3: row: the record spans lines 3-4: a quoted field holds line breaks (is a quote left open?)",
			"f.csv:5: phoneNumber: contains the non-printable character U+00A0 at position 3"}},
		{"every problem of a row", hdr + "=X,-1,123,MTS\n", Options{}, []string{
			`f.csv:2: externalId: starts with "=", which a spreadsheet would run as a formula`,
			`f.csv:2: amount: "-1" must be positive`,
			"f.csv:2: row: has both a cardNumber and a telecomOperator: give exactly one destination",
			"f.csv:2: cardNumber: 1** must have 12 to 19 digits, has 3"}},
		// Structure.
		{"field count", hdr + "F1,1,4111111111111111\nF2,1,4111111111111111,,extra\nF3,1,,MTS\n", Options{}, []string{
			"f.csv:2: row: has 3 fields, the header has 4",
			"f.csv:3: row: has 5 fields, the header has 4"}},
		{"header repeated", hdr + "R1,1,,MTS\nExternal ID,Amount,Card Number,Telecom Operator\nR2,1,,MTS\n", Options{}, []string{
			"f.csv:3: row: repeats the header row (were two files joined?)"}},
		{"bare quote", hdr + "Q1,1\"0,,MTS\nQ2,1,,MTS\n", Options{}, []string{
			`f.csv:2: row: quote (") inside an unquoted field at column 5: quote the whole field and double the quotes inside it`}},
		{"text after closing quote", hdr + "\"Q1\"x,1,,MTS\nQ2,1,,MTS\n", Options{}, []string{
			`f.csv:2: row: text after a closing quote at column 4: quote the whole field and double the quotes inside it`}},
		{"quote never closed", hdr + "Q1,1,,MTS\nQ2,\"1,,MTS\nQ3,1,,MTS\n", Options{}, []string{
			"f.csv:3: row: the quote opened on this line is never closed (the field runs to the end of the file, line 4)"}},
		{"quote closed lines later", hdr + "Q1,\"1,,MTS\nQ2,1,,MTS\nQ3,\"1\"x,,MTS\nQ4,1,,MTS\n", Options{}, []string{
			"f.csv:2: row: the quoted field opened on this line runs on to line 4, where its closing quote is followed by other text (is a quote left open?)"}},
		{"multi-line record keeps later lines right", hdr + "M1,1,,MTS\n\"M\n2\",1,,MTS\nM3,x,,MTS\n", Options{}, []string{
			"f.csv:3: row: the record spans lines 3-4: a quoted field holds line breaks (is a quote left open?)",
			`f.csv:5: amount: "x" is not a plain decimal number (digits and one '.')`}},
		// Encoding and size.
		{"latin-1", hdr + "PO-1,1,,Caf\xe9\n", Options{}, []string{
			"f.csv:2: file: invalid UTF-8 byte 0xE9 at column 12: save the file as UTF-8 (Latin-1 or Windows-1252 text?)"}},
		{"nul byte", hdr + "PO-1,1,,MTS\x00\n", Options{}, []string{
			"f.csv:2: file: NUL byte at column 12: binary data or UTF-16 text, not a UTF-8 CSV file"}},
		{"control byte", hdr + "PO-1\x1b,1,,MTS\n", Options{}, []string{
			"f.csv:2: file: control byte 0x1B at column 5: binary data, not a CSV text file"}},
		{"utf-16", "\xff\xfee\x00x\x00\n\x00", Options{}, []string{
			"f.csv:1: file: the file is UTF-16 text; save it as UTF-8"}},
		{"line too long", hdr + "PO-1,1,,MTS\nPO-2," + strings.Repeat("1", 300) + ",,MTS\nPO-3,1,,MTS\n", Options{MaxLineBytes: 256}, []string{
			"f.csv:3: file: line is longer than 256 bytes"}},
		{"record too long", hdr + "PO-1,\"1,,MTS\n" + strings.Repeat("PO-2,1,,MTS\n", 30), Options{MaxLineBytes: 256}, []string{
			"f.csv:2: file: the record starting on this line is longer than 256 bytes (is a quote left open?)"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sum, errs := collect(t, tt.in, tt.opts)
			if !slices.Equal(errs, tt.want) {
				t.Errorf("errors\n got %s\nwant %s", strings.Join(errs, "\n     "), strings.Join(tt.want, "\n     "))
			}
			if sum.Errors != len(errs) {
				t.Errorf("Summary.Errors %d, %d reported", sum.Errors, len(errs))
			}
			if sum.Rows != sum.ValidRows+len(sum.BadLines) {
				t.Errorf("rows %d != valid %d + bad %d", sum.Rows, sum.ValidRows, len(sum.BadLines))
			}
		})
	}
}

func TestSummaryAndKinds(t *testing.T) {
	in := hdr + "K1,1.25,,MTS\nK2,x,,MTS\nK1,2,,MTS\nK4,1,2,\nK5,2.75,4111111111111111,\n"
	var errs []Error
	sum, err := Check(context.Background(), "k.csv", strings.NewReader(in), Options{}, func(e Error) { errs = append(errs, e) })
	if err != nil {
		t.Fatal(err)
	}
	if sum.Rows != 5 || sum.ValidRows != 2 || !slices.Equal(sum.BadLines, []int{3, 4, 5}) || sum.Total.StringFixed(2) != "4.00" {
		t.Errorf("summary %+v total %s", sum, sum.Total)
	}
	if sum.Aborted || sum.Delimiter != ',' || !slices.Equal(sum.Columns, []string{"externalId", "amount", "cardNumber", "telecomOperator"}) {
		t.Errorf("summary %+v", sum)
	}
	// Duplicates come after the scan; SortErrors puts them in line order.
	if len(errs) != 3 || errs[2].Kind != KindDuplicate || errs[2].Line != 4 {
		t.Fatalf("errors %v", errs)
	}
	SortErrors(errs)
	var lines []int
	for _, e := range errs {
		lines = append(lines, e.Line)
	}
	if !slices.Equal(lines, []int{3, 4, 5}) {
		t.Errorf("sorted lines %v", lines)
	}
	var asErr error = errs[1]
	if !errors.Is(asErr, KindDuplicate) || errors.Is(asErr, KindField) {
		t.Errorf("errors.Is on %v", asErr)
	}
	var pe Error
	if !errors.As(asErr, &pe) || pe.Column != ColExternalID || pe.File != "k.csv" {
		t.Errorf("errors.As: %+v", pe)
	}
	if got := errs[0].String(); got != `k.csv:3: amount: "x" is not a plain decimal number (digits and one '.')` {
		t.Errorf("String() = %q", got)
	}
	kinds := map[string]Kind{}
	for _, c := range []struct {
		in   string
		kind Kind
	}{
		{"", KindEmpty}, {hdr, KindEmpty}, {"a,b\n", KindHeader}, {hdr + "x,1,,M\xe9\n", KindEncoding},
		{hdr + "x,1\n", KindStructure}, {hdr + "x,0,,MTS\n", KindField},
	} {
		_, errs, _ := Collect(context.Background(), "k", strings.NewReader(c.in), Options{})
		if len(errs) != 1 || errs[0].Kind != c.kind {
			t.Errorf("%q: %v, want kind %v", c.in, errs, c.kind)
		}
		kinds[c.kind.String()] = c.kind
	}
	if len(kinds) != 5 {
		t.Errorf("kinds %v", kinds)
	}
}

func TestAborted(t *testing.T) {
	for _, in := range []string{"", hdr, "x,y\n", hdr + "a,1,,MTS\nb,1,,\xe9\nc,1,,MTS\n"} {
		sum, _ := collect(t, in, Options{})
		if !sum.Aborted {
			t.Errorf("%q: not aborted", in)
		}
	}
	// An encoding error mid-file stops the scan: rows after it are not read.
	sum, _ := collect(t, hdr+"a,1,,MTS\nb,1,,\xe9\nc,1,,MTS\n", Options{})
	if sum.Rows != 1 || sum.ValidRows != 1 {
		t.Errorf("summary %+v", sum)
	}
}

// TestHashCollisions forces every externalId onto one hash: the second read
// must keep distinct ids apart and still find the true duplicates.
func TestHashCollisions(t *testing.T) {
	in := hdr + "A,1,,MTS\nB,2,,MTS\nC,3,,MTS\nB,4,,MTS\nD,5,,MTS\n"
	var errs []string
	same := func(string) uint64 { return 42 }
	sum, err := check(context.Background(), "h.csv", strings.NewReader(in), Options{}, func(e Error) { errs = append(errs, e.String()) }, nil, same)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{`h.csv:5: externalId: "B" already appears on line 3`}
	if !slices.Equal(errs, want) {
		t.Errorf("errors %q, want %q", errs, want)
	}
	if sum.ValidRows != 4 || sum.Total.String() != "11" || !slices.Equal(sum.BadLines, []int{5}) {
		t.Errorf("summary %+v total %s", sum, sum.Total)
	}

	// No duplicates at all, every hash equal: no error.
	errs = nil
	sum, err = check(context.Background(), "h.csv", strings.NewReader(hdr+"A,1,,MTS\nB,2,,MTS\n"), Options{}, func(e Error) { errs = append(errs, e.String()) }, nil, same)
	if err != nil || len(errs) != 0 || sum.ValidRows != 2 || sum.Total.String() != "3" {
		t.Errorf("errors %q, summary %+v, err %v", errs, sum, err)
	}
}

// changingReader serves a different text after the first Seek.
type changingReader struct {
	*strings.Reader
	second string
	seeks  int
}

func (c *changingReader) Seek(off int64, whence int) (int64, error) {
	if whence == 0 {
		c.seeks++
		if c.seeks == 1 {
			c.Reader = strings.NewReader(c.second)
		}
	}
	return c.Reader.Seek(off, whence)
}

func TestFileChanged(t *testing.T) {
	r := &changingReader{Reader: strings.NewReader(hdr + "A,1,,MTS\nA,2,,MTS\n"), second: hdr + "A,1,,MTS\n"}
	_, err := Check(context.Background(), "c.csv", r, Options{}, func(Error) {})
	if !errors.Is(err, ErrFileChanged) {
		t.Errorf("err %v, want ErrFileChanged", err)
	}
}

func TestCheckFromOffset(t *testing.T) {
	r := strings.NewReader("junk\n" + hdr + "A,1,,MTS\nA,2,,MTS\n")
	if _, err := r.Seek(5, 0); err != nil {
		t.Fatal(err)
	}
	var errs []string
	sum, err := Check(context.Background(), "o.csv", r, Options{}, func(e Error) { errs = append(errs, e.String()) })
	if err != nil || sum.ValidRows != 1 || !slices.Equal(errs, []string{`o.csv:3: externalId: "A" already appears on line 2`}) {
		t.Errorf("sum %+v errs %q err %v", sum, errs, err)
	}
}

func TestBadOptions(t *testing.T) {
	for _, o := range []Options{
		{ExtraColumns: []string{"card_number"}},
		{ExtraColumns: []string{"phone", "PHONE"}},
		{ExtraColumns: []string{" - "}},
		{MaxLineBytes: 10},
	} {
		_, err := Check(context.Background(), "o", strings.NewReader(hdr), o, func(Error) {})
		if !errors.Is(err, ErrBadOptions) {
			t.Errorf("%+v: err %v", o, err)
		}
		if err := Each(context.Background(), "o", strings.NewReader(hdr), o, nil, func(Row) error { return nil }); !errors.Is(err, ErrBadOptions) {
			t.Errorf("%+v: Each err %v", o, err)
		}
	}
}

func TestContextCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := Check(ctx, "x", strings.NewReader(hdr+"A,1,,MTS\n"), Options{}, func(Error) {})
	if !errors.Is(err, context.Canceled) {
		t.Errorf("Check: %v", err)
	}
	// Cancelled in the middle of a long file.
	in := generate(20000, nil)
	ctx, cancel = context.WithCancel(context.Background())
	n := 0
	err = Each(ctx, "x", strings.NewReader(in), Options{}, nil, func(Row) error {
		if n++; n == 100 {
			cancel()
		}
		return nil
	})
	if !errors.Is(err, context.Canceled) || n >= 20000 {
		t.Errorf("Each after cancel: %v after %d rows", err, n)
	}
}

func TestEachStopsAndLeaksNothing(t *testing.T) {
	before := runtime.NumGoroutine()
	in := generate(5000, nil)
	stop := errors.New("enough")
	n := 0
	err := Each(context.Background(), "x", strings.NewReader(in), Options{}, nil, func(Row) error {
		if n++; n == 10 {
			return stop
		}
		return nil
	})
	if !errors.Is(err, stop) || n != 10 {
		t.Errorf("err %v after %d rows", err, n)
	}
	// Each returns only after its reading goroutine ended.
	deadline := time.Now().Add(5 * time.Second)
	for runtime.NumGoroutine() > before && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if g := runtime.NumGoroutine(); g > before {
		t.Errorf("%d goroutines, %d before", g, before)
	}
}

func TestEachRefusesUnskippedBadRow(t *testing.T) {
	in := hdr + "A,1,,MTS\nB,0,,MTS\nC,1,,MTS\n"
	var seen []string
	err := Each(context.Background(), "e.csv", strings.NewReader(in), Options{}, nil, func(r Row) error {
		seen = append(seen, r.ExternalID)
		return nil
	})
	var pe Error
	if !errors.As(err, &pe) || pe.Line != 3 || pe.Column != ColAmount || !slices.Equal(seen, []string{"A"}) {
		t.Errorf("err %v, rows %v", err, seen)
	}
	// A file-level problem is returned too.
	err = Each(context.Background(), "e.csv", strings.NewReader("nonsense\n"), Options{}, nil, func(Row) error { return nil })
	if !errors.Is(err, KindHeader) {
		t.Errorf("err %v", err)
	}
}

func TestDestinationMasked(t *testing.T) {
	r := Row{CardNumber: "4111111111111111"}
	if d := r.Destination(); d != "card 411111******1111" {
		t.Errorf("%q", d)
	}
	if d := (Row{TelecomOperator: "MTS"}).Destination(); d != "telecom MTS" {
		t.Errorf("%q", d)
	}
}

func TestMergeLines(t *testing.T) {
	for _, c := range []struct{ a, b, want []int }{
		{nil, nil, nil}, {[]int{1, 3}, nil, []int{1, 3}}, {nil, []int{2}, []int{2}},
		{[]int{1, 3, 5}, []int{2, 3, 6}, []int{1, 2, 3, 5, 6}},
	} {
		if got := mergeLines(c.a, c.b); !slices.Equal(got, c.want) {
			t.Errorf("merge(%v,%v) = %v", c.a, c.b, got)
		}
	}
}

func TestFold(t *testing.T) {
	for _, s := range []string{"External ID", "external_id", "EXTERNAL-ID", "externalId", " External\nId\u200b", "\uFEFFexternalid"} {
		if fold(s) != "externalid" || !foldEqual(s, "externalid") {
			t.Errorf("fold(%q) = %q", s, fold(s))
		}
	}
	if foldEqual("external", "externalid") || foldEqual("externalidx", "externalid") {
		t.Error("foldEqual matches a different name")
	}
}

// generate builds a valid payout file of n rows, cycling through cards and
// operators; dup lists row indexes (0-based) that repeat the id of row 0.
func generate(n int, dup map[int]bool) string {
	cards := []string{"4111111111111111", "5555 5555 5555 4444", "4012-8888-8888-1881", "378282246310005"}
	ops := []string{"MTS", "Beeline", "Megafon", "Tele2"}
	var b strings.Builder
	b.Grow(n * 48)
	b.WriteString(hdr)
	for i := range n {
		id := fmt.Sprintf("PO-2026-11-%07d", i)
		if dup[i] {
			id = "PO-2026-11-0000000"
		}
		if i%3 == 2 {
			fmt.Fprintf(&b, "%s,%d.%02d,,%s\n", id, 1+i%5000, i%100, ops[i%4])
		} else {
			fmt.Fprintf(&b, "%s,%d.%02d,%s,\n", id, 1+i%5000, i%100, cards[i%4])
		}
	}
	return b.String()
}

// CheckEach hands over every row valid on its own, during the one read;
// a repeat is handed over too and ends up in BadLines; an error from the
// callback stops the check.
func TestCheckEach(t *testing.T) {
	in := hdr + "A,1,,MTS\nB,0,,MTS\nC,2,,MTS\nA,3,,MTS\nD,4,,MTS\n"
	var seen []string
	var lines []int
	sum, errs, err := CollectEach(context.Background(), "c.csv", strings.NewReader(in), Options{}, func(r Row) error {
		seen, lines = append(seen, r.ExternalID), append(lines, r.Line)
		return nil
	})
	if err != nil || len(errs) != 2 {
		t.Fatalf("errs %v, err %v", errs, err)
	}
	if !slices.Equal(seen, []string{"A", "C", "A", "D"}) || !slices.Equal(lines, []int{2, 4, 5, 6}) {
		t.Errorf("handed over %v at lines %v", seen, lines)
	}
	if !slices.Equal(sum.BadLines, []int{3, 5}) || sum.ValidRows != 3 || sum.Total.Cmp(money.MustParse("7")) != 0 {
		t.Errorf("summary %+v", sum)
	}

	stop := errors.New("redis down")
	n := 0
	_, err = CheckEach(context.Background(), "c.csv", strings.NewReader(in), Options{}, nil, func(Row) error {
		if n++; n == 2 {
			return stop
		}
		return nil
	})
	if !errors.Is(err, stop) || n != 2 {
		t.Errorf("err %v after %d rows", err, n)
	}
}
