//go:build integration

package queue_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/acme/payout/internal/decide"
	"github.com/acme/payout/internal/ledger"
	"github.com/acme/payout/internal/lifecycle"
	"github.com/acme/payout/internal/money"
	"github.com/acme/payout/internal/proof/testenv/redistest"
	"github.com/acme/payout/internal/queue"
	"github.com/acme/payout/internal/reconcile"
	"github.com/acme/payout/jobs"
	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"
	"github.com/rs/zerolog"
)

// shape puts the task id in a shape, with rdb's commands, as Asynq's
// scripts (or the failures of hibiken/asynq#1051, #1144) leave it.
type shape struct {
	name string
	lost bool
	put  func(ctx context.Context, rdb *redis.Client, id string, now time.Time) error
}

func toActive(ctx context.Context, rdb *redis.Client, id string, lease time.Time, withLease bool) error {
	pipe := rdb.TxPipeline()
	pipe.LRem(ctx, queue.PendingKey(), 0, id)
	pipe.LPush(ctx, queue.ActiveKey(), id)
	pipe.HSet(ctx, queue.TaskKey(id), "state", "active")
	if withLease {
		pipe.ZAdd(ctx, queue.LeaseKey(), redis.Z{Score: float64(lease.Unix()), Member: id})
	}
	_, err := pipe.Exec(ctx)
	return err
}

func toZset(ctx context.Context, rdb *redis.Client, id, state, key string, add bool) error {
	pipe := rdb.TxPipeline()
	pipe.LRem(ctx, queue.PendingKey(), 0, id)
	pipe.HSet(ctx, queue.TaskKey(id), "state", state)
	if add {
		pipe.ZAdd(ctx, key, redis.Z{Score: float64(time.Now().Add(time.Hour).Unix()), Member: id})
	}
	_, err := pipe.Exec(ctx)
	return err
}

var shapes = []shape{
	// Lost: nothing will ever run them.
	{"active without lease", true, func(ctx context.Context, rdb *redis.Client, id string, now time.Time) error {
		return toActive(ctx, rdb, id, now, false)
	}},
	{"active, lease expired long ago", true, func(ctx context.Context, rdb *redis.Client, id string, now time.Time) error {
		return toActive(ctx, rdb, id, now.Add(-10*time.Minute), true)
	}},
	{"active with a lease, not in the active list", true, func(ctx context.Context, rdb *redis.Client, id string, now time.Time) error {
		if err := toActive(ctx, rdb, id, now.Add(30*time.Second), true); err != nil {
			return err
		}
		return rdb.LRem(ctx, queue.ActiveKey(), 0, id).Err()
	}},
	{"pending, not in the pending list", true, func(ctx context.Context, rdb *redis.Client, id string, now time.Time) error {
		return rdb.LRem(ctx, queue.PendingKey(), 0, id).Err()
	}},
	{"scheduled, not in its zset", true, func(ctx context.Context, rdb *redis.Client, id string, now time.Time) error {
		return toZset(ctx, rdb, id, "scheduled", queue.ScheduledKey(), false)
	}},
	{"retry, not in its zset", true, func(ctx context.Context, rdb *redis.Client, id string, now time.Time) error {
		return toZset(ctx, rdb, id, "retry", queue.RetryKey(), false)
	}},
	// Live: left alone.
	{"pending in the list", false, func(context.Context, *redis.Client, string, time.Time) error { return nil }},
	{"active with a lease", false, func(ctx context.Context, rdb *redis.Client, id string, now time.Time) error {
		return toActive(ctx, rdb, id, now.Add(30*time.Second), true)
	}},
	{"active, lease expired within the grace (the recoverer's to act)", false, func(ctx context.Context, rdb *redis.Client, id string, now time.Time) error {
		return toActive(ctx, rdb, id, now.Add(-40*time.Second), true)
	}},
	{"scheduled in its zset", false, func(ctx context.Context, rdb *redis.Client, id string, now time.Time) error {
		return toZset(ctx, rdb, id, "scheduled", queue.ScheduledKey(), true)
	}},
	{"retry in its zset", false, func(ctx context.Context, rdb *redis.Client, id string, now time.Time) error {
		return toZset(ctx, rdb, id, "retry", queue.RetryKey(), true)
	}},
}

// ageSuspect moves a sweep's first sighting of id as orphaned back by d
// (by Redis's clock), as if it had been made that long ago.
func ageSuspect(ctx context.Context, t *testing.T, rdb *redis.Client, id string, d time.Duration) {
	t.Helper()
	seen, err := rdb.Get(ctx, queue.SuspectKey(id)).Int64()
	if err != nil {
		t.Fatalf("%s: no first sighting as orphaned: %v", id, err)
	}
	if err := rdb.Set(ctx, queue.SuspectKey(id), seen-int64(d/time.Second)-1, time.Hour).Err(); err != nil {
		t.Fatal(err)
	}
}

// TestReconcilerJudgesTasksByWhereTheySit puts the task of each of a
// loaded batch's payouts in one shape. The sweep restores the step of
// every lost shape exactly as for a deleted task (a queued payout gets its
// create task back, one pending task under its ID; a submitting payout
// moves to checking and gets a status check, never a create) and leaves
// every live shape untouched. Before, the reconciler trusted the state
// word and every lost shape stayed open forever.
func TestReconcilerJudgesTasksByWhereTheySit(t *testing.T) {
	for _, submitting := range []bool{false, true} {
		t.Run(fmt.Sprintf("payout submitting %v", submitting), func(t *testing.T) {
			testShapes(t, submitting)
		})
	}
}

func testShapes(t *testing.T, submitting bool) {
	ctx := context.Background()
	opt, err := redis.ParseURL(redistest.New(t))
	if err != nil {
		t.Fatal(err)
	}
	rdb := redis.NewClient(opt)
	t.Cleanup(func() { rdb.Close() })
	led := ledger.New(rdb)
	client := asynq.NewClientFromRedisClient(rdb)
	t.Cleanup(func() { client.Close() })

	const batch = "orphans"
	if _, _, err := led.BeginBatch(ctx, ledger.Batch{ID: batch, File: "o.csv", LoadedAt: time.Now(), Rows: int64(len(shapes)), Total: money.MustParse("1"), Scale: 2}); err != nil {
		t.Fatal(err)
	}
	var ps []ledger.NewPayout
	for i := range shapes {
		ps = append(ps, ledger.NewPayout{Line: i + 2, ExternalID: fmt.Sprintf("O-%d", i), Amount: money.MustParse("1.00"), Telecom: "MTS", Destination: "telecom MTS"})
	}
	if _, err := led.Register(ctx, batch, ps, 2); err != nil {
		t.Fatal(err)
	}
	if err := led.FinishBatch(ctx, batch); err != nil {
		t.Fatal(err)
	}
	now, err := led.Time(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for i, sh := range shapes {
		ext := ps[i].ExternalID
		if submitting { // a worker began the create and vanished
			if b, err := led.BeginCreate(ctx, batch, ext, 1); err != nil || b.Action != decide.Proceed {
				t.Fatalf("begin %s: %+v %v", ext, b, err)
			}
		}
		task, err := jobs.NewCreateTask(jobs.CreatePayload{Batch: batch, ExternalID: ext, Attempt: 1, Amount: "1.00", Destination: "telecom MTS"})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := client.EnqueueContext(ctx, queue.Asynq(task, time.Now())); err != nil {
			t.Fatal(err)
		}
		if err := sh.put(ctx, rdb, jobs.CreateTaskID(ext, 1), now); err != nil {
			t.Fatal(err)
		}
	}

	// Every payout is older than the sweep's grace (1ms) by now.
	time.Sleep(5 * time.Millisecond)
	sw := reconcile.New(rdb, led, reconcile.Config{Grace: time.Millisecond}, zerolog.Nop())
	rep, err := sw.Sweep(ctx, false)
	if err != nil {
		t.Fatal(err)
	}
	repaired := map[string]reconcile.Repair{}
	for _, r := range rep.Repairs {
		if r.Done {
			repaired[r.ExternalID] = r
		}
	}
	// A lost active task is only suspect on a first sweep; its sighting
	// is aged by the lease grace (as a sweep that long later would find
	// it), and the next sweep removes it.
	for i, sh := range shapes {
		active := strings.HasPrefix(sh.name, "active")
		if _, ok := repaired[ps[i].ExternalID]; ok && active {
			t.Errorf("%s: repaired on the first sweep; want it suspect until a sweep the lease grace later", sh.name)
		}
		if sh.lost && active {
			ageSuspect(ctx, t, rdb, jobs.CreateTaskID(ps[i].ExternalID, 1), queue.DefaultLeaseGrace)
		}
	}
	rep, err = sw.Sweep(ctx, false)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rep.Repairs {
		if r.Done {
			repaired[r.ExternalID] = r
		}
	}
	for i, sh := range shapes {
		ext := ps[i].ExternalID
		createID := jobs.CreateTaskID(ext, 1)
		r, ok := repaired[ext]
		if !sh.lost {
			if ok {
				t.Errorf("%s (live): repaired %+v, want untouched", sh.name, r)
			}
			continue
		}
		if !ok || !r.Done || !r.Orphan {
			t.Errorf("%s (lost): repair %+v (found %v), want done, orphan removed", sh.name, r, ok)
			continue
		}
		p, err := led.Get(ctx, batch, ext)
		if err != nil {
			t.Fatal(err)
		}
		if submitting {
			// Never a create: checking, with its status check, and the
			// orphaned create task gone.
			if p.State != lifecycle.Checking || p.Creates != 1 {
				t.Errorf("%s: payout %s creates %d, want checking after 1 create", sh.name, p.State, p.Creates)
			}
			if n := rdb.Exists(ctx, queue.TaskKey(createID)).Val(); n != 0 {
				t.Errorf("%s: the orphaned create task is still there", sh.name)
			}
			if st := rdb.HGet(ctx, queue.TaskKey(jobs.StatusTaskID(ext, p.Seq)), "state").Val(); st != "pending" && st != "scheduled" {
				t.Errorf("%s: status check %d is %q, want enqueued", sh.name, p.Seq, st)
			}
			continue
		}
		if p.State != lifecycle.Queued {
			t.Errorf("%s: payout %s, want queued", sh.name, p.State)
		}
		// Exactly one task under the ID, where a worker will take it.
		if st := rdb.HGet(ctx, queue.TaskKey(createID), "state").Val(); st != "pending" {
			t.Errorf("%s: restored create task is %q, want pending", sh.name, st)
		}
		pending, _ := rdb.LRange(ctx, queue.PendingKey(), 0, -1).Result()
		n := 0
		for _, id := range pending {
			if id == createID {
				n++
			}
		}
		inActive := rdb.LPos(ctx, queue.ActiveKey(), createID, redis.LPosArgs{}).Err() == nil
		_, leaseErr := rdb.ZScore(ctx, queue.LeaseKey(), createID).Result()
		if n != 1 || inActive || leaseErr == nil {
			t.Errorf("%s: %s %d times in the pending list, in the active list %v, lease kept %v; want once, nowhere else", sh.name, createID, n, inActive, leaseErr == nil)
		}
	}
	// A second sweep finds nothing more to do.
	if rep, err := sw.Sweep(ctx, false); err != nil || len(rep.Repairs) != 0 {
		t.Fatalf("second sweep: %d repairs %v, want none", len(rep.Repairs), err)
	}
}

// TestOrphanCheckTrustsTheWorkerRegistry: Asynq scores a lease with the
// worker's clock; a worker whose clock is behind Redis's by more than the
// lease grace runs a task whose lease looks long expired. Listed in
// Asynq's worker registry (asynq:workers:{host:pid:sid}, TTL set by
// Redis), it is live: never removed, however many sweeps find its lease
// old. A real orphan (no worker lists it) is removed only by a sweep at
// least the lease grace after the first that found it. Before, both were
// removed at the first sweep.
func TestOrphanCheckTrustsTheWorkerRegistry(t *testing.T) {
	ctx := context.Background()
	opt, err := redis.ParseURL(redistest.New(t))
	if err != nil {
		t.Fatal(err)
	}
	rdb := redis.NewClient(opt)
	t.Cleanup(func() { rdb.Close() })
	client := asynq.NewClientFromRedisClient(rdb)
	t.Cleanup(func() { client.Close() })
	now := time.Now()
	var ids []string
	for _, ext := range []string{"SKEW-1", "LOST-1"} {
		task, err := jobs.NewCreateTask(jobs.CreatePayload{Batch: "b", ExternalID: ext, Attempt: 1, Amount: "1.00", Destination: "telecom MTS"})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := client.EnqueueContext(ctx, queue.Asynq(task, time.Now())); err != nil {
			t.Fatal(err)
		}
		id := jobs.CreateTaskID(ext, 1)
		// The lease as a worker 10 minutes behind Redis writes it.
		if err := toActive(ctx, rdb, id, now.Add(-10*time.Minute+30*time.Second), true); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	skewed, lost := ids[0], ids[1]
	// The skewed worker's heartbeat, as Asynq v0.26 writes it.
	wkey := "asynq:workers:{host-b:4242:8f1c}"
	pipe := rdb.TxPipeline()
	pipe.ZAdd(ctx, "asynq:workers", redis.Z{Score: float64(now.Add(-10 * time.Minute).Unix()), Member: wkey})
	pipe.HSet(ctx, wkey, skewed, "worker-info")
	pipe.Expire(ctx, wkey, 10*time.Second)
	if _, err := pipe.Exec(ctx); err != nil {
		t.Fatal(err)
	}

	live, err := queue.NewLiveness(rdb, 0).Live(ctx, ids)
	if err != nil {
		t.Fatal(err)
	}
	if !live[0] || live[1] {
		t.Fatalf("live %v, want [true false]: the registry lists %s, nothing lists %s", live, skewed, lost)
	}
	for sweep := 1; sweep <= 2; sweep++ {
		o, err := queue.RemoveOrphan(ctx, rdb, skewed, 0, 0)
		if err != nil || o != queue.OrphanLive {
			t.Fatalf("sweep %d, %s (listed by a worker): %q %v, want live", sweep, skewed, o, err)
		}
	}
	if st := rdb.HGet(ctx, queue.TaskKey(skewed), "state").Val(); st != "active" {
		t.Errorf("%s is %q, want still active", skewed, st)
	}

	if o, err := queue.RemoveOrphan(ctx, rdb, lost, 0, 0); err != nil || o != queue.OrphanSuspect {
		t.Fatalf("first sweep, %s: %q %v, want suspect", lost, o, err)
	}
	if o, err := queue.RemoveOrphan(ctx, rdb, lost, 0, 0); err != nil || o != queue.OrphanSuspect {
		t.Fatalf("second sweep within the lease grace, %s: %q %v, want suspect", lost, o, err)
	}
	if n := rdb.Exists(ctx, queue.TaskKey(lost)).Val(); n != 1 {
		t.Fatalf("%s removed before a sweep the lease grace later", lost)
	}
	ageSuspect(ctx, t, rdb, lost, queue.DefaultLeaseGrace)
	if o, err := queue.RemoveOrphan(ctx, rdb, lost, 0, 0); err != nil || o != queue.OrphanRemoved {
		t.Fatalf("sweep the lease grace later, %s: %q %v, want removed", lost, o, err)
	}
	if n := rdb.Exists(ctx, queue.TaskKey(lost), queue.SuspectKey(lost)).Val(); n != 0 {
		t.Errorf("%s: task or its sighting left after removal", lost)
	}

	// The worker dies: its registry entry expires (Redis's TTL), and the
	// task is judged like any other.
	rdb.Del(ctx, wkey)
	if o, err := queue.RemoveOrphan(ctx, rdb, skewed, 0, 0); err != nil || o != queue.OrphanSuspect {
		t.Fatalf("%s after its worker died: %q %v, want suspect", skewed, o, err)
	}
}
