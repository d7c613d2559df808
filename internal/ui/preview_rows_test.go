package ui_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/acme/payout/internal/proof/uitest"
)

// TestUploadPreviewShowsRows: the preview of an upload shows its first
// ten rows as parsed (line, externalId, amount, destination masked, the
// informational columns) and says what Confirm will do: wait for
// approval, or send at once.
func TestUploadPreviewShowsRows(t *testing.T) {
	for _, tc := range []struct {
		name  string
		o     uitest.Options
		after string
	}{
		{"approval required", uitest.Options{ApprovalRequired: true}, "it then awaits approval (every batch needs one): nothing is sent before."},
		{"no approval", uitest.Options{}, "the payments are sent at once (no approval needed)."},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.o.Spool = t.TempDir()
			e := newEnv(t, tc.o)
			_, tok := e.page()
			w := e.upload(tok, "twelve.csv", twelveRows(), nil)
			body := w.Body.String()
			if w.Code != http.StatusOK || !hashRE.MatchString(body) {
				t.Fatalf("preview: %d\n%s", w.Code, body)
			}
			rows := section(t, strings.Replace(body, `<table id="preview-rows">`, `<table class="full" id="preview-rows">`, 1), "preview-rows")
			if n := strings.Count(rows, "<tr><td"); n != 10 {
				t.Errorf("rows shown: %d, want 10\n%s", n, rows)
			}
			for _, want := range []string{
				`<tr><td class="n">2</td><td class="mono">RV-01</td><td class="n">100.25</td><td class="mono">card 411111******1111</td><td class="info">Person 1</td><td class="info">note 1</td></tr>`,
				`<td class="mono">telecom MTS</td>`, `<th class="info">recipient</th><th class="info">notes</th>`, "RV-10",
			} {
				if !strings.Contains(rows, want) {
					t.Errorf("the preview's rows lack %q:\n%s", want, rows)
				}
			}
			if strings.Contains(rows, "RV-11") || strings.Contains(body, "4111 1111 1111 1111") {
				t.Errorf("more than 10 rows, or a card in full:\n%s", rows)
			}
			if !strings.Contains(body, `<p id="after-confirm">Confirm loads the rows as a batch; `+tc.after+`</p>`) {
				t.Errorf("the preview does not say what Confirm does (%q):\n%s", tc.after, body)
			}
		})
	}
}

// TestUploadPreviewShowsDestinationProperties: a phone number the file
// gives is shown in the preview's rows.
func TestUploadPreviewShowsDestinationProperties(t *testing.T) {
	e := newEnv(t, uitest.Options{Spool: t.TempDir()})
	_, tok := e.page()
	w := e.upload(tok, "phones.csv", "externalId,amount,cardNumber,telecomOperator,phoneNumber\nPP-1,10.00,,MTS,+79161234567\nPP-2,5.00,4111 1111 1111 1111,,\n", nil)
	body := w.Body.String()
	if w.Code != http.StatusOK || !strings.Contains(body, `<th class="extra">phoneNumber</th>`) ||
		!strings.Contains(body, `<td class="mono extra">&#43;79161234567</td>`) {
		t.Fatalf("preview: %d\n%s", w.Code, body)
	}
}
