package jobs

import (
	"encoding/json"
	"fmt"
)

// TypeWithdrawalWatch asks the worker to query the status of a paid
// order again while the payout is watched (money may come back: returned).
// Its task ID is [WatchTaskID].
const TypeWithdrawalWatch = "withdrawal:watch"

// WatchPayload is the payload of a withdrawal:watch task.
type WatchPayload struct {
	Batch      string `json:"batch"`
	ExternalID string `json:"externalId"`
	// DueMS is the due time (Unix ms, Redis's clock) of the check a watch
	// sweep found: the worker skips the task when the watch's next check
	// is due at another time by then (this check was done, by an earlier
	// task of the same ID or by a callback's). 0 (a callback's check, or a
	// task of an older version): the check runs in any case.
	DueMS int64 `json:"dueMs,omitempty"`
}

// WatchTaskID is the task ID of the watch check of a payout due at second
// at (Unix time): the check a watch sweep found due, or one a PSP callback
// moved to now.
func WatchTaskID(externalID string, at int64) string {
	return fmt.Sprintf("watch:%s:%d", externalID, at)
}

// NewWatchTask builds a watch check task; at is WatchTaskID's.
func NewWatchTask(p WatchPayload, at int64) (Task, error) {
	if p.Batch == "" || p.ExternalID == "" {
		return Task{}, fmt.Errorf("jobs: watch payload needs batch and externalId")
	}
	b, err := json.Marshal(p)
	if err != nil {
		return Task{}, fmt.Errorf("jobs: encode watch payload: %w", err)
	}
	return Task{Type: TypeWithdrawalWatch, Payload: b, ID: WatchTaskID(p.ExternalID, at)}, nil
}

// DecodeWatch reads a watch payload.
func DecodeWatch(b []byte) (WatchPayload, error) {
	var p WatchPayload
	if err := json.Unmarshal(b, &p); err != nil {
		return p, fmt.Errorf("jobs: decode watch payload: %w", err)
	}
	if p.Batch == "" || p.ExternalID == "" {
		return p, fmt.Errorf("jobs: watch payload lacks batch or externalId")
	}
	return p, nil
}
