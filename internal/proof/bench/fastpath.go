package bench

import (
	"context"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/acme/payout/internal/decide"
	"github.com/acme/payout/internal/ledger"
	"github.com/acme/payout/internal/ledger/keys"
	"github.com/acme/payout/internal/lifecycle"
	"github.com/acme/payout/internal/sandbox"
	"github.com/acme/payout/internal/worker"
	"github.com/acme/payout/jobs"
	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"
)

// FidelityTolerance is how far the fast path's bytes may be from the real
// worker's: used_memory per payout, and bytes per key of each kind that
// holds at least FidelityShare of the batch's memory.
const (
	FidelityTolerance = 0.02
	FidelityShare     = 0.01
	// StreamTolerance is the per-key tolerance of a stream (the audit
	// trail): its bytes depend on how the entries of concurrent payouts
	// interleave (a stream node delta-encodes an entry against the node's
	// first; begin and finish entries have different fields), which no two
	// runs repeat: up to 2% apart between the real worker and the fast
	// path at 2,000 rows under -race. used_memory as a whole stays within
	// FidelityTolerance.
	StreamTolerance = 0.05
)

// processFast makes the n payouts of batch final as the in-process worker
// does against a simulator that accepts every order (processReal), without
// HTTP and without an Asynq server: for each pending create task, from
// cfg.FastConcurrency goroutines with a connection each, it
// dequeues the task as Asynq does, runs the ledger's own transitions
// (BeginCreate: queued -> submitting; FinishCreate: -> created with an
// order id, the simulator's status and HTTP 200, created final as with
// outcomes not followed), records the PSP lookup sample once, and marks the
// task completed as Asynq does (asynqtask.go). The Redis keys it leaves
// are the real path's; the simulation's fidelity check compares them.
func (m *memRun) processFast(ctx context.Context, batch string, n int) error {
	// One connection per goroutine, not one autopipelined connection: the
	// order in which Redis serves the connections mixes begins and
	// finishes in the audit stream as the real worker's PSP requests do.
	// Pipelined, each round carries only begins or only finishes, and more
	// stream entries share the field names of their node's first entry
	// (a stream smaller by about 5% than the real worker's).
	ap := redis.NewClient(&redis.Options{Addr: m.addr, PoolSize: m.cfg.FastConcurrency, ReadTimeout: time.Minute, WriteTimeout: time.Minute})
	defer ap.Close()
	led := ledger.New(ap)
	var sampleOnce sync.Once
	var sampleErr error
	err := parallel(ctx, n, m.cfg.FastConcurrency, func(ctx context.Context, _ int) error {
		t, err := dequeueTask(ctx, ap, jobs.Queue)
		if err != nil {
			return err
		}
		if t.Type != jobs.TypeWithdrawalCreate {
			return fmt.Errorf("bench: fast path: task %s is a %s", t.ID, t.Type)
		}
		p, err := jobs.DecodeCreate(t.Payload)
		if err != nil {
			return err
		}
		b, err := led.BeginCreate(ctx, p.Batch, p.ExternalID, p.Attempt)
		if err != nil {
			return err
		}
		if b.Action != decide.Proceed {
			return fmt.Errorf("bench: fast path: begin create of %s: %s, want %s", p.ExternalID, b.Action, decide.Proceed)
		}
		fin, err := led.FinishCreate(ctx, p.Batch, p.ExternalID, p.Attempt, decide.CreateResult{
			To: lifecycle.Created, OrderID: "WD-" + orderUUID(), PSPStatus: sandbox.StatusCreated, HTTPStatus: 200})
		if err != nil {
			return err
		}
		if fin.State != lifecycle.Created {
			return fmt.Errorf("bench: fast path: %s ended %s", p.ExternalID, fin.State)
		}
		// The worker's first created payout is its lookup sample (SETNX).
		sampleOnce.Do(func() { sampleErr = m.rdb.SetNX(ctx, keys.LookupSample(), p.ExternalID, 0).Err() })
		if sampleErr != nil {
			return sampleErr
		}
		return completeTask(ctx, ap, t)
	})
	if err != nil {
		return fmt.Errorf("bench: fast path: %w", err)
	}
	// The real worker drains the payout events' outbox (PumpEvents);
	// without a webhook endpoint they are dropped, as here.
	if _, err := worker.PumpEvents(ctx, led, nil); err != nil {
		return fmt.Errorf("bench: fast path: drain the events' outbox: %w", err)
	}
	return pollFinal(ctx, ledger.New(m.rdb), batch, n, time.Minute)
}

// orderUUID is a random version-4 UUID in the simulator's form.
func orderUUID() string {
	var b [16]byte
	binary.BigEndian.PutUint64(b[:8], rand.Uint64())
	binary.BigEndian.PutUint64(b[8:], rand.Uint64())
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	h := hex.EncodeToString(b[:])
	return h[0:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:]
}

// Fidelity is the simulation's check of its fast path: the same batch
// processed by the real worker and by the fast path, each on an emptied
// Redis, measured when every payout is final and its completed task
// retained.
type Fidelity struct {
	Rows int
	// Real and Fast are used_memory per payout without what is no key
	// (connection buffers and the script cache, which depend on the
	// connections each path opened and not on the payouts); RealRaw and
	// FastRaw with them.
	Real, Fast       float64
	RealRaw, FastRaw float64
	RealKeys         []KeyClass // by kind, as the phases have them
	FastKeys         []KeyClass
	Diffs            []string // what differs beyond FidelityTolerance; none: passed
}

// fidelity runs the check on n rows and fails naming every difference.
func (m *memRun) fidelity(ctx context.Context, n int) (*Fidelity, error) {
	file := filepath.Join(m.dir, "fidelity.csv")
	if err := WriteRows(file, 1, n); err != nil {
		return nil, err
	}
	f := &Fidelity{Rows: n}
	type shape struct{ payout, task []string }
	run := func(process func(context.Context, string, int) error) (net, raw float64, _ []KeyClass, _ shape, _ error) {
		var s shape
		if err := m.rdb.FlushAll(ctx).Err(); err != nil {
			return 0, 0, nil, s, err
		}
		empty, err := m.used(ctx)
		if err != nil {
			return 0, 0, nil, s, err
		}
		emptyNoKey, err := m.noKey(ctx)
		if err != nil {
			return 0, 0, nil, s, err
		}
		batch, err := m.load(ctx, file, n)
		if err != nil {
			return 0, 0, nil, s, err
		}
		if err := process(ctx, batch, n); err != nil {
			return 0, 0, nil, s, err
		}
		u, err := m.used(ctx)
		if err != nil {
			return 0, 0, nil, s, err
		}
		noKey, err := m.noKey(ctx)
		if err != nil {
			return 0, 0, nil, s, err
		}
		keys, err := m.keyClasses(ctx)
		if err != nil {
			return 0, 0, nil, s, err
		}
		ext := RowAt(1).ExternalID
		if s.payout, err = m.fieldsOf(ctx, "*}:p:"+ext); err != nil {
			return 0, 0, nil, s, err
		}
		if s.task, err = m.fieldsOf(ctx, asynqKey(jobs.Queue, "t:"+jobs.CreateTaskID(ext, 1))); err != nil {
			return 0, 0, nil, s, err
		}
		info, err := asynq.NewInspectorFromRedisClient(m.rdb).GetTaskInfo(jobs.Queue, jobs.CreateTaskID(ext, 1))
		if err != nil {
			return 0, 0, nil, s, fmt.Errorf("bench: fidelity: the completed task: %w", err)
		}
		if info.State != asynq.TaskStateCompleted || time.Since(info.CompletedAt) > time.Hour || info.Retention != jobs.Retention {
			return 0, 0, nil, s, fmt.Errorf("bench: fidelity: task %s is %s, completed at %s, retention %s", info.ID, info.State, info.CompletedAt, info.Retention)
		}
		return float64((u-noKey)-(empty-emptyNoKey)) / float64(n), float64(u-empty) / float64(n), keys, s, nil
	}
	var real, fast shape
	var err error
	m.logf("simulation: fidelity check, %s rows by the real worker", thousands(int64(n)))
	if f.Real, f.RealRaw, f.RealKeys, real, err = run(m.processReal); err != nil {
		return f, fmt.Errorf("bench: fidelity, real path: %w", err)
	}
	m.logf("simulation: fidelity check, the same rows by the fast path")
	if f.Fast, f.FastRaw, f.FastKeys, fast, err = run(m.processFast); err != nil {
		return f, fmt.Errorf("bench: fidelity, fast path: %w", err)
	}
	f.Diffs = compareRuns(f.Real, f.Fast, f.RealKeys, f.FastKeys)
	if !slices.Equal(real.payout, fast.payout) {
		f.Diffs = append(f.Diffs, fmt.Sprintf("payout hash fields: real %v, fast %v", real.payout, fast.payout))
	}
	if !slices.Equal(real.task, fast.task) {
		f.Diffs = append(f.Diffs, fmt.Sprintf("task hash fields: real %v, fast %v", real.task, fast.task))
	}
	m.logf("simulation: fidelity check: %.0f B/payout real, %.0f fast; %d differences", f.Real, f.Fast, len(f.Diffs))
	if len(f.Diffs) > 0 {
		return f, fmt.Errorf("bench: the fast path differs from the real worker: %s", strings.Join(f.Diffs, "; "))
	}
	return f, nil
}

// noKey returns the part of used_memory that is no key: connection
// buffers (mem_clients_normal) and the script cache (used_memory_scripts).
func (m *memRun) noKey(ctx context.Context) (int64, error) {
	info, err := m.rdb.Info(ctx, "memory").Result()
	if err != nil {
		return 0, fmt.Errorf("bench: INFO memory: %w", err)
	}
	c, err1 := strconv.ParseInt(infoField(info, "mem_clients_normal"), 10, 64)
	sc, err2 := strconv.ParseInt(infoField(info, "used_memory_scripts"), 10, 64)
	if err := errors.Join(err1, err2); err != nil {
		return 0, fmt.Errorf("bench: INFO memory: %w", err)
	}
	return c + sc, nil
}

// fieldsOf returns the sorted field names of the one hash matching
// pattern.
func (m *memRun) fieldsOf(ctx context.Context, pattern string) ([]string, error) {
	var keys []string
	iter := m.rdb.Scan(ctx, 0, pattern, 10000).Iterator()
	for iter.Next(ctx) {
		keys = append(keys, iter.Val())
	}
	if err := iter.Err(); err != nil {
		return nil, err
	}
	if len(keys) != 1 {
		return nil, fmt.Errorf("bench: fidelity: %d keys match %s", len(keys), pattern)
	}
	fields, err := m.rdb.HKeys(ctx, keys[0]).Result()
	sort.Strings(fields)
	return fields, err
}

// compareRuns lists what differs between the real and the fast run beyond
// FidelityTolerance: used_memory per payout, and for every kind of key
// holding at least FidelityShare of either run's bytes, the number of keys,
// bytes per key and encodings.
func compareRuns(real, fast float64, realKeys, fastKeys []KeyClass) []string {
	var diffs []string
	offBy := func(a, b, tol float64) bool { return math.Abs(b-a) > tol*math.Abs(a) }
	off := func(a, b float64) bool { return offBy(a, b, FidelityTolerance) }
	if off(real, fast) {
		diffs = append(diffs, fmt.Sprintf("used_memory per payout (without connection buffers and scripts): real %.0f B, fast %.0f B (%+.1f%%)", real, fast, 100*(fast-real)/real))
	}
	byClass := func(ks []KeyClass) (map[string]KeyClass, float64) {
		out, sum := map[string]KeyClass{}, 0.0
		for _, k := range ks {
			out[k.Class] = k
			sum += k.AvgBytes * float64(k.Keys)
		}
		return out, sum
	}
	r, rsum := byClass(realKeys)
	f, fsum := byClass(fastKeys)
	var classes []string
	for c, k := range r {
		if k.AvgBytes*float64(k.Keys) >= FidelityShare*rsum || f[c].AvgBytes*float64(f[c].Keys) >= FidelityShare*fsum {
			classes = append(classes, c)
		}
	}
	for c, k := range f {
		if _, ok := r[c]; !ok && k.AvgBytes*float64(k.Keys) >= FidelityShare*fsum {
			classes = append(classes, c)
		}
	}
	sort.Strings(classes)
	for _, c := range classes {
		rk, inReal := r[c]
		fk, inFast := f[c]
		switch {
		case !inReal || !inFast:
			diffs = append(diffs, fmt.Sprintf("%s: only in the %s run", c, map[bool]string{true: "real", false: "fast"}[inReal]))
		case rk.Keys != fk.Keys:
			diffs = append(diffs, fmt.Sprintf("%s: %d keys real, %d fast", c, rk.Keys, fk.Keys))
		case offBy(rk.AvgBytes, fk.AvgBytes, tolerance(rk)):
			diffs = append(diffs, fmt.Sprintf("%s: %.0f B a key real, %.0f fast (%+.1f%%)", c, rk.AvgBytes, fk.AvgBytes, 100*(fk.AvgBytes-rk.AvgBytes)/rk.AvgBytes))
		}
		if inReal && inFast && !slices.Equal(encodingNames(rk.Encodings), encodingNames(fk.Encodings)) {
			diffs = append(diffs, fmt.Sprintf("%s: encodings real %s, fast %s", c, encodings(rk.Encodings), encodings(fk.Encodings)))
		}
	}
	return diffs
}

// tolerance is how far a kind of key's bytes may be apart: StreamTolerance
// for streams, FidelityTolerance for any other.
func tolerance(k KeyClass) float64 {
	if k.Encodings["stream"] > 0 {
		return StreamTolerance
	}
	return FidelityTolerance
}

func encodingNames(m map[string]int) []string {
	var out []string
	for e := range m {
		out = append(out, e)
	}
	sort.Strings(out)
	return out
}

// write prints the check.
func (f *Fidelity) write(w io.Writer) {
	fmt.Fprintf(w, "\nFidelity check of the fast path (%s rows, real worker vs fast path, each on an empty Redis, all final, completed tasks retained): used_memory without connection buffers and scripts %.0f B/payout real, %.0f fast (%+.2f%%; tolerance %.0f%%); with them %.0f real, %.0f fast\n",
		thousands(int64(f.Rows)), f.Real, f.Fast, 100*(f.Fast-f.Real)/f.Real, 100*FidelityTolerance, f.RealRaw, f.FastRaw)
	fast := map[string]KeyClass{}
	for _, k := range f.FastKeys {
		fast[k.Class] = k
	}
	fmt.Fprintf(w, "| kind | keys real / fast | bytes/key real / fast | encodings real / fast |\n|---|---|---|---|\n")
	for _, k := range f.RealKeys {
		fk := fast[k.Class]
		fmt.Fprintf(w, "| %s | %s / %s | %.0f / %.0f | %s / %s |\n", k.Class, thousands(int64(k.Keys)), thousands(int64(fk.Keys)),
			k.AvgBytes, fk.AvgBytes, encodings(k.Encodings), encodings(fk.Encodings))
	}
	if len(f.Diffs) == 0 {
		fmt.Fprintf(w, "passed\n")
		return
	}
	fmt.Fprintf(w, "FAILED:\n")
	for _, d := range f.Diffs {
		fmt.Fprintf(w, "  %s\n", d)
	}
}
