//go:build integration

package cli

import (
	"context"
	"fmt"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/acme/payout/internal/proof/testenv"
	"github.com/acme/payout/internal/proof/testenv/gobuild"
	"github.com/acme/payout/internal/proof/testenv/proc"
	"github.com/acme/payout/internal/proof/testenv/redistest"
	"github.com/acme/payout/internal/report"
	"github.com/acme/payout/internal/sandbox"
	"github.com/acme/payout/internal/vault"
)

func TestMain(m *testing.M) { os.Exit(gobuild.Main(m)) }

// TestRunRerunAfterInterruption: `payout run` against a PSP (a simulator
// in this test process, a separate HTTP server, that stores every create it
// receives) on a real Redis, interrupted three times mid-way as a crash
// (SIGKILL) or as cron's timeout does (SIGTERM), then run to its end:
// every rerun resumes the same batch, and at the end every externalId has
// exactly one order at the PSP and the result file names that order. On
// the embedded Redis (what run used without --redis before it required
// one), the reruns created the orders again.
func TestRunRerunAfterInterruption(t *testing.T) {
	bin := gobuild.Binary(t, "github.com/acme/payout/cmd/payout")
	for _, mode := range []struct {
		name string
		stop func(p *proc.Proc)
	}{
		{"SIGKILL", func(p *proc.Proc) { p.Kill() }},
		{"SIGTERM", func(p *proc.Proc) {
			if _, err := p.Stop(20 * time.Second); err != nil {
				t.Errorf("SIGTERM: %v", err)
			}
		}},
	} {
		t.Run(mode.name, func(t *testing.T) {
			t.Parallel()
			const rows = 40
			dir := t.TempDir()
			file := filepath.Join(dir, "payouts.csv")
			var b strings.Builder
			b.WriteString("externalId,amount,cardNumber,telecomOperator\n")
			for i := 1; i <= rows; i++ {
				fmt.Fprintf(&b, "RR-%03d,%d.50,,MTS\n", i, i)
			}
			if err := os.WriteFile(file, []byte(b.String()), 0o600); err != nil {
				t.Fatal(err)
			}
			cfg := sandbox.DefaultConfig()
			cfg.Seed = 5
			cfg.Latency, cfg.LatencyJitter = 150*time.Millisecond, 100*time.Millisecond
			cfg.PAmbiguous = 0.2 // stored, then answered badly: the rerun must find it by status
			sbx := sandbox.New(cfg, zerolog.Nop())
			psp := httptest.NewServer(sbx.Handler())
			defer psp.Close()
			orders := func() map[string]int {
				n := map[string]int{}
				for _, o := range sbx.Orders() {
					if o.Kind == "withdrawal" {
						n[o.ExternalID]++
					}
				}
				return n
			}

			// Durable (AOF, fsync always): run refuses a Redis that is not.
			redisURL := redistest.StartConfig(t, redistest.Config{AOF: true}).URL()
			key, err := vault.GenerateKey()
			if err != nil {
				t.Fatal(err)
			}
			out := filepath.Join(dir, "result.csv")
			spec := proc.Spec{Name: "payout run", Bin: bin,
				Args: []string{"run", "--redis", redisURL, "--psp-url", psp.URL, "--track-outcome=false",
					"--concurrency", "2", "--psp-timeout", "1s", "--absent-spacing", "1s", "--status-delay", "200ms",
					"--reconcile-interval", "2s", "--reconcile-grace", "7s", "--log-level", "warn", "--out", out, file},
				Env: testenv.CleanEnv("PAYOUT_PSP_TOKEN="+cfg.Token, "PAYOUT_DATA_KEY="+key)}

			for round := 1; round <= 3; round++ {
				p := proc.StartT(t, spec)
				// Interrupt once round quarters of the rows have an order.
				err := testenv.Poll(context.Background(), 2*time.Minute, 20*time.Millisecond, func() (bool, error) {
					return len(orders()) >= round*rows/4 || p.Exited(), nil
				})
				if err != nil {
					t.Fatalf("round %d: %v (orders for %d rows)", round, err, len(orders()))
				}
				if p.Exited() {
					t.Fatalf("round %d: run ended before it was interrupted (exit %d)", round, p.ExitCode())
				}
				mode.stop(p)
				if mode.name == "SIGTERM" && p.ExitCode() == ExitOK {
					t.Errorf("round %d: exit 0 after SIGTERM, want the interrupted code", round)
				}
				t.Logf("round %d: interrupted with orders for %d of %d rows", round, len(orders()), rows)
			}

			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
			defer cancel()
			u, p, err := proc.Run(ctx, spec)
			if err != nil {
				t.Fatalf("last run: %v", err)
			}
			stdout, _ := p.Output()
			if u.ExitCode != ExitOK {
				t.Fatal(p.Failure(u, "last run did not end well"))
			}
			if !strings.Contains(stdout, "resuming batch ") {
				t.Errorf("the last run did not say it resumed the batch:\n%s", stdout)
			}

			got := orders()
			truth := map[string]string{}
			for _, o := range sbx.Orders() {
				truth[o.ExternalID] = o.PSPOrderID
			}
			for i := 1; i <= rows; i++ {
				ext := fmt.Sprintf("RR-%03d", i)
				if got[ext] != 1 {
					t.Errorf("%s: %d orders at the PSP, want exactly 1", ext, got[ext])
				}
			}
			// The CSV is a clean table; its summary, with the
			// reconciliation line, is NAME.summary.txt beside it.
			raw, err := os.ReadFile(report.SummaryPath(out))
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(string(raw), "\nreconciled: ") || strings.Contains(string(raw), "MISMATCH") {
				t.Errorf("the result does not reconcile:\n%s", raw)
			}
			res := resultRows(t, out)
			if len(res) != rows {
				t.Errorf("result file has %d rows, want %d", len(res), rows)
			}
			for ext, r := range res {
				if r["state"] != "created" || r["pspOrderId"] != truth[ext] {
					t.Errorf("%s: result %s %q, PSP order %q", ext, r["state"], r["pspOrderId"], truth[ext])
				}
			}
		})
	}
}
