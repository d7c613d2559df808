package cli

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/acme/payout/internal/decide"
	"github.com/acme/payout/internal/ledger"
	"github.com/acme/payout/internal/lifecycle"
	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
)

// moneyFile is a payout file whose amounts and total end in 0 (1234.50 +
// 2000.00 + 315.10 = 3549.60): an amount printed without the file's two
// decimals shows as 1234.5, 2000, 315.1 or 3549.6. Times (after a ':')
// are not amounts.
const moneyFile = "externalId,amount,cardNumber,telecomOperator\n" +
	"PO-W-1,1234.50,4111 1111 1111 1111,\n" +
	"PO-W-2,2000.00,,MTS\n" +
	"PO-W-3,315.10,,MTS\n"

// amountLike finds decimal numbers: not part of a dotted version or
// address, not a percentage or a duration (a letter or % after it).
var amountLike = regexp.MustCompile(`(^|[^\d.:])(\d+\.\d+)([^\d.]|$)`)

// wholeAmounts finds the integer parts of the file's amounts and total.
var wholeAmounts = regexp.MustCompile(`(^|[^\d.])(1234|2000|315|3549)(\.\d+)?([^\d]|$)`)

// checkMoney fails for every amount-like number in out without exactly
// two decimals, and for every amount of the file printed without them.
func checkMoney(t *testing.T, what, out string) {
	t.Helper()
	for _, line := range strings.Split(out, "\n") {
		for _, m := range amountLike.FindAllStringSubmatch(line, -1) {
			after := m[3]
			if after != "" && (after == "%" || after == "s" || after == "m" || after == "µ" || after == "h" ||
				(after[0] >= 'a' && after[0] <= 'z')) {
				continue // 12.5%, 1.2s, 3.4ms
			}
			if dec := m[2][strings.IndexByte(m[2], '.')+1:]; len(dec) != 2 {
				t.Errorf("%s: amount %s without the file's 2 decimals in %q", what, m[2], line)
			}
		}
		for _, m := range wholeAmounts.FindAllStringSubmatch(line, -1) {
			if len(m[3]) != 3 {
				t.Errorf("%s: amount %s%s without the file's 2 decimals in %q", what, m[2], m[3], line)
			}
		}
	}
}

// TestEveryCommandPrintsMoneyWithDecimals runs the commands a person reads
// amounts from, in process, against an embedded Redis, on a file whose
// total ends in 0, and checks every amount they print and every text file
// they write: each has the file's two decimals. A new command belongs in
// the list.
func TestEveryCommandPrintsMoneyWithDecimals(t *testing.T) {
	mr := miniredis.RunT(t)
	url := "redis://" + mr.Addr()
	_, key := newRing(t)
	env := map[string]string{"PAYOUT_DATA_KEY": key, "PAYOUT_LOG_LEVEL": "error"}
	dir := t.TempDir()
	file := filepath.Join(dir, "june.csv")
	if err := os.WriteFile(file, []byte(moneyFile), 0o600); err != nil {
		t.Fatal(err)
	}
	ran := map[string]bool{}
	run := func(want int, args ...string) string {
		t.Helper()
		var out, errb bytes.Buffer
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		all := append([]string{args[0]}, args[1:]...)
		if args[0] != "run" && args[0] != "keygen" {
			all = append(all, "--redis", url)
		}
		code := Main(ctx, all, nil, &out, &errb, func(k string) string { return env[k] })
		what := strings.Join(args, " ")
		if code != want {
			t.Fatalf("%s: exit %d, want %d\n%s%s", what, code, want, out.String(), errb.String())
		}
		if args[0] != "keygen" { // its output is a random key, whose digits are no amount
			checkMoney(t, what, out.String()+errb.String())
		}
		ran[args[0]] = true
		return out.String() + errb.String()
	}
	checkFile := func(path string) {
		t.Helper()
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		checkMoney(t, filepath.Base(path), string(b))
	}

	if out := run(ExitOK, "load", "--dry-run", file); !strings.Contains(out, "total 3549.60") {
		t.Errorf("dry run: %s", out)
	}
	if out := run(ExitOK, "load", "--allow-volatile-redis", "--by", "alice", "--max-batch-total", "1000.5", file); !strings.Contains(out, "total 3549.60") ||
		!strings.Contains(out, "above the batch limit 1000.50") {
		t.Errorf("load: %s", out)
	}
	run(ExitOK, "status")
	run(ExitOK, "status", file)
	run(ExitOK, "status", "--json", file)
	if out := run(ExitRejected, "approve", "--by", "bob", "--daily-limit", "100", file); !strings.Contains(out, "over the daily limit 100.00") {
		t.Errorf("approve over the daily limit: %s", out)
	}
	if out := run(ExitOK, "approve", "--by", "bob", file); !strings.Contains(out, "total 3549.60") {
		t.Errorf("approve: %s", out)
	}

	// The workers' part, straight in the ledger: PO-W-1 failed, PO-W-2
	// paid, PO-W-3 needs review.
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	defer rdb.Close()
	l := ledger.New(rdb)
	ctx := context.Background()
	batch, err := resolveBatch(ctx, l, file)
	if err != nil {
		t.Fatal(err)
	}
	for ext, to := range map[string]lifecycle.State{"PO-W-1": lifecycle.Failed, "PO-W-2": lifecycle.Paid, "PO-W-3": lifecycle.NeedsReview} {
		if _, err := l.BeginCreate(ctx, batch, ext, 1); err != nil {
			t.Fatal(err)
		}
		res := decide.CreateResult{To: lifecycle.Created, OrderID: "WD-" + ext, PSPStatus: "Created", OutcomeWindow: time.Hour}
		if to == lifecycle.NeedsReview {
			res = decide.CreateResult{To: lifecycle.NeedsReview, Error: "status unknown after 10 status checks without an answer"}
		}
		if _, err := l.FinishCreate(ctx, batch, ext, 1, res); err != nil {
			t.Fatal(err)
		}
		verdict := map[lifecycle.State]decide.Verdict{lifecycle.Paid: decide.VerdictPaid, lifecycle.Failed: decide.VerdictFailed}
		if v, ok := verdict[to]; ok {
			if err := recordOutcome(ctx, l, batch, ext, v, "Done", "account closed"); err != nil {
				t.Fatal(err)
			}
		}
	}

	run(ExitOK, "status", file)
	run(ExitOK, "status")
	run(ExitRejected, "report", file)
	run(ExitRejected, "report", "--format", "json", file)
	run(ExitRejected, "report", "--summary-in-csv", file)
	run(ExitRejected, "report", "--out", filepath.Join(dir, "june.result.csv"), file)
	checkFile(filepath.Join(dir, "june.result.csv"))
	checkFile(filepath.Join(dir, "june.summary.txt"))
	run(ExitRejected, "report", "--out", filepath.Join(dir, "june.xlsx"), file)
	run(ExitOK, "report", "--failed-only", "--include-final", "--out", filepath.Join(dir, "retry.csv"), file)
	checkFile(filepath.Join(dir, "retry.csv"))
	run(ExitOK, "resolve", file)
	run(ExitOK, "history", file)
	run(ExitOK, "history", file, "PO-W-3")
	run(ExitOK, "reconcile", "--dry-run")
	psp := fakePSP(t, nil) // marking rejected asks the PSP first: it has no such order
	for k, v := range psp {
		env[k] = v
	}
	run(ExitOK, "resolve", file, "PO-W-3", "--as", "rejected", "--note", "the PSP has no such order", "--by", "carol")
	for k := range psp {
		delete(env, k)
	}
	run(ExitRejected, "cancel", file, "PO-W-2", "--by", "carol", "--note", "late")
	run(ExitRejected, "release", file, "PO-W-2", "--by", "carol", "--note", "known supplier") // not held: refused, no amount
	run(ExitOK, "archive", "--older-than", "0s", "--dry-run")

	// A second batch, discarded.
	other := filepath.Join(dir, "july.csv")
	if err := os.WriteFile(other, []byte(strings.ReplaceAll(moneyFile, "PO-W-", "PO-J-")), 0o600); err != nil {
		t.Fatal(err)
	}
	run(ExitOK, "load", "--allow-volatile-redis", "--approval", "required", "--by", "alice", other)
	run(ExitOK, "discard", "--by", "bob", "--note", "wrong month", other)
	run(ExitOK, "status")

	// load, work, wait and report in one process.
	out := filepath.Join(dir, "run.result.csv")
	run(ExitOK, "run", "--sandbox", "--seed", "3", "--log-level", "error", "--out", out, file)
	checkFile(out)
	checkFile(filepath.Join(dir, "run.summary.txt"))

	run(ExitOK, "pause", "--by", "carol", "--note", "PSP maintenance")
	run(ExitOK, "resume", "--by", "carol")
	if key := strings.TrimSpace(run(ExitOK, "keygen")); strings.ContainsAny(key, " \n") || len(key) < 32 {
		t.Errorf("keygen printed more than one key: %q", key)
	}

	// Every command is walked, or says here why it prints no amount a
	// test could walk: a new command fails this until it is one or the
	// other.
	servers := map[string]string{
		"worker":    "a server: its amounts go to the log, from the ledger",
		"ui":        "a server: the web UI's pages are tested in internal/ui",
		"sandbox":   "the PSP simulator: no payout amount of ours",
		"passwd":    "prints a users-file line: a name and a bcrypt hash (TestPasswd)",
		"api":       "a server: the API's answers are tested in internal/api (amounts as decimal strings)",
		"token":     "prints API tokens and their names and roles: no amount",
		"dev":       "a server: the local stack of embedded Redis, simulator, worker and console (TestDevStack)",
		"redeliver": "prints webhook event ids and counts, never an amount (operator.TestRedeliver)",
	}
	for _, c := range commands() {
		if !ran[c.name] && servers[c.name] == "" {
			t.Errorf("payout %s was not walked: add it to this test", c.name)
		}
	}
}
