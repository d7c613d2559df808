package loader

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/acme/payout/internal/payfile"
	"github.com/acme/payout/internal/proof/chaos"
	"github.com/acme/payout/internal/proof/redisdump"
	"github.com/acme/payout/internal/report"
	"github.com/acme/payout/internal/results"
	"github.com/rs/zerolog"
)

// TestCardsOutsideCardNumberLeakNowhere (issue 26 item 2): card numbers
// in externalId, telecomOperator, phoneNumber and an informational column
// refuse their rows, and appear in full nowhere: not in the error listing
// or the errors file, Redis keys or values, task payloads, the log or the
// result file. The valid rows load, their informational columns carried
// into the result file (item 5).
func TestCardsOutsideCardNumberLeakNowhere(t *testing.T) {
	f := newFixture(t)
	var logs bytes.Buffer
	f.ld.log = zerolog.New(&logs)
	ctx := context.Background()
	cards := []string{"4111111111111111", "5555555555554444", "2200123456789019", "4012888888881881"}
	in := "externalId,amount,cardNumber,telecomOperator,phoneNumber,notes,Pay date\n" +
		"PO-1,10.00,4000000000000002,,,first,2026-11-30\n" +
		"4111-1111-1111-1111,11.00,,MTS,,x,\n" +
		"PO-4111111111111111,12.00,,MTS,,x,\n" +
		"PO-3,13.00,,MTS 5555555555554444,,x,\n" +
		"PO-4,14.00,,MTS,4012888888881881,,\n" +
		"PO-5,15.00,,MTS,,paid to 2200 1234 5678 9019,\n" +
		"PO-6,16.00,,MTS,+79161234567,,\n"
	path := writeFile(t, t.TempDir(), "cards.csv", in)
	res, err := f.ld.LoadFile(ctx, path, Options{Partial: true})
	if err != nil {
		t.Fatal(err)
	}
	if !res.Loaded || res.Registered != 2 || len(res.Errors) != 5 {
		t.Fatalf("loaded %v, registered %d, errors %v", res.Loaded, res.Registered, res.Errors)
	}
	var listing, errorsFile bytes.Buffer
	if err := payfile.WriteErrors(&listing, res.Errors); err != nil {
		t.Fatal(err)
	}
	if err := report.WriteErrorsCSV(&errorsFile, func(yield func(report.ErrorRow) bool) {
		for _, e := range res.Errors {
			if !yield(report.ErrorRow{File: e.File, Line: e.Line, Column: e.Column, Message: e.Message}) {
				return
			}
		}
	}); err != nil {
		t.Fatal(err)
	}
	for i, col := range []string{payfile.ColExternalID, payfile.ColExternalID, payfile.ColTelecomOperator, payfile.ColPhoneNumber, "notes"} {
		if e := res.Errors[i]; e.Line != i+3 || e.Column != col || !strings.Contains(e.Message, "holds a card number") {
			t.Errorf("error %d: %v, want line %d column %s", i, e, i+3, col)
		}
	}

	scan := chaos.NewScanner(cards, nil)
	var leaks []chaos.Leak
	leaks = append(leaks, scan.Scan("error listing", listing.Bytes())...)
	leaks = append(leaks, scan.Scan("errors file", errorsFile.Bytes())...)
	leaks = append(leaks, scan.Scan("log", logs.Bytes())...)
	contents, err := redisdump.Contents(ctx, f.rdb)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range contents {
		leaks = append(leaks, scan.Scan("redis key "+k, []byte(k))...)
		leaks = append(leaks, scan.Scan("redis value of "+k, []byte(v))...)
	}
	for _, task := range f.pendingTasks() {
		leaks = append(leaks, scan.Scan("task "+task.ID, task.Payload)...)
		if bytes.Contains(task.Payload, []byte("first")) || bytes.Contains(task.Payload, []byte("2026-11-30")) {
			t.Errorf("task %s carries informational values: %s", task.ID, task.Payload)
		}
	}
	var result bytes.Buffer
	b, err := f.led.Batch(ctx, res.Batch)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := report.WriteCSV(&result, results.Batch(b), results.Rows(ctx, f.led, res.Batch)); err != nil {
		t.Fatal(err)
	}
	leaks = append(leaks, scan.Scan("result file", result.Bytes())...)
	for _, l := range leaks {
		t.Errorf("full card number: %s", l)
	}

	// The informational columns, beside their rows in the result file,
	// stored only where present.
	lines := strings.Split(result.String(), "\n")
	if want := strings.Join(report.Header, ",") + ",notes,Pay date"; lines[0] != want {
		t.Errorf("result header %q, want %q", lines[0], want)
	}
	if !strings.HasPrefix(lines[1], "2,PO-1,") || !strings.HasSuffix(lines[1], ",first,2026-11-30") ||
		!strings.HasPrefix(lines[2], "8,PO-6,") || !strings.HasSuffix(lines[2], ",,") {
		t.Errorf("result rows:\n%s\n%s", lines[1], lines[2])
	}
	if p, err := f.led.Get(ctx, res.Batch, "PO-6"); err != nil || p.Info != "" {
		t.Errorf("PO-6 stores info %q (%v), want none", p.Info, err)
	}
	if p, err := f.led.Get(ctx, res.Batch, "PO-1"); err != nil || p.Info != "first\x1f2026-11-30" {
		t.Errorf("PO-1 stores info %q (%v)", p.Info, err)
	}
	if _, err := f.led.Get(ctx, res.Batch, "4111-1111-1111-1111"); err == nil {
		t.Error("the row with a card in its externalId was stored")
	}
}
