package bench

import (
	"context"
	"fmt"
	"io"
	"net/http/httptest"
	"os"
	"runtime"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/acme/payout/internal/decide"
	"github.com/acme/payout/internal/ledger"
	"github.com/acme/payout/internal/ledger/keys"
	"github.com/acme/payout/internal/lifecycle"
	"github.com/acme/payout/internal/money"
	"github.com/acme/payout/internal/psp"
	"github.com/acme/payout/internal/sandbox"
	"github.com/acme/payout/internal/vault"
	"github.com/acme/payout/internal/worker"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
	"github.com/rs/zerolog"
)

// PartWatch is `bench watch`: what the watch of paid payouts costs Redis.
const PartWatch = "watch"

// WatchConfig sizes `bench watch`.
type WatchConfig struct {
	Payouts     int // paid payouts of the measured batch
	Checks      int // of them, how many are made due and checked by the real worker
	Concurrency int // worker concurrency of the checks
	// FastConcurrency: goroutines that create the orders at the simulator
	// and drive the payouts to paid through the ledger's transitions.
	FastConcurrency int
	ResultsDir      string // JSON of the run ("" none)
	Progress        io.Writer
}

// DefaultWatchConfig is `go run ./internal/proof/cmd/bench watch`.
func DefaultWatchConfig() WatchConfig {
	return WatchConfig{Payouts: 100_000, Checks: 10_000, Concurrency: 50, FastConcurrency: 64, ResultsDir: "bench/results"}
}

// WatchSchedule is how many checks the default watch (decide.DefaultWatchWindow,
// decide.DefaultWatchIntervals: 1h, 6h, then daily) makes of one paid
// payout that is never returned, the last at the window's end.
func WatchSchedule() (checks int, window time.Duration) {
	p := decide.WatchPolicy{Window: decide.DefaultWatchWindow, Intervals: decide.DefaultWatchIntervals}
	at := p.First()
	for seq := 1; ; seq++ {
		checks++
		if at >= p.Window {
			return checks, p.Window
		}
		at += min(p.Interval(seq+1), p.Window-at)
	}
}

// Watch measures the Redis cost of the watch of paid payouts on a private
// redis-server (Redis's defaults): cfg.Payouts payouts driven to paid by
// the ledger's own transitions (the orders of the first cfg.Checks
// created at the in-process simulator), once unwatched (the baseline) and once under the default
// watch; the used_memory difference per payout is the watch's bytes. Then
// cfg.Checks of the watched payouts are made due and the real in-process
// worker checks them against the simulator (their orders unchanged: the
// common check); the INFO commandstats difference, less what the idle
// worker runs in the same time, per check is the commands of a check.
func Watch(ctx context.Context, cfg WatchConfig) (*Report, error) {
	if cfg.Progress == nil {
		cfg.Progress = io.Discard
	}
	if cfg.Checks > cfg.Payouts {
		cfg.Checks = cfg.Payouts
	}
	rep := &Report{Started: time.Now(), Machine: machine(), Settings: map[string]string{
		"payouts": strconv.Itoa(cfg.Payouts), "checks": strconv.Itoa(cfg.Checks),
		"concurrency": strconv.Itoa(cfg.Concurrency), "watch": "window 30 days, checks after 1h, 6h, then daily",
		"redis": "defaults (hash-max-listpack-value 64, -entries 128); one batch"}}
	rep.Machine.LoadAvgStart = LoadAvg()
	dir, err := os.MkdirTemp("", "payout-watch-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	srv, err := startRedis(ctx, dir)
	if err != nil {
		return nil, err
	}
	defer srv.Stop(redisGrace)
	w, err := newWatchRun(ctx, cfg, srv.Addr)
	if err != nil {
		return nil, err
	}
	defer w.close()
	rep.Machine.RedisVersion, _ = RedisVersion(ctx, w.m.rdb)
	if err := w.run(ctx, rep); err != nil {
		return rep, err
	}
	rep.Machine.LoadAvgEnd = LoadAvg()
	rep.ElapsedS = time.Since(rep.Started).Seconds()
	for i := range rep.Figures {
		rep.Figures[i].Evaluate()
	}
	rep.Summarize()
	return rep, nil
}

// machine describes the machine as bench.Run does, with the Go version
// this bench was built with (it builds no binary).
func machine() Machine {
	m := Machine{CPUs: runtime.NumCPU(), CPUModel: "unknown CPU", GoVersion: runtime.Version(), OS: runtime.GOOS + "/" + runtime.GOARCH}
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		m.CPUModel = CPUModel(string(b))
	}
	return m
}

type watchRun struct {
	cfg   WatchConfig
	m     *memRun // used_memory and key classes of the measured server
	addr  string
	ring  *vault.Keyring
	sbx   *sandbox.Server
	pspSv *httptest.Server
	psp   *psp.Client
	sent  sentCommands // commands the worker's client sent
	// polled: commands the bench's polls of check sent
	polled sentCommands
	// idleSent: commands the idle worker sent in idle's time
	idleSent float64
}

// sentCommands counts the commands a client sends (a pipeline's each),
// as a go-redis hook: commandstats counts those a script runs too.
type sentCommands struct{ n atomic.Int64 }

func (c *sentCommands) DialHook(next redis.DialHook) redis.DialHook { return next }

func (c *sentCommands) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		c.n.Add(1)
		return next(ctx, cmd)
	}
}

func (c *sentCommands) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		c.n.Add(int64(len(cmds)))
		return next(ctx, cmds)
	}
}

func newWatchRun(ctx context.Context, cfg WatchConfig, addr string) (*watchRun, error) {
	log := zerolog.New(io.Discard)
	sbx := sandbox.New(sandbox.DefaultConfig(), log) // orders stay Created: a check finds them unchanged
	sv := httptest.NewServer(sbx.Handler())
	client, err := psp.New(psp.Config{BaseURL: sv.URL, Token: psp.StaticToken(SandboxToken), MaxConnsPerHost: cfg.FastConcurrency, Logger: log})
	if err != nil {
		sv.Close()
		return nil, err
	}
	w := &watchRun{cfg: cfg, addr: addr, ring: vault.Ephemeral(), sbx: sbx, pspSv: sv, psp: client,
		m: &memRun{cfg: MemoryConfig{Progress: cfg.Progress}, addr: addr, rdb: adminClient(addr), log: log, start: time.Now()}}
	if err := w.m.rdb.Ping(ctx).Err(); err != nil {
		w.close()
		return nil, err
	}
	return w, nil
}

func (w *watchRun) close() {
	w.psp.Close()
	w.pspSv.Close()
	_ = w.m.rdb.Close()
}

// watchBatchID is the measured batch.
const watchBatchID = "watchbench"

// paid registers cfg.Payouts payouts (telecom destinations, as the
// loader registers them), creates their orders at the simulator and
// drives each to paid as the worker does (begin create, created with the
// order id and an outcome window, outcome paid), watched under policy
// (a zero policy: unwatched); then drains the events' outbox.
func (w *watchRun) paid(ctx context.Context, policy decide.WatchPolicy) error {
	n := w.cfg.Payouts
	led := ledger.New(w.m.rdb)
	total := money.Zero
	ps := make([]ledger.NewPayout, n)
	for i := range ps {
		ps[i] = ledger.NewPayout{Line: i + 2, ExternalID: fmt.Sprintf("WB-%07d", i+1), Amount: money.MustParse(fmt.Sprintf("%d.%02d", 20+i%980, i%100)), // never sandbox.RefusedAmount
			Telecom: "MTS", Destination: "telecom MTS"}
		total = total.Add(ps[i].Amount)
	}
	if _, _, err := led.BeginBatch(ctx, ledger.Batch{ID: watchBatchID, File: "watch.csv", LoadedAt: time.Now(), Rows: int64(n), Total: total, Scale: 2}); err != nil {
		return err
	}
	for i := 0; i < n; i += 1000 {
		if _, err := led.Register(ctx, watchBatchID, ps[i:min(i+1000, n)], 2); err != nil {
			return err
		}
	}
	if err := led.FinishBatch(ctx, watchBatchID); err != nil {
		return err
	}
	rdb := redis.NewClient(&redis.Options{Addr: w.addr, PoolSize: w.cfg.FastConcurrency, ReadTimeout: time.Minute, WriteTimeout: time.Minute})
	defer rdb.Close()
	wl := ledger.New(rdb).WithWatch(policy).As("bench-watch:1")
	err := parallel(ctx, n, w.cfg.FastConcurrency, func(ctx context.Context, i int) error {
		p := ps[i-1] // i is 1..n
		// The orders of the payouts to be checked (the first cfg.Checks)
		// are created at the simulator; the others get an order id of
		// the simulator's form, as the memory bench's fast path does.
		res := psp.Result{Outcome: psp.Created, Order: psp.Order{OrderID: "WD-" + orderUUID(), Status: sandbox.StatusCreated}}
		if i <= w.cfg.Checks {
			res = w.psp.CreateWithdrawal(ctx, psp.WithdrawalRequest{ExternalID: p.ExternalID, Amount: p.Amount,
				Properties: []psp.Property{{Key: psp.KeyTelecomOperator, Value: p.Telecom}}})
		}
		if res.Outcome != psp.Created {
			return fmt.Errorf("create of %s at the simulator: %s %s", p.ExternalID, res.Outcome, res.Message)
		}
		if _, err := wl.BeginCreate(ctx, watchBatchID, p.ExternalID, 1); err != nil {
			return err
		}
		if _, err := wl.FinishCreate(ctx, watchBatchID, p.ExternalID, 1, decide.CreateResult{To: lifecycle.Created,
			OrderID: res.Order.OrderID, PSPStatus: res.Order.Status, HTTPStatus: 200, OutcomeWindow: 72 * time.Hour}); err != nil {
			return err
		}
		_, s, err := wl.Snapshot(ctx, watchBatchID, p.ExternalID)
		if err != nil {
			return err
		}
		st, err := wl.RecordOutcome(ctx, s, max(s.OutcomeSeq, 1), decide.OutcomeAnswer{Verdict: decide.VerdictPaid, PSPStatus: "Paid", HTTPStatus: 200})
		if err != nil {
			return err
		}
		if st.State != lifecycle.Paid {
			return fmt.Errorf("%s: outcome %s, want paid", p.ExternalID, st.State)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("bench: watch: %w", err)
	}
	_, err = worker.PumpEvents(ctx, ledger.New(w.m.rdb), nil)
	return err
}

func (w *watchRun) run(ctx context.Context, rep *Report) error {
	n := w.cfg.Payouts
	m := w.m
	measure := func(policy decide.WatchPolicy, what string) (int64, []KeyClass, error) {
		if err := m.rdb.FlushAll(ctx).Err(); err != nil {
			return 0, nil, err
		}
		w.sbx.Reset()
		empty, err := m.used(ctx)
		if err != nil {
			return 0, nil, err
		}
		start := time.Now()
		if err := w.paid(ctx, policy); err != nil {
			return 0, nil, err
		}
		u, err := m.used(ctx)
		if err != nil {
			return 0, nil, err
		}
		kc, err := m.keyClasses(ctx)
		m.logf("watch: %s paid payouts %s: used_memory %s B over empty (%s)", thousands(int64(n)), what, thousands(u-empty), time.Since(start).Round(time.Second))
		return u - empty, kc, err
	}
	base, baseKeys, err := measure(decide.WatchPolicy{}, "unwatched")
	if err != nil {
		return err
	}
	policy := decide.WatchPolicy{Window: decide.DefaultWatchWindow, Intervals: decide.DefaultWatchIntervals}
	ours, ourKeys, err := measure(policy, "watched")
	if err != nil {
		return err
	}
	per := float64(ours-base) / float64(n)
	hashOurs, hashBase := classBytes(ourKeys, "payout hash PREFIX:{B}:p:ID"), classBytes(baseKeys, "payout hash PREFIX:{B}:p:ID")
	zset, err := m.rdb.MemoryUsage(ctx, keys.Watch(watchBatchID), 0).Result()
	if err != nil {
		return fmt.Errorf("bench: MEMORY USAGE of the watch zset: %w", err)
	}
	watching, _ := m.rdb.MemoryUsage(ctx, keys.Watching(), 0).Result()
	countsClass := keyClass(keys.Counts(watchBatchID))
	counts := classBytes(ourKeys, countsClass) - classBytes(baseKeys, countsClass)
	enc, _ := m.rdb.ObjectEncoding(ctx, keys.Watch(watchBatchID)).Result()
	// The watch's own keys and fields, by MEMORY USAGE: steadier than
	// used_memory, whose difference between two runs also holds the
	// audit stream's and the allocator's variations.
	keyed := hashOurs - hashBase + (float64(zset)+float64(watching)+counts)/float64(n)
	rep.Figures = append(rep.Figures,
		Figure{Name: "Redis used_memory per paid payout, watched (vs unwatched)", Unit: "B", Ours: float64(ours) / float64(n),
			Baseline: float64(base) / float64(n), BaselineName: "unwatched", Target: Target{Kind: Reported}},
		Figure{Name: "watch: Redis bytes per watched payout (MEMORY USAGE of its keys and fields)", Unit: "B", Ours: keyed, Target: Target{Kind: Reported}},
		Figure{Name: "watch: Redis bytes per watched payout (used_memory delta)", Unit: "B", Ours: per, Target: Target{Kind: Reported}})
	rep.Notes = append(rep.Notes,
		fmt.Sprintf("watch bytes per payout: %.0f by MEMORY USAGE: the payout hash %+.0f B (%.0f watched vs %.0f, mean of 200 sampled: its 4 watch fields), the batch's watch zset %.0f B (%s B, %s), PREFIX:watching %d B and the batch's counts %+.0f B in all; %.0f by used_memory (%s B watched, %s B unwatched, over an empty Redis)",
			keyed, hashOurs-hashBase, hashOurs, hashBase, float64(zset)/float64(n), thousands(zset), enc, watching, counts, per, thousands(ours), thousands(base)))

	// The checks: cfg.Checks watched payouts made due now; the real worker
	// sweeps and checks them.
	k := w.cfg.Checks
	idle, idleSecs, err := w.idle(ctx, policy)
	if err != nil {
		return err
	}
	if err := w.makeDue(ctx, k); err != nil {
		return err
	}
	if err := m.rdb.ConfigResetStat(ctx).Err(); err != nil {
		return err
	}
	sent0 := w.sent.n.Load()
	secs, err := w.check(ctx, policy)
	if err != nil {
		return err
	}
	info, err := m.rdb.Info(ctx, "commandstats").Result()
	if err != nil {
		return err
	}
	checked, twice, err := w.countChecks(ctx, k)
	if err != nil {
		return err
	}
	stats := CommandStats(info)
	calls := callsOf(stats) - w.polled.n.Load()
	net := float64(calls) - idle/idleSecs*secs
	perCheck := net / float64(checked)
	sentNet := float64(w.sent.n.Load()-sent0) - w.idleSent/idleSecs*secs
	sentPerCheck := sentNet / float64(checked)
	nChecks, window := WatchSchedule()
	days := window.Hours() / 24
	perDay := perCheck * float64(nChecks) / days
	rep.Figures = append(rep.Figures,
		Figure{Name: "watch: commands the worker sends per check", Unit: "cmds", Ours: sentPerCheck, Target: Target{Kind: Reported}},
		Figure{Name: "watch: commands Redis runs per check (commandstats, scripts' included)", Unit: "cmds", Ours: perCheck, Target: Target{Kind: Reported}},
		Figure{Name: "watch: commands Redis runs per watched payout per day", Unit: "cmds", Ours: perDay, Target: Target{Kind: Reported}},
		Figure{Name: "watch: Redis commands per second at 100,000 paid payouts a day (30-day window)", Unit: "cmds/s",
			Ours: perDay * 100_000 * days / 86400, Target: Target{Kind: Reported}})
	rep.Notes = append(rep.Notes,
		fmt.Sprintf("watch checks: %s made due, %s checks recorded in %.1f s (%d payouts checked twice: a second task of the same due second ran after the first was done and deleted; the bench sweeps every 100ms), %s commands (less %.0f an idle worker runs in that time: %.1f/s); %.2f a check: %s",
			thousands(int64(k)), thousands(int64(checked)), secs, twice, thousands(calls), idle/idleSecs*secs, idle/idleSecs, perCheck, FormatStats(stats, 10)),
		fmt.Sprintf("the worker's client sent %.2f commands a check (%.1f a watched payout a day), %.1f a second idle", sentPerCheck, sentPerCheck*float64(nChecks)/days, w.idleSent/idleSecs),
		fmt.Sprintf("default schedule: %d checks of a payout never returned in %.0f days (1h, 6h, then daily, the last at the window's end): %.3f a day; a watched payout costs %.1f commands a day; at 100,000 paid payouts a day, %s payouts are watched at once",
			nChecks, days, float64(nChecks)/days, perDay, thousands(int64(100_000*days))),
		"the idle cost is per worker, not per payout: its watch sweep (one TIME, one ZRANGE of PREFIX:watching and one ZRANGE per batch with watches every worker.Config.WatchSweep, 1m; no flag) and Asynq's own polling")
	m.logf("watch: %.2f commands a check, %.1f a watched payout a day", perCheck, perDay)
	return nil
}

// classBytes is the mean bytes of the keys of class, or 0.
func classBytes(ks []KeyClass, class string) float64 {
	for _, k := range ks {
		if k.Class == class {
			return k.AvgBytes
		}
	}
	return 0
}

// callsOf sums the calls of st, leaving out the bench's own commands.
func callsOf(st []CommandStat) int64 {
	var n int64
	for _, s := range st {
		if !benchCommands[s.Name] {
			n += s.Calls
		}
	}
	return n
}

// makeDue makes the checks of the first k watched payouts (those with an
// order at the simulator) due now (their score in the batch's watch zset
// and their wdue), as time passing would.
func (w *watchRun) makeDue(ctx context.Context, k int) error {
	rdb := w.m.rdb
	members := make([]string, k)
	for i := range members {
		members[i] = fmt.Sprintf("WB-%07d", i+1)
	}
	now, err := rdb.Time(ctx).Result()
	if err != nil {
		return err
	}
	due := now.Add(-time.Second).UnixMilli()
	for i := 0; i < len(members); i += 1000 {
		pipe := rdb.Pipeline()
		for _, ext := range members[i:min(i+1000, len(members))] {
			pipe.ZAddXX(ctx, keys.Watch(watchBatchID), redis.Z{Score: float64(due), Member: ext})
			pipe.HSet(ctx, keys.Payout(watchBatchID, ext), "wdue", strconv.FormatInt(due, 10))
		}
		if _, err := pipe.Exec(ctx); err != nil {
			return err
		}
	}
	return nil
}

// newWorker is the real worker as payout worker runs it with the default
// watch, its watch sweep every 100ms (the default 1m would take 40
// minutes to enqueue 10,000 checks, 500 a sweep).
func (w *watchRun) newWorker(policy decide.WatchPolicy) (*worker.Worker, error) {
	wcfg := worker.DefaultConfig()
	wcfg.Concurrency = w.cfg.Concurrency
	wcfg.Watch = policy
	wcfg.WatchSweep = 100 * time.Millisecond
	wcfg.TrustStatusByExternal = true
	words, err := wcfg.Outcome.Words.WithReturned(psp.DefaultReturnedStatuses)
	if err != nil {
		return nil, err
	}
	wcfg.Outcome.Words = words
	met := worker.NewMetrics(prometheus.NewRegistry())
	rdb := adminClient(w.addr).(*redis.Client)
	rdb.AddHook(&w.sent)
	ap, err := rdb.AutoPipeline()
	if err != nil {
		return nil, err
	}
	wcfg.Redis, wcfg.Ledger, wcfg.PSP, wcfg.Opener, wcfg.Metrics, wcfg.Logger = rdb, ledger.New(ap), w.psp, w.ring, met, w.m.log
	wk, err := worker.New(wcfg)
	return wk, err
}

// idle runs the worker with no check due for a few seconds and returns
// the commands it ran and the seconds.
func (w *watchRun) idle(ctx context.Context, policy decide.WatchPolicy) (float64, float64, error) {
	wk, err := w.newWorker(policy)
	if err != nil {
		return 0, 0, err
	}
	wctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- wk.Run(wctx) }()
	time.Sleep(2 * time.Second) // its start-up
	if err := w.m.rdb.ConfigResetStat(ctx).Err(); err != nil {
		cancel()
		<-done
		return 0, 0, err
	}
	start, sent0 := time.Now(), w.sent.n.Load()
	time.Sleep(10 * time.Second)
	info, err := w.m.rdb.Info(ctx, "commandstats").Result()
	secs := time.Since(start).Seconds()
	w.idleSent = float64(w.sent.n.Load() - sent0)
	cancel()
	if werr := <-done; err == nil {
		err = werr
	}
	if err != nil {
		return 0, 0, err
	}
	return float64(callsOf(CommandStats(info))), secs, nil
}

// check runs the worker until the due checks were recorded (the watch
// zset holds no member due, no task is pending or active) and returns the
// seconds.
func (w *watchRun) check(ctx context.Context, policy decide.WatchPolicy) (secs float64, err error) {
	wk, err := w.newWorker(policy)
	if err != nil {
		return 0, err
	}
	wctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	start := time.Now()
	go func() { done <- wk.Run(wctx) }()
	deadline := time.Now().Add(15 * time.Minute)
	// The bench's own polls go through a client of their own, counted,
	// and are taken out of the commandstats (w.polled).
	poll := adminClient(w.addr).(*redis.Client)
	defer poll.Close()
	poll.AddHook(&w.polled)
	for {
		now, err := poll.Time(ctx).Result()
		if err == nil {
			var due int64
			due, err = poll.ZCount(ctx, keys.Watch(watchBatchID), "-inf", strconv.FormatInt(now.UnixMilli(), 10)).Result()
			if err == nil && due == 0 {
				// every due check recorded; the last tasks done
				var q int64
				q, err = queueLen(ctx, poll)
				if err == nil && q == 0 {
					secs = time.Since(start).Seconds()
					break
				}
			}
		}
		if err == nil && time.Now().After(deadline) {
			err = fmt.Errorf("bench: watch: checks not done within 15 minutes")
		}
		if err != nil {
			cancel()
			<-done
			return 0, err
		}
		time.Sleep(250 * time.Millisecond)
	}
	cancel()
	if err := <-done; err != nil {
		return 0, err
	}
	return secs, nil
}

// countChecks returns the checks recorded since the payouts were paid
// and the payouts checked twice.
func (w *watchRun) countChecks(ctx context.Context, k int) (checks, twice int, err error) {
	// A check recorded moves wseq on by one (check 1 is due after paid).
	// A payout checked twice had a second task of its due second run
	// after the first was done and deleted (no retention) but before the
	// sweep that enqueued it read the zset: it asked again and recorded
	// check 2 hours early. Both are counted: each asked and wrote.
	checks, twice = 0, 0
	for i := 0; i < w.cfg.Payouts; i += 1000 {
		pipe := w.m.rdb.Pipeline()
		cmds := make([]*redis.StringCmd, 0, 1000)
		for j := i; j < min(i+1000, w.cfg.Payouts); j++ {
			cmds = append(cmds, pipe.HGet(ctx, keys.Payout(watchBatchID, fmt.Sprintf("WB-%07d", j+1)), "wseq"))
		}
		if _, err := pipe.Exec(ctx); err != nil {
			return 0, 0, err
		}
		for _, c := range cmds {
			n, _ := strconv.Atoi(c.Val())
			checks += max(n-1, 0)
			if n > 2 {
				twice++
			}
		}
	}
	if checks < k {
		return checks, twice, fmt.Errorf("bench: watch: %d checks recorded, want at least %d", checks, k)
	}
	return checks, twice, nil
}

// queueLen is the tasks of the payout queue pending or active.
func queueLen(ctx context.Context, rdb redis.UniversalClient) (int64, error) {
	p, err := rdb.LLen(ctx, "asynq:{payouts}:pending").Result()
	if err != nil {
		return 0, err
	}
	a, err := rdb.LLen(ctx, "asynq:{payouts}:active").Result()
	return p + a, err
}
