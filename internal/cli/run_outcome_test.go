package cli

import (
	"bytes"
	"context"
	"encoding/csv"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/rs/zerolog"

	"github.com/acme/payout/internal/sandbox"
)

// fastOutcomeFlags are worker flags that follow orders settling within a
// second to their outcome quickly.
var fastOutcomeFlags = []string{
	"--status-delay", "100ms", "--absent-spacing", "1s", "--psp-timeout", "1s",
	"--outcome-intervals", "100ms,200ms", "--outcome-window", "30s", "--log-level", "error",
}

// resultRows reads the rows of a CSV result file by column name (comment
// lines, "# ...", are the summary), keyed by externalId.
func resultRows(t *testing.T, path string) map[string]map[string]string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var lines []string
	for _, l := range strings.Split(string(b), "\n") {
		if l != "" && !strings.HasPrefix(l, "#") {
			lines = append(lines, l)
		}
	}
	r := csv.NewReader(strings.NewReader(strings.Join(lines, "\n")))
	r.FieldsPerRecord = -1
	recs, err := r.ReadAll()
	if err != nil || len(recs) < 2 {
		t.Fatalf("result file %s: %v\n%s", path, err, b)
	}
	rows := map[string]map[string]string{}
	for _, rec := range recs[1:] {
		m := map[string]string{}
		for i, h := range recs[0] {
			if i < len(rec) {
				m[h] = rec[i]
			}
		}
		rows[m["externalId"]] = m
	}
	return rows
}

// TestRunSandboxOutcomes: `payout run --sandbox` with the simulator's
// lifecycle follows every created order to paid or failed, and ends with
// both.
func TestRunSandboxOutcomes(t *testing.T) {
	out := filepath.Join(t.TempDir(), "r.csv")
	var stdout, stderr bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	args := append([]string{"run", "--sandbox", "--seed", "7", "--p-fail", "0.3", "--settle-after", "300ms", "--out", out},
		fastOutcomeFlags...)
	code := Main(ctx, append(args, "../../samples/payouts-good.csv"), nil, &stdout, &stderr, func(string) string { return "" })
	if code != ExitOK {
		t.Fatalf("exit %d\n%s\n%s", code, stdout.String(), stderr.String())
	}
	counts := map[string]int{}
	for ext, r := range resultRows(t, out) {
		counts[r["state"]]++
		if r["state"] == "failed" && !strings.Contains(r["error"], "PSP status Failed: ") {
			t.Errorf("%s failed without the PSP's status and reason: %q", ext, r["error"])
		}
	}
	if counts["paid"] == 0 || counts["failed"] == 0 || counts["paid"]+counts["failed"] != 20 {
		t.Fatalf("want 20 rows paid or failed, some of each; got %v\n%s", counts, stdout.String())
	}
}

// TestRunOutcomesMatchTheSimulator: against a simulator whose truth the
// test can read (each order's finalStatus and finalReason), every row of
// `payout run` ends exactly as its order does.
func TestRunOutcomesMatchTheSimulator(t *testing.T) {
	cfg := sandbox.DefaultConfig()
	cfg.Seed, cfg.SettleAfter, cfg.PFail = 11, 300*time.Millisecond, 0.3
	cfg.Faults.PAmbiguous = 0.2
	sbx := sandbox.New(cfg, zerolog.Nop())
	srv := httptest.NewServer(sbx.Handler())
	defer srv.Close()

	out := filepath.Join(t.TempDir(), "r.csv")
	var stdout, stderr bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	// Against a PSP other than its own --sandbox, run needs a Redis that
	// outlives it: here an in-process one the test owns, volatile by its
	// nature (--allow-volatile-redis).
	mr := miniredis.RunT(t)
	args := append([]string{"run", "--psp-url", srv.URL, "--redis", "redis://" + mr.Addr(), "--allow-volatile-redis", "--insecure-plaintext", "--out", out}, fastOutcomeFlags...)
	code := Main(ctx, append(args, "../../samples/payouts-good.csv"), nil, &stdout, &stderr,
		func(k string) string { return map[string]string{"PAYOUT_PSP_TOKEN": cfg.Token}[k] })
	if code != ExitOK {
		t.Fatalf("exit %d\n%s\n%s", code, stdout.String(), stderr.String())
	}
	rows := resultRows(t, out)
	truth := map[string]sandbox.Order{}
	for _, o := range sbx.Orders() {
		if o.Kind == "withdrawal" {
			if _, dup := truth[o.ExternalID]; dup {
				t.Errorf("%s: two orders at the PSP", o.ExternalID)
			}
			truth[o.ExternalID] = o
		}
	}
	var paid, failed int
	for ext, r := range rows {
		o, ok := truth[ext]
		if !ok {
			t.Errorf("%s: %s, but the PSP has no order", ext, r["state"])
			continue
		}
		want := map[string]string{cfg.PaidStatus: "paid", cfg.FailedStatus: "failed"}[o.FinalStatus]
		if r["state"] != want || r["pspOrderId"] != o.PSPOrderID {
			t.Errorf("%s: %s with order %s, but the PSP's order %s ends %q", ext, r["state"], r["pspOrderId"], o.PSPOrderID, o.FinalStatus)
		}
		if want == "failed" && !strings.Contains(r["error"], o.FinalReason) {
			t.Errorf("%s: failed with %q, the PSP's reason is %q", ext, r["error"], o.FinalReason)
		}
		switch want {
		case "paid":
			paid++
		case "failed":
			failed++
		}
	}
	if len(rows) != 20 || len(truth) != 20 || paid == 0 || failed == 0 {
		t.Fatalf("rows %d, orders %d, paid %d, failed %d: want 20, 20 and some of each", len(rows), len(truth), paid, failed)
	}
}
