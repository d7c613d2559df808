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
