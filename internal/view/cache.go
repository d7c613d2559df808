package view

import (
	"context"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/acme/payout/internal/lifecycle"
)

// briefsFor bounds how long a scan of a batch is reused.
const briefsFor = 30 * time.Second

// briefCache holds the latest scan of each batch.
type briefCache struct {
	mu sync.Mutex
	m  map[string]briefEntry
}

type briefEntry struct {
	briefs []brief
	counts map[lifecycle.State]int64
	at     time.Time
	// sorted holds the scan in an amount order (AmountAsc, AmountDesc),
	// made on first use.
	sorted map[Order][]brief
}

// get returns the entry key while it is fresh and the batch's counts per
// state are those it was taken at; it drops the stale entries meanwhile,
// so that the cache stays small.
func (bc *briefCache) get(key string, counts map[lifecycle.State]int64) (briefEntry, bool) {
	bc.mu.Lock()
	defer bc.mu.Unlock()
	for k, v := range bc.m {
		if time.Since(v.at) >= briefsFor {
			delete(bc.m, k)
		}
	}
	e, ok := bc.m[key]
	return e, ok && maps.Equal(e.counts, counts)
}

// put stores the entry key.
func (bc *briefCache) put(key string, e briefEntry) {
	bc.mu.Lock()
	defer bc.mu.Unlock()
	bc.m[key] = e
}

// reviewKey is the cache key of the scan of batch id for its payouts in
// needs_review only (the whole scan's key is id).
func reviewKey(id string) string { return id + "\x00" + string(lifecycle.NeedsReview) }

// cachedBriefs is the scan of batch id in order: the cached one while
// the batch's counts per state are those it was taken at, a new one
// otherwise. The caller must not modify it.
func (r *Reader) cachedBriefs(ctx context.Context, id string, order Order) ([]brief, error) {
	if r.cache == nil {
		bs, err := r.briefs(ctx, id)
		return sortedBriefs(bs, order), err
	}
	counts, err := r.Counts(ctx, id)
	if err != nil {
		return nil, err
	}
	e, ok := r.cache.get(id, counts.Rows)
	if !ok {
		bs, err := r.briefs(ctx, id)
		if err != nil {
			return nil, err
		}
		e = briefEntry{briefs: bs, counts: counts.Rows, at: time.Now(), sorted: map[Order][]brief{}}
	}
	out := e.briefs
	if order == AmountAsc || order == AmountDesc {
		r.cache.mu.Lock()
		sorted := e.sorted[order]
		r.cache.mu.Unlock()
		if sorted == nil {
			sorted = sortedBriefs(e.briefs, order)
			r.cache.mu.Lock()
			e.sorted[order] = sorted
			r.cache.mu.Unlock()
		}
		out = sorted
	}
	r.cache.put(id, e)
	return out, nil
}

// reviewBriefs is up to limit payouts of batch id in needs_review, in file
// order, from the batch's cached scan when there is one, else from a scan
// that compares the state in Redis (cached when it found them all). counts
// are the batch's counts per state.
func (r *Reader) reviewBriefs(ctx context.Context, id string, counts map[lifecycle.State]int64, limit int) ([]brief, error) {
	if r.cache == nil {
		return r.briefsIn(ctx, id, lifecycle.NeedsReview, limit)
	}
	if e, ok := r.cache.get(id, counts); ok {
		var out []brief
		for _, p := range e.briefs {
			if p.State == lifecycle.NeedsReview && len(out) < limit {
				out = append(out, p)
			}
		}
		return out, nil
	}
	if e, ok := r.cache.get(reviewKey(id), counts); ok && (len(e.briefs) >= limit || int64(len(e.briefs)) == counts[lifecycle.NeedsReview]) {
		return e.briefs[:min(limit, len(e.briefs))], nil
	}
	bs, err := r.briefsIn(ctx, id, lifecycle.NeedsReview, limit)
	if err != nil {
		return nil, err
	}
	r.cache.put(reviewKey(id), briefEntry{briefs: bs, counts: counts, at: time.Now()})
	return bs, nil
}

// sortedBriefs is a copy of bs in an amount order, or bs itself in file
// order.
func sortedBriefs(bs []brief, order Order) []brief {
	if order != AmountAsc && order != AmountDesc {
		return bs
	}
	out := slices.Clone(bs)
	sortBriefs(out, order == AmountDesc)
	return out
}
