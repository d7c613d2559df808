package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/acme/payout/internal/decide"
	"github.com/acme/payout/internal/ledger"
	"github.com/acme/payout/internal/lifecycle"
	"github.com/acme/payout/internal/money"
	"github.com/acme/payout/internal/payfile"
	"github.com/acme/payout/internal/results"
	"github.com/acme/payout/internal/vault"
	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
)

// outcomeRow is one payout of the outcome fixture and where the ledger
// takes it.
type outcomeRow struct {
	ext, amount, pan, telecom, extra, info string
	to                                     lifecycle.State // queued, created (awaiting), paid, failed, rejected
	reason                                 string          // of a failed one; default "card closed by the issuer"
}

var outcomeFixture = []outcomeRow{
	{ext: "PO-1", amount: "100.10", pan: "4111111111111111", to: lifecycle.Paid},
	{ext: "PO-2", amount: "250.50", pan: "5555555555554444", to: lifecycle.Failed},
	{ext: "PO-3", amount: "75", telecom: "MTS", extra: `[{"key":"phoneNumber","value":"+79001234567"}]`, info: "=call first\x1f2026-02-28", to: lifecycle.Failed},
	{ext: "PO-4-R2", amount: "0.20", pan: "4012888888881881", to: lifecycle.Failed, reason: "PSP status Failed: Account closed"},
	{ext: "PO-5", amount: "12.34", pan: "4111111111111111", to: lifecycle.Created},
	{ext: "PO-6", amount: "33.33", pan: "4111111111111111", to: lifecycle.Rejected},
	{ext: "PO-7", amount: "2.02", telecom: "Beeline", to: lifecycle.Queued},
}

// outcomeLedger loads outcomeFixture as batch "b-out" into a fresh
// miniredis and moves each payout through the ledger's own transitions.
func outcomeLedger(t *testing.T, ring *vault.Keyring) (*miniredis.Miniredis, *ledger.Ledger) {
	t.Helper()
	ctx := context.Background()
	mr := miniredis.RunT(t)
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	t.Cleanup(func() { rdb.Close() })
	l := ledger.New(rdb)
	const batch = "b-out"
	var ps []ledger.NewPayout
	total := money.Zero
	for i, r := range outcomeFixture {
		a := money.MustParse(r.amount)
		total = total.Add(a)
		p := ledger.NewPayout{Line: i + 2, ExternalID: r.ext, Amount: a, Telecom: r.telecom, Extra: r.extra, Info: r.info, Destination: "telecom " + r.telecom}
		if r.pan != "" {
			sealed, err := ring.Seal(r.pan, ledger.SealAD(batch, r.ext))
			if err != nil {
				t.Fatal(err)
			}
			p.Sealed, p.Destination = sealed, "card "+r.pan[:6]+"******"+r.pan[12:]
		}
		ps = append(ps, p)
	}
	if _, _, err := l.BeginBatch(ctx, ledger.Batch{ID: batch, File: "payouts-2026-02.xlsx", LoadedAt: time.Now(), Rows: int64(len(ps)), Total: total, Scale: 2,
		InfoColumns: []string{"notes", "Pay date"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Register(ctx, batch, ps, 2); err != nil {
		t.Fatal(err)
	}
	if err := l.FinishBatch(ctx, batch); err != nil {
		t.Fatal(err)
	}
	for _, r := range outcomeFixture {
		if r.to == lifecycle.Queued {
			continue
		}
		if _, err := l.BeginCreate(ctx, batch, r.ext, 1); err != nil {
			t.Fatal(err)
		}
		res := decide.CreateResult{To: lifecycle.Created, OrderID: "WD-" + r.ext, PSPStatus: "Created", OutcomeWindow: time.Hour}
		if r.to == lifecycle.Rejected {
			res = decide.CreateResult{To: lifecycle.Rejected, Error: "amount exceeds daily limit"}
		}
		if _, err := l.FinishCreate(ctx, batch, r.ext, 1, res); err != nil {
			t.Fatal(err)
		}
		var err error
		switch r.to {
		case lifecycle.Paid:
			err = recordOutcome(ctx, l, batch, r.ext, decide.VerdictPaid, "Paid", "")
		case lifecycle.Failed:
			reason := r.reason
			if reason == "" {
				reason = "card closed by the issuer"
			}
			err = recordOutcome(ctx, l, batch, r.ext, decide.VerdictFailed, "Declined", reason)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	return mr, l
}

func newRing(t *testing.T) (*vault.Keyring, string) {
	t.Helper()
	key, err := vault.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	ring, err := vault.NewKeyring(key)
	if err != nil {
		t.Fatal(err)
	}
	return ring, key
}

func TestRetryID(t *testing.T) {
	for _, tt := range []struct{ in, want string }{
		{"PO-1", "PO-1-R1"},
		{"PO-1-R1", "PO-1-R2"},
		{"PO-1-R9", "PO-1-R10"},
		{"PO-1-R", "PO-1-R-R1"},
		{"R1", "R1-R1"},
		{"-R3", "-R4"},
		{"PO-r1", "PO-r1-R1"},
		{"PO-1-R1x", "PO-1-R1x-R1"},
	} {
		if got := results.RetryID(tt.in); got != tt.want {
			t.Errorf("RetryID(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

// TestReportFailedOnly: the failed payouts, and only they, come out as a
// payout file that payfile accepts: new externalIds, exact amounts, card
// numbers in clear, mode 0600; no key is exit 2; an existing file is kept
// unless --force.
func TestReportFailedOnly(t *testing.T) {
	ring, key := newRing(t)
	mr, l := outcomeLedger(t, ring)
	dir := t.TempDir()
	out := filepath.Join(dir, "retry.csv")
	run := func(vars map[string]string, args ...string) (int, string, string) {
		var stdout, stderr bytes.Buffer
		code := Main(context.Background(), append([]string{"report", "--redis", "redis://" + mr.Addr()}, args...), nil, &stdout, &stderr,
			func(k string) string { return vars[k] })
		return code, stdout.String(), stderr.String()
	}
	withKey := map[string]string{"PAYOUT_DATA_KEY": key}

	code, stdout, stderr := run(nil, "--failed-only", "--out", out, "b-out")
	if code != ExitUsage || !strings.Contains(stderr, "needs the data key") || !strings.Contains(stderr, "PAYOUT_DATA_KEY") {
		t.Fatalf("without a key: exit %d\n%s%s", code, stdout, stderr)
	}
	if _, err := os.Stat(out); !os.IsNotExist(err) {
		t.Fatalf("a file was written without a key: %v", err)
	}

	code, stdout, stderr = run(withKey, "--failed-only", "--out", out, "b-out")
	if code != ExitOK {
		t.Fatalf("exit %d\n%s%s", code, stdout, stderr)
	}
	if !strings.Contains(stdout, "2 failed payouts, total 325.50") || !strings.Contains(stdout, "1 payout failed for good left out (account closed, card expired, total 0.20): give --include-final") {
		t.Errorf("stdout %q does not give the rows, the total and the payouts left out", stdout)
	}
	if strings.Contains(stdout+stderr, "4111111111111111") || strings.Contains(stdout+stderr, "5555555555554444") {
		t.Error("a card number was printed")
	}
	st, err := os.Stat(out)
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode().Perm() != 0o600 {
		t.Errorf("mode %v, want 0600", st.Mode().Perm())
	}
	got, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	// The payout whose account is closed is left out; each row says why it
	// failed.
	want := "externalId,amount,cardNumber,telecomOperator,phoneNumber,notes,Pay date,reason\n" +
		"PO-2-R1,250.50,5555555555554444,,,,,card closed by the issuer\n" +
		"PO-3-R1,75.00,,MTS,+79001234567,'=call first,2026-02-28,card closed by the issuer\n"
	if string(got) != want {
		t.Fatalf("file:\n%s\nwant:\n%s", got, want)
	}

	// The loader's checker takes the file as it is: same rows, same total.
	f, err := os.Open(out)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var rows []payfile.Row
	sum, errs, err := payfile.CollectEach(context.Background(), "retry.csv", f, payfile.Options{}, func(r payfile.Row) error {
		rows = append(rows, r)
		return nil
	})
	if err != nil || len(errs) > 0 || sum.ValidRows != 2 || sum.Total.StringFixed(2) != "325.50" {
		t.Fatalf("payfile: %v %v, %d valid rows, total %s", err, errs, sum.ValidRows, sum.Total)
	}
	if rows[0].CardNumber != "5555555555554444" || rows[1].TelecomOperator != "MTS" ||
		len(rows[1].Extra) != 1 || rows[1].Extra[0] != (payfile.Property{Key: "phoneNumber", Value: "+79001234567"}) {
		t.Errorf("rows read back: %+v", rows)
	}

	// An existing file is kept without --force, replaced with it.
	if err := os.WriteFile(out, []byte("keep me"), 0o600); err != nil {
		t.Fatal(err)
	}
	code, _, stderr = run(withKey, "--failed-only", "--out", out, "b-out")
	if b, _ := os.ReadFile(out); code != ExitUsage || string(b) != "keep me" || !strings.Contains(stderr, "--force") {
		t.Fatalf("existing file: exit %d, content %q, stderr %s", code, b, stderr)
	}
	if code, stdout, stderr = run(withKey, "--failed-only", "--force", "--out", out, "b-out"); code != ExitOK {
		t.Fatalf("--force: exit %d\n%s%s", code, stdout, stderr)
	}
	if b, _ := os.ReadFile(out); string(b) != want {
		t.Fatalf("--force wrote:\n%s", b)
	}
	// --include-final writes the payout failed for good too.
	if code, stdout, stderr = run(withKey, "--failed-only", "--include-final", "--force", "--out", out, "b-out"); code != ExitOK ||
		!strings.Contains(stdout, "3 failed payouts, total 325.70") {
		t.Fatalf("--include-final: exit %d\n%s%s", code, stdout, stderr)
	}
	if b, _ := os.ReadFile(out); string(b) != want+"PO-4-R3,0.20,4012888888881881,,,,,PSP status Failed: Account closed\n" {
		t.Fatalf("--include-final wrote:\n%s", b)
	}
	if code, _, _ = run(withKey, "--include-final", "b-out"); code != ExitUsage {
		t.Errorf("--include-final without --failed-only: exit %d", code)
	}
	if code, stdout, stderr = run(withKey, "--failed-only", "--force", "--out", out, "b-out"); code != ExitOK {
		t.Fatalf("--force: exit %d\n%s%s", code, stdout, stderr)
	}
	if st, _ := os.Stat(out); st.Mode().Perm() != 0o600 {
		t.Errorf("mode after --force %v, want 0600", st.Mode().Perm())
	}

	// A batch without failed payouts: nothing written, an existing file
	// left alone even with --force.
	ctx := context.Background()
	if _, _, err := l.BeginBatch(ctx, ledger.Batch{ID: "b-none", File: "none.csv", LoadedAt: time.Now(), Rows: 1, Total: money.MustParse("1"), Scale: 2}); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Register(ctx, "b-none", []ledger.NewPayout{{Line: 2, ExternalID: "N-1", Amount: money.MustParse("1"), Telecom: "MTS"}}, 2); err != nil {
		t.Fatal(err)
	}
	code, stdout, _ = run(withKey, "--failed-only", "--force", "--out", out, "b-none")
	if b, _ := os.ReadFile(out); code != ExitOK || string(b) != want || !strings.Contains(stdout, "no failed payouts") {
		t.Fatalf("no failed rows: exit %d, stdout %q, file now %q", code, stdout, b)
	}

	// Another key does not open the card numbers: exit 2, no file left.
	_, other := newRing(t)
	out2 := filepath.Join(dir, "other.csv")
	code, _, stderr = run(map[string]string{"PAYOUT_DATA_KEY": other}, "--failed-only", "--out", out2, "b-out")
	if _, err := os.Stat(out2); code != ExitUsage || !os.IsNotExist(err) || !strings.Contains(stderr, "data key") {
		t.Fatalf("wrong key: exit %d, stat %v, stderr %s", code, err, stderr)
	}
}

// TestStatusShowsOutcomes: `payout status` (table, detail and --json) and
// the result file show paid, failed and awaiting outcome.
func TestStatusShowsOutcomes(t *testing.T) {
	ring, _ := newRing(t)
	mr, _ := outcomeLedger(t, ring)
	run := func(args ...string) (int, string) {
		var stdout, stderr bytes.Buffer
		code := Main(context.Background(), append([]string{args[0], "--redis", "redis://" + mr.Addr()}, args[1:]...), nil, &stdout, &stderr,
			func(string) string { return "" })
		if code != ExitOK && code != ExitRejected {
			return code, stdout.String() + stderr.String()
		}
		return code, stdout.String() // stderr names the Redis; exit 1 is an answer (rows failed)
	}
	code, out := run("status", "--json", "b-out")
	if code != ExitOK {
		t.Fatalf("status --json: exit %d\n%s", code, out)
	}
	var v struct {
		Counts         map[string]int64 `json:"counts"`
		Awaiting       int64            `json:"awaitingOutcome"`
		AmountPaid     string           `json:"amountPaid"`
		AmountFailed   string           `json:"amountFailed"`
		AmountAwaiting string           `json:"amountAwaiting"`
	}
	if err := json.Unmarshal([]byte(out), &v); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if v.Counts["paid"] != 1 || v.Counts["failed"] != 3 || v.Counts["created"] != 1 || v.Awaiting != 1 ||
		v.AmountPaid != "100.10" || v.AmountFailed != "325.70" || v.AmountAwaiting != "12.34" {
		t.Errorf("status --json: %+v", v)
	}
	for _, tc := range []struct {
		args []string
		want []string
	}{
		{[]string{"status", "b-out"}, []string{"paid", "failed", "awaiting outcome", "amount paid 100.10, failed 325.70, awaiting outcome 12.34"}},
		{[]string{"status"}, []string{"PAID", "FAILED", "AWAITING", "100.10 / 12.34 / 473.49"}},
	} {
		code, out := run(tc.args...)
		if code != ExitOK {
			t.Fatalf("%v: exit %d\n%s", tc.args, code, out)
		}
		for _, w := range tc.want {
			if !strings.Contains(out, w) {
				t.Errorf("%v: no %q in\n%s", tc.args, w, out)
			}
		}
	}
	// The result file: exit 1 (failed rows, one awaiting), every row with
	// its outcome group, the groups adding up to the file's total.
	code, out = run("report", "b-out")
	if code != ExitRejected {
		t.Errorf("report: exit %d, want %d", code, ExitRejected)
	}
	for _, w := range []string{
		",paid,WD-PO-1,Paid,1,,", ",failed,WD-PO-2,Declined,1,card closed by the issuer,", ",created,WD-PO-5,Created,1,,",
		",pending,,\n", ",failed,'=call first,2026-02-28\n",
	} {
		if !strings.Contains(out, w) {
			t.Errorf("result file has no %q:\n%s", w, out)
		}
	}
	if strings.Count(out, "\n") != 8 || strings.Contains(out, "#") {
		t.Errorf("result file is not a clean table of a header and 7 rows:\n%s", out)
	}
	// The old layout, behind --summary-in-csv.
	_, legacy := run("report", "--summary-in-csv", "b-out")
	for _, w := range []string{
		"\n\n# batch,", "# outcome,paid,1,100.10", "# outcome,failed,3,325.70", "# outcome,pending,2,14.36",
		"# outcome,not_sent,1,33.33", "# outcome,unknown,0,0.00", "# outcome,total,7,473.49", ",OK,",
	} {
		if !strings.Contains(legacy, w) {
			t.Errorf("--summary-in-csv: no %q:\n%s", w, legacy)
		}
	}
	// With --out, the summary file beside it; an XLSX by its name.
	dir := t.TempDir()
	_, printed := run("report", "--out", filepath.Join(dir, "b.result.csv"), "b-out")
	sum, err := os.ReadFile(filepath.Join(dir, "b.summary.txt"))
	if err != nil || !strings.Contains(string(sum), "reconciled: 473.49 = 473.49 (7 rows)") || !strings.Contains(printed, "summary file written: ") {
		t.Errorf("summary file: %v\n%s\nstdout:\n%s", err, sum, printed)
	}
	if code, printed := run("report", "--out", filepath.Join(dir, "b.xlsx"), "b-out"); code != ExitRejected || !strings.Contains(printed, "result file written: ") {
		t.Errorf("xlsx: exit %d\n%s", code, printed)
	}
	if data, err := os.ReadFile(filepath.Join(dir, "b.xlsx")); err != nil || !bytes.HasPrefix(data, []byte("PK")) {
		t.Errorf("b.xlsx: %v", err)
	}
	if strings.Contains(out, "4111111111111111") {
		t.Error("the result file holds a card number")
	}
}

// recordOutcome records verdict v of outcome check 1 of a created payout,
// read as a worker reads it before it asks the PSP.
func recordOutcome(ctx context.Context, l *ledger.Ledger, batch, ext string, v decide.Verdict, status, reason string) error {
	_, s, err := l.Snapshot(ctx, batch, ext)
	if err != nil {
		return err
	}
	_, err = l.RecordOutcome(ctx, s, 1, decide.OutcomeAnswer{Verdict: v, PSPStatus: status, Reason: reason, HTTPStatus: 200})
	return err
}
