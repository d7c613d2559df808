// Command bench measures payout's loader and workers against bare
// baselines on a private redis-server and prints one table (`make bench`);
// the JSON of the run goes to --out.
//
// Usage:
//
//	bench [flags]                 run every measurement
//	bench bare-enqueue [flags]    baseline process: enqueue create tasks only
//	bench bare-worker [flags]     baseline process: one POST per task only
//	bench profile [flags]         CPU profiles of in-process equivalents
//	bench memory [flags]          Redis bytes per payout; the 90-day simulation
//	bench watch [flags]           Redis bytes and commands of the watch of paid payouts
//
// Exit codes: 0 measured (whether or not targets were met; see the table),
// 1 the bench could not run, 2 usage error.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/acme/payout/internal/proof/bench"
	"github.com/acme/payout/internal/redisconn"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	os.Exit(run(ctx, os.Args[1:], os.Stdout, os.Stderr))
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	cmd := ""
	if len(args) > 0 && len(args[0]) > 0 && args[0][0] != '-' {
		cmd, args = args[0], args[1:]
	}
	var err error
	switch cmd {
	case "":
		err = runAll(ctx, args, stdout, stderr)
	case "bare-enqueue":
		err = runBareEnqueue(ctx, args, stderr)
	case "bare-worker":
		err = runBareWorker(ctx, args, stdout, stderr)
	case "profile":
		err = runProfile(ctx, args, stdout, stderr)
	case "memory":
		err = runMemoryCmd(ctx, args, stdout, stderr)
	case "watch":
		err = runWatch(ctx, args, stdout, stderr)
	default:
		fmt.Fprintf(stderr, "bench: unknown command %q (want bare-enqueue, bare-worker, profile, memory, watch or none)\n", cmd)
		return 2
	}
	var u usageError
	switch {
	case err == nil:
		return 0
	case errors.Is(err, flag.ErrHelp):
		return 0
	case errors.As(err, &u):
		fmt.Fprintln(stderr, "bench:", err)
		return 2
	}
	fmt.Fprintln(stderr, err) // the package's errors start with "bench:"
	return 1
}

type usageError struct{ error }

func parse(fs *flag.FlagSet, args []string, stderr io.Writer) error {
	fs.SetOutput(stderr)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return usageError{err}
	}
	if fs.NArg() > 0 {
		return usageError{fmt.Errorf("unexpected argument %q", fs.Arg(0))}
	}
	return nil
}

func runAll(ctx context.Context, args []string, stdout, stderr io.Writer) (err error) {
	cfg := bench.DefaultConfig()
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	fs.StringVar(&cfg.Go, "go", cfg.Go, "go command that builds the binaries")
	fs.StringVar(&cfg.Root, "root", cfg.Root, "module root")
	fs.StringVar(&cfg.ResultsDir, "out", "bench/results", "directory of the JSON result (empty: none)")
	fs.IntVar(&cfg.LoaderRows, "loader-rows", cfg.LoaderRows, "rows of the loader throughput file")
	fs.IntVar(&cfg.LoaderRepeat, "loader-repeat", cfg.LoaderRepeat, "ours/baseline pairs of the loader figure (median reported)")
	fs.IntVar(&cfg.RSSRows, "rss-rows", cfg.RSSRows, "rows of the loader peak-RSS file")
	fs.IntVar(&cfg.OverheadPayouts, "overhead-payouts", cfg.OverheadPayouts, "payouts of the PSP-overhead-bound worker figure")
	fs.IntVar(&cfg.OverheadConcurrency, "overhead-concurrency", cfg.OverheadConcurrency, "worker concurrency of the PSP-overhead-bound figure")
	fs.IntVar(&cfg.OverheadRepeat, "overhead-repeat", cfg.OverheadRepeat, "ours/baseline pairs of the PSP-overhead-bound figure (median reported)")
	fs.IntVar(&cfg.LatencyPayouts, "latency-payouts", cfg.LatencyPayouts, "payouts of the PSP-latency-bound worker figure")
	fs.IntVar(&cfg.LatencyConcurrency, "latency-concurrency", cfg.LatencyConcurrency, "worker concurrency of the PSP-latency-bound figure")
	fs.DurationVar(&cfg.Latency, "latency", cfg.Latency, "sandbox latency of the PSP-latency-bound figure")
	fs.IntVar(&cfg.E2ERows, "e2e-rows", cfg.E2ERows, "rows of the payout run figure")
	fs.IntVar(&cfg.APIRows, "api-rows", cfg.APIRows, "items of the API create figure (JSON, against payout load of the same rows)")
	fs.IntVar(&cfg.APIRepeat, "api-repeat", cfg.APIRepeat, "API/file pairs of the API figure (median reported)")
	fs.DurationVar(&cfg.PhaseTimeout, "phase-timeout", cfg.PhaseTimeout, "bound of one measurement")
	only := fs.String("only", "", "comma-separated measurements to run, of "+strings.Join(bench.Parts, ", ")+" (default: all)")
	mem := bench.DefaultMemoryConfig()
	memoryFlags(fs, &mem)
	if err := parse(fs, args, stderr); err != nil {
		return err
	}
	if *only != "" {
		for _, p := range strings.Split(*only, ",") {
			p = strings.TrimSpace(p)
			if !slices.Contains(bench.Parts, p) {
				return usageError{fmt.Errorf("--only: unknown measurement %q (want %s)", p, strings.Join(bench.Parts, ", "))}
			}
			cfg.Only = append(cfg.Only, p)
		}
	}
	cfg.Progress = stderr
	if len(cfg.Only) == 0 || slices.Contains(cfg.Only, bench.PartMemory) {
		if len(cfg.Only) == 1 {
			return runMemory(ctx, mem, stdout, stderr)
		}
		defer func() {
			if merr := runMemory(ctx, mem, stdout, stderr); err == nil {
				err = merr
			}
		}()
	}
	rep, err := bench.Run(ctx, cfg)
	if err != nil {
		return err
	}
	fmt.Fprintln(stdout)
	if err := rep.WriteTable(stdout); err != nil {
		return err
	}
	if cfg.ResultsDir != "" {
		path, err := rep.WriteJSON(cfg.ResultsDir)
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "JSON: %s\n", path)
	}
	return nil
}

func runBareEnqueue(ctx context.Context, args []string, stderr io.Writer) error {
	fs := flag.NewFlagSet("bench bare-enqueue", flag.ContinueOnError)
	url := fs.String("redis", "", "Redis URL")
	batch := fs.String("batch", "", "batch id put in the payloads")
	rows := fs.Int("rows", 0, "tasks to enqueue (rows 1..N of the generated file)")
	conc := fs.Int("concurrency", bench.LoaderEnqueueWorkers, "concurrent enqueues")
	pipelined := fs.Bool("pipeline", false, "enqueue through go-redis autopipelining, as payout load does")
	if err := parse(fs, args, stderr); err != nil {
		return err
	}
	if *url == "" || *batch == "" || *rows < 1 {
		return usageError{errors.New("bare-enqueue needs --redis, --batch and --rows")}
	}
	rdb, err := redisconn.Open(ctx, redisconn.Options{URL: *url})
	if err != nil {
		return err
	}
	defer rdb.Close()
	return bench.BareEnqueue(ctx, rdb, *batch, *rows, *conc, *pipelined)
}

func runBareWorker(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("bench bare-worker", flag.ContinueOnError)
	url := fs.String("redis", "", "Redis URL")
	pspURL := fs.String("psp-url", "", "PSP base URL")
	conc := fs.Int("concurrency", 10, "Asynq concurrency")
	lanes := fs.Int("lanes", 1, "Asynq servers sharing --concurrency, as payout worker's --dequeue-lanes")
	expect := fs.Int("expect", 0, "print \""+bench.BareDoneLine+"\" after this many answers 200")
	if err := parse(fs, args, stderr); err != nil {
		return err
	}
	if *url == "" || *pspURL == "" || *conc < 1 {
		return usageError{errors.New("bare-worker needs --redis, --psp-url and --concurrency >= 1")}
	}
	token := os.Getenv("PAYOUT_PSP_TOKEN")
	if token == "" {
		token = bench.SandboxToken
	}
	rdb, err := redisconn.Open(ctx, redisconn.Options{URL: *url})
	if err != nil {
		return err
	}
	defer rdb.Close()
	return bench.RunBareWorker(ctx, rdb, bench.BareWorkerConfig{
		PSPURL: *pspURL, Token: token, Concurrency: *conc, Lanes: *lanes, Expect: *expect,
		Done: func() { fmt.Fprintln(stdout, bench.BareDoneLine) },
	})
}

func runProfile(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	cfg := bench.ProfileConfig{Go: "go", Root: ".", Rows: 100_000, Payouts: 20_000, Concurrency: 50}
	fs := flag.NewFlagSet("bench profile", flag.ContinueOnError)
	fs.StringVar(&cfg.Go, "go", cfg.Go, "go command that builds the binaries")
	fs.StringVar(&cfg.Root, "root", cfg.Root, "module root")
	fs.StringVar(&cfg.Dir, "dir", "bench/profiles", "directory of the .pprof files")
	fs.IntVar(&cfg.Rows, "rows", cfg.Rows, "rows of the loader file")
	fs.IntVar(&cfg.HeapRows, "heap-rows", 0, "also profile the peak heap of a load of this many rows (e.g. 1000000)")
	fs.IntVar(&cfg.Payouts, "payouts", cfg.Payouts, "payouts of the worker run")
	fs.IntVar(&cfg.Concurrency, "concurrency", cfg.Concurrency, "worker concurrency")
	if err := parse(fs, args, stderr); err != nil {
		return err
	}
	cfg.Progress = stderr
	start := time.Now()
	if err := bench.Profile(ctx, cfg); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "profiles in %s (%s); read them with: go tool pprof -top %s/worker.cpu.pprof\n",
		cfg.Dir, time.Since(start).Round(time.Second), cfg.Dir)
	return nil
}

// memoryFlags adds the flags of the memory measurement to fs.
func memoryFlags(fs *flag.FlagSet, c *bench.MemoryConfig) {
	fs.IntVar(&c.Rows, "memory-rows", c.Rows, "rows of the memory measurement")
	fs.IntVar(&c.Concurrency, "memory-concurrency", c.Concurrency, "worker concurrency of the memory measurement")
	fs.IntVar(&c.Days, "sim-days", c.Days, "days of the simulation (0: none)")
	fs.IntVar(&c.RowsPerDay, "sim-rows", c.RowsPerDay, "rows a day of the simulation")
	fs.IntVar(&c.ArchiveAfter, "sim-archive-after", c.ArchiveAfter, "days after which the simulation archives a batch")
	fs.IntVar(&c.IDWindow, "sim-id-window", c.IDWindow, "id window of the simulation, days")
	fs.BoolVar(&c.SimReal, "sim-real", c.SimReal, "process the simulated days by the real in-process worker and PSP simulator (slow) instead of the fast path")
	fs.IntVar(&c.FidelityRows, "sim-fidelity-rows", c.FidelityRows, "rows of the fast path's fidelity check against the real worker (0: no check)")
	fs.IntVar(&c.FastConcurrency, "sim-concurrency", c.FastConcurrency, "goroutines of the simulation's fast path")
	fs.StringVar(&c.RedisConf, "redis-conf", c.RedisConf, "redis.conf the measured redis-server reads first, e.g. deploy/redis.conf (default: Redis's defaults)")
	fs.IntVar(&c.ListpackValue, "listpack-value", c.ListpackValue, "hash-max-listpack-value to set on the measured redis-server (0: as Redis or --redis-conf has it)")
}

func runMemoryCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	c := bench.DefaultMemoryConfig()
	fs := flag.NewFlagSet("bench memory", flag.ContinueOnError)
	memoryFlags(fs, &c)
	if err := parse(fs, args, stderr); err != nil {
		return err
	}
	return runMemory(ctx, c, stdout, stderr)
}

func runMemory(ctx context.Context, c bench.MemoryConfig, stdout, stderr io.Writer) error {
	c.Progress = stderr
	rep, err := bench.Memory(ctx, c)
	if rep != nil {
		fmt.Fprintln(stdout)
		rep.WriteMemory(stdout)
	}
	if err != nil {
		return fmt.Errorf("bench: memory: %w", err)
	}
	return nil
}

func runWatch(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	c := bench.DefaultWatchConfig()
	fs := flag.NewFlagSet("bench watch", flag.ContinueOnError)
	fs.IntVar(&c.Payouts, "payouts", c.Payouts, "paid payouts watched")
	fs.IntVar(&c.Checks, "checks", c.Checks, "of them, how many checks the real worker makes for the command count")
	fs.IntVar(&c.Concurrency, "concurrency", c.Concurrency, "worker concurrency of the checks")
	fs.IntVar(&c.FastConcurrency, "fast-concurrency", c.FastConcurrency, "goroutines driving the payouts to paid")
	fs.StringVar(&c.ResultsDir, "out", c.ResultsDir, "directory of the JSON result (empty: none)")
	if err := parse(fs, args, stderr); err != nil {
		return err
	}
	if c.Payouts < 1 || c.Checks < 1 || c.Concurrency < 1 || c.FastConcurrency < 1 {
		return usageError{errors.New("watch needs --payouts, --checks, --concurrency and --fast-concurrency >= 1")}
	}
	c.Progress = stderr
	rep, err := bench.Watch(ctx, c)
	if err != nil {
		return fmt.Errorf("bench: watch: %w", err)
	}
	fmt.Fprintln(stdout)
	if err := rep.WriteTable(stdout); err != nil {
		return err
	}
	if c.ResultsDir != "" {
		path, err := rep.WriteJSON(c.ResultsDir)
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "JSON: %s\n", path)
	}
	return nil
}
