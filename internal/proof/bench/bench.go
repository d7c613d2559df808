// Package bench measures payout against bare baselines on one private
// redis-server, in one run, and reports each figure beside its baseline as a
// ratio (`make bench`, command internal/proof/cmd/bench).
//
// "Ours" is always the real binary run as a subprocess (`payout load`,
// `payout worker`, `payout run`), built with the flags of `make build`; the
// baselines run as subprocesses of the bench binary itself (built the same
// way), so that every measured process pays its own start-up and is
// accounted alone by the kernel (wall time, user+system CPU, peak RSS from
// wait4). The PSP simulator is a third process (cmd/psp-sandbox), started
// fresh for every worker measurement.
//
//   - Loader: rows/s of `payout load` on a generated file against a process
//     that only enqueues the same create tasks (same payloads, task IDs,
//     options) with the loader's concurrency: no file, no ledger, no
//     encryption. Peak RSS of `payout load` on a larger file.
//   - Workers: create tasks are preloaded (not measured), then the worker
//     starts; the rate is payouts / (time from the worker's start to the
//     moment the ledger shows every payout final). The bare worker is an
//     Asynq server whose handler sends the same JSON body in one POST with
//     net/http and a keep-alive pool of the same size, and nothing else.
//   - End to end: wall time of `payout run --sandbox` with its embedded
//     Redis and in-process simulator.
//
// Redis is flushed between measurements. Nothing here touches a Redis it
// did not start.
package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/acme/payout/internal/ledger"
	"github.com/acme/payout/internal/lifecycle"
	"github.com/acme/payout/internal/loader"
	"github.com/acme/payout/internal/proof/testenv"
	"github.com/acme/payout/internal/proof/testenv/gobuild"
	"github.com/acme/payout/internal/proof/testenv/proc"
	"github.com/acme/payout/internal/sandbox"
	"github.com/acme/payout/internal/view"
	"github.com/acme/payout/internal/worker"
	"github.com/acme/payout/jobs"
	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"
)

// SandboxToken is the bearer token the simulator accepts by default.
const SandboxToken = "sandbox-token"

// Config sizes a bench run.
type Config struct {
	Go         string // go command used to build the binaries
	Root       string // module root (holds go.mod)
	ResultsDir string // where the JSON report goes; "" writes none

	LoaderRows   int // rows of the loader throughput file
	LoaderRepeat int // ours/baseline pairs of the loader figure (median reported)
	RSSRows      int // rows of the loader peak-RSS file

	OverheadPayouts     int // payouts of the PSP-overhead-bound worker figure
	OverheadConcurrency int // worker concurrency there
	OverheadRepeat      int // ours/baseline pairs of that figure (median reported)

	LatencyPayouts     int           // payouts of the PSP-latency-bound worker figure
	LatencyConcurrency int           // worker concurrency there
	Latency            time.Duration // sandbox latency there

	E2ERows int // rows of the `payout run` figure

	APIRows   int // items of the API create figure (apicreate.go)
	APIRepeat int // API/file pairs of that figure (median reported)

	// Only, when not empty, names the measurements to run (see Parts);
	// the others are left out of the report.
	Only []string

	PhaseTimeout time.Duration // bound of one measurement
	Progress     io.Writer     // progress lines; nil: none
}

// DefaultConfig is the configuration of `make bench`.
func DefaultConfig() Config {
	return Config{
		Go: "go", Root: ".",
		LoaderRows: 100_000, LoaderRepeat: 5, RSSRows: 1_000_000,
		OverheadPayouts: 20_000, OverheadConcurrency: 50, OverheadRepeat: 5,
		LatencyPayouts: 20_000, LatencyConcurrency: 200, Latency: 100 * time.Millisecond,
		E2ERows: 10_000, APIRows: 15_000, APIRepeat: 5,
		PhaseTimeout: 4 * time.Minute,
	}
}

// Targets of the issues: the ratios those of #29 (the loader at 0.85 of
// the bare enqueue, the worker at 0.70 of the bare handler, the
// latency-bound worker at 0.95), the memory bounds of the first round.
const (
	TargetLoaderRatio   = 0.85
	TargetLoaderRSSMB   = 64
	TargetOverheadRatio = 0.70
	TargetLatencyRatio  = 0.95
	TargetWorkerRSSMB   = 128
)

type runner struct {
	cfg      Config
	dir      string
	payout   string // binaries
	sandbox  string
	self     string
	keyFile  string
	redisURL string
	rdb      redis.UniversalClient
	files    map[int]string
	start    time.Time
	notes    []string
}

// Run builds the binaries, starts a private redis-server and measures every
// figure. A figure that could not be measured carries its Error; Run fails
// only when the bench itself cannot run (no Go, no redis-server).
func Run(ctx context.Context, cfg Config) (*Report, error) {
	b := &runner{cfg: cfg, files: map[int]string{}, start: time.Now()}
	loadStart := LoadAvg()
	if b.cfg.Progress == nil {
		b.cfg.Progress = io.Discard
	}
	dir, err := os.MkdirTemp("", "payout-bench-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	b.dir = dir

	if err := b.build(ctx); err != nil {
		return nil, err
	}
	if err := b.keygen(); err != nil {
		return nil, err
	}
	srv, err := startRedis(ctx, dir)
	if err != nil {
		return nil, err
	}
	defer srv.Stop(redisGrace)
	b.redisURL = srv.URL()
	b.rdb = adminClient(srv.Addr)
	defer b.rdb.Close()

	rep := &Report{Started: b.start, Settings: b.settings()}
	if rep.Machine, err = b.machine(ctx); err != nil {
		return nil, err
	}
	b.logf("machine: nproc %d, %s, %s, Redis %s", rep.Machine.CPUs, rep.Machine.CPUModel, rep.Machine.GoVersion, rep.Machine.RedisVersion)

	if b.wants(PartLoader) {
		rep.Figures = append(rep.Figures, b.loaderFigures(ctx)...)
	}
	if b.wants(PartLoaderRSS) {
		rep.Figures = append(rep.Figures, b.loaderRSSFigures(ctx)...)
	}
	if b.wants(PartOverhead) {
		rep.Figures = append(rep.Figures, b.overheadFigures(ctx)...)
	}
	if b.wants(PartLatency) {
		rep.Figures = append(rep.Figures, b.latencyFigures(ctx)...)
	}
	if b.wants(PartE2E) {
		rep.Figures = append(rep.Figures, b.e2eFigure(ctx))
	}
	if b.wants(PartAPI) {
		rep.Figures = append(rep.Figures, b.apiFigures(ctx)...)
	}
	for i := range rep.Figures {
		rep.Figures[i].Evaluate()
	}
	rep.Notes = append(rep.Notes, b.notes...)
	rep.Machine.LoadAvgStart, rep.Machine.LoadAvgEnd = loadStart, LoadAvg()
	rep.ElapsedS = time.Since(b.start).Seconds()
	rep.Summarize()
	return rep, nil
}

// The measurements of a run, for Config.Only.
const (
	PartLoader    = "loader"     // loader rows/s against the bare enqueue
	PartLoaderRSS = "loader-rss" // loader peak RSS on the large file
	PartOverhead  = "overhead"   // worker against the bare handler, PSP latency 0
	PartLatency   = "latency"    // worker against c/latency, and its RSS
	PartE2E       = "e2e"        // payout run --sandbox
	PartAPI       = "api"        // API create (JSON) against payout load of the same rows, and the API's RSS
	PartMemory    = "memory"     // Redis bytes per payout and the 90-day simulation (Memory)
)

// Parts lists the measurements in the order a run makes them.
var Parts = []string{PartLoader, PartLoaderRSS, PartOverhead, PartLatency, PartE2E, PartAPI, PartMemory}

func (b *runner) wants(part string) bool {
	return len(b.cfg.Only) == 0 || slices.Contains(b.cfg.Only, part)
}

func (b *runner) logf(format string, args ...any) {
	fmt.Fprintf(b.cfg.Progress, "[%4.0fs] %s\n", time.Since(b.start).Seconds(), fmt.Sprintf(format, args...))
}

func (b *runner) note(format string, args ...any) {
	n := fmt.Sprintf(format, args...)
	b.notes = append(b.notes, n)
	b.logf("%s", n)
}

func (b *runner) settings() map[string]string {
	c := b.cfg
	s := map[string]string{
		"loaderRows": strconv.Itoa(c.LoaderRows), "loaderRepeat": strconv.Itoa(c.LoaderRepeat),
		"loaderConcurrency": strconv.Itoa(LoaderEnqueueWorkers), "rssRows": strconv.Itoa(c.RSSRows),
		"overheadPayouts": strconv.Itoa(c.OverheadPayouts), "overheadConcurrency": strconv.Itoa(c.OverheadConcurrency),
		"overheadRepeat": strconv.Itoa(c.OverheadRepeat),
		"latencyPayouts": strconv.Itoa(c.LatencyPayouts), "latencyConcurrency": strconv.Itoa(c.LatencyConcurrency),
		"latency": c.Latency.String(), "e2eRows": strconv.Itoa(c.E2ERows),
		"apiRows": strconv.Itoa(c.APIRows), "apiRepeat": strconv.Itoa(c.APIRepeat),
		"sandbox":   "separate process (cmd/psp-sandbox), fresh per measurement, log level error",
		"processes": "ours and baselines are separate processes built with CGO_ENABLED=0 -trimpath",
	}
	if len(c.Only) > 0 {
		s["only"] = strings.Join(c.Only, ",")
	}
	return s
}

// build compiles payout, psp-sandbox and the bench itself like `make build`.
func (b *runner) build(ctx context.Context) error {
	b.payout = filepath.Join(b.dir, "payout")
	b.sandbox = filepath.Join(b.dir, "psp-sandbox")
	b.self = filepath.Join(b.dir, "bench")
	b.logf("go build ./cmd/payout ./cmd/psp-sandbox ./internal/proof/cmd/bench")
	_, err := gobuild.Build(ctx, gobuild.Options{ModuleDir: b.cfg.Root, Go: b.cfg.Go, Flags: []string{"-trimpath"}, Env: []string{"CGO_ENABLED=0"}},
		b.dir, []gobuild.Target{{Name: "payout", Pkg: "./cmd/payout"}, {Name: "psp-sandbox", Pkg: "./cmd/psp-sandbox"}, {Name: "bench", Pkg: "./internal/proof/cmd/bench"}})
	if err != nil {
		return fmt.Errorf("bench: %w", err)
	}
	return nil
}

// keygen makes the data key with `payout keygen`.
func (b *runner) keygen() error {
	u, p, err := proc.Run(context.Background(), proc.Spec{Name: "payout keygen", Bin: b.payout, Args: []string{"keygen"}, Env: testenv.CleanEnv()})
	if err != nil {
		return err
	}
	out, _ := p.Output()
	if u.ExitCode != 0 || strings.TrimSpace(out) == "" {
		return p.Failure(u, "no key")
	}
	b.keyFile = filepath.Join(b.dir, "data.key")
	return os.WriteFile(b.keyFile, []byte(strings.TrimSpace(out)+"\n"), 0o600)
}

func (b *runner) machine(ctx context.Context) (Machine, error) {
	m := Machine{CPUs: runtime.NumCPU(), CPUModel: "unknown CPU", OS: runtime.GOOS + "/" + runtime.GOARCH}
	if info, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		m.CPUModel = CPUModel(string(info))
	}
	out, err := exec.CommandContext(ctx, b.cfg.Go, "env", "GOVERSION").Output()
	if err != nil {
		return m, fmt.Errorf("bench: go env GOVERSION: %w", err)
	}
	m.GoVersion = strings.TrimSpace(string(out))
	m.RedisVersion, err = RedisVersion(ctx, b.rdb)
	return m, err
}

// file returns a generated payout file of n rows (made once).
func (b *runner) file(n int) (string, error) {
	if p, ok := b.files[n]; ok {
		return p, nil
	}
	p := filepath.Join(b.dir, fmt.Sprintf("payouts-%d.csv", n))
	if err := WriteFile(p, n); err != nil {
		return "", err
	}
	b.files[n] = p
	return p, nil
}

func batchOf(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	return loader.BatchID(f)
}

// adminClient is the bench's own connection: a FLUSHALL of a million
// payouts takes longer than go-redis's default read timeout.
func adminClient(addr string) redis.UniversalClient {
	return redis.NewClient(&redis.Options{Addr: addr, ReadTimeout: 2 * time.Minute, WriteTimeout: time.Minute})
}

func (b *runner) flush(ctx context.Context) error {
	if err := b.rdb.FlushAll(ctx).Err(); err != nil {
		return fmt.Errorf("bench: FLUSHALL: %w", err)
	}
	return nil
}

// redisCPU returns the CPU seconds Redis has used so far.
func (b *runner) redisCPU(ctx context.Context) float64 {
	info, err := b.rdb.Info(ctx, "cpu").Result()
	if err != nil {
		return 0
	}
	u, _ := strconv.ParseFloat(infoField(info, "used_cpu_user"), 64)
	s, _ := strconv.ParseFloat(infoField(info, "used_cpu_sys"), 64)
	return u + s
}

// resetStats zeroes Redis's command statistics.
func (b *runner) resetStats(ctx context.Context) {
	_ = b.rdb.ConfigResetStat(ctx).Err()
}

// topCommands returns the k commands Redis spent most time on since the
// last resetStats.
func (b *runner) topCommands(ctx context.Context, k int) string {
	info, err := b.rdb.Info(ctx, "commandstats").Result()
	if err != nil {
		return "unavailable: " + err.Error()
	}
	return FormatStats(CommandStats(info), k)
}

// ---- loader ----

// payoutLoad runs `payout load` on an empty Redis.
func (b *runner) payoutLoad(ctx context.Context, file string, n int) (proc.Usage, error) {
	if err := b.flush(ctx); err != nil {
		return proc.Usage{}, err
	}
	u, p, err := proc.Run(ctx, proc.Spec{Name: "payout load", Bin: b.payout, Env: testenv.CleanEnv(),
		Args: []string{"load", "--redis", b.redisURL, "--allow-volatile-redis", "--data-key-file", b.keyFile, file}})
	if err != nil {
		return u, err
	}
	out, _ := p.Output()
	if u.ExitCode != 0 || !strings.Contains(out, fmt.Sprintf("loaded %d rows", n)) {
		return u, p.Failure(u, fmt.Sprintf("did not load %d rows", n))
	}
	return u, nil
}

// bareEnqueue runs the bare enqueue baseline on an empty Redis; pipelined
// gives it the loader's autopipelining.
func (b *runner) bareEnqueue(ctx context.Context, batch string, n int, pipelined bool) (proc.Usage, error) {
	if err := b.flush(ctx); err != nil {
		return proc.Usage{}, err
	}
	u, p, err := proc.Run(ctx, proc.Spec{Name: "bare enqueue", Bin: b.self, Env: testenv.CleanEnv(),
		Args: []string{"bare-enqueue", "--redis", b.redisURL, "--batch", batch, "--rows", strconv.Itoa(n),
			"--concurrency", strconv.Itoa(LoaderEnqueueWorkers), "--pipeline=" + strconv.FormatBool(pipelined)}})
	if err != nil {
		return u, err
	}
	if u.ExitCode != 0 {
		return u, p.Failure(u, "failed")
	}
	info, err := asynq.NewInspectorFromRedisClient(b.rdb).GetQueueInfo(jobs.Queue)
	if err != nil {
		return u, fmt.Errorf("bench: inspect queue after bare enqueue: %w", err)
	}
	if info.Pending != n {
		return u, fmt.Errorf("bench: bare enqueue left %d pending tasks, want %d", info.Pending, n)
	}
	return u, nil
}

// loaderFigures measures `payout load` against the bare enqueue (the
// target), and, for context, against a bare enqueue that gets the same
// autopipelining as the loader: how much of the loader's own work the
// pipelining hides.
func (b *runner) loaderFigures(ctx context.Context) []Figure {
	n := b.cfg.LoaderRows
	f := Figure{Name: fmt.Sprintf("loader, %s-row file", thousands(int64(n))), Unit: "rows/s",
		BaselineName: "(bare enqueue)", Target: Target{Kind: RatioAtLeast, Value: TargetLoaderRatio}}
	fp := Figure{Name: fmt.Sprintf("loader, %s-row file, vs pipelined bare enqueue (context)", thousands(int64(n))), Unit: "rows/s",
		BaselineName: "(bare enqueue, autopipelined)", Target: Target{Kind: Informative}}
	fail := func(err error) []Figure {
		f.Error, fp.Error = err.Error(), err.Error()
		return []Figure{f, fp}
	}
	file, err := b.file(n)
	if err != nil {
		return fail(err)
	}
	batch, err := batchOf(file)
	if err != nil {
		return fail(err)
	}
	var oursCPU, baseCPU, pipeCPU []float64
	var oursRedis, baseRedis, pipeRedis []float64
	var oursCmds, baseCmds, pipeCmds string
	// sample runs one measurement and records its rate, process CPU, Redis
	// CPU and busiest Redis commands.
	sample := func(label, unit string, run func() (proc.Usage, error), rates, cpu, redisCPU *[]float64, cmds *string) func() error {
		return func() error {
			r0 := b.redisCPU(ctx)
			b.resetStats(ctx)
			u, err := run()
			if err != nil {
				return err
			}
			*cmds = b.topCommands(ctx, 5)
			rate := float64(n) / u.Wall.Seconds()
			*rates = append(*rates, rate)
			*cpu = append(*cpu, u.CPU.Seconds())
			*redisCPU = append(*redisCPU, b.redisCPU(ctx)-r0)
			b.logf("loader: %s %d %s in %.2f s = %.0f %s/s (cpu %.2f s, peak RSS %.1f MiB)", label, n, unit, u.Wall.Seconds(), rate, unit, u.CPU.Seconds(), u.MaxRSSMB())
			return nil
		}
	}
	ours := sample("payout load", "rows", func() (proc.Usage, error) { return b.payoutLoad(ctx, file, n) },
		&f.OursSamples, &oursCPU, &oursRedis, &oursCmds)
	bare := sample("bare enqueue", "tasks", func() (proc.Usage, error) { return b.bareEnqueue(ctx, batch, n, false) },
		&f.BaseSamples, &baseCPU, &baseRedis, &baseCmds)
	pipe := sample("bare enqueue (autopipelined)", "tasks", func() (proc.Usage, error) { return b.bareEnqueue(ctx, batch, n, true) },
		&fp.BaseSamples, &pipeCPU, &pipeRedis, &pipeCmds)
	for i := 0; i < max(b.cfg.LoaderRepeat, 1); i++ {
		round := []func() error{ours, bare, pipe}
		if i%2 == 1 {
			round = []func() error{pipe, bare, ours} // alternate the order
		}
		for _, run := range round {
			if err := run(); err != nil {
				return fail(err)
			}
		}
	}
	f.Ours, f.Baseline = median(f.OursSamples), median(f.BaseSamples)
	f.Name += fmt.Sprintf(" (median of %d)", len(f.OursSamples))
	f.OursCPU, f.BaseCPU = median(oursCPU), median(baseCPU)
	fp.Ours, fp.OursCPU, fp.OursSamples = f.Ours, f.OursCPU, f.OursSamples
	fp.Baseline, fp.BaseCPU = median(fp.BaseSamples), median(pipeCPU)
	b.note("loader %s rows (%d concurrent enqueues): process CPU ours %.2f s, bare %.2f s, bare autopipelined %.2f s (%.1f, %.1f, %.1f us/row); Redis CPU %.2f s, %.2f s, %.2f s",
		thousands(int64(n)), LoaderEnqueueWorkers, f.OursCPU, f.BaseCPU, fp.BaseCPU,
		1e6*f.OursCPU/float64(n), 1e6*f.BaseCPU/float64(n), 1e6*fp.BaseCPU/float64(n),
		median(oursRedis), median(baseRedis), median(pipeRedis))
	b.note("loader %s rows: Redis time by command (last run), payout load: %s; bare: %s; bare autopipelined: %s",
		thousands(int64(n)), oursCmds, baseCmds, pipeCmds)
	if f.Baseline > 0 {
		b.note("%s", redisFloorNote(n, median(oursRedis), float64(n)/f.Baseline, TargetLoaderRatio))
	}
	return []Figure{f, fp}
}

// redisFloorNote compares the Redis CPU a load of rows rows took
// (oursRedis, seconds) with the time the loader target leaves it: the
// bare enqueue's wall time baseWall divided by the target ratio. Redis
// runs every command of a load on its one main thread, so no overlap of
// the load's stages can finish it in less wall time than its Redis CPU:
// when that exceeds the time the target leaves, the target is out of
// reach of the load's present Redis work, however its stages are
// arranged.
func redisFloorNote(rows int, oursRedis, baseWall, ratio float64) string {
	budget := baseWall / ratio
	verdict := "within reach of"
	if oursRedis > budget {
		verdict = "out of reach of"
	}
	return fmt.Sprintf("loader %s rows: Redis floor: payout load keeps Redis busy %.2f s (%.1f us/row; one thread: no arrangement of its stages finishes sooner); the target leaves it %.2f s (bare enqueue %.2f s / %.2f): %s its present Redis work",
		thousands(int64(rows)), oursRedis, 1e6*oursRedis/float64(rows), budget, baseWall, ratio, verdict)
}

func (b *runner) loaderRSSFigures(ctx context.Context) []Figure {
	n := b.cfg.RSSRows
	rss := Figure{Name: fmt.Sprintf("loader peak RSS, %s-row file", thousands(int64(n))), Unit: "MiB",
		Target: Target{Kind: AtMost, Value: TargetLoaderRSSMB}}
	rate := Figure{Name: fmt.Sprintf("loader, %s-row file (context)", thousands(int64(n))), Unit: "rows/s", Target: Target{Kind: Informative}}
	file, err := b.file(n)
	if err == nil {
		var u proc.Usage
		u, err = b.payoutLoad(ctx, file, n)
		rss.Ours, rss.OursCPU = u.MaxRSSMB(), u.CPU.Seconds()
		if err == nil {
			rate.Ours, rate.OursCPU = float64(n)/u.Wall.Seconds(), u.CPU.Seconds()
			b.logf("loader: payout load %d rows in %.1f s = %.0f rows/s, peak RSS %.1f MiB", n, u.Wall.Seconds(), rate.Ours, rss.Ours)
		}
	}
	if err != nil {
		rss.Error, rate.Error = err.Error(), err.Error()
	}
	_ = os.Remove(file) // 1M rows: ~50 MB of temp space
	delete(b.files, n)
	return []Figure{rss, rate}
}

// ---- workers ----

type workerRun struct {
	rate       float64
	u          proc.Usage
	sandboxCPU float64
	redisCPU   float64
	commands   string // Redis time by command while the worker ran
}

// startSandbox starts a fresh simulator with the given latency.
func (b *runner) startSandbox(ctx context.Context, latency time.Duration) (*proc.Proc, string, error) {
	var lastErr error
	for try := 0; try < 5; try++ {
		port, err := testenv.FreePort()
		if err != nil {
			return nil, "", err
		}
		addr := "127.0.0.1:" + strconv.Itoa(port)
		p, err := proc.Start(proc.Spec{Name: "psp-sandbox", Bin: b.sandbox, Env: testenv.CleanEnv(),
			Args: []string{"--addr", addr, "--latency", latency.String(), "--log-level", "error", "--seed", "1"}})
		if err != nil {
			return nil, "", err
		}
		adm := sandbox.Admin{URL: "http://" + addr}
		lastErr = testenv.Poll(ctx, 5*time.Second, 20*time.Millisecond, func() (bool, error) { return adm.Health(ctx) == nil, nil })
		if lastErr == nil {
			return p, "http://" + addr, nil
		}
		_, _ = p.Stop(2 * time.Second)
	}
	return nil, "", fmt.Errorf("bench: psp-sandbox did not come up: %w", lastErr)
}

func stopSandbox(p *proc.Proc) float64 {
	u, _ := p.Stop(5 * time.Second)
	return u.CPU.Seconds()
}

// oursWorker preloads n payouts with `payout load`, then measures `payout
// worker` until the ledger shows all of them final.
func (b *runner) oursWorker(ctx context.Context, n, conc int, latency time.Duration) (r workerRun, _ error) {
	file, err := b.file(n)
	if err != nil {
		return r, err
	}
	batch, err := batchOf(file)
	if err != nil {
		return r, err
	}
	sbx, url, err := b.startSandbox(ctx, latency)
	if err != nil {
		return r, err
	}
	defer func() { r.sandboxCPU = stopSandbox(sbx) }()
	if _, err := b.payoutLoad(ctx, file, n); err != nil {
		return r, err
	}
	led := ledger.New(b.rdb)
	r0 := b.redisCPU(ctx)
	b.resetStats(ctx)
	w, err := proc.Start(proc.Spec{Name: "payout worker", Bin: b.payout, Env: testenv.CleanEnv("PAYOUT_PSP_TOKEN=" + SandboxToken),
		Args: []string{"worker", "--redis", b.redisURL, "--allow-volatile-redis", "--psp-url", url, "--concurrency", strconv.Itoa(conc),
			"--metrics-addr", "", "--data-key-file", b.keyFile, "--track-outcome=false"},
		Log: filepath.Join(b.dir, "worker.log")})
	if err != nil {
		return r, err
	}
	elapsed, counts, waitErr := b.waitFinal(ctx, w, led, batch, n)
	if err := b.stopMeasured(ctx, w, r0, waitErr, &r); err != nil {
		return r, err
	}
	if got := counts.Rows[lifecycle.Created]; got != int64(n) {
		return r, fmt.Errorf("bench: %d of %d payouts created (rejected %d, needs_review %d)", got, n,
			counts.Rows[lifecycle.Rejected], counts.Rows[lifecycle.NeedsReview])
	}
	r.rate = float64(n) / elapsed.Seconds()
	return r, nil
}

// waitFinal polls the ledger counters every 10 ms until n payouts are final.
func (b *runner) waitFinal(ctx context.Context, w *proc.Proc, led *ledger.Ledger, batch string, n int) (time.Duration, ledger.Counts, error) {
	ctx, cancel := context.WithTimeout(ctx, b.cfg.PhaseTimeout)
	defer cancel()
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		c, err := view.New(led.Redis()).Counts(ctx, batch)
		if err != nil {
			return 0, c, err
		}
		if c.Total() >= int64(n) && c.Open() == 0 {
			return time.Since(w.Started()), c, nil
		}
		select {
		case <-ctx.Done():
			return 0, c, fmt.Errorf("bench: %d of %d payouts still open after %s", c.Open(), n, b.cfg.PhaseTimeout)
		case <-w.Done():
			u, _ := w.Wait()
			return 0, c, w.Failure(u, "worker exited early")
		case <-tick.C:
		}
	}
}

// bareWorker preloads n bare tasks, then measures the bare worker (one
// Asynq server) until it has had n answers 200.
func (b *runner) bareWorker(ctx context.Context, n, conc int, latency time.Duration) (workerRun, error) {
	return b.bareWorkerLanes(ctx, n, conc, latency, 1)
}

// bareWorkerLanes is bareWorker with the bare worker's concurrency shared
// by lanes Asynq servers, as payout worker shares its own.
func (b *runner) bareWorkerLanes(ctx context.Context, n, conc int, latency time.Duration, lanes int) (r workerRun, _ error) {
	if err := b.flush(ctx); err != nil {
		return r, err
	}
	sbx, url, err := b.startSandbox(ctx, latency)
	if err != nil {
		return r, err
	}
	defer func() { r.sandboxCPU = stopSandbox(sbx) }()
	if err := PreloadBareTasks(ctx, b.rdb, n, LoaderEnqueueWorkers); err != nil {
		return r, err
	}
	lines := make(chan string, 64)
	r0 := b.redisCPU(ctx)
	b.resetStats(ctx)
	w, err := proc.Start(proc.Spec{Name: "bare worker", Bin: b.self, Env: testenv.CleanEnv("PAYOUT_PSP_TOKEN=" + SandboxToken), Lines: lines,
		Args: []string{"bare-worker", "--redis", b.redisURL, "--psp-url", url, "--concurrency", strconv.Itoa(conc),
			"--lanes", strconv.Itoa(lanes), "--expect", strconv.Itoa(n)},
		Log: filepath.Join(b.dir, "bare-worker.log")})
	if err != nil {
		return r, err
	}
	wctx, cancel := context.WithTimeout(ctx, b.cfg.PhaseTimeout)
	defer cancel()
	var elapsed time.Duration
	var waitErr error
wait:
	for {
		select {
		case l := <-lines:
			if l == BareDoneLine {
				elapsed = time.Since(w.Started())
				break wait
			}
		case <-w.Done():
			u, _ := w.Wait()
			waitErr = w.Failure(u, "bare worker exited early")
			break wait
		case <-wctx.Done():
			waitErr = fmt.Errorf("bench: bare worker not done after %s", b.cfg.PhaseTimeout)
			break wait
		}
	}
	if err := b.stopMeasured(ctx, w, r0, waitErr, &r); err != nil {
		return r, err
	}
	r.rate = float64(n) / elapsed.Seconds()
	return r, nil
}

// stopMeasured ends a worker measurement: it records Redis's CPU since r0
// and its busiest commands, stops the worker and records its usage. The
// error is waitErr, else the worker's own.
func (b *runner) stopMeasured(ctx context.Context, w *proc.Proc, r0 float64, waitErr error, r *workerRun) error {
	r.redisCPU = b.redisCPU(ctx) - r0
	r.commands = b.topCommands(ctx, 5)
	u, err := w.Stop(time.Minute)
	r.u = u
	if waitErr != nil {
		return waitErr
	}
	return err
}

// BareDoneLine is what the bare worker prints once it had all its answers.
const BareDoneLine = "done"

// workerPair measures payout worker and the bare worker on the same load,
// ours first unless bareFirst.
func (b *runner) workerPair(ctx context.Context, label string, n, conc int, latency time.Duration, bareFirst bool) (ours, bare workerRun, oursErr, bareErr error) {
	measure := func(name string, run func(context.Context, int, int, time.Duration) (workerRun, error), r *workerRun, err *error) func() {
		return func() {
			*r, *err = run(ctx, n, conc, latency)
			if *err != nil {
				b.logf("%s: %s failed: %v", label, name, *err)
				return
			}
			b.logf("%s: %s %d payouts in %.2f s = %.0f/s (cpu %.2f s, peak RSS %.1f MiB; sandbox cpu %.2f s, redis cpu %.2f s)",
				label, name, n, float64(n)/r.rate, r.rate, r.u.CPU.Seconds(), r.u.MaxRSSMB(), r.sandboxCPU, r.redisCPU)
		}
	}
	runOurs := measure("payout worker", b.oursWorker, &ours, &oursErr)
	runBare := measure("bare worker", b.bareWorker, &bare, &bareErr)
	if bareFirst {
		runBare()
		runOurs()
	} else {
		runOurs()
		runBare()
	}
	if oursErr == nil && bareErr == nil {
		b.note("%s: CPU per payout: payout worker %.0f us, bare %.0f us; sandbox %.0f / %.0f us; Redis %.0f / %.0f us (ours / bare)",
			label, 1e6*ours.u.CPU.Seconds()/float64(n), 1e6*bare.u.CPU.Seconds()/float64(n),
			1e6*ours.sandboxCPU/float64(n), 1e6*bare.sandboxCPU/float64(n),
			1e6*ours.redisCPU/float64(n), 1e6*bare.redisCPU/float64(n))
		b.note("%s: Redis time by command, payout worker: %s; bare: %s", label, ours.commands, bare.commands)
	}
	return ours, bare, oursErr, bareErr
}

// overheadFigures runs OverheadRepeat pairs, alternating which of the two
// goes first, and reports the medians: with three processes on two cores
// one run of either moves by 10% or more. Each pair is followed by a
// bare worker with as many lanes as payout worker runs by default (a
// context figure: the bare handler given the same dequeue loops).
func (b *runner) overheadFigures(ctx context.Context) []Figure {
	n, c := b.cfg.OverheadPayouts, b.cfg.OverheadConcurrency
	lanes := worker.DefaultConfig().Lanes
	f := Figure{Name: fmt.Sprintf("worker, PSP latency 0, c=%d, %s payouts", c, thousands(int64(n))), Unit: "payouts/s",
		BaselineName: "(bare handler)", Target: Target{Kind: RatioAtLeast, Value: TargetOverheadRatio}}
	fl := Figure{Name: fmt.Sprintf("worker, same, vs a bare handler of %d lanes (context)", lanes), Unit: "payouts/s",
		BaselineName: fmt.Sprintf("(bare handler, %d lanes)", lanes), Target: Target{Kind: Informative}}
	var oursCPU, baseCPU, lanesCPU, oursRedis, baseRedis, lanesRedis []float64
	for i := 0; i < max(b.cfg.OverheadRepeat, 1); i++ {
		ours, bare, oursErr, bareErr := b.workerPair(ctx, "worker PSP 0 ms", n, c, 0, i%2 == 1)
		if err := errors.Join(oursErr, bareErr); err != nil {
			f.Error, fl.Error = err.Error(), err.Error()
			return []Figure{f, fl}
		}
		wide, err := b.bareWorkerLanes(ctx, n, c, 0, lanes)
		if err != nil {
			fl.Error = err.Error()
		} else {
			b.logf("worker PSP 0 ms: bare worker, %d lanes, %d payouts in %.2f s = %.0f/s (cpu %.2f s; sandbox cpu %.2f s, redis cpu %.2f s)",
				lanes, n, float64(n)/wide.rate, wide.rate, wide.u.CPU.Seconds(), wide.sandboxCPU, wide.redisCPU)
			fl.BaseSamples, lanesCPU = append(fl.BaseSamples, wide.rate), append(lanesCPU, wide.u.CPU.Seconds())
			lanesRedis = append(lanesRedis, 1e6*wide.redisCPU/float64(n))
		}
		f.OursSamples, f.BaseSamples = append(f.OursSamples, ours.rate), append(f.BaseSamples, bare.rate)
		oursCPU, baseCPU = append(oursCPU, ours.u.CPU.Seconds()), append(baseCPU, bare.u.CPU.Seconds())
		oursRedis, baseRedis = append(oursRedis, 1e6*ours.redisCPU/float64(n)), append(baseRedis, 1e6*bare.redisCPU/float64(n))
	}
	f.Ours, f.Baseline = median(f.OursSamples), median(f.BaseSamples)
	f.OursCPU, f.BaseCPU = median(oursCPU), median(baseCPU)
	f.OursRedisUS, f.BaseRedisUS = median(oursRedis), median(baseRedis)
	f.Name += fmt.Sprintf(" (median of %d)", len(f.OursSamples))
	if fl.Error == "" {
		fl.Ours, fl.OursCPU, fl.OursSamples, fl.OursRedisUS = f.Ours, f.OursCPU, f.OursSamples, f.OursRedisUS
		fl.Baseline, fl.BaseCPU, fl.BaseRedisUS = median(fl.BaseSamples), median(lanesCPU), median(lanesRedis)
	}
	return []Figure{f, fl}
}

func (b *runner) latencyFigures(ctx context.Context) []Figure {
	n, c, lat := b.cfg.LatencyPayouts, b.cfg.LatencyConcurrency, b.cfg.Latency
	limit := float64(c) / lat.Seconds()
	label := fmt.Sprintf("PSP latency %s, c=%d, %s payouts", lat, c, thousands(int64(n)))
	ours := Figure{Name: "worker, " + label, Unit: "payouts/s", Baseline: limit, BaselineName: "(c/latency)",
		Target: Target{Kind: RatioAtLeast, Value: TargetLatencyRatio}}
	bare := Figure{Name: "bare handler, " + label + " (context)", Unit: "payouts/s", Baseline: limit, BaselineName: "(c/latency)",
		Target: Target{Kind: Informative}}
	rss := Figure{Name: fmt.Sprintf("worker peak RSS, c=%d", c), Unit: "MiB", Target: Target{Kind: AtMost, Value: TargetWorkerRSSMB}}
	bareRSS := Figure{Name: fmt.Sprintf("bare handler peak RSS, c=%d (context)", c), Unit: "MiB", Target: Target{Kind: Informative}}
	o, bw, oursErr, bareErr := b.workerPair(ctx, "worker PSP "+lat.String(), n, c, lat, false)
	ours.Ours, ours.OursCPU = o.rate, o.u.CPU.Seconds()
	rss.Ours = o.u.MaxRSSMB()
	bare.Ours, bare.OursCPU = bw.rate, bw.u.CPU.Seconds()
	if oursErr == nil && bareErr == nil {
		ours.OursRedisUS, bare.OursRedisUS = 1e6*o.redisCPU/float64(n), 1e6*bw.redisCPU/float64(n)
	}
	bareRSS.Ours = bw.u.MaxRSSMB()
	if oursErr != nil {
		ours.Error, rss.Error = oursErr.Error(), oursErr.Error()
	}
	if bareErr != nil {
		bare.Error, bareRSS.Error = bareErr.Error(), bareErr.Error()
	}
	return []Figure{ours, bare, rss, bareRSS}
}

// ---- end to end ----

func (b *runner) e2eFigure(ctx context.Context) Figure {
	n := b.cfg.E2ERows
	f := Figure{Name: fmt.Sprintf("payout run --sandbox, %s rows, embedded Redis (wall)", thousands(int64(n))), Unit: "s",
		Target: Target{Kind: Reported}}
	file, err := b.file(n)
	if err != nil {
		f.Error = err.Error()
		return f
	}
	ctx, cancel := context.WithTimeout(ctx, b.cfg.PhaseTimeout)
	defer cancel()
	p, err := proc.Start(proc.Spec{Name: "payout run", Bin: b.payout, Env: testenv.CleanEnv(),
		Args: []string{"run", "--sandbox", "--out", filepath.Join(b.dir, "e2e.result.csv"), "--show-rows", "0", file},
		Log:  filepath.Join(b.dir, "run.log")})
	if err != nil {
		f.Error = err.Error()
		return f
	}
	select {
	case <-p.Done():
	case <-ctx.Done():
		_ = p.Signal(syscall.SIGTERM)
	}
	u, err := p.Wait()
	f.Ours, f.OursCPU = u.Wall.Seconds(), u.CPU.Seconds()
	switch {
	case err != nil:
		f.Error = err.Error()
	case ctx.Err() != nil:
		f.Error = fmt.Sprintf("not done after %s", b.cfg.PhaseTimeout)
	case u.ExitCode != 0:
		f.Error = p.Failure(u, "did not finish cleanly").Error()
	}
	b.note("payout run %s rows: wall %.1f s = %.0f payouts/s, CPU %.1f s, peak RSS %.1f MiB (default concurrency 10, miniredis)",
		thousands(int64(n)), u.Wall.Seconds(), float64(n)/u.Wall.Seconds(), u.CPU.Seconds(), u.MaxRSSMB())
	return f
}

func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}
