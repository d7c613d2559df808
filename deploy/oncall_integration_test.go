//go:build integration

package deploy

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/acme/payout/internal/cli"
	"github.com/acme/payout/internal/metrics"
	"github.com/acme/payout/internal/proof/testenv"
	"github.com/acme/payout/internal/proof/testenv/gobuild"
	"github.com/acme/payout/internal/proof/testenv/proc"
	"github.com/acme/payout/internal/proof/testenv/redistest"
)

// queriedMetrics returns every metric name the rules and the dashboard
// query, with where.
func queriedMetrics(t *testing.T) map[string][]string {
	t.Helper()
	out := map[string][]string{}
	for _, r := range readRules(t).alerts() {
		for _, n := range metricNames(r.Expr) {
			out[n] = append(out[n], "rule "+r.Alert)
		}
	}
	for title, es := range readDashboard(t).exprs() {
		for _, e := range es {
			for _, n := range metricNames(e) {
				out[n] = append(out[n], "panel "+title)
			}
		}
	}
	return out
}

var typeLine = regexp.MustCompile(`(?m)^# TYPE (\S+) `)

// exportedNames is every series name the code exports: a worker's registry
// (on a Redis that holds the payouts queue, so that Asynq's collector
// describes its series), the loader's textfile as written, and up
// (Prometheus's own).
func exportedNames(t *testing.T) map[string]bool {
	t.Helper()
	rdb := redistest.Start(t).ClientT(t)
	ctx := context.Background()
	// Asynq lists the queues it knows in this set; a queue exists once a
	// task was enqueued to it.
	if err := rdb.SAdd(ctx, "asynq:queues", "payouts").Err(); err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{"up": true}
	worker, err := cli.WorkerMetricNames(rdb)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range worker {
		names[n] = true
	}
	path := filepath.Join(t.TempDir(), "loader.prom")
	if err := metrics.WriteLoaderRun(path, metrics.LoaderRun{OK: true, Finished: time.Now()}); err != nil {
		t.Fatal(err)
	}
	for _, m := range typeLine.FindAllStringSubmatch(readAbs(t, path), -1) {
		names[m[1]] = true
	}
	for _, want := range []string{"asynq_queue_size", "payout_outcomes_total", "payout_open_oldest_age_seconds", "payout_loader_last_run_rows"} {
		if !names[want] {
			t.Fatalf("the exported names lack %s: the listing itself is broken", want)
		}
	}
	return names
}

func readAbs(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestQueriedMetricsAreExported: every metric an alert rule or a dashboard
// panel queries is one the code exports.
func TestQueriedMetricsAreExported(t *testing.T) {
	names := exportedNames(t)
	queried := queriedMetrics(t)
	if len(queried) < 20 {
		t.Fatalf("only %d metric names found in the rules and the dashboard: the extraction is broken", len(queried))
	}
	for _, n := range sortedKeys(queried) {
		if !names[n] {
			t.Errorf("%s is queried (%s) but exported by nothing", n, strings.Join(queried[n], "; "))
		}
	}
}

// testRules is the shipped rule file with the waits of a test: every
// `for:` 0s, every range [1m]... [1h] 20s, and the thresholds of the
// alerts this test drives (checking older than an hour: 3 s).
func testRules(t *testing.T) string {
	t.Helper()
	s := readFile(t, rulesFile)
	s = regexp.MustCompile(`(?m)^(\s+for: ).*$`).ReplaceAllString(s, "${1}0s")
	s = regexp.MustCompile(`\[\d+[mh]\]`).ReplaceAllString(s, "[20s]")
	for old, repl := range map[string]string{
		`max(payout_open_oldest_age_seconds{state="checking"}) > 3600`: `max(payout_open_oldest_age_seconds{state="checking"}) > 3`,
	} {
		if !strings.Contains(s, old) {
			t.Fatalf("the rules no longer contain %q: update the test", old)
		}
		s = strings.Replace(s, old, repl, 1)
	}
	return s
}

// promAlert is one entry of /api/v1/alerts.
type promAlert struct {
	Labels map[string]string `json:"labels"`
	State  string            `json:"state"`
}

func alerts(ctx context.Context, base string) ([]promAlert, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/api/v1/alerts", nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var body struct {
		Status string `json:"status"`
		Data   struct {
			Alerts []promAlert `json:"alerts"`
		} `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		return nil, err
	}
	if body.Status != "success" {
		return nil, fmt.Errorf("/api/v1/alerts: status %q", body.Status)
	}
	return body.Data.Alerts, nil
}

func firing(as []promAlert) map[string]bool {
	out := map[string]bool{}
	for _, a := range as {
		if a.State == "firing" {
			out[a.Labels["alertname"]] = true
		}
	}
	return out
}

func freeAddr(t *testing.T) string {
	t.Helper()
	return net.JoinHostPort("127.0.0.1", fmt.Sprint(testenv.Port(t)))
}

// TestAlertsFireOnRealPrometheus runs a real prometheus with the shipped
// rules (waits shortened by testRules) against a real worker and the
// loader's textfile, and watches alerts fire and resolve through
// /api/v1/alerts: the loader's failed run, then the PSP down while a
// payout is held in checking, then the PSP back.
func TestAlertsFireOnRealPrometheus(t *testing.T) {
	promBin := testenv.NeedTool(t, "prometheus")
	payout := gobuild.Binary(t, "github.com/acme/payout/cmd/payout")
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	redisURL := redistest.Start(t).URL()

	key, err := exec.CommandContext(ctx, payout, "keygen").Output()
	if err != nil {
		t.Fatalf("payout keygen: %v", err)
	}
	env := testenv.CleanEnv("PAYOUT_DATA_KEY="+strings.TrimSpace(string(key)), "PAYOUT_PSP_TOKEN=tok", "PAYOUT_SANDBOX_TOKEN=tok", "PAYOUT_ALLOW_VOLATILE_REDIS=true")

	// The PSP simulator, started later: first it is down.
	pspAddr := freeAddr(t)
	sandbox := func(args ...string) *proc.Proc {
		return proc.StartT(t, proc.Spec{Name: "sandbox", Bin: payout, Env: env,
			Args: append([]string{"sandbox", "--addr", pspAddr, "--log-level", "warn"}, args...)})
	}

	// The loader's textfile, served as node_exporter's textfile collector
	// serves it.
	textfile := filepath.Join(dir, "payout_loader.prom")
	loaderSrv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		b, err := os.ReadFile(textfile)
		if err != nil {
			http.Error(w, err.Error(), http.StatusNotFound)
			return
		}
		w.Header().Set("Content-Type", "text/plain; version=0.0.4")
		_, _ = w.Write(b)
	}))
	defer loaderSrv.Close()
	load := func(redis string, wantCode int) {
		t.Helper()
		csv := filepath.Join(dir, fmt.Sprintf("payouts-%d.csv", time.Now().UnixNano()))
		rows := "externalId,amount,cardNumber,telecomOperator\n"
		for i := range 20 {
			rows += fmt.Sprintf("PO-%d-%d,10.00,4111 1111 1111 1111,\n", time.Now().UnixNano(), i)
		}
		if err := os.WriteFile(csv, []byte(rows), 0o600); err != nil {
			t.Fatal(err)
		}
		cmd := exec.CommandContext(ctx, payout, "load", csv, "--redis", redis, "--metrics-textfile", textfile, "--log-level", "warn")
		cmd.Env = env
		out, err := cmd.CombinedOutput()
		if code := cmd.ProcessState.ExitCode(); code != wantCode {
			t.Fatalf("payout load exited %d (%v), want %d:\n%s", code, err, wantCode, out)
		}
	}

	workerAddr := freeAddr(t)
	proc.StartT(t, proc.Spec{Name: "worker", Bin: payout, Env: env, Args: []string{"worker",
		"--redis", redisURL, "--psp-url", "http://" + pspAddr, "--metrics-addr", workerAddr,
		"--ledger-metrics-interval", "1s", "--psp-timeout", "1s", "--status-delay", "200ms",
		"--absent-checks", "3", "--absent-spacing", "12s", "--log-level", "warn"}})
	waitListening(ctx, t, workerAddr)

	promAddr := freeAddr(t)
	if err := os.WriteFile(filepath.Join(dir, "rules.yml"), []byte(testRules(t)), 0o600); err != nil {
		t.Fatal(err)
	}
	conf := fmt.Sprintf(`global:
  scrape_interval: 1s
  evaluation_interval: 1s
rule_files: [%q]
scrape_configs:
  - job_name: payout-worker
    static_configs: [{targets: [%q]}]
  - job_name: payout-loader
    static_configs: [{targets: [%q]}]
`, filepath.Join(dir, "rules.yml"), workerAddr, strings.TrimPrefix(loaderSrv.URL, "http://"))
	if err := os.WriteFile(filepath.Join(dir, "prometheus.yml"), []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	proc.StartT(t, proc.Spec{Name: "prometheus", Bin: promBin, Log: filepath.Join(dir, "prometheus.log"), Args: []string{
		"--config.file", filepath.Join(dir, "prometheus.yml"), "--storage.tsdb.path", filepath.Join(dir, "tsdb"),
		"--web.listen-address", promAddr}})
	base := "http://" + promAddr

	// expect polls until the firing alerts include every name in fire and
	// none in quiet.
	start := time.Now()
	expect := func(what string, fire, quiet []string) {
		t.Helper()
		defer func() { t.Logf("%s: after %s", what, time.Since(start).Round(100*time.Millisecond)) }()
		var last map[string]bool
		err := testenv.Poll(ctx, 90*time.Second, 250*time.Millisecond, func() (bool, error) {
			as, err := alerts(ctx, base)
			if err != nil {
				return false, nil // not up yet
			}
			last = firing(as)
			for _, n := range fire {
				if !last[n] {
					return false, nil
				}
			}
			for _, n := range quiet {
				if last[n] {
					return false, nil
				}
			}
			return true, nil
		})
		if err != nil {
			t.Fatalf("%s: want firing %v and not %v; firing: %v (%v)", what, fire, quiet, sortedKeys(last), err)
		}
	}

	// 1. The loader: a run that cannot reach Redis is a failed run; the
	//    next good run (which loads 20 payouts) clears it.
	load("redis://"+testenv.ClosedAddr(t)+"/0", 3)
	expect("loader failed", []string{"PayoutLoaderFailed"}, nil)
	load(redisURL, 0)
	expect("loader ran", nil, []string{"PayoutLoaderFailed", "PayoutLoaderNotRunning"})

	// 2. The PSP simulator is down: every create fails to connect, the
	//    breaker opens.
	expect("PSP down", []string{"PayoutPSPUnreachable", "PayoutPSPBreakerOpen"}, []string{"PayoutWorkersDown", "PayoutStuckInChecking"})

	// 3. It comes up, answers about a third of the creates ambiguously
	//    (the order stored, then a 5xx, 423, hang or drop: too few to trip
	//    the breaker again), and answers status queries 404 for the first
	//    10 s of an order: those payouts are held in checking (absence
	//    needs 3 404s 12 s apart) past the (shortened) hour, until the
	//    order shows and they are created.
	sandbox("--p-ambiguous", "0.3", "--status-lag", "10s", "--hang-for", "2s", "--seed", "7")
	expect("payouts held in checking", []string{"PayoutStuckInChecking"}, nil)

	// 4. Everything resolves: the PSP answers, no payout is left in checking.
	expect("all clear", nil, []string{"PayoutPSPUnreachable", "PayoutPSPBreakerOpen", "PayoutStuckInChecking", "PayoutLoaderFailed", "PayoutWorkersDown"})
}

func waitListening(ctx context.Context, t *testing.T, addr string) {
	t.Helper()
	err := testenv.Poll(ctx, 30*time.Second, 20*time.Millisecond, func() (bool, error) {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err != nil {
			return false, nil
		}
		c.Close()
		return true, nil
	})
	if err != nil {
		t.Fatalf("nothing listens on %s: %v", addr, err)
	}
}
