package bench

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"strconv"

	"github.com/acme/payout/internal/card"
)

// Header is the header row of the generated payout files.
const Header = "externalId,amount,cardNumber,telecomOperator"

// Row is one generated payout: the same values for the file that `payout
// load` reads and for the bare baselines, which never parse a file.
type Row struct {
	ExternalID string
	Amount     string // as written in the file, e.g. "1234.56"
	Card       string // full card number, or ""
	Telecom    string // telecom operator, or ""
}

// Destination is the masked display form the loader puts in task payloads.
func (r Row) Destination() string {
	if r.Card != "" {
		return "card " + card.Mask(r.Card)
	}
	return "telecom " + r.Telecom
}

// Body is the JSON body of the withdrawal create for this row, as the PSP
// client sends it (amount as a decimal string).
func (r Row) Body() []byte {
	type prop struct {
		Key   string `json:"key"`
		Value string `json:"value"`
	}
	p := prop{Key: "cardNumber", Value: r.Card}
	if r.Card == "" {
		p = prop{Key: "telecomOperator", Value: r.Telecom}
	}
	b, _ := json.Marshal(struct {
		ExternalID string `json:"externalId"`
		Amount     string `json:"amount"`
		Properties []prop `json:"properties"`
	}{r.ExternalID, r.Amount, []prop{p}})
	return b
}

// refusedCents is the sandbox's magic refused amount (13.13), never
// generated.
const refusedCents = 1313

// RowAt returns the i-th generated row (i >= 1). Every tenth row pays to a
// telecom operator, the others to a Luhn-valid 16-digit card that is never
// the sandbox's declined card. Amounts are in canonical form (as
// money.Amount.String prints them) and never the sandbox's refused amount.
func RowAt(i int) Row {
	cents := 100 + (i*7919)%1_000_000
	if cents%10 == 0 {
		// A last digit 0 would be shortened by the ledger ("792.9"):
		// keep the text canonical so that the baselines can use it
		// as is, with no decimal parsing.
		cents++
	}
	if cents == refusedCents {
		cents += 2
	}
	r := Row{
		ExternalID: fmt.Sprintf("BENCH-%09d", i),
		Amount:     strconv.Itoa(cents/100) + "." + fmt.Sprintf("%02d", cents%100),
	}
	if i%10 == 0 {
		r.Telecom = "MTS"
	} else {
		r.Card = cardAt(i)
	}
	return r
}

// cardAt is "411111", nine digits of i and a Luhn check digit.
func cardAt(i int) string {
	body := fmt.Sprintf("411111%09d", i%1_000_000_000)
	return body + strconv.Itoa(card.CheckDigit(body))
}

// WriteFile writes a payout file of rows 1..n to path.
func WriteFile(path string, n int) error { return WriteRows(path, 1, n) }

// WriteRows writes a payout file of rows first..first+n-1 to path.
func WriteRows(path string, first, n int) error {
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("bench: create %s: %w", path, err)
	}
	w := bufio.NewWriterSize(f, 1<<20)
	fmt.Fprintln(w, Header)
	for i := first; i < first+n; i++ {
		r := RowAt(i)
		fmt.Fprintf(w, "%s,%s,%s,%s\n", r.ExternalID, r.Amount, r.Card, r.Telecom)
	}
	if err := w.Flush(); err != nil {
		f.Close()
		return fmt.Errorf("bench: write %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("bench: write %s: %w", path, err)
	}
	return nil
}
