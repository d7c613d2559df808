package bench

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/acme/payout/internal/access"
	"github.com/acme/payout/internal/api"
	"github.com/acme/payout/internal/proof/testenv"
	"github.com/acme/payout/internal/proof/testenv/proc"
)

// The API figure (issue 41): a batch of APIRows items created through
// `payout api` (POST /api/v1/batches, JSON) against the same rows loaded
// from a CSV file by `payout load`, pair by pair, the order alternating.
// The API's time is the request's (the server is up and idle before it);
// the file's is the process's wall time, start-up included. The ratio is
// file time / API time (API rows/s over file rows/s). Each API
// measurement runs a fresh `payout api` whose idle RSS, read from
// /proc once it answers, is its baseline: the figure is its peak RSS
// (wait4) over that baseline, what one create of APIRows items costs.

// Targets of the API figure (issue 41).
const (
	TargetAPIRatio  = 0.90 // file time / API time: the API within noise of the file
	TargetAPIRSSMiB = 64   // peak RSS over the idle process, MiB
)

// writeItems writes the JSON create body of rows 1..n to path.
func writeItems(path string, n int) error {
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("bench: create %s: %w", path, err)
	}
	w := bufio.NewWriterSize(f, 1<<20)
	fmt.Fprintf(w, `{"name":"bench-api","items":[`)
	for i := 1; i <= n; i++ {
		r := RowAt(i)
		dest := map[string]string{"cardNumber": r.Card}
		if r.Card == "" {
			dest = map[string]string{"telecomOperator": r.Telecom}
		}
		b, _ := json.Marshal(map[string]any{"externalId": r.ExternalID, "amount": r.Amount, "destination": dest})
		if i > 1 {
			w.WriteByte(',')
		}
		w.Write(b)
	}
	w.WriteString("]}")
	if err := w.Flush(); err != nil {
		f.Close()
		return fmt.Errorf("bench: write %s: %w", path, err)
	}
	return f.Close()
}

// apiRun is one create through the API.
type apiRun struct {
	wall      time.Duration
	idleKB    int64
	u         proc.Usage
	redisCPU  float64
	commands  string
	idleCPU   float64 // CPU seconds of the process up to the request
	createCPU float64 // CPU seconds of the process during the request
}

// oursAPI starts `payout api` on an empty Redis, waits until it answers,
// reads its idle RSS, sends the create of body (n items), and stops it.
func (b *runner) oursAPI(ctx context.Context, body string, n int) (r apiRun, err error) {
	if err := b.flush(ctx); err != nil {
		return r, err
	}
	secret, _, err := api.NewTokens(b.rdb).Create(ctx, "bench", access.Maker, "bench")
	if err != nil {
		return r, fmt.Errorf("bench: token: %w", err)
	}
	port, err := testenv.FreePort()
	if err != nil {
		return r, err
	}
	addr := "127.0.0.1:" + strconv.Itoa(port)
	staging := filepath.Join(b.dir, "api-staging")
	if err := os.MkdirAll(staging, 0o700); err != nil {
		return r, err
	}
	p, err := proc.Start(proc.Spec{Name: "payout api", Bin: b.payout, Env: testenv.CleanEnv(),
		Args: []string{"api", "--redis", b.redisURL, "--allow-volatile-redis", "--data-key-file", b.keyFile,
			"--addr", addr, "--staging", staging, "--log-level", "error"},
		Log: filepath.Join(b.dir, "api.log")})
	if err != nil {
		return r, err
	}
	defer func() {
		u, serr := p.Stop(time.Minute)
		r.u = u
		if err == nil && serr != nil {
			err = serr
		}
	}()
	base := "http://" + addr
	client := &http.Client{Timeout: b.cfg.PhaseTimeout}
	err = testenv.Poll(ctx, 10*time.Second, 20*time.Millisecond, func() (bool, error) {
		resp, err := client.Get(base + "/api/v1/openapi.json")
		if err != nil {
			return false, nil
		}
		resp.Body.Close()
		return resp.StatusCode == 200, nil
	})
	if err != nil {
		return r, fmt.Errorf("bench: payout api did not come up: %w\n%s", err, p.Tail(20))
	}
	r.idleKB, r.idleCPU = vmRSSKB(p.Pid()), cpuSeconds(p.Pid())
	f, err := os.Open(body)
	if err != nil {
		return r, err
	}
	defer f.Close()
	req, err := http.NewRequestWithContext(ctx, "POST", base+"/api/v1/batches", f)
	if err != nil {
		return r, err
	}
	req.Header.Set("Authorization", "Bearer "+secret)
	req.Header.Set("Idempotency-Key", "bench-"+strconv.FormatInt(time.Now().UnixNano(), 10))
	req.Header.Set("Content-Type", "application/json")
	r0 := b.redisCPU(ctx)
	b.resetStats(ctx)
	start := time.Now()
	resp, err := client.Do(req)
	if err != nil {
		return r, fmt.Errorf("bench: API create: %w", err)
	}
	got, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	r.wall = time.Since(start)
	r.createCPU = cpuSeconds(p.Pid()) - r.idleCPU
	r.redisCPU = b.redisCPU(ctx) - r0
	r.commands = b.topCommands(ctx, 5)
	if resp.StatusCode != http.StatusCreated || !bytes.Contains(got, []byte(`"rows":`+strconv.Itoa(n)+`,`)) {
		return r, fmt.Errorf("bench: API create answered %d, want 201 and %d rows: %.500s", resp.StatusCode, n, got)
	}
	return r, nil
}

// vmRSSKB is the resident set of pid now, in KB (0 when unknown).
func vmRSSKB(pid int) int64 {
	s, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for _, l := range strings.Split(string(s), "\n") {
		if v, ok := strings.CutPrefix(l, "VmRSS:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			return kb
		}
	}
	return 0
}

// cpuSeconds is the user+system CPU pid has used so far (from
// /proc/PID/stat, in clock ticks of 1/100 s; 0 when unknown).
func cpuSeconds(pid int) float64 {
	s, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	i := bytes.LastIndexByte(s, ')')
	if i < 0 {
		return 0
	}
	f := strings.Fields(string(s[i+1:]))
	if len(f) < 13 {
		return 0
	}
	u, _ := strconv.ParseFloat(f[11], 64) // utime: field 14 of stat
	k, _ := strconv.ParseFloat(f[12], 64) // stime: field 15
	return (u + k) / 100
}

// apiFigures measures the API create against `payout load` of the same
// rows, APIRepeat pairs, and the API process's peak RSS over its idle RSS.
func (b *runner) apiFigures(ctx context.Context) []Figure {
	n := b.cfg.APIRows
	f := Figure{Name: fmt.Sprintf("API create, %s items (JSON)", thousands(int64(n))), Unit: "rows/s",
		BaselineName: "(payout load, same rows as CSV)", Target: Target{Kind: RatioAtLeast, Value: TargetAPIRatio}}
	rss := Figure{Name: fmt.Sprintf("API peak RSS over idle, %s items", thousands(int64(n))), Unit: "MiB",
		Target: Target{Kind: AtMost, Value: TargetAPIRSSMiB}}
	peak := Figure{Name: "API peak RSS (context)", Unit: "MiB", Target: Target{Kind: Informative}}
	fail := func(err error) []Figure {
		f.Error, rss.Error, peak.Error = err.Error(), err.Error(), err.Error()
		return []Figure{f, rss, peak}
	}
	file, err := b.file(n)
	if err != nil {
		return fail(err)
	}
	body := filepath.Join(b.dir, fmt.Sprintf("items-%d.json", n))
	if err := writeItems(body, n); err != nil {
		return fail(err)
	}
	var oursCPU, baseCPU, oursRedis, baseRedis, over, peaks, createCPU []float64
	var oursCmds string
	for i := 0; i < max(b.cfg.APIRepeat, 1); i++ {
		var a apiRun
		var lu proc.Usage
		var aerr, lerr error
		runAPI := func() {
			a, aerr = b.oursAPI(ctx, body, n)
			if aerr == nil {
				b.logf("api: POST %d items in %.2f s = %.0f rows/s (server cpu %.2f s: %.2f s up to the request, %.2f s for it; idle RSS %.1f MiB, peak %.1f MiB, redis cpu %.2f s)",
					n, a.wall.Seconds(), float64(n)/a.wall.Seconds(), a.u.CPU.Seconds(), a.idleCPU, a.createCPU, float64(a.idleKB)/1024, a.u.MaxRSSMB(), a.redisCPU)
			}
		}
		runFile := func() {
			r0 := b.redisCPU(ctx)
			lu, lerr = b.payoutLoad(ctx, file, n)
			if lerr == nil {
				baseRedis = append(baseRedis, 1e6*(b.redisCPU(ctx)-r0)/float64(n))
				b.logf("api: payout load %d rows in %.2f s = %.0f rows/s (cpu %.2f s, peak RSS %.1f MiB)",
					n, lu.Wall.Seconds(), float64(n)/lu.Wall.Seconds(), lu.CPU.Seconds(), lu.MaxRSSMB())
			}
		}
		if i%2 == 0 {
			runAPI()
			runFile()
		} else {
			runFile()
			runAPI()
		}
		if err := errJoin(aerr, lerr); err != nil {
			return fail(err)
		}
		f.OursSamples = append(f.OursSamples, float64(n)/a.wall.Seconds())
		f.BaseSamples = append(f.BaseSamples, float64(n)/lu.Wall.Seconds())
		oursCPU, baseCPU = append(oursCPU, a.u.CPU.Seconds()), append(baseCPU, lu.CPU.Seconds())
		createCPU = append(createCPU, a.createCPU)
		oursRedis = append(oursRedis, 1e6*a.redisCPU/float64(n))
		over = append(over, float64(a.u.MaxRSSKB-a.idleKB)/1024)
		peaks = append(peaks, a.u.MaxRSSMB())
		oursCmds = a.commands
	}
	f.Ours, f.Baseline = median(f.OursSamples), median(f.BaseSamples)
	f.OursCPU, f.BaseCPU = median(oursCPU), median(baseCPU)
	f.OursRedisUS, f.BaseRedisUS = median(oursRedis), median(baseRedis)
	f.Name += fmt.Sprintf(" (median of %d)", len(f.OursSamples))
	rss.Ours, rss.OursSamples = maxOf(over), over
	peak.Ours, peak.OursSamples = maxOf(peaks), peaks
	ratios := make([]string, len(f.OursSamples))
	for i := range f.OursSamples {
		ratios[i] = fmt.Sprintf("%.2f", f.OursSamples[i]/f.BaseSamples[i])
	}
	b.note("api %s items: per-pair ratios (file time / API time) %s; CPU (median): the API process %.2f s for the request (%.2f s in all), payout load %.2f s in all; API Redis time by command: %s",
		thousands(int64(n)), strings.Join(ratios, ", "), median(createCPU), f.OursCPU, f.BaseCPU, oursCmds)
	return []Figure{f, rss, peak}
}

func maxOf(xs []float64) float64 {
	m := 0.0
	for _, x := range xs {
		m = max(m, x)
	}
	return m
}

func errJoin(a, b error) error {
	if a != nil {
		return a
	}
	return b
}
