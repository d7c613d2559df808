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

	"github.com/hibiken/asynq"
	"github.com/rs/zerolog"

	"github.com/acme/payout/internal/ledger"
	"github.com/acme/payout/internal/lifecycle"
	"github.com/acme/payout/internal/proof/testenv"
	"github.com/acme/payout/internal/proof/testenv/gobuild"
	"github.com/acme/payout/internal/proof/testenv/proc"
	"github.com/acme/payout/internal/proof/testenv/redistest"
	"github.com/acme/payout/internal/sandbox"
	"github.com/acme/payout/internal/vault"
	"github.com/acme/payout/internal/view"
	"github.com/acme/payout/jobs"
)

// volatileFixture is a payout file of n telecom rows, a data key and the
// simulator as the PSP.
type volatileFixture struct {
	file, key string
	sbx       *sandbox.Server
	psp       *httptest.Server
}

func newVolatileFixture(t *testing.T, n int) volatileFixture {
	t.Helper()
	var b strings.Builder
	b.WriteString("externalId,amount,cardNumber,telecomOperator\n")
	for i := 1; i <= n; i++ {
		fmt.Fprintf(&b, "RB-%03d,%d.25,,MTS\n", i, i)
	}
	file := filepath.Join(t.TempDir(), "payouts.csv")
	if err := os.WriteFile(file, []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	key, err := vault.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	sbx := sandbox.New(sandbox.DefaultConfig(), zerolog.Nop())
	psp := httptest.NewServer(sbx.Handler())
	t.Cleanup(psp.Close)
	return volatileFixture{file: file, key: key, sbx: sbx, psp: psp}
}

// creates counts the create requests the PSP stored.
func (f volatileFixture) creates() int {
	n := 0
	for _, o := range f.sbx.Orders() {
		if o.Kind == "withdrawal" {
			n++
		}
	}
	return n
}

func (f volatileFixture) env() []string {
	return testenv.CleanEnv("PAYOUT_PSP_TOKEN="+sandbox.DefaultToken, "PAYOUT_DATA_KEY="+f.key)
}

func (f volatileFixture) workerArgs(redisURL string, more ...string) []string {
	return append([]string{"worker", "--redis", redisURL, "--psp-url", f.psp.URL, "--metrics-addr", "",
		"--track-outcome=false", "--status-delay", "200ms", "--log-format", "json"}, more...)
}

// TestVolatileRedisRefused: payout load and payout worker (the binary) on
// a redis-server that would lose the ledger's last writes in a crash (no
// AOF: a default install; AOF synced every second) refuse to start (exit
// 2), name the setting and the fix and write nothing; with
// --allow-volatile-redis they run, and every log line says so. Before,
// load did not look and the worker only warned.
func TestVolatileRedisRefused(t *testing.T) {
	bin := gobuild.Binary(t, "github.com/acme/payout/cmd/payout")
	f := newVolatileFixture(t, 3)
	for _, tc := range []struct {
		name string
		srv  *redistest.Server
		says string
	}{
		{"no AOF", redistest.Start(t), "appendonly=no appendfsync=everysec"},
		{"AOF everysec", redistest.Start(t, "--appendonly", "yes", "--appendfsync", "everysec"), "appendfsync=everysec: a crash of the machine"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, args := range [][]string{
				{"load", "--redis", tc.srv.URL(), f.file},
				f.workerArgs(tc.srv.URL()),
			} {
				ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
				u, p, err := proc.Run(ctx, proc.Spec{Name: "payout " + args[0], Bin: bin, Args: args, Env: f.env()})
				cancel()
				if err != nil {
					t.Fatal(err)
				}
				stdout, stderr := p.Output()
				got := stdout + stderr
				if u.ExitCode != ExitUsage {
					t.Fatalf("%s: exit %d, want %d (refused)\n%s", args[0], u.ExitCode, ExitUsage, got)
				}
				for _, w := range []string{tc.says, "`appendonly yes` and `appendfsync always`", "CONFIG SET appendfsync always",
					"--allow-volatile-redis (PAYOUT_ALLOW_VOLATILE_REDIS=true)"} {
					if !strings.Contains(got, w) {
						t.Errorf("%s: output lacks %q:\n%s", args[0], w, got)
					}
				}
			}
			if n, _ := tc.srv.ClientT(t).DBSize(context.Background()).Result(); n != 0 {
				t.Errorf("refused, yet Redis holds %d keys", n)
			}
		})
	}

	t.Run("accepted: every log line says so", func(t *testing.T) { acceptedVolatile(t, bin, f) })
}

// acceptedVolatile: load and worker with --allow-volatile-redis run, name
// the risk, and every log line carries the durability field.
func acceptedVolatile(t *testing.T, bin string, f volatileFixture) {
	srv := redistest.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	u, p, err := proc.Run(ctx, proc.Spec{Name: "payout load", Bin: bin, Env: f.env(),
		Args: []string{"load", "--redis", srv.URL(), "--allow-volatile-redis", "--log-format", "json", f.file}})
	if err != nil || u.ExitCode != ExitOK {
		t.Fatalf("load --allow-volatile-redis: %v %v", err, p.Failure(u, "load"))
	}
	_, stderr := p.Output()
	w := proc.StartT(t, proc.Spec{Name: "payout worker", Bin: bin, Env: f.env(), Args: f.workerArgs(srv.URL(), "--allow-volatile-redis")})
	testenv.Eventually(t, "3 creates", func() bool { return f.creates() == 3 || w.Exited() })
	if _, err := w.Stop(20 * time.Second); err != nil {
		t.Fatal(err)
	}
	_, werr := w.Output()
	lines := 0
	for _, line := range strings.Split(strings.TrimSpace(stderr+"\n"+werr), "\n") {
		if strings.HasPrefix(line, "{") {
			lines++
			if !strings.Contains(line, `"durability":"volatile-accepted"`) {
				t.Errorf("log line without the durability field: %s", line)
			}
		}
	}
	if lines < 3 || !strings.Contains(werr, `"risk":"Redis has no replica and appendonly=no`) {
		t.Errorf("want the risk named in the logs (%d lines):\n%s\n%s", lines, stderr, werr)
	}
}

// TestWorkerStopsOnLedgerRolledBack: a worker on a Redis without AOF (the
// risk accepted) creates 5 payouts; Redis is killed (SIGKILL) and comes
// back from the snapshot taken before them, with the 5 payouts queued and
// their tasks pending again. The worker sees the batch's create epoch go
// back, sends nothing, pauses the queue and records the finding; a worker
// started now refuses to, and `payout resume` wants --ledger-reconciled.
// Before, the worker created all 5 again.
func TestWorkerStopsOnLedgerRolledBack(t *testing.T) {
	bin := gobuild.Binary(t, "github.com/acme/payout/cmd/payout")
	const rows = 5
	f := newVolatileFixture(t, rows)
	srv := redistest.Start(t) // RDB only: SAVE writes the snapshot the restart reads
	rdb := srv.ClientT(t)
	ctx := context.Background()
	run := func(args ...string) (int, string) {
		c, cancel := context.WithTimeout(ctx, time.Minute)
		defer cancel()
		u, p, err := proc.Run(c, proc.Spec{Name: "payout " + args[0], Bin: bin, Args: args, Env: f.env()})
		if err != nil {
			t.Fatal(err)
		}
		stdout, stderr := p.Output()
		return u.ExitCode, stdout + stderr
	}
	if code, out := run("load", "--redis", srv.URL(), "--allow-volatile-redis", f.file); code != ExitOK {
		t.Fatalf("load: exit %d\n%s", code, out)
	}
	if err := rdb.Save(ctx).Err(); err != nil {
		t.Fatal(err)
	}

	w := proc.StartT(t, proc.Spec{Name: "payout worker", Bin: bin, Env: f.env(), Args: f.workerArgs(srv.URL(), "--allow-volatile-redis")})
	insp := asynq.NewInspectorFromRedisClient(rdb)
	l := ledger.New(rdb)
	testenv.Eventually(t, "5 creates recorded", func() bool {
		ids, _ := view.New(l.Redis()).BatchIDs(ctx)
		if len(ids) != 1 {
			return w.Exited()
		}
		c, err := view.New(l.Redis()).Counts(ctx, ids[0])
		return f.creates() == rows && err == nil && c.Rows[lifecycle.Created] == rows || w.Exited()
	})
	if w.Exited() {
		t.Fatalf("worker exited: %s", w.Tail(20))
	}

	if err := srv.Restart(ctx); err != nil { // SIGKILL, then up from the snapshot
		t.Fatal(err)
	}
	err := testenv.Poll(ctx, time.Minute, 50*time.Millisecond, func() (bool, error) {
		_, werr := w.Output()
		return strings.Contains(werr, "LEDGER WENT BACK IN TIME") || f.creates() > rows || w.Exited(), nil
	})
	if err != nil || f.creates() > rows {
		t.Fatalf("after the rollback: %d creates at the PSP for %d payouts (want %d), rollback not found (%v)\n%s", f.creates(), rows, rows, err, w.Tail(30))
	}
	_, werr := w.Output()
	if !strings.Contains(werr, "LEDGER WENT BACK IN TIME") || !strings.Contains(werr, `"alert":"ledger_rolled_back"`) {
		t.Errorf("no alert in the worker's log:\n%s", werr)
	}
	if info, err := insp.GetQueueInfo(jobs.Queue); err != nil || !info.Paused {
		t.Errorf("queue not paused after the rollback: %+v %v", info, err)
	}
	// The PayoutQueuePaused runbook's first step: payout history says who
	// paused the queue and why.
	if code, out := run("history", "--redis", srv.URL()); code != ExitOK || !strings.Contains(out, "paused") || !strings.Contains(out, "create mark took epoch") {
		t.Errorf("payout history after the rollback pause: exit %d, want the worker's pause with the finding\n%s", code, out)
	}

	fleetAfterRollback(t, f, rows, run, srv.URL())
}

// fleetAfterRollback: after a worker found the ledger gone back in time, a
// new worker refuses to start, resume wants --ledger-reconciled, nothing
// more was created, and once cleared resume goes on.
func fleetAfterRollback(t *testing.T, f volatileFixture, rows int, run func(...string) (int, string), url string) {
	t.Helper()
	// A second worker, which never saw the epochs, refuses to start.
	if code, out := run(f.workerArgs(url, "--allow-volatile-redis")...); code != ExitUsage || !strings.Contains(out, "the ledger went back in time") {
		t.Errorf("a new worker: exit %d, want %d and the reason\n%s", code, ExitUsage, out)
	}
	if code, out := run("resume", "--redis", url); code != ExitUsage || !strings.Contains(out, "--ledger-reconciled") {
		t.Errorf("resume without --ledger-reconciled: exit %d\n%s", code, out)
	}
	if f.creates() != rows {
		t.Errorf("%d creates at the PSP, want %d", f.creates(), rows)
	}
	if code, out := run("resume", "--redis", url, "--ledger-reconciled", "--note", "checked against the PSP report"); code != ExitOK {
		t.Errorf("resume --ledger-reconciled: exit %d\n%s", code, out)
	}
	if code, out := run("resume", "--redis", url); code != ExitOK {
		t.Errorf("resume after the mark was cleared: exit %d\n%s", code, out)
	}
}
