package ui_test

import (
	"os"
	"strings"
	"testing"

	"github.com/acme/payout/internal/proof/uitest"
)

// TestConsoleShowsInformationColumns: the notes, recipient and phone
// columns a file carried are shown in the batch page's rows, in one
// Details column, each value under its column's name (a file may carry
// any number of them: one column each overflowed the window), and on
// each payout's page; the search, across batches with other columns,
// leaves them to the payout's page.
func TestConsoleShowsInformationColumns(t *testing.T) {
	e := newEnv(t, uitest.Options{})
	id := e.hold("info.csv", "externalId,amount,cardNumber,telecomOperator,recipient,contact,notes\n"+
		"IN-1,10.00,4111 1111 1111 1111,,Anna Smith,+7 916 123-45-67,bonus November\n"+
		"IN-2,20.00,,MTS,Boris Ivanov,+7 903 000-00-01,refund of order 77\n", "bob")
	body := e.get("/batches/"+id, 200)
	for _, want := range []string{
		`<th>Destination</th><th class="info" title="the file's own columns: recipient, contact, notes">Details</th><th>State</th>`,
		`<td class="wrap info"><div><small class="col">recipient</small> Anna Smith</div><div><small class="col">contact</small> &#43;7 916 123-45-67</div><div><small class="col">notes</small> bonus November</div></td>`,
		`<div><small class="col">notes</small> refund of order 77</div></td>`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("the batch page lacks %q", want)
		}
	}
	body = e.get("/batches/"+id+"/payouts/IN-1", 200)
	for _, want := range []string{`<tr class="info"><th>recipient</th><td class="wrap">Anna Smith</td></tr>`, `<tr class="info"><th>notes</th><td class="wrap">bonus November</td></tr>`} {
		if !strings.Contains(body, want) {
			t.Errorf("the payout page lacks %q", want)
		}
	}
	if body := e.get("/search?ext=IN-2", 200); strings.Contains(body, "Boris Ivanov") || !strings.Contains(body, "IN-2") {
		t.Errorf("search results: info columns shown without their headers, or IN-2 not found")
	}
}

// TestConsoleSaysReasonsAndActorsPlainly: a reason is shown in plain
// words beside the PSP's raw text, and the history names a program's
// steps "worker", not its host:pid.
func TestConsoleSaysReasonsAndActorsPlainly(t *testing.T) {
	e, d := demoEnv(t, uitest.Options{})
	body := e.get("/batches/"+d.Worked, 200)
	for _, want := range []string{
		`<span class="plain">The PSP took the order but reports it was not paid (the PSP&#39;s reason is beside).</span><br><small class="raw" title="as recorded">account closed</small>`,
		`<span class="plain">The PSP refused this payout: it was not paid.`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("the batch page lacks %q", want)
		}
	}
	body = e.get("/batches/"+d.Worked+"/payouts/INV-2026-0001", 200)
	if !strings.Contains(body, `<td class="actor" title="`) || !strings.Contains(body, `">worker</td>`) {
		t.Errorf("the history does not name the worker:\n%s", body)
	}
	if host, _ := os.Hostname(); strings.Contains(body, ">"+host+":") {
		t.Errorf("the history shows a host:pid as who acted")
	}
}

// TestConsoleShowsDestinationProperties: a phone number (or another
// destination property the file gave and the PSP is sent) is shown in
// the batch page's rows, on the payout's page and in the approval
// review.
func TestConsoleShowsDestinationProperties(t *testing.T) {
	e := newEnv(t, uitest.Options{})
	id := e.hold("phones.csv", "externalId,amount,cardNumber,telecomOperator,phoneNumber,recipient\n"+
		"PH-1,10.00,,MTS,+79161234567,Anna Smith\n"+
		"PH-2,20.00,4111 1111 1111 1111,,,Boris Ivanov\n", "bob")
	for page, head := range map[string]string{
		"/batches/" + id:              `<th class="extra">phoneNumber</th><th class="info" title="the file's own columns: recipient">Details</th>`,
		"/batches/" + id + "/approve": `<th class="extra">phoneNumber</th><th class="info">recipient</th>`,
	} {
		body := e.get(page, 200)
		for _, want := range []string{head, `<td class="mono extra">&#43;79161234567</td>`} {
			if !strings.Contains(body, want) {
				t.Errorf("%s lacks %q", page, want)
			}
		}
	}
	if body := e.get("/batches/"+id+"/payouts/PH-1", 200); !strings.Contains(body, `<tr class="extra"><th>phoneNumber</th><td class="mono">&#43;79161234567</td></tr>`) {
		t.Errorf("the payout page lacks the phone number")
	}
}
