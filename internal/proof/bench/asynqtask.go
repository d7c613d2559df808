package bench

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/redis/go-redis/v9"
	"google.golang.org/protobuf/encoding/protowire"
)

// The simulation's fast path moves Asynq tasks from pending to active to
// completed itself, as an Asynq server does, because Asynq has no public
// API for it (its Redis code is in its internal/rdb package). Everything
// here is taken from github.com/hibiken/asynq v0.26.0 and must follow it
// on an upgrade (the fidelity check of the simulation compares the result
// with a run of the real worker):
//
//   - the scripts: internal/rdb/rdb.go, dequeueCmd and markAsCompleteCmd,
//     verbatim;
//   - the keys: internal/base/base.go (PendingKey, PausedKey, ActiveKey,
//     LeaseKey, CompletedKey, TaskKeyPrefix, ProcessedKey,
//     ProcessedTotalKey);
//   - the arguments: RDB.Dequeue (lease of LeaseDuration, 30 s) and
//     RDB.MarkAsComplete (CompletedAt set to now in the message, completed
//     set scored now + the message's Retention, daily stats kept statsTTL,
//     90 days);
//   - the message: internal/proto/asynq.proto, TaskMessage (type 1,
//     payload 2, id 3, queue 4, unique_key 10, retention 12, completed_at
//     13), which base.EncodeMessage marshals with proto.Marshal, fields in
//     the order of their numbers.

var asynqDequeue = redis.NewScript(`
if redis.call("EXISTS", KEYS[2]) == 0 then
	local id = redis.call("RPOPLPUSH", KEYS[1], KEYS[3])
	if id then
		local key = ARGV[2] .. id
		redis.call("HSET", key, "state", "active")
		redis.call("HDEL", key, "pending_since")
		redis.call("ZADD", KEYS[4], ARGV[1], id)
		return redis.call("HGET", key, "msg")
	end
end
return nil`)

var asynqMarkAsComplete = redis.NewScript(`
if redis.call("LREM", KEYS[1], 0, ARGV[1]) == 0 then
  return redis.error_reply("NOT FOUND")
end
if redis.call("ZREM", KEYS[2], ARGV[1]) == 0 then
  return redis.error_reply("NOT FOUND")
end
if redis.call("ZADD", KEYS[3], ARGV[3], ARGV[1]) ~= 1 then
  return redis.error_reply("INTERNAL")
end
redis.call("HSET", KEYS[4], "msg", ARGV[4], "state", "completed")
local n = redis.call("INCR", KEYS[5])
if tonumber(n) == 1 then
	redis.call("EXPIREAT", KEYS[5], ARGV[2])
end
local total = redis.call("GET", KEYS[6])
if tonumber(total) == tonumber(ARGV[5]) then
	redis.call("SET", KEYS[6], 1)
else
	redis.call("INCR", KEYS[6])
end
return redis.status_reply("OK")
`)

const (
	asynqLease    = 30 * time.Second
	asynqStatsTTL = 90 * 24 * time.Hour
)

// errNoTask: the queue's pending list is empty.
var errNoTask = errors.New("bench: no pending task")

// asynqTask is the part of a task message the fast path reads.
type asynqTask struct {
	Type, ID, Queue, UniqueKey string
	Payload                    []byte
	Retention                  int64 // seconds
	raw                        []byte
}

// asynqKey is Asynq's key name of queue q (asynq's internal/base: the
// queue's keys share the prefix asynq:{QUEUE}:); the one place the bench
// spells an Asynq key.
func asynqKey(q, name string) string { return "asynq:{" + q + "}:" + name }

// dequeueTask pops the oldest pending task of queue q as an Asynq server
// does (RDB.Dequeue): it is active, leased, and no longer pending.
func dequeueTask(ctx context.Context, rdb redis.Scripter, q string) (asynqTask, error) {
	p := asynqKey(q, "")
	res, err := asynqDequeue.Run(ctx, rdb, []string{p + "pending", p + "paused", p + "active", p + "lease"},
		time.Now().Add(asynqLease).Unix(), p+"t:").Text()
	if errors.Is(err, redis.Nil) {
		return asynqTask{}, errNoTask
	}
	if err != nil {
		return asynqTask{}, fmt.Errorf("bench: asynq dequeue: %w", err)
	}
	return decodeTask([]byte(res))
}

// completeTask marks an active task completed as an Asynq server does when
// its handler returned nil and the task has a retention
// (RDB.MarkAsComplete).
func completeTask(ctx context.Context, rdb redis.Scripter, t asynqTask) error {
	if t.UniqueKey != "" {
		return fmt.Errorf("bench: task %s has a unique key: not a task of ours", t.ID)
	}
	now := time.Now()
	msg, err := withCompletedAt(t.raw, now.Unix())
	if err != nil {
		return err
	}
	p := asynqKey(t.Queue, "")
	keys := []string{p + "active", p + "lease", p + "completed", p + "t:" + t.ID,
		p + "processed:" + now.UTC().Format("2006-01-02"), p + "processed"}
	err = asynqMarkAsComplete.Run(ctx, rdb, keys, t.ID, now.Add(asynqStatsTTL).Unix(), now.Unix()+t.Retention,
		msg, int64(math.MaxInt64)).Err()
	if err != nil {
		return fmt.Errorf("bench: asynq mark %s completed: %w", t.ID, err)
	}
	return nil
}

// decodeTask reads the fields of an encoded TaskMessage the fast path needs.
func decodeTask(b []byte) (asynqTask, error) {
	t := asynqTask{raw: b}
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return t, fmt.Errorf("bench: asynq message: %w", protowire.ParseError(n))
		}
		b = b[n:]
		switch typ {
		case protowire.BytesType:
			v, n := protowire.ConsumeBytes(b)
			if n < 0 {
				return t, fmt.Errorf("bench: asynq message field %d: %w", num, protowire.ParseError(n))
			}
			switch num {
			case 1:
				t.Type = string(v)
			case 2:
				t.Payload = v
			case 3:
				t.ID = string(v)
			case 4:
				t.Queue = string(v)
			case 10:
				t.UniqueKey = string(v)
			}
			b = b[n:]
		default:
			if num == 12 && typ == protowire.VarintType {
				v, _ := protowire.ConsumeVarint(b)
				t.Retention = int64(v)
			}
			n := protowire.ConsumeFieldValue(num, typ, b)
			if n < 0 {
				return t, fmt.Errorf("bench: asynq message field %d: %w", num, protowire.ParseError(n))
			}
			b = b[n:]
		}
	}
	if t.ID == "" || t.Queue == "" {
		return t, errors.New("bench: asynq message without id or queue")
	}
	return t, nil
}

// withCompletedAt returns the message b with completed_at (field 13) set to
// at, the bytes proto.Marshal would write: fields in number order.
func withCompletedAt(b []byte, at int64) ([]byte, error) {
	out := make([]byte, 0, len(b)+8)
	put := func() {
		out = protowire.AppendTag(out, 13, protowire.VarintType)
		out = protowire.AppendVarint(out, uint64(at))
	}
	done := false
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return nil, fmt.Errorf("bench: asynq message: %w", protowire.ParseError(n))
		}
		m := protowire.ConsumeFieldValue(num, typ, b[n:])
		if m < 0 {
			return nil, fmt.Errorf("bench: asynq message field %d: %w", num, protowire.ParseError(m))
		}
		field := b[:n+m]
		b = b[n+m:]
		if num == 13 {
			continue
		}
		if num > 13 && !done {
			put()
			done = true
		}
		out = append(out, field...)
	}
	if !done {
		put()
	}
	return out, nil
}
