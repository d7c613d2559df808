package ui_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/acme/payout/internal/proof/uitest"
)

// TestUploadSaysOnceHowToDeclareTheAmountFormat: a file of 200 rows with
// decimal commas, uploaded with the format as configured (plain), is
// refused row by row, and the page says once, in the browser's terms (the
// upload form's "Amounts written as"), what to do: not a command-line flag
// on each of the 200 rows. With the form's choice the same file is
// acceptable.
func TestUploadSaysOnceHowToDeclareTheAmountFormat(t *testing.T) {
	var b strings.Builder
	b.WriteString("externalId;amount;cardNumber;telecomOperator\n")
	for i := range 200 {
		fmt.Fprintf(&b, "EU-%d;1 %03d,50;;MTS\n", i, i)
	}
	e := newEnv(t, uitest.Options{Spool: t.TempDir()})
	_, tok := e.page()
	w := e.upload(tok, "eu.csv", b.String(), nil)
	body := w.Body.String()
	if w.Code != 200 || strings.Count(body, "<tr><td class=\"n\">") != 200 {
		t.Fatalf("preview of a decimal-comma file read as plain: %d, want 200 rows of errors\n%s", w.Code, body)
	}
	if n := strings.Count(body, "amount-format"); n != 0 {
		t.Errorf("the page names the command-line flag %d times", n)
	}
	if n := strings.Count(body, `id="amount-hint"`); n != 1 {
		t.Errorf("the hint appears %d times, want once", n)
	}
	if !strings.Contains(body, "200 amounts look written as another locale writes amounts") || !strings.Contains(body, "Amounts written as</a>") {
		t.Errorf("the hint does not count the amounts or name the form's choice:\n%s", body)
	}
	w = e.upload(tok, "eu.csv", b.String(), map[string]string{"amount_format": "comma"})
	if body := w.Body.String(); w.Code != 200 || strings.Contains(body, `id="amount-hint"`) || !strings.Contains(body, `id="confirm"`) {
		t.Errorf("with the form's comma format: %d\n%s", w.Code, body)
	}
}
