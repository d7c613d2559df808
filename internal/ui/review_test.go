package ui_test

import (
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"github.com/acme/payout/internal/lifecycle"
	"github.com/acme/payout/internal/money"
	"github.com/acme/payout/internal/proof/uitest"
)

// twelveRows is a held batch of 12 rows, cards and telecom, with
// informational columns: the largest amount is on the last line.
func twelveRows() string {
	var b strings.Builder
	b.WriteString("externalId,amount,cardNumber,telecomOperator,recipient,notes\n")
	for i := 1; i <= 12; i++ {
		dest := "4111 1111 1111 1111,"
		if i%3 == 0 {
			dest = ",MTS"
		}
		fmt.Fprintf(&b, "RV-%02d,%d.25,%s,Person %d,note %d\n", i, i*100, dest, i, i)
	}
	return b.String()
}

// TestApproveReview: Approve opens a review (the rule, the totals per
// destination type, the largest rows and the first rows as read, cards
// masked) whose confirm form, with its note, is the only way to approve:
// a one-click POST is refused; the note is checked and kept in the audit
// trail with the approval.
func TestApproveReview(t *testing.T) {
	e := newEnv(t, uitest.Options{FourEyes: true, DailyLimit: money.MustParse("50000")})
	id := e.hold("review.csv", twelveRows(), "bob")

	for _, page := range []string{"/batches", "/batches/" + id, "/queue"} {
		body := e.get(page, 200)
		if !strings.Contains(body, `href="/batches/`+id+`/approve"`) || strings.Contains(body, `action="/batches/`+id+`/approve"`) {
			t.Errorf("%s: Approve is not a link to the review (or still a one-click form)", page)
		}
	}

	body := e.get("/batches/"+id+"/approve", 200)
	for _, want := range []string{
		`id="approve-review"`, `id="approve-confirm"`, `name="note"`, `maxlength="1000"`, `name="confirm" value="yes"`,
		"Four-eyes: a second person must approve it; the person who loaded it (bob) may not.",
		"Daily limit:", "50000",
		`<td class="n" id="approve-count">12</td>`, `<td class="n" id="approve-total">7,803.00</td>`,
		"<tr><td>card</td><td class=\"n\">8</td><td class=\"n\">4,802.00</td></tr>",
		"<tr><td>telecom</td><td class=\"n\">4</td><td class=\"n\">3,001.00</td></tr>",
		"411111******1111", "telecom MTS", "Person 12", "note 12", `<th class="info">recipient</th>`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("the review lacks %q", want)
		}
	}
	if strings.Contains(body, "4111111111111111") || strings.Contains(body, "4111 1111 1111 1111") {
		t.Error("the review shows a card number in full")
	}
	largest := section(t, body, "approve-largest")
	if n := strings.Count(largest, "<tr><td"); n != 5 || strings.Index(largest, "RV-12") > strings.Index(largest, "RV-11") || strings.Contains(largest, "RV-01") {
		t.Errorf("largest rows: want RV-12..RV-08 in that order, got %d rows:\n%s", n, largest)
	}
	sample := section(t, body, "approve-sample")
	if n := strings.Count(sample, "<tr><td"); n != 10 || !strings.Contains(sample, "RV-01") || strings.Contains(sample, "RV-11") {
		t.Errorf("sample: want the first 10 rows, got %d:\n%s", n, sample)
	}

	tok := e.token("/batches/" + id + "/approve")
	for name, form := range map[string]url.Values{
		"one click, no confirmation": {"csrf": {tok}},
		"note with a newline":        {"csrf": {tok}, "confirm": {"yes"}, "note": {"ok\nbob approved"}},
		"note too long":              {"csrf": {tok}, "confirm": {"yes"}, "note": {strings.Repeat("n", 1001)}},
	} {
		if w := e.post("/batches/"+id+"/approve", form); w.Code != http.StatusConflict || e.phase(id) != lifecycle.PhaseAwaiting {
			t.Fatalf("%s: %d, phase %s\n%s", name, w.Code, e.phase(id), w.Body.String())
		}
	}
	w := e.post("/batches/"+id+"/approve", url.Values{"csrf": {tok}, "confirm": {"yes"}, "note": {"  matches the payroll export, card 5555 5555 5555 4444 "}})
	if w.Code != 200 || !strings.Contains(w.Body.String(), "approved by "+opUser) || e.phase(id) != lifecycle.PhaseLoaded {
		t.Fatalf("confirmed approval: %d, phase %s\n%s", w.Code, e.phase(id), w.Body.String())
	}
	var note string
	for _, a := range e.audit(id) {
		if a.From == lifecycle.PhaseAwaiting {
			note = a.Context["note"]
		}
	}
	if note != "approved: matches the payroll export, card 555555******4444" {
		t.Fatalf("audit note of the approval: %q", note)
	}
	if body := e.get("/batches/"+id, 200); !strings.Contains(body, "approved: matches the payroll export") {
		t.Error("the batch page does not show the approver's note")
	}
	if body := e.get("/batches/"+id+"/approve", 200); !strings.Contains(body, `id="not-awaiting"`) || strings.Contains(body, `id="approve-confirm"`) {
		t.Error("the review of an approved batch still offers to approve it")
	}
}

// TestApproveReviewUnderFourEyes: the loader reads the review but is not
// offered the confirm button, and is told why.
func TestApproveReviewUnderFourEyes(t *testing.T) {
	e := newEnv(t, uitest.Options{FourEyes: true})
	id := e.hold("mine.csv", threeRows, opUser)
	body := e.get("/batches/"+id+"/approve", 200)
	if !strings.Contains(body, `id="approve-review"`) || strings.Contains(body, `id="approve-confirm"`) || !strings.Contains(body, `id="noapprove"`) {
		t.Fatalf("the loader's review:\n%s", body)
	}
	e.get("/batches/nosuch/approve", http.StatusNotFound)
	e.get("/batches/a.b/approve", http.StatusBadRequest)
}

// section is the table of id in body.
func section(t *testing.T, body, id string) string {
	t.Helper()
	m := regexp.MustCompile(`(?s)<table class="full" id="` + id + `">.*?</table>`).FindString(body)
	if m == "" {
		t.Fatalf("no table %s", id)
	}
	return m
}
