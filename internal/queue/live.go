package queue

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/acme/payout/jobs"
	"github.com/redis/go-redis/v9"
)

// Asynq v0.26 keeps a task of Queue as a hash (taskKey) whose field
// "state" is pending, active, scheduled, retry, archived, completed or
// aggregating, and keeps its ID in the structure that makes it run:
//
//	pending    the queue's pending list (LPUSHed, popped by a worker)
//	active     the active list AND the lease zset (score: the lease's
//	           expiry, unix seconds, extended by the worker's heartbeat);
//	           a task whose lease expired is moved back by Asynq's
//	           recoverer, which looks every minute for leases expired
//	           more than 30 s ago
//	scheduled  the scheduled zset; retry the retry zset
//
// The state word alone is not enough: Asynq users report tasks left in
// state active with no lease entry after Redis access was lost during a
// worker restart (hibiken/asynq#1051, #1144), which the recoverer never
// sees. A task is live only where something will run it. Reading these
// keys directly lets the reconciler look at thousands of tasks in a few
// pipelined round trips; TestLiveAgreesWithTheInspector fails if Asynq
// ever moves them.
func taskKey(id string) string { return "asynq:{" + jobs.Queue + "}:t:" + id }
func pendingKey() string       { return "asynq:{" + jobs.Queue + "}:pending" }
func activeKey() string        { return "asynq:{" + jobs.Queue + "}:active" }
func leaseKey() string         { return "asynq:{" + jobs.Queue + "}:lease" }
func scheduledKey() string     { return "asynq:{" + jobs.Queue + "}:scheduled" }
func retryKey() string         { return "asynq:{" + jobs.Queue + "}:retry" }
func queueKeys(id string) []string {
	return []string{taskKey(id), pendingKey(), activeKey(), leaseKey(), scheduledKey(), retryKey(), suspectKey(id)}
}

// Asynq's worker registry: every server's heartbeat (every few seconds)
// rewrites the hash asynq:workers:{host:pid:sid}, one field per task it is
// running (field: the task ID), and gives it a TTL of two heartbeats, set
// by Redis (EXPIRE): the registry says which tasks a live worker holds
// without reading any worker's clock. The zset asynq:workers lists those
// hashes (its scores are the worker's clock: not read).
const workersKey = "asynq:workers"

// suspectKey holds the Redis time (unix seconds) a sweep first found the
// active task id orphaned; in the queue's hash slot, so RemoveOrphan's
// script reads it with the task's keys.
func suspectKey(id string) string { return "payout:reconcile:{" + jobs.Queue + "}:suspect:" + id }

// Asynq's keys of Queue, for tools and tests that look at (or, like the
// chaos suite, damage) the queue as Asynq keeps it.
var (
	TaskKey      = taskKey
	PendingKey   = pendingKey
	ActiveKey    = activeKey
	LeaseKey     = leaseKey
	ScheduledKey = scheduledKey
	RetryKey     = retryKey
	SuspectKey   = suspectKey
)

// DefaultLeaseGrace is how long after its lease expired an active task is
// still left to Asynq's recoverer: it acts on leases expired 30 s ago or
// more, once a minute; two minutes leave room for a slow sweep and
// clock skew.
const DefaultLeaseGrace = 2 * time.Minute

// Liveness judges tasks by where they sit. It keeps a snapshot of the
// pending list between calls (refreshed when a task said pending is not
// in it), so a sweep of many chunks reads that list about once.
type Liveness struct {
	rdb redis.UniversalClient
	// LeaseGrace: an active task whose lease expired longer ago than this
	// is lost (Asynq's recoverer would have moved it). Default
	// DefaultLeaseGrace.
	LeaseGrace time.Duration
	pending    map[string]struct{}
}

// NewLiveness judges the tasks of Queue on rdb.
func NewLiveness(rdb redis.UniversalClient, leaseGrace time.Duration) *Liveness {
	if leaseGrace <= 0 {
		leaseGrace = DefaultLeaseGrace
	}
	return &Liveness{rdb: rdb, LeaseGrace: leaseGrace}
}

// Live reports, for each task ID, whether a task holds it in Queue where
// something will run it: pending and in the pending list; active, in the
// active list, with a lease not expired longer ago than LeaseGrace, or
// active and listed by a live worker in Asynq's registry (the lease is in
// the worker's clock, which may be behind Redis's);
// scheduled or retry and in its zset. A missing, completed or archived
// task is not live, nor is one in any other state or shape (lost).
// LeaseGrace and the snapshot are this Liveness's.
func (lv *Liveness) Live(ctx context.Context, ids []string) ([]bool, error) {
	live := make([]bool, len(ids))
	if len(ids) == 0 {
		return live, nil
	}
	at, err := readPlaces(ctx, lv.rdb, ids)
	if err != nil {
		return nil, err
	}
	pendingIdx, activeIdx := at.judge(live, lv.LeaseGrace)
	if len(activeIdx) > 0 {
		if err := lv.judgeActive(ctx, ids, activeIdx, live); err != nil {
			return nil, err
		}
	}
	if len(pendingIdx) > 0 {
		if err := lv.judgePending(ctx, ids, pendingIdx, live); err != nil {
			return nil, err
		}
	}
	return live, nil
}

// places is where Live found each of its task IDs, read in one pipeline:
// the task's state word, its lease's score, its position in the active
// list and its scores in the scheduled and retry zsets, with Redis's time.
type places struct {
	now    *redis.TimeCmd
	states []*redis.StringCmd
	leases []*redis.FloatCmd
	active []*redis.IntCmd
	sched  []*redis.FloatCmd
	retry  []*redis.FloatCmd
}

// readPlaces reads the places of ids in one round trip.
func readPlaces(ctx context.Context, rdb redis.UniversalClient, ids []string) (places, error) {
	pipe := rdb.Pipeline()
	at := places{
		now:    pipe.Time(ctx),
		states: make([]*redis.StringCmd, len(ids)),
		leases: make([]*redis.FloatCmd, len(ids)),
		active: make([]*redis.IntCmd, len(ids)),
		sched:  make([]*redis.FloatCmd, len(ids)),
		retry:  make([]*redis.FloatCmd, len(ids)),
	}
	for i, id := range ids {
		at.states[i] = pipe.HGet(ctx, taskKey(id), "state")
		at.leases[i] = pipe.ZScore(ctx, leaseKey(), id)
		at.active[i] = pipe.LPos(ctx, activeKey(), id, redis.LPosArgs{}) // the active list is short: at most the workers' concurrency
		at.sched[i] = pipe.ZScore(ctx, scheduledKey(), id)
		at.retry[i] = pipe.ZScore(ctx, retryKey(), id)
	}
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		return places{}, fmt.Errorf("queue: read task states: %w", err)
	}
	return at, nil
}

// judge sets live[i] for the tasks their places show live: active with a
// lease not expired longer ago than leaseGrace, scheduled or retry and in
// its zset. It returns the indexes it cannot judge alone: the tasks said
// pending (judgePending), and the active ones not found live
// (judgeActive).
func (at places) judge(live []bool, leaseGrace time.Duration) (pendingIdx, activeIdx []int) {
	for i := range at.states {
		switch at.states[i].Val() {
		case "pending":
			pendingIdx = append(pendingIdx, i)
		case "active":
			live[i] = at.active[i].Err() == nil && at.leases[i].Err() == nil &&
				!leaseExpired(at.leases[i].Val(), at.now.Val(), leaseGrace)
			if !live[i] {
				activeIdx = append(activeIdx, i)
			}
		case "scheduled":
			live[i] = at.sched[i].Err() == nil
		case "retry":
			live[i] = at.retry[i].Err() == nil
		}
	}
	return pendingIdx, activeIdx
}

// judgeActive sets live[i], for each i of activeIdx (tasks in state
// active whose lease looks expired or missing), to whether Asynq's worker
// registry lists ids[i].
func (lv *Liveness) judgeActive(ctx context.Context, ids []string, activeIdx []int, live []bool) error {
	// The lease's score is the worker's clock: a worker whose clock
	// is behind Redis's looks expired while it runs the task. One the
	// registry lists is running.
	running, err := Running(ctx, lv.rdb)
	if err != nil {
		return err
	}
	for _, i := range activeIdx {
		_, live[i] = running[ids[i]]
	}
	return nil
}

// judgePending sets live[i], for each i of pendingIdx (tasks in state
// pending), to whether ids[i] is in the pending list.
func (lv *Liveness) judgePending(ctx context.Context, ids []string, pendingIdx []int, live []bool) error {
	// A task said pending that was in the snapshot is in the list now:
	// Asynq sets the state and pushes the ID in one script, and pops it
	// setting active in another. One not in it may have been enqueued
	// since: read the list again (after the states) before calling it lost.
	missing := false
	for _, i := range pendingIdx {
		if _, ok := lv.pending[ids[i]]; ok {
			live[i] = true
		} else {
			missing = true
		}
	}
	if !missing {
		return nil
	}
	if err := lv.refreshPending(ctx); err != nil {
		return err
	}
	for _, i := range pendingIdx {
		_, live[i] = lv.pending[ids[i]]
	}
	return nil
}

// Running returns the IDs of the tasks Asynq's worker registry says a
// live worker runs now (see workersKey): the fields of every
// asynq:workers:{...} hash not expired.
func Running(ctx context.Context, rdb redis.UniversalClient) (map[string]struct{}, error) {
	keys, err := rdb.ZRange(ctx, workersKey, 0, -1).Result()
	if err != nil {
		return nil, fmt.Errorf("queue: read the worker registry: %w", err)
	}
	running := map[string]struct{}{}
	if len(keys) == 0 {
		return running, nil
	}
	pipe := rdb.Pipeline()
	fields := make([]*redis.StringSliceCmd, len(keys))
	for i, k := range keys {
		fields[i] = pipe.HKeys(ctx, k)
	}
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		return nil, fmt.Errorf("queue: read the worker registry: %w", err)
	}
	for _, f := range fields {
		for _, id := range f.Val() {
			running[id] = struct{}{}
		}
	}
	return running, nil
}

func (lv *Liveness) refreshPending(ctx context.Context) error {
	ids, err := lv.rdb.LRange(ctx, pendingKey(), 0, -1).Result()
	if err != nil {
		return fmt.Errorf("queue: read the pending list: %w", err)
	}
	lv.pending = make(map[string]struct{}, len(ids))
	for _, id := range ids {
		lv.pending[id] = struct{}{}
	}
	return nil
}

// leaseExpired reports whether a lease (unix seconds) expired longer ago
// than grace at now.
func leaseExpired(lease float64, now time.Time, grace time.Duration) bool {
	return time.Unix(int64(lease), 0).Add(grace).Before(now)
}

// Orphan is what RemoveOrphan found.
type Orphan string

// The answers of RemoveOrphan.
const (
	OrphanNone    Orphan = "none"    // no task holds the ID (or only a completed or archived one: Remind replaces it)
	OrphanLive    Orphan = "live"    // the task is where something will run it after all: leave it
	OrphanRemoved Orphan = "removed" // a lost task: every trace of it removed, the ID is free
	// OrphanSuspect: an active task that looks lost, first seen so less
	// than the lease grace ago (by Redis's clock): left for a later sweep.
	OrphanSuspect Orphan = "suspect"
)

// removeOrphanScript checks, atomically, where a task sits and removes it
// if nothing will run it: its hash, and its ID from every list and zset of
// the queue (a worker that still holds it finds nothing to acknowledge:
// Asynq's done and retry scripts refuse a task not in the active list).
// An active task is removed only when a sweep found it lost at least the
// lease grace after a sweep first did (suspect key, Redis's clock): a task
// a worker just took (fresh lease, in the worker's clock, possibly behind
// Redis's; not yet in the registry) is in the registry by then.
//
//	KEYS[1]  the task's hash (taskKey): field state
//	KEYS[2]  the queue's pending list (pendingKey)
//	KEYS[3]  the queue's active list (activeKey)
//	KEYS[4]  the queue's lease zset (leaseKey): score, the lease's expiry
//	KEYS[5]  the queue's scheduled zset (scheduledKey)
//	KEYS[6]  the queue's retry zset (retryKey)
//	KEYS[7]  the suspicion of this task (suspectKey): Redis time first seen lost
//	ARGV[1]  the task ID
//	ARGV[2]  the lease grace, whole seconds
//	ARGV[3]  how long a suspicion is kept unconfirmed, whole seconds
//
// It returns one of the Orphan words. All keys share the queue's hash
// slot ({payouts}), so the script runs on a cluster too.
var removeOrphanScript = redis.NewScript(`
local st = redis.call('HGET', KEYS[1], 'state')
if not st or st == 'completed' or st == 'archived' then
  redis.call('DEL', KEYS[7])
  return 'none'
end
local id = ARGV[1]
if st == 'pending' then
  if redis.call('LPOS', KEYS[2], id) then return 'live' end
elseif st == 'active' then
  local now = tonumber(redis.call('TIME')[1])
  local lease = redis.call('ZSCORE', KEYS[4], id)
  if lease and redis.call('LPOS', KEYS[3], id) then
    if tonumber(lease) + tonumber(ARGV[2]) >= now then
      redis.call('DEL', KEYS[7])
      return 'live'
    end
  end
  local seen = redis.call('GET', KEYS[7])
  if not seen then
    redis.call('SET', KEYS[7], now, 'EX', ARGV[3])
    return 'suspect'
  end
  if tonumber(seen) + tonumber(ARGV[2]) > now then
    redis.call('EXPIRE', KEYS[7], ARGV[3])
    return 'suspect'
  end
elseif st == 'scheduled' then
  if redis.call('ZSCORE', KEYS[5], id) then return 'live' end
elseif st == 'retry' then
  if redis.call('ZSCORE', KEYS[6], id) then return 'live' end
end
redis.call('LREM', KEYS[2], 0, id)
redis.call('LREM', KEYS[3], 0, id)
redis.call('ZREM', KEYS[4], id)
redis.call('ZREM', KEYS[5], id)
redis.call('ZREM', KEYS[6], id)
redis.call('DEL', KEYS[1])
redis.call('DEL', KEYS[7])
return 'removed'
`)

// RemoveOrphan removes the task holding id if it is lost (as Live judges,
// checked again atomically), so that the ID is free for the step's task
// to be enqueued again (payout's tasks have fixed IDs: Asynq refuses a
// second task with the ID of one that exists in any state).
//
// An active task is removed only on a second finding at least leaseGrace
// after the first (OrphanSuspect until then), both by Redis's clock and
// kept in Redis, so that every reconciler agrees; one the worker registry
// lists is live. A first finding not confirmed within forget (0:
// 4×leaseGrace; give more than the sweep interval plus leaseGrace) is
// forgotten.
func RemoveOrphan(ctx context.Context, rdb redis.UniversalClient, id string, leaseGrace, forget time.Duration) (Orphan, error) {
	if leaseGrace <= 0 {
		leaseGrace = DefaultLeaseGrace
	}
	if forget <= leaseGrace {
		forget = 4 * leaseGrace
	}
	running, err := Running(ctx, rdb)
	if err != nil {
		return "", err
	}
	if _, ok := running[id]; ok {
		return OrphanLive, nil
	}
	res, err := removeOrphanScript.Run(ctx, rdb, queueKeys(id), id, strconv.FormatInt(int64(leaseGrace/time.Second), 10),
		strconv.FormatInt(int64(forget/time.Second), 10)).Text()
	if err != nil {
		return "", fmt.Errorf("queue: remove orphaned task %s: %w", id, err)
	}
	return Orphan(res), nil
}
