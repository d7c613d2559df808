package ledger

import (
	"context"
	"fmt"
	"sort"
	"strconv"

	"github.com/redis/go-redis/v9"
)

// The read side of the web UI's console: a page of a batch's payouts in
// file order at the cost of the page (the line index is chunked by line
// number, so a page needs the chunk sizes and the one or two chunks it
// falls in), a brief scan of a batch for filters and sorts, and a look-up
// of an externalId across batches. Nothing here writes.

// PayoutBrief is what a filter or a sort needs of a payout.
type PayoutBrief struct {
	ExternalID string
	Line       int
	State      State
	Units      int64 // amount in the batch's minor units
}

// briefsScript reads the line, state and units of each payout KEYS[i]:
// one call per thousand payouts instead of a command each (the client's
// per-command cost is what a scan of a large batch spends). Every key is
// declared and of one batch, so one slot. Replies line, state, units per
// key ("" for a field or payout that is gone).
var briefsScript = redis.NewScript(`
local out = {}
for i, k in ipairs(KEYS) do
  local v = redis.call('HMGET', k, 'line', 'state', 'units')
  out[#out + 1] = v[1] or ''
  out[#out + 1] = v[2] or ''
  out[#out + 1] = v[3] or ''
end
return out
`)

// Briefs returns every payout of batch in file line order with its state
// and amount, a script call per eachChunk payouts.
func (l *Ledger) Briefs(ctx context.Context, batch string) ([]PayoutBrief, error) {
	var out []PayoutBrief
	err := l.eachIDs(ctx, batch, func(ids []string) error {
		keys := make([]string, len(ids))
		for i, id := range ids {
			keys[i] = payoutKey(batch, id)
		}
		v, err := briefsScript.Run(ctx, l.rdb, keys).StringSlice()
		if err != nil {
			return fmt.Errorf("ledger: read payouts of %s: %w", batch, err)
		}
		for i := range ids {
			line, st, units := v[3*i], v[3*i+1], v[3*i+2]
			if st == "" {
				continue // gone (archived meanwhile)
			}
			n, _ := strconv.Atoi(line)
			u, _ := strconv.ParseInt(units, 10, 64)
			out = append(out, PayoutBrief{ExternalID: ids[i], Line: n, State: State(st), Units: u})
		}
		return nil
	})
	return out, err
}

// Payouts returns the payouts ids of batch in that order (a payout that is
// gone is left out), in one pipelined round trip.
func (l *Ledger) Payouts(ctx context.Context, batch string, ids []string) ([]Payout, error) {
	if len(ids) == 0 {
		return nil, nil
	}
	hashes, err := l.readPayouts(ctx, batch, ids)
	if err != nil {
		return nil, err
	}
	out := make([]Payout, 0, len(hashes))
	for _, h := range hashes {
		if len(h) > 0 {
			out = append(out, parsePayout(batch, h))
		}
	}
	return out, nil
}

// PageByLine returns the payouts offset..offset+limit-1 of batch in file
// line order, and how many the batch has. Its Redis work is the chunk
// list and sizes (one entry per 128 lines) and the page's chunks and
// hashes; a batch registered before the index was chunked is read whole.
func (l *Ledger) PageByLine(ctx context.Context, batch string, offset, limit int) ([]Payout, int, error) {
	if offset < 0 {
		offset = 0
	}
	old, err := l.rdb.Exists(ctx, linesKey(batch)).Result()
	if err != nil {
		return nil, 0, fmt.Errorf("ledger: list payouts of %s: %w", batch, err)
	}
	if old > 0 {
		return l.pageByScan(ctx, batch, offset, limit)
	}
	chunks, err := l.lineChunks(ctx, batch)
	if err != nil {
		return nil, 0, err
	}
	pipe := l.rdb.Pipeline()
	sizes := make([]*redis.IntCmd, len(chunks))
	for i, c := range chunks {
		sizes[i] = pipe.ZCard(ctx, lineChunkKey(batch, c))
	}
	if len(chunks) > 0 {
		if _, err := pipe.Exec(ctx); err != nil {
			return nil, 0, fmt.Errorf("ledger: list payouts of %s: %w", batch, err)
		}
	}
	total := 0
	for _, s := range sizes {
		total += int(s.Val())
	}
	var ids []string
	skip := offset
	for i, c := range chunks {
		if len(ids) >= limit {
			break
		}
		n := int(sizes[i].Val())
		if skip >= n {
			skip -= n
			continue
		}
		ms, err := l.rdb.ZRange(ctx, lineChunkKey(batch, c), int64(skip), int64(skip+limit-len(ids)-1)).Result()
		if err != nil {
			return nil, 0, fmt.Errorf("ledger: list payouts of %s: %w", batch, err)
		}
		ids = append(ids, ms...)
		skip = 0
	}
	ps, err := l.Payouts(ctx, batch, ids)
	return ps, total, err
}

// pageByScan pages a batch through its whole line index.
func (l *Ledger) pageByScan(ctx context.Context, batch string, offset, limit int) ([]Payout, int, error) {
	var ids []string
	total := 0
	err := l.eachIDs(ctx, batch, func(page []string) error {
		for _, id := range page {
			if total >= offset && len(ids) < limit {
				ids = append(ids, id)
			}
			total++
		}
		return nil
	})
	if err != nil {
		return nil, 0, err
	}
	ps, err := l.Payouts(ctx, batch, ids)
	return ps, total, err
}

// SortBriefs orders briefs by amount (descending when desc), then by line.
func SortBriefs(bs []PayoutBrief, desc bool) {
	sort.SliceStable(bs, func(i, j int) bool {
		if bs[i].Units != bs[j].Units {
			return (bs[i].Units > bs[j].Units) == desc
		}
		return bs[i].Line < bs[j].Line
	})
}

// FindPayout returns the payout ext in every batch that holds one (a
// payout of a batch still in Redis), newest batch first: one EXISTS per
// batch in one pipelined round trip, then the hashes found.
func (l *Ledger) FindPayout(ctx context.Context, ext string) ([]Payout, error) {
	ids, err := l.BatchIDs(ctx)
	if err != nil {
		return nil, err
	}
	if len(ids) == 0 {
		return nil, nil
	}
	pipe := l.rdb.Pipeline()
	cmds := make([]*redis.MapStringStringCmd, len(ids))
	for i, b := range ids {
		cmds[i] = pipe.HGetAll(ctx, payoutKey(b, ext))
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return nil, fmt.Errorf("ledger: find payout %s: %w", ext, err)
	}
	var out []Payout
	for i, c := range cmds {
		if m := c.Val(); len(m) > 0 {
			out = append(out, parsePayout(ids[i], m))
		}
	}
	return out, nil
}
