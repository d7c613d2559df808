package view

import (
	"context"
	"fmt"

	"github.com/acme/payout/internal/ledger"
	"github.com/acme/payout/internal/ledger/keys"
	"github.com/acme/payout/internal/lifecycle"
	"github.com/redis/go-redis/v9"
)

// BatchStatus is a batch with its counters.
type BatchStatus struct {
	ledger.Batch
	Counts ledger.Counts
	// Interrupted: the batch is loading but no loader holds its load lock
	// (the lock expires LoadLockTTL after its loader died, and is released
	// at once by a loader that failed). No create is sent for it; running
	// the same file again completes it, payout discard abandons it.
	Interrupted bool
}

// State is how a person reads the batch's phase: "loading, interrupted"
// for an interrupted load, else the phase.
func (b BatchStatus) State() string {
	if b.Interrupted {
		return lifecycle.PhaseLoading + ", interrupted"
	}
	return b.Phase
}

// BatchIDs lists batch ids, newest first.
func (r *Reader) BatchIDs(ctx context.Context) ([]string, error) {
	ids, err := r.rdb.ZRevRange(ctx, keys.Batches(), 0, -1).Result()
	if err != nil {
		return nil, fmt.Errorf("view: list batches: %w", err)
	}
	return ids, nil
}

// Counts returns the per-state counters of a batch.
func (r *Reader) Counts(ctx context.Context, id string) (ledger.Counts, error) {
	m, err := r.rdb.HGetAll(ctx, keys.Counts(id)).Result()
	if err != nil {
		return ledger.Counts{}, fmt.Errorf("view: read counts of %s: %w", id, err)
	}
	return ledger.CountsFromFields(m), nil
}

// statusCmds are the pipelined reads of one batch's status.
type statusCmds struct {
	meta, counts *redis.MapStringStringCmd
	lock         *redis.IntCmd
}

func queueStatus(ctx context.Context, pipe redis.Pipeliner, id string) statusCmds {
	return statusCmds{
		meta:   pipe.HGetAll(ctx, keys.Meta(id)),
		counts: pipe.HGetAll(ctx, keys.Counts(id)),
		lock:   pipe.Exists(ctx, keys.LoadLock(id)),
	}
}

// status is the batch status read by c; ok is false when it has no meta.
func (c statusCmds) status() (BatchStatus, bool) {
	m := c.meta.Val()
	if len(m) == 0 {
		return BatchStatus{}, false
	}
	b := ledger.BatchFromFields(m)
	return BatchStatus{Batch: b, Counts: ledger.CountsFromFields(c.counts.Val()),
		Interrupted: b.Phase == lifecycle.PhaseLoading && c.lock.Val() == 0}, true
}

// Statuses returns every batch with its counters, newest first, in two
// pipelined round trips.
func (r *Reader) Statuses(ctx context.Context) ([]BatchStatus, error) {
	ids, err := r.BatchIDs(ctx)
	if err != nil || len(ids) == 0 {
		return nil, err
	}
	pipe := r.rdb.Pipeline()
	cmds := make([]statusCmds, len(ids))
	for i, id := range ids {
		cmds[i] = queueStatus(ctx, pipe, id)
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return nil, fmt.Errorf("view: read batches: %w", err)
	}
	out := make([]BatchStatus, 0, len(ids))
	for _, c := range cmds {
		if s, ok := c.status(); ok {
			out = append(out, s)
		}
	}
	return out, nil
}

// Status returns one batch with its counters, or ledger.ErrNotFound.
func (r *Reader) Status(ctx context.Context, id string) (BatchStatus, error) {
	pipe := r.rdb.Pipeline()
	c := queueStatus(ctx, pipe, id)
	if _, err := pipe.Exec(ctx); err != nil {
		return BatchStatus{}, fmt.Errorf("view: read batch %s: %w", id, err)
	}
	s, ok := c.status()
	if !ok {
		return BatchStatus{}, fmt.Errorf("batch %s: %w", id, ledger.ErrNotFound)
	}
	return s, nil
}

// RawBatch returns a batch's meta and counts hashes as stored (the
// archive writes them), or ledger.ErrNotFound.
func (r *Reader) RawBatch(ctx context.Context, id string) (meta, counts map[string]string, err error) {
	pipe := r.rdb.Pipeline()
	mc := pipe.HGetAll(ctx, keys.Meta(id))
	cc := pipe.HGetAll(ctx, keys.Counts(id))
	if _, err := pipe.Exec(ctx); err != nil {
		return nil, nil, fmt.Errorf("view: read batch %s: %w", id, err)
	}
	if len(mc.Val()) == 0 {
		return nil, nil, fmt.Errorf("batch %s: %w", id, ledger.ErrNotFound)
	}
	return mc.Val(), cc.Val(), nil
}
