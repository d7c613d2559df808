package bench

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"time"

	"github.com/acme/payout/internal/ledger"
	"github.com/acme/payout/internal/loader"
	"github.com/acme/payout/internal/psp"
	"github.com/acme/payout/internal/queue"
	"github.com/acme/payout/internal/vault"
	"github.com/acme/payout/internal/view"
	"github.com/acme/payout/internal/worker"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"
)

// ProfileConfig sizes a profiling run.
type ProfileConfig struct {
	Go, Root    string
	Dir         string // where the .pprof files go
	Rows        int    // rows of the loader file
	HeapRows    int    // rows of the loader file whose peak heap is profiled (0: skip)
	Payouts     int    // payouts of the worker run
	Concurrency int    // worker concurrency
	Progress    io.Writer
}

// Profile runs in-process equivalents of `payout load` and `payout worker`
// (same packages, same settings as the CLI, logs at the CLI's default level
// into io.Discard) and of both bare baselines under the CPU profiler,
// against a private redis-server and a psp-sandbox process with no
// latency. It writes loader.cpu.pprof, loader.heap.pprof,
// bare-enqueue.cpu.pprof, worker.cpu.pprof and bare-worker.cpu.pprof to
// cfg.Dir; with HeapRows, also loader-peak.heap.pprof, the in-use heap of
// a load of that many rows at its highest sampled point.
func Profile(ctx context.Context, cfg ProfileConfig) error {
	if cfg.Progress == nil {
		cfg.Progress = io.Discard
	}
	if err := os.MkdirAll(cfg.Dir, 0o755); err != nil {
		return err
	}
	dir, err := os.MkdirTemp("", "payout-profile-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	b := &runner{cfg: Config{Go: cfg.Go, Root: cfg.Root, Progress: cfg.Progress, PhaseTimeout: 4 * time.Minute},
		dir: dir, files: map[int]string{}, start: time.Now()}
	if err := b.build(ctx); err != nil {
		return err
	}
	srv, err := startRedis(ctx, dir)
	if err != nil {
		return err
	}
	defer srv.Stop(redisGrace)
	rdb := adminClient(srv.Addr)
	defer rdb.Close()
	b.rdb, b.redisURL = rdb, srv.URL()
	key, err := vault.GenerateKey()
	if err != nil {
		return err
	}
	ring, err := vault.NewKeyring(key)
	if err != nil {
		return err
	}
	log := zerolog.New(io.Discard).Level(zerolog.InfoLevel).With().Timestamp().Logger()
	out := func(name string) string { return filepath.Join(cfg.Dir, name) }

	if err := b.profileLoader(ctx, cfg, ring, log); err != nil {
		return err
	}
	if cfg.HeapRows > 0 {
		if err := b.profileLoaderPeak(ctx, cfg.HeapRows, ring, log, out("loader-peak.heap.pprof")); err != nil {
			return err
		}
	}

	// Worker.
	if err := b.profileWorker(ctx, cfg, ring, log, out("worker.cpu.pprof")); err != nil {
		return err
	}
	return b.profileBareWorker(ctx, cfg, out("bare-worker.cpu.pprof"))
}

// profileLoader profiles a load of cfg.Rows rows (loader.cpu.pprof, then
// loader.heap.pprof) and the bare enqueue of as many tasks
// (bare-enqueue.cpu.pprof).
func (b *runner) profileLoader(ctx context.Context, cfg ProfileConfig, ring *vault.Keyring, log zerolog.Logger) error {
	out := func(name string) string { return filepath.Join(cfg.Dir, name) }
	rdb := b.rdb
	file, err := b.file(cfg.Rows)
	if err != nil {
		return err
	}
	batch, err := batchOf(file)
	if err != nil {
		return err
	}
	if err := b.flush(ctx); err != nil {
		return err
	}
	ap, err := rdb.AutoPipeline() // as payout load's default --enqueue-pipeline
	if err != nil {
		return err
	}
	ld := loader.New(ledger.New(rdb), queue.New(ap), ring, log)
	var res loader.Result
	d, err := cpuProfile(out("loader.cpu.pprof"), func() error {
		var err error
		res, err = ld.LoadFile(ctx, file, loader.Options{})
		return err
	})
	if err != nil {
		return err
	}
	if res.Enqueued != cfg.Rows {
		return fmt.Errorf("bench: profile load enqueued %d of %d", res.Enqueued, cfg.Rows)
	}
	b.logf("profile: loader %d rows in %.2f s = %.0f rows/s (in-process)", cfg.Rows, d.Seconds(), float64(cfg.Rows)/d.Seconds())
	if err := heapProfile(out("loader.heap.pprof")); err != nil {
		return err
	}
	if err := b.flush(ctx); err != nil {
		return err
	}
	d, err = cpuProfile(out("bare-enqueue.cpu.pprof"), func() error {
		return BareEnqueue(ctx, rdb, batch, cfg.Rows, LoaderEnqueueWorkers, false)
	})
	if err != nil {
		return err
	}
	b.logf("profile: bare enqueue %d tasks in %.2f s = %.0f tasks/s (in-process)", cfg.Rows, d.Seconds(), float64(cfg.Rows)/d.Seconds())
	return nil
}

func (b *runner) profileWorker(ctx context.Context, cfg ProfileConfig, ring *vault.Keyring, log zerolog.Logger, path string) error {
	file, err := b.file(cfg.Payouts)
	if err != nil {
		return err
	}
	if err := b.flush(ctx); err != nil {
		return err
	}
	led := ledger.New(b.rdb)
	res, err := loader.New(led, queue.New(b.rdb), ring, log).LoadFile(ctx, file, loader.Options{})
	if err != nil {
		return err
	}
	sbx, url, err := b.startSandbox(ctx, 0)
	if err != nil {
		return err
	}
	defer stopSandbox(sbx)
	// As cmd/payout worker builds it.
	reg := prometheus.NewRegistry()
	m := worker.NewMetrics(reg)
	wcfg := worker.DefaultConfig()
	wcfg.Concurrency = cfg.Concurrency
	client, err := psp.New(psp.Config{BaseURL: url, Token: psp.StaticToken(SandboxToken), MaxConnsPerHost: wcfg.Concurrency,
		Logger: log.With().Str("component", "psp").Logger(), Observe: m.ObservePSP})
	if err != nil {
		return err
	}
	defer client.Close()
	ap, err := b.rdb.AutoPipeline() // as payout worker's default --redis-pipeline
	if err != nil {
		return err
	}
	wcfg.Redis, wcfg.Ledger, wcfg.PSP, wcfg.Opener, wcfg.Metrics, wcfg.Logger = b.rdb, ledger.New(ap), client, ring, m, log
	w, err := worker.New(wcfg)
	if err != nil {
		return err
	}
	return b.profileRun(ctx, cfg, path, "worker", w.Run, func() error {
		return pollFinal(ctx, led, res.Batch, cfg.Payouts, b.cfg.PhaseTimeout)
	})
}

func (b *runner) profileBareWorker(ctx context.Context, cfg ProfileConfig, path string) error {
	if err := b.flush(ctx); err != nil {
		return err
	}
	if err := PreloadBareTasks(ctx, b.rdb, cfg.Payouts, LoaderEnqueueWorkers); err != nil {
		return err
	}
	sbx, url, err := b.startSandbox(ctx, 0)
	if err != nil {
		return err
	}
	defer stopSandbox(sbx)
	finished := make(chan struct{})
	run := func(wctx context.Context) error {
		return RunBareWorker(wctx, b.rdb, BareWorkerConfig{PSPURL: url, Token: SandboxToken, Concurrency: cfg.Concurrency,
			Expect: cfg.Payouts, Done: func() { close(finished) }})
	}
	return b.profileRun(ctx, cfg, path, "bare worker", run, func() error {
		select {
		case <-finished:
			return nil
		case <-time.After(b.cfg.PhaseTimeout):
			return fmt.Errorf("bench: bare worker not done after %s", b.cfg.PhaseTimeout)
		}
	})
}

// profileRun runs a worker (run) under a CPU profile written to path until
// wait returns, stops it, and logs the throughput of cfg.Payouts. The
// error is wait's, else run's.
func (b *runner) profileRun(ctx context.Context, cfg ProfileConfig, path, what string, run func(context.Context) error, wait func() error) error {
	d, err := cpuProfile(path, func() error {
		wctx, cancel := context.WithCancel(ctx)
		done := make(chan error, 1)
		go func() { done <- run(wctx) }()
		err := wait()
		cancel()
		if werr := <-done; err == nil {
			err = werr
		}
		return err
	})
	if err != nil {
		return err
	}
	b.logf("profile: %s %d payouts in %.2f s = %.0f/s (in-process, c=%d)", what, cfg.Payouts, d.Seconds(), float64(cfg.Payouts)/d.Seconds(), cfg.Concurrency)
	return nil
}

// profileLoaderPeak loads a file of n rows in-process while a sampler
// keeps the in-use heap profile taken at the highest heap seen.
func (b *runner) profileLoaderPeak(ctx context.Context, n int, ring *vault.Keyring, log zerolog.Logger, path string) error {
	file, err := b.file(n)
	if err != nil {
		return err
	}
	defer func() { _ = os.Remove(file); delete(b.files, n) }()
	if err := b.flush(ctx); err != nil {
		return err
	}
	ap, err := b.rdb.AutoPipeline()
	if err != nil {
		return err
	}
	ld := loader.New(ledger.New(b.rdb), queue.New(ap), ring, log)
	stop := make(chan struct{})
	sampled := make(chan error, 1)
	var peak uint64
	var best bytes.Buffer
	go func() {
		tick := time.NewTicker(250 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				sampled <- os.WriteFile(path, best.Bytes(), 0o644)
				return
			case <-tick.C:
			}
			var ms runtime.MemStats
			runtime.ReadMemStats(&ms)
			if ms.HeapInuse > peak {
				peak = ms.HeapInuse
				best.Reset()
				if err := pprof.Lookup("heap").WriteTo(&best, 0); err != nil {
					sampled <- err
					return
				}
			}
		}
	}()
	start := time.Now()
	res, err := ld.LoadFile(ctx, file, loader.Options{})
	close(stop)
	if serr := <-sampled; err == nil {
		err = serr
	}
	if err != nil {
		return err
	}
	b.logf("profile: loader %d rows in %.1f s (in-process), %d enqueued, peak heap in use %.1f MiB",
		n, time.Since(start).Seconds(), res.Enqueued, float64(peak)/(1<<20))
	return b.flush(ctx)
}

// pollFinal polls the ledger until n payouts of batch are final.
func pollFinal(ctx context.Context, led *ledger.Ledger, batch string, n int, within time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, within)
	defer cancel()
	for {
		c, err := view.New(led.Redis()).Counts(ctx, batch)
		if err != nil {
			return err
		}
		if c.Total() >= int64(n) && c.Open() == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("bench: %d of %d payouts open after %s", c.Open(), n, within)
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// cpuProfile runs fn under the CPU profiler and returns its wall time.
func cpuProfile(path string, fn func() error) (time.Duration, error) {
	f, err := os.Create(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	if err := pprof.StartCPUProfile(f); err != nil {
		return 0, err
	}
	start := time.Now()
	err = fn()
	d := time.Since(start)
	pprof.StopCPUProfile()
	return d, err
}

func heapProfile(path string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	defer f.Close()
	runtime.GC()
	return pprof.Lookup("allocs").WriteTo(f, 0)
}
