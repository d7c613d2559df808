//go:build integration

package jobs_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/acme/payout/internal/ledger"
	"github.com/acme/payout/internal/money"
	"github.com/acme/payout/internal/reconcile"
	"github.com/acme/payout/internal/testenv/redistest"
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
	pipe.LRem(ctx, jobs.PendingKey(), 0, id)
	pipe.LPush(ctx, jobs.ActiveKey(), id)
	pipe.HSet(ctx, jobs.TaskKey(id), "state", "active")
	if withLease {
		pipe.ZAdd(ctx, jobs.LeaseKey(), redis.Z{Score: float64(lease.Unix()), Member: id})
	}
	_, err := pipe.Exec(ctx)
	return err
}

func toZset(ctx context.Context, rdb *redis.Client, id, state, key string, add bool) error {
	pipe := rdb.TxPipeline()
	pipe.LRem(ctx, jobs.PendingKey(), 0, id)
	pipe.HSet(ctx, jobs.TaskKey(id), "state", state)
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
		return rdb.LRem(ctx, jobs.ActiveKey(), 0, id).Err()
	}},
	{"pending, not in the pending list", true, func(ctx context.Context, rdb *redis.Client, id string, now time.Time) error {
		return rdb.LRem(ctx, jobs.PendingKey(), 0, id).Err()
	}},
	{"scheduled, not in its zset", true, func(ctx context.Context, rdb *redis.Client, id string, now time.Time) error {
		return toZset(ctx, rdb, id, "scheduled", jobs.ScheduledKey(), false)
	}},
	{"retry, not in its zset", true, func(ctx context.Context, rdb *redis.Client, id string, now time.Time) error {
		return toZset(ctx, rdb, id, "retry", jobs.RetryKey(), false)
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
		return toZset(ctx, rdb, id, "scheduled", jobs.ScheduledKey(), true)
	}},
	{"retry in its zset", false, func(ctx context.Context, rdb *redis.Client, id string, now time.Time) error {
		return toZset(ctx, rdb, id, "retry", jobs.RetryKey(), true)
	}},
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
			if b, err := led.BeginCreate(ctx, batch, ext, 1); err != nil || b.Action != ledger.Proceed {
				t.Fatalf("begin %s: %+v %v", ext, b, err)
			}
		}
		task, err := jobs.NewCreateTask(jobs.CreatePayload{Batch: batch, ExternalID: ext, Attempt: 1, Amount: "1.00", Destination: "telecom MTS"})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := client.EnqueueContext(ctx, task); err != nil {
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
		repaired[r.ExternalID] = r
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
			if p.State != ledger.Checking || p.Creates != 1 {
				t.Errorf("%s: payout %s creates %d, want checking after 1 create", sh.name, p.State, p.Creates)
			}
			if n := rdb.Exists(ctx, jobs.TaskKey(createID)).Val(); n != 0 {
				t.Errorf("%s: the orphaned create task is still there", sh.name)
			}
			if st := rdb.HGet(ctx, jobs.TaskKey(jobs.StatusTaskID(ext, p.Seq)), "state").Val(); st != "pending" && st != "scheduled" {
				t.Errorf("%s: status check %d is %q, want enqueued", sh.name, p.Seq, st)
			}
			continue
		}
		if p.State != ledger.Queued {
			t.Errorf("%s: payout %s, want queued", sh.name, p.State)
		}
		// Exactly one task under the ID, where a worker will take it.
		if st := rdb.HGet(ctx, jobs.TaskKey(createID), "state").Val(); st != "pending" {
			t.Errorf("%s: restored create task is %q, want pending", sh.name, st)
		}
		pending, _ := rdb.LRange(ctx, jobs.PendingKey(), 0, -1).Result()
		n := 0
		for _, id := range pending {
			if id == createID {
				n++
			}
		}
		inActive := rdb.LPos(ctx, jobs.ActiveKey(), createID, redis.LPosArgs{}).Err() == nil
		_, leaseErr := rdb.ZScore(ctx, jobs.LeaseKey(), createID).Result()
		if n != 1 || inActive || leaseErr == nil {
			t.Errorf("%s: %s %d times in the pending list, in the active list %v, lease kept %v; want once, nowhere else", sh.name, createID, n, inActive, leaseErr == nil)
		}
	}
	// A second sweep finds nothing more to do.
	if rep, err := sw.Sweep(ctx, false); err != nil || len(rep.Repairs) != 0 {
		t.Fatalf("second sweep: %d repairs %v, want none", len(rep.Repairs), err)
	}
}
