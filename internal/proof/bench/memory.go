package bench

import (
	"context"
	"fmt"
	"io"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/acme/payout/internal/ledger"
	"github.com/acme/payout/internal/loader"
	"github.com/acme/payout/internal/proof/testenv/redistest"
	"github.com/acme/payout/internal/psp"
	"github.com/acme/payout/internal/queue"
	"github.com/acme/payout/internal/results"
	"github.com/acme/payout/internal/sandbox"
	"github.com/acme/payout/internal/vault"
	"github.com/acme/payout/internal/worker"
	"github.com/acme/payout/jobs"
	"github.com/hibiken/asynq"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
	"github.com/rs/zerolog"
)

// Memory targets of issue 17, bytes of Redis used_memory per payout.
const (
	TargetQueuedBytes   = 1000 // after the load: ledger + task + claim + index
	TargetFinalBytes    = 1200 // every payout final, not archived
	TargetArchivedBytes = 64   // archived: what is left (the claims)
)

// MemoryConfig sizes `bench memory`.
type MemoryConfig struct {
	Rows        int // rows of the measured file
	Concurrency int // worker concurrency

	// The simulation: Days days of RowsPerDay rows each; every day's batch
	// is loaded and processed, and archived ArchiveAfter days later (fake
	// time, passed to the archive as its clock). 0 Days: no simulation.
	Days          int
	RowsPerDay    int
	ArchiveAfter  int // days
	IDWindow      int // days
	RetentionDays int // completed tasks of a day are deleted this many days later (Asynq's retention, in fake time)
	// SimReal processes each simulated day by the real in-process worker
	// against the in-process simulator; otherwise by the fast path
	// (processFast: the ledger's transitions and Asynq's task moves without
	// HTTP or Asynq server), checked first against the real worker on
	// FidelityRows rows (0: not checked).
	SimReal         bool
	FidelityRows    int
	FastConcurrency int // goroutines of the fast path

	// RedisConf, if set, is a redis.conf the private redis-server reads
	// first (e.g. deploy/redis.conf); "" runs it with Redis's defaults.
	RedisConf string
	// ListpackValue, if > 0, sets hash-max-listpack-value (CONFIG SET)
	// after the start, over the file's value.
	ListpackValue int

	Progress io.Writer
}

// DefaultMemoryConfig is `go run ./internal/proof/cmd/bench memory`.
func DefaultMemoryConfig() MemoryConfig {
	return MemoryConfig{Rows: 100_000, Concurrency: 50, Days: 90, RowsPerDay: 5_000,
		ArchiveAfter: 30, IDWindow: 90, RetentionDays: max(1, int(jobs.Retention.Hours()/24)),
		FidelityRows: 10_000, FastConcurrency: 256}
}

// KeyClass is what one kind of key costs, from MEMORY USAGE of a sample.
type KeyClass struct {
	Class     string
	Keys      int
	AvgBytes  float64        // MEMORY USAGE, mean over the sample
	Encodings map[string]int // OBJECT ENCODING over the sample
}

// MemoryPhase is used_memory at one point of the measurement.
type MemoryPhase struct {
	Name      string
	UsedBytes int64
	// Clients and Scripts are the parts of UsedBytes that are no key:
	// connection buffers (mem_clients_normal) and the script cache
	// (used_memory_scripts).
	Clients, Scripts int64
	PerPayout        float64 // (used - empty) / payouts
	Target           float64
	Keys             []KeyClass
}

// SimDay is one day of the simulation.
type SimDay struct {
	Day       int
	UsedBytes int64
	Live      int   // batches in Redis
	Archived  int   // batches archived so far
	Claims    int64 // claims of archived batches held after the day's archive run
}

// MemoryReport is the result of Memory.
type MemoryReport struct {
	Rows       int
	Limits     string // hash-max-listpack-value/-entries the run had, and where from
	EmptyBytes int64
	Phases     []MemoryPhase
	Config     MemoryConfig
	Sim        []SimDay
	SimPeak    int64
	SimSeconds float64
	Fidelity   *Fidelity // the fast path's check; nil with SimReal or no simulation
	Redis      string
}

// Memory measures Redis's used_memory per payout on a private
// redis-server (Redis's defaults, or cfg.RedisConf and cfg.ListpackValue;
// the report names the hash encoding limits in force): after loading cfg.Rows
// rows, after the in-process worker made every payout final against the
// in-process simulator (no faults; outcomes not followed, so created is
// final), and after archiving the batch. Then, if cfg.Days > 0, the
// simulation.
func Memory(ctx context.Context, cfg MemoryConfig) (*MemoryReport, error) {
	if cfg.Progress == nil {
		cfg.Progress = io.Discard
	}
	dir, err := os.MkdirTemp("", "payout-memory-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	srv, err := startMemRedis(ctx, dir, cfg.RedisConf)
	if err != nil {
		return nil, err
	}
	defer srv.Stop(redisGrace)
	m, err := newMemRun(ctx, cfg, dir, srv.Addr)
	if err != nil {
		return nil, err
	}
	defer m.close()
	rep := &MemoryReport{Rows: cfg.Rows, Config: cfg}
	rep.Redis, _ = RedisVersion(ctx, m.rdb)
	if rep.Limits, err = m.limits(ctx); err != nil {
		return nil, err
	}
	if err := m.measure(ctx, rep); err != nil {
		return rep, err
	}
	if cfg.Days > 0 {
		if err := m.simulate(ctx, rep); err != nil {
			return rep, err
		}
	}
	return rep, nil
}

type memRun struct {
	cfg   MemoryConfig
	dir   string
	addr  string // of the redis-server
	rdb   redis.UniversalClient
	ring  *vault.Keyring
	log   zerolog.Logger
	pspSv *httptest.Server
	start time.Time
}

func newMemRun(ctx context.Context, cfg MemoryConfig, dir, addr string) (*memRun, error) {
	key, err := vault.GenerateKey()
	if err != nil {
		return nil, err
	}
	ring, err := vault.NewKeyring(key)
	if err != nil {
		return nil, err
	}
	log := zerolog.New(io.Discard)
	sbx := sandbox.New(sandbox.DefaultConfig(), log)
	m := &memRun{cfg: cfg, dir: dir, addr: addr, rdb: adminClient(addr), ring: ring, log: log,
		pspSv: httptest.NewServer(sbx.Handler()), start: time.Now()}
	return m, m.rdb.Ping(ctx).Err()
}

// startMemRedis starts the measured redis-server: Redis's defaults, or
// conf read first (its persistence as the file says).
func startMemRedis(ctx context.Context, dir, conf string) (*redistest.Server, error) {
	if conf == "" {
		return startRedis(ctx, dir)
	}
	abs, err := filepath.Abs(conf)
	if err != nil {
		return nil, err
	}
	s, err := redistest.Launch(ctx, redistest.Config{Dir: dir, File: abs, Extra: []string{"--loglevel", "warning"}})
	if err != nil {
		return nil, fmt.Errorf("bench: redis-server with %s: %w", conf, err)
	}
	return s, nil
}

// limits applies cfg.ListpackValue and describes the hash encoding limits
// in effect, e.g. "hash-max-listpack-value 64, -entries 128 (Redis defaults)".
func (m *memRun) limits(ctx context.Context) (string, error) {
	from := "Redis defaults"
	if m.cfg.RedisConf != "" {
		from = m.cfg.RedisConf
	}
	if m.cfg.ListpackValue > 0 {
		if err := m.rdb.ConfigSet(ctx, "hash-max-listpack-value", strconv.Itoa(m.cfg.ListpackValue)).Err(); err != nil {
			return "", fmt.Errorf("bench: CONFIG SET hash-max-listpack-value: %w", err)
		}
		from += ", --listpack-value " + strconv.Itoa(m.cfg.ListpackValue)
	}
	get := func(k string) string {
		v, _ := m.rdb.ConfigGet(ctx, k).Result()
		return v[k]
	}
	return fmt.Sprintf("hash-max-listpack-value %s, hash-max-listpack-entries %s (%s)",
		get("hash-max-listpack-value"), get("hash-max-listpack-entries"), from), nil
}

func (m *memRun) close() {
	m.pspSv.Close()
	_ = m.rdb.Close()
}

func (m *memRun) logf(format string, args ...any) {
	fmt.Fprintf(m.cfg.Progress, "[%4.0fs] %s\n", time.Since(m.start).Seconds(), fmt.Sprintf(format, args...))
}

// used returns used_memory once it is steady: lazy frees done and the
// main dictionary resized (Redis shrinks it in its cron, 10 times a
// second), two readings 300 ms apart within 0.1%, for at most 5 s.
func (m *memRun) used(ctx context.Context) (int64, error) {
	read := func() (int64, error) {
		info, err := m.rdb.Info(ctx, "memory").Result()
		if err != nil {
			return 0, fmt.Errorf("bench: INFO memory: %w", err)
		}
		return strconv.ParseInt(infoField(info, "used_memory"), 10, 64)
	}
	last, err := read()
	if err != nil {
		return 0, err
	}
	for i := 0; i < 16; i++ {
		select {
		case <-ctx.Done():
			return 0, ctx.Err()
		case <-time.After(300 * time.Millisecond):
		}
		u, err := read()
		if err != nil {
			return 0, err
		}
		if d := u - last; d > -u/1000 && d < u/1000 {
			return u, nil
		}
		last = u
	}
	return last, nil
}

func (m *memRun) measure(ctx context.Context, rep *MemoryReport) error {
	n := m.cfg.Rows
	if err := m.rdb.FlushAll(ctx).Err(); err != nil {
		return err
	}
	var err error
	if rep.EmptyBytes, err = m.used(ctx); err != nil {
		return err
	}
	file := filepath.Join(m.dir, "memory.csv")
	if err := WriteRows(file, 1, n); err != nil {
		return err
	}
	phase := func(name string, target float64, payouts int) error {
		u, err := m.used(ctx)
		if err != nil {
			return err
		}
		keys, err := m.keyClasses(ctx)
		if err != nil {
			return err
		}
		p := MemoryPhase{Name: name, UsedBytes: u, PerPayout: float64(u-rep.EmptyBytes) / float64(payouts), Target: target, Keys: keys}
		if info, err := m.rdb.Info(ctx, "memory").Result(); err == nil {
			p.Clients, _ = strconv.ParseInt(infoField(info, "mem_clients_normal"), 10, 64)
			p.Scripts, _ = strconv.ParseInt(infoField(info, "used_memory_scripts"), 10, 64)
		}
		rep.Phases = append(rep.Phases, p)
		m.logf("memory: %s: used_memory %s B, %.0f B/payout", name, thousands(u), p.PerPayout)
		return nil
	}
	batch, err := m.load(ctx, file, n)
	if err != nil {
		return err
	}
	if err := phase("queued (after the load)", TargetQueuedBytes, n); err != nil {
		return err
	}
	if err := m.processReal(ctx, batch, n); err != nil {
		return err
	}
	if err := phase(fmt.Sprintf("final, completed tasks retained (their first %s)", jobs.Retention), 0, n); err != nil {
		return err
	}
	if err := m.dropCompleted(ctx); err != nil {
		return err
	}
	if err := phase("final, not archived (after task retention)", TargetFinalBytes, n); err != nil {
		return err
	}
	if _, err := results.Archive(ctx, ledger.New(m.rdb), results.ArchiveOptions{Dir: filepath.Join(m.dir, "archive"),
		IDWindow: time.Duration(m.cfg.IDWindow) * 24 * time.Hour}); err != nil {
		return err
	}
	return phase("archived", TargetArchivedBytes, n)
}

// load loads file in-process, as payout load does.
func (m *memRun) load(ctx context.Context, file string, n int) (string, error) {
	ap, err := m.rdb.AutoPipeline()
	if err != nil {
		return "", err
	}
	res, err := loader.New(ledger.New(m.rdb), queue.New(ap), m.ring, m.log).LoadFile(ctx, file, loader.Options{})
	if err != nil {
		return "", err
	}
	if res.Enqueued != n {
		return "", fmt.Errorf("bench: load of %s enqueued %d of %d", file, res.Enqueued, n)
	}
	return res.Batch, nil
}

// processReal runs the worker in-process until n payouts of batch are
// final.
func (m *memRun) processReal(ctx context.Context, batch string, n int) error {
	reg := prometheus.NewRegistry()
	met := worker.NewMetrics(reg)
	wcfg := worker.DefaultConfig()
	wcfg.Concurrency = m.cfg.Concurrency
	wcfg.Outcome.Track = false
	client, err := psp.New(psp.Config{BaseURL: m.pspSv.URL, Token: psp.StaticToken(SandboxToken), MaxConnsPerHost: wcfg.Concurrency,
		Logger: m.log, Observe: met.ObservePSP})
	if err != nil {
		return err
	}
	defer client.Close()
	ap, err := m.rdb.AutoPipeline()
	if err != nil {
		return err
	}
	wcfg.Redis, wcfg.Ledger, wcfg.PSP, wcfg.Opener, wcfg.Metrics, wcfg.Logger = m.rdb, ledger.New(ap), client, m.ring, met, m.log
	w, err := worker.New(wcfg)
	if err != nil {
		return err
	}
	wctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- w.Run(wctx) }()
	err = pollFinal(ctx, ledger.New(m.rdb), batch, n, 10*time.Minute)
	cancel()
	if werr := <-done; err == nil {
		err = werr
	}
	if err != nil {
		return err
	}
	// The worker drains the events' outbox every round; what its last
	// round left is drained now, so that both paths end with none.
	_, err = worker.PumpEvents(ctx, ledger.New(m.rdb), nil)
	return err
}

// dropCompleted deletes every completed task: what Asynq's janitor does
// once their retention is over.
func (m *memRun) dropCompleted(ctx context.Context) error {
	_, err := asynq.NewInspectorFromRedisClient(m.rdb).DeleteAllCompletedTasks(jobs.Queue)
	return err
}

// keyClass names the kind of a key: its shape with ids replaced by '*'.
func keyClass(k string) string {
	switch {
	case strings.Contains(k, "}:p:"):
		return "payout hash PREFIX:{B}:p:ID"
	case strings.HasPrefix(k, "asynq:") && strings.Contains(k, "}:t:"):
		return "asynq task asynq:{Q}:t:ID"
	}
	if i := strings.Index(k, "{"); i >= 0 {
		if j := strings.Index(k[i:], "}"); j > 0 && !strings.HasPrefix(k, "asynq:") {
			k = k[:i] + "{*}" + k[i+j+1:]
		}
	}
	parts := strings.Split(k, ":")
	if len(parts) >= 3 && parts[0] == "payout" && !strings.HasPrefix(parts[1], "{") {
		return strings.Join(parts[:2], ":") + ":*"
	}
	for i, p := range parts {
		if _, err := strconv.Atoi(p); err == nil && i > 0 && strings.HasPrefix(k, "payout:") {
			parts[i] = "*"
		}
	}
	return strings.Join(parts, ":")
}

// keyClasses scans every key and measures up to 200 of each class, each
// key whole (MEMORY USAGE SAMPLES 0: the default estimate from 5 elements
// of a big zset or stream varies by several percent between equal keys).
func (m *memRun) keyClasses(ctx context.Context) ([]KeyClass, error) {
	byClass := map[string][]string{}
	counts := map[string]int{}
	iter := m.rdb.Scan(ctx, 0, "*", 5000).Iterator()
	for iter.Next(ctx) {
		c := keyClass(iter.Val())
		counts[c]++
		if len(byClass[c]) < 200 {
			byClass[c] = append(byClass[c], iter.Val())
		}
	}
	if err := iter.Err(); err != nil {
		return nil, err
	}
	var out []KeyClass
	for c, keys := range byClass {
		kc := KeyClass{Class: c, Keys: counts[c], Encodings: map[string]int{}}
		var sum int64
		for _, k := range keys {
			u, err := m.rdb.MemoryUsage(ctx, k, 0).Result() // SAMPLES 0: every element, not an estimate from 5
			if err != nil {
				continue // expired or deleted meanwhile
			}
			sum += u
			if e, err := m.rdb.ObjectEncoding(ctx, k).Result(); err == nil {
				kc.Encodings[e]++
			}
		}
		kc.AvgBytes = float64(sum) / float64(len(keys))
		out = append(out, kc)
	}
	sort.Slice(out, func(i, j int) bool {
		return out[i].AvgBytes*float64(out[i].Keys) > out[j].AvgBytes*float64(out[j].Keys)
	})
	return out, nil
}

// WriteMemory prints the report.
func (r *MemoryReport) WriteMemory(w io.Writer) {
	fmt.Fprintf(w, "Redis %s, %s; %s rows (bench data: 9 in 10 rows a card, 1 in 10 a telecom operator)\n", r.Redis, r.Limits, thousands(int64(r.Rows)))
	fmt.Fprintf(w, "empty Redis: used_memory %s B\n\n", thousands(r.EmptyBytes))
	fmt.Fprintf(w, "| phase | used_memory | bytes/payout | target | met |\n|---|---|---|---|---|\n")
	for _, p := range r.Phases {
		target, met := "reported", ""
		if p.Target > 0 {
			target, met = fmt.Sprintf("<= %.0f", p.Target), "yes"
			if p.PerPayout > p.Target {
				met = "no"
			}
		}
		fmt.Fprintf(w, "| %s | %s B | %.0f | %s | %s |\n", p.Name, thousands(p.UsedBytes), p.PerPayout, target, met)
	}
	fmt.Fprintf(w, "\nOf used_memory, no key: connection buffers (mem_clients_normal) and the script cache (used_memory_scripts):\n")
	for _, p := range r.Phases {
		fmt.Fprintf(w, "  %s: clients %s B, scripts %s B\n", p.Name, thousands(p.Clients), thousands(p.Scripts))
	}
	for _, p := range r.Phases {
		fmt.Fprintf(w, "\n%s: keys by kind (MEMORY USAGE and OBJECT ENCODING of up to 200 of each)\n", p.Name)
		fmt.Fprintf(w, "| kind | keys | bytes/key | ~total | encodings |\n|---|---|---|---|---|\n")
		for _, k := range p.Keys {
			fmt.Fprintf(w, "| %s | %s | %.0f | %s | %s |\n", k.Class, thousands(int64(k.Keys)), k.AvgBytes,
				thousands(int64(k.AvgBytes*float64(k.Keys))), encodings(k.Encodings))
		}
	}
	if r.Fidelity != nil {
		r.Fidelity.write(w)
	}
	if len(r.Sim) > 0 {
		r.writeSim(w)
	}
}

func encodings(m map[string]int) string {
	var parts []string
	for e, n := range m {
		parts = append(parts, fmt.Sprintf("%s %d", e, n))
	}
	sort.Strings(parts)
	return strings.Join(parts, ", ")
}
