//go:build integration

package clustertest

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"os"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/acme/payout/internal/proof/testenv"
	"github.com/acme/payout/internal/proof/testenv/proc"
	"github.com/acme/payout/internal/proof/testenv/redistest"
	"github.com/redis/go-redis/v9"
)

var (
	scale            = flag.Bool("scale", false, "run TestScaleOut (a few minutes): throughput of 1, 2, 4 worker processes and a shared rate limit")
	scalePayouts     = flag.Int("scale.payouts", 4000, "payouts per step of TestScaleOut")
	scaleConcurrency = flag.Int("scale.concurrency", 20, "--concurrency of each worker in TestScaleOut")
	scaleLatency     = flag.Duration("scale.latency", 50*time.Millisecond, "latency of every simulator answer in TestScaleOut")
	scaleRate        = flag.Int("scale.rate", 100, "--rate of the rate-limited step of TestScaleOut")
)

// step is one measurement of TestScaleOut.
type step struct {
	workers int
	rate    int // --rate, 0 for none

	payouts   int
	wall      time.Duration // first worker started -> last order stored
	span      time.Duration // first order stored -> last order stored
	maxWindow int           // most orders stored in any 1 s window
	steady    float64       // orders/s after the first second (the limiter's burst)
	excess    float64       // most orders in any window beyond rate x window length
	redisCmds int64         // commands Redis processed during the processing
	workerCPU time.Duration // all workers together
	redisCPU  float64       // seconds, during the processing
	sbCPU     float64       // seconds, during the processing (-1: unknown)
}

func (s step) perSecond() float64 { return float64(s.payouts-1) / s.span.Seconds() }

// TestScaleOut measures payouts per second of 1, 2 and 4 `payout worker`
// processes on one Redis server against the simulator with a fixed latency
// and no faults, then 4 workers sharing --rate. Opt in with -scale:
//
//	go test -tags integration -run TestScaleOut -v -timeout 20m ./internal/proof/clustertest/ -scale
//
// Every step also checks that each payout got exactly one PSP order; the
// rate-limited step checks that the observed rate stays within the limit.
func TestScaleOut(t *testing.T) {
	if !*scale {
		t.Skip("scale-out measurement is opt-in: pass -scale")
	}
	testenv.NeedTool(t, "redis-server")
	bins := Build(t)
	sb := StartSandbox(t, bins.Sandbox, "-seed", "1", "-latency", scaleLatency.String())
	steps := []step{{workers: 1}, {workers: 2}, {workers: 4}, {workers: 4, rate: *scaleRate}}
	for i := range steps {
		s := &steps[i]
		t.Run(fmt.Sprintf("workers=%d,rate=%d", s.workers, s.rate), func(t *testing.T) {
			measure(t, bins, sb, s)
		})
	}

	var b strings.Builder
	fmt.Fprintf(&b, "scale-out: %d payouts per step, concurrency %d per worker, simulator latency %s, one Redis, %d CPUs\n",
		*scalePayouts, *scaleConcurrency, *scaleLatency, runtime.NumCPU())
	fmt.Fprintf(&b, "| workers | --rate | payouts/s | wall s | max in 1 s | worker CPU s | redis CPU s | sandbox CPU s | redis cmds/payout |\n")
	fmt.Fprintf(&b, "|---|---|---|---|---|---|---|---|---|\n")
	for _, s := range steps {
		if s.payouts == 0 {
			continue
		}
		rate := "-"
		if s.rate > 0 {
			rate = strconv.Itoa(s.rate)
		}
		sbCPU := "-"
		if s.sbCPU >= 0 {
			sbCPU = fmt.Sprintf("%.1f", s.sbCPU)
		}
		fmt.Fprintf(&b, "| %d | %s | %.0f | %.1f | %d | %.1f | %.1f | %s | %.0f |\n", s.workers, rate, s.perSecond(),
			s.wall.Seconds(), s.maxWindow, s.workerCPU.Seconds(), s.redisCPU, sbCPU, float64(s.redisCmds)/float64(s.payouts))
	}
	for _, s := range steps {
		if s.rate > 0 && s.payouts > 0 {
			fmt.Fprintf(&b, "rate %d/s shared by %d workers: %.1f/s after the first second; at most %.0f orders above %d/s x window length in any window (the limiter's burst is %d)\n",
				s.rate, s.workers, s.steady, s.excess, s.rate, s.rate)
		}
	}
	t.Log("\n" + b.String())
}

// measure runs one step on a fresh Redis and fills in s.
func measure(t *testing.T, bins Binaries, sb *Sandbox, s *step) {
	node := redistest.Start(t)
	rdb := node.ClientT(t)
	ctx := context.Background()
	if err := sb.Reset(ctx); err != nil {
		t.Fatal(err)
	}
	cli := NewCLI(t, bins.Payout, node.URL())
	const files = 4
	paths, rows := WriteFiles(t, t.TempDir(), FileSpec{Files: files, PerFile: *scalePayouts / files, Seed: uint64(s.workers*1000 + s.rate), Prefix: "SC"})
	cli.Load(t, paths...)

	redisBefore, cmdsBefore := redisCPU(t, rdb), redisCommands(t, rdb)
	sbBefore, sbOK := cpuSeconds(sb.Pid())
	extra := []string{"--concurrency", strconv.Itoa(*scaleConcurrency), "--log-level", "warn"}
	if s.rate > 0 {
		extra = append(extra, "--rate", strconv.Itoa(s.rate))
	}
	start := time.Now()
	var procs []*proc.Proc
	for i := 0; i < s.workers; i++ {
		procs = append(procs, cli.StartWorker(t, fmt.Sprintf("worker-%d", i+1), sb.URL, extra...))
	}
	// Poll the simulator, not the CLI: a status subprocess every tick would
	// take CPU from the processes measured.
	expect := len(rows)
	stored := 0
	err := testenv.Poll(ctx, time.Duration(expect/20+60)*time.Second, 100*time.Millisecond, func() (bool, error) {
		for _, p := range procs {
			if p.Exited() {
				return false, fmt.Errorf("%s exited early:\n%s", p.Name(), p.Tail(3000))
			}
		}
		st, err := sb.Stats(ctx)
		stored = st.OrdersStored
		return err == nil && stored >= expect, err
	})
	if err != nil {
		t.Fatalf("%d of %d orders after %s: %v", stored, expect, time.Since(start), err)
	}
	s.wall = time.Since(start)
	s.redisCPU = redisCPU(t, rdb) - redisBefore
	s.redisCmds = redisCommands(t, rdb) - cmdsBefore
	s.sbCPU = -1
	if sbAfter, ok := cpuSeconds(sb.Pid()); ok && sbOK {
		s.sbCPU = sbAfter - sbBefore
	}
	cli.WaitFinal(t, files, 30*time.Second, nil)
	for _, p := range procs {
		s.workerCPU += Stop(t, p, 30*time.Second)
	}

	// Exactly one order per payout, all created.
	orders, err := sb.Orders(ctx)
	if err != nil {
		t.Fatal(err)
	}
	per := map[string]int{}
	var at []time.Time
	for _, o := range orders {
		if o.Kind != "withdrawal" {
			continue
		}
		per[o.ExternalID]++
		at = append(at, o.CreatedAt)
	}
	for ext := range rows {
		if per[ext] != 1 {
			t.Errorf("%s: %d PSP orders, want 1", ext, per[ext])
		}
	}
	if len(at) != expect {
		t.Fatalf("%d orders for %d payouts", len(at), expect)
	}
	sort.Slice(at, func(i, j int) bool { return at[i].Before(at[j]) })
	s.payouts = len(at)
	s.span = at[len(at)-1].Sub(at[0])
	s.maxWindow = maxInWindow(at, time.Second)
	if s.span > 2*time.Second {
		n := 0
		for _, x := range at {
			if x.Sub(at[0]) >= time.Second {
				n++
			}
		}
		s.steady = float64(n) / (s.span - time.Second).Seconds()
	}
	t.Logf("%d workers, rate %d: %d payouts in %s (%.0f/s; wall %s), max %d in 1 s; CPU: workers %s, redis %.1fs, sandbox %.1fs",
		s.workers, s.rate, s.payouts, s.span.Round(time.Millisecond), s.perSecond(), s.wall.Round(time.Millisecond),
		s.maxWindow, s.workerCPU.Round(10*time.Millisecond), s.redisCPU, s.sbCPU)
	if s.rate > 0 {
		perSec := make([]int, int(s.span/time.Second)+1)
		for _, x := range at {
			perSec[int(x.Sub(at[0])/time.Second)]++
		}
		t.Logf("orders per second from the first: %v", perSec)
		// The limiter (GCRA, redis_rate.PerSecond) lets through at most
		// burst + rate x W requests in any window W, with burst = rate. The
		// simulator stamps an order after its latency, so allow a tenth of
		// a second of jitter.
		s.excess = envelopeExcess(at, float64(s.rate))
		if s.steady > float64(s.rate)*1.05 {
			t.Errorf("shared rate %d/s: observed %.1f/s after the first second", s.rate, s.steady)
		}
		if s.excess > float64(s.rate)*1.1 {
			t.Errorf("shared rate %d/s: %.0f orders above rate x window in some window, burst is %d", s.rate, s.excess, s.rate)
		}
	}
}

// maxInWindow is the largest number of sorted times within any window w.
func maxInWindow(at []time.Time, w time.Duration) int {
	best, j := 0, 0
	for i := range at {
		for at[i].Sub(at[j]) >= w {
			j++
		}
		if n := i - j + 1; n > best {
			best = n
		}
	}
	return best
}

// envelopeExcess is the largest count of sorted times in any window
// [at[j], at[i]] beyond rate x its length: max over j <= i of
// (i-j+1) - rate*(t_i - t_j).
func envelopeExcess(at []time.Time, rate float64) float64 {
	best := 0.0
	minV := 0.0
	for i := range at {
		v := float64(i) - rate*at[i].Sub(at[0]).Seconds()
		if i == 0 || v < minV {
			minV = v
		}
		if e := v - minV + 1; e > best {
			best = e
		}
	}
	return best
}

// redisCommands is total_commands_processed of the server.
func redisCommands(t *testing.T, rdb *redis.Client) int64 {
	t.Helper()
	info, err := rdb.Info(context.Background(), "stats").Result()
	if err != nil {
		t.Fatalf("INFO stats: %v", err)
	}
	for _, line := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "total_commands_processed:"); ok {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				t.Fatalf("INFO stats %s: %v", line, err)
			}
			return n
		}
	}
	t.Fatal("INFO stats: no total_commands_processed")
	return 0
}

// redisCPU is used_cpu_user + used_cpu_sys of the server, in seconds.
func redisCPU(t *testing.T, rdb *redis.Client) float64 {
	t.Helper()
	info, err := rdb.Info(context.Background(), "cpu").Result()
	if err != nil {
		t.Fatalf("INFO cpu: %v", err)
	}
	var sum float64
	for _, line := range strings.Split(info, "\n") {
		k, v, ok := strings.Cut(strings.TrimSpace(line), ":")
		if ok && (k == "used_cpu_user" || k == "used_cpu_sys") {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				t.Fatalf("INFO cpu %s: %v", line, err)
			}
			sum += f
		}
	}
	return sum
}

// cpuSeconds is the user+system CPU time of a running process from
// /proc/PID/stat (Linux); ok is false elsewhere or once it has exited.
func cpuSeconds(pid int) (float64, bool) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, false
	}
	// The command name (field 2) is in parentheses and may hold spaces.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, false
	}
	f := strings.Fields(string(b[i+1:]))
	// After the name: state(3) ... utime(14) stime(15), so index 11 and 12.
	if len(f) < 13 {
		return 0, false
	}
	ut, err1 := strconv.ParseFloat(f[11], 64)
	st, err2 := strconv.ParseFloat(f[12], 64)
	if err1 != nil || err2 != nil {
		return 0, false
	}
	const clkTck = 100 // USER_HZ on every Linux architecture Go supports
	return (ut + st) / clkTck, true
}
