package queue

import (
	"context"
	"fmt"

	"github.com/acme/payout/jobs"
	"github.com/redis/go-redis/v9"
)

// pausedKey is the key Asynq v0.26 sets while Queue is paused (Inspector
// PauseQueue, payout pause, asynqmon's pause button); its absence means
// running. TestQueuePausedAgreesWithTheInspector fails if Asynq moves it.
func pausedKey() string { return "asynq:{" + jobs.Queue + "}:paused" }

// QueuePaused reports whether jobs.Queue is paused: nothing is sent, nothing
// is lost, until it is resumed. One EXISTS, cheap enough for every page
// and every payout status (the inspector's queue info scans the queue).
func QueuePaused(ctx context.Context, rdb redis.UniversalClient) (bool, error) {
	n, err := rdb.Exists(ctx, pausedKey()).Result()
	if err != nil {
		return false, fmt.Errorf("is queue %s paused: %w", jobs.Queue, err)
	}
	return n == 1, nil
}

// allQueuesKey is the set of queue names Asynq v0.26 knows (its client adds
// a queue on its first enqueue); the inspector answers NOT_FOUND for, and
// cannot pause, a queue not in it. TestPauseAFreshQueue fails if Asynq
// moves it.
func allQueuesKey() string { return "asynq:queues" }

// RegisterQueue makes jobs.Queue known to Asynq before any task was enqueued,
// as its client does on the first enqueue, so that payout pause works on
// a fresh stack (pausing before the first load is a way to hold it).
func RegisterQueue(ctx context.Context, rdb redis.UniversalClient) error {
	if err := rdb.SAdd(ctx, allQueuesKey(), jobs.Queue).Err(); err != nil {
		return fmt.Errorf("register queue %s: %w", jobs.Queue, err)
	}
	return nil
}
