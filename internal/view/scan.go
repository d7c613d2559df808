package view

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/acme/payout/internal/ledger"
	"github.com/acme/payout/internal/ledger/keys"
	"github.com/acme/payout/internal/lifecycle"
	"github.com/redis/go-redis/v9"
)

// The reads behind a page: a page of a batch's payouts in file order at
// the cost of the page (the line index is chunked by line number, so a
// page needs the chunk sizes and the one or two chunks it falls in), a
// page in one state from the index per state, a brief scan of a batch for
// filters and sorts, and a look-up of an externalId across batches.
// Nothing here writes but the ledger's LineIndex, which moves a batch's
// index of before the chunks into them.

// brief is what a filter or a sort needs of a payout.
type brief struct {
	ExternalID string
	Line       int
	State      lifecycle.State
	Units      int64 // amount in the batch's minor units
}

// scanGroup is how many line chunks (scanGroup*keys.LineChunk payouts)
// one call of briefsScript reads: a few milliseconds of Redis.
const scanGroup = 16

// scanWave is how many calls of briefsScript go in one pipelined round
// trip: about 16,000 payouts, so that a 100,000-payout batch is read in 7
// round trips (each a wake-up of client and server, which a busy machine
// makes costly) while a round trip holds Redis for tens of milliseconds
// at most.
const scanWave = 8

// briefsScript reads, in Redis, the payouts of the line chunks KEYS (every
// one of a batch): for each externalId of a chunk, in line order, its
// hash ARGV[1]..externalId. It replies one text per payout in state
// ARGV[2] (any state when ARGV[2] is ""): "state units line externalId",
// the externalId last so that it may hold any character. A payout whose
// hash is gone (archived meanwhile) is left out. The hashes are named by
// the script (all in the batch's slot); only the chunks are declared:
// declaring the hashes would mean shipping every externalId to Redis and
// back.
var briefsScript = redis.NewScript(`
local out = {}
for _, k in ipairs(KEYS) do
  local z = redis.call('ZRANGE', k, 0, -1, 'WITHSCORES')
  for i = 1, #z, 2 do
    local v = redis.call('HMGET', ARGV[1] .. z[i], 'state', 'units')
    if v[1] and (ARGV[2] == '' or v[1] == ARGV[2]) then
      out[#out + 1] = v[1] .. ' ' .. (v[2] or '0') .. ' ' .. z[i + 1] .. ' ' .. z[i]
    end
  end
end
return out
`)

// briefs returns every payout of batch in file line order with its state
// and amount: briefsScript over every group of chunks, scanWave calls per
// round trip.
func (r *Reader) briefs(ctx context.Context, batch string) ([]brief, error) {
	return r.scanBriefs(ctx, batch, "", 0)
}

// briefsIn returns the first limit payouts of batch in state st (any
// state when st is ""), in file line order (every one when limit <= 0):
// the scan of briefs, with the state compared in Redis, so that only
// those payouts travel, and stopped at the round trip that finds the
// limit-th.
func (r *Reader) briefsIn(ctx context.Context, batch string, st lifecycle.State, limit int) ([]brief, error) {
	return r.scanBriefs(ctx, batch, st, limit)
}

// scanBriefs runs briefsScript over the line index of batch.
func (r *Reader) scanBriefs(ctx context.Context, batch string, st lifecycle.State, limit int) ([]brief, error) {
	chunks, err := r.l.LineIndex(ctx, batch)
	if err != nil || len(chunks) == 0 {
		return nil, err
	}
	// EVALSHA after a SCRIPT LOAD per scan: a pipelined EVALSHA cannot
	// fall back to EVAL.
	if err := briefsScript.Load(ctx, r.rdb).Err(); err != nil {
		return nil, fmt.Errorf("view: read payouts of %s: %w", batch, err)
	}
	prefix := keys.Payout(batch, "")
	var out []brief
	for len(chunks) > 0 && (limit <= 0 || len(out) < limit) {
		pipe := r.rdb.Pipeline()
		cmds := make([]*redis.Cmd, 0, scanWave)
		for len(chunks) > 0 && len(cmds) < scanWave {
			group := chunks[:min(scanGroup, len(chunks))]
			chunks = chunks[len(group):]
			ks := make([]string, len(group))
			for i, c := range group {
				ks[i] = keys.LineChunkOf(batch, c)
			}
			cmds = append(cmds, briefsScript.EvalSha(ctx, pipe, ks, prefix, string(st)))
		}
		if _, err := pipe.Exec(ctx); err != nil {
			return nil, fmt.Errorf("view: read payouts of %s: %w", batch, err)
		}
		for _, c := range cmds {
			if out, err = appendBriefs(out, c); err != nil {
				return nil, fmt.Errorf("view: read payouts of %s: %w", batch, err)
			}
		}
	}
	if limit > 0 && len(out) > limit {
		out = out[:limit]
	}
	return out, nil
}

// errBriefReply is a briefsScript reply that is not "state units line
// externalId" with numbers where they belong.
var errBriefReply = errors.New("view: malformed reply of the brief scan")

// appendBriefs appends the payouts of a briefsScript reply to dst.
func appendBriefs(dst []brief, c *redis.Cmd) ([]brief, error) {
	rows, err := c.StringSlice()
	if err != nil {
		return dst, err
	}
	for _, r := range rows {
		st, rest, _ := strings.Cut(r, " ")
		units, rest, _ := strings.Cut(rest, " ")
		line, ext, ok := strings.Cut(rest, " ")
		if !ok {
			return dst, fmt.Errorf("%w: brief %q", errBriefReply, r)
		}
		u, err := strconv.ParseInt(units, 10, 64)
		if err != nil {
			return dst, fmt.Errorf("%w: units of %s: %w", errBriefReply, ext, err)
		}
		n, err := strconv.ParseFloat(line, 64)
		if err != nil {
			return dst, fmt.Errorf("%w: line of %s: %w", errBriefReply, ext, err)
		}
		dst = append(dst, brief{ExternalID: ext, Line: int(n), State: lifecycle.State(st), Units: u})
	}
	return dst, nil
}

// Payouts returns the payouts ids of batch in that order, a payout that is
// gone left out, in one round trip (the digest mail of package mail).
func (r *Reader) Payouts(ctx context.Context, batch string, ids []string) ([]ledger.Payout, error) {
	return r.payouts(ctx, batch, ids)
}

// payouts returns the payouts ids of batch in that order (a payout that
// is gone is left out), in one pipelined round trip.
func (r *Reader) payouts(ctx context.Context, batch string, ids []string) ([]ledger.Payout, error) {
	if len(ids) == 0 {
		return nil, nil
	}
	pipe := r.rdb.Pipeline()
	cmds := make([]*redis.MapStringStringCmd, len(ids))
	for i, id := range ids {
		cmds[i] = pipe.HGetAll(ctx, keys.Payout(batch, id))
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return nil, fmt.Errorf("view: read payouts of %s: %w", batch, err)
	}
	out := make([]ledger.Payout, 0, len(cmds))
	for _, c := range cmds {
		if m := c.Val(); len(m) > 0 {
			out = append(out, ledger.PayoutFromFields(batch, m))
		}
	}
	return out, nil
}

// pageByLine returns the payouts offset..offset+limit-1 of batch in file
// line order, and how many the batch has. Its Redis work is the chunk
// list and sizes (one entry per 128 lines) and the page's chunks and
// hashes.
func (r *Reader) pageByLine(ctx context.Context, batch string, offset, limit int) ([]ledger.Payout, int, error) {
	offset = max(offset, 0)
	chunks, err := r.l.LineIndex(ctx, batch)
	if err != nil {
		return nil, 0, err
	}
	pipe := r.rdb.Pipeline()
	sizes := make([]*redis.IntCmd, len(chunks))
	for i, c := range chunks {
		sizes[i] = pipe.ZCard(ctx, keys.LineChunkOf(batch, c))
	}
	if len(chunks) > 0 {
		if _, err := pipe.Exec(ctx); err != nil {
			return nil, 0, fmt.Errorf("view: list payouts of %s: %w", batch, err)
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
		ms, err := r.rdb.ZRange(ctx, keys.LineChunkOf(batch, c), int64(skip), int64(skip+limit-len(ids)-1)).Result()
		if err != nil {
			return nil, 0, fmt.Errorf("view: list payouts of %s: %w", batch, err)
		}
		ids = append(ids, ms...)
		skip = 0
	}
	ps, err := r.payouts(ctx, batch, ids)
	return ps, total, err
}

// sortBriefs orders briefs by amount (descending when desc), then by line
// (then externalId: a total order, so no stable sort is needed).
func sortBriefs(bs []brief, desc bool) {
	slices.SortFunc(bs, func(a, b brief) int {
		if a.Units != b.Units {
			if desc {
				return cmp.Compare(b.Units, a.Units)
			}
			return cmp.Compare(a.Units, b.Units)
		}
		if a.Line != b.Line {
			return cmp.Compare(a.Line, b.Line)
		}
		return strings.Compare(a.ExternalID, b.ExternalID)
	})
}

// findPayout returns the payout ext in every batch that holds one (a
// payout of a batch still in Redis), newest batch first: one EXISTS per
// batch in one pipelined round trip, then the hashes found.
func (r *Reader) findPayout(ctx context.Context, ext string) ([]ledger.Payout, error) {
	ids, err := r.BatchIDs(ctx)
	if err != nil {
		return nil, err
	}
	if len(ids) == 0 {
		return nil, nil
	}
	pipe := r.rdb.Pipeline()
	cmds := make([]*redis.MapStringStringCmd, len(ids))
	for i, b := range ids {
		cmds[i] = pipe.HGetAll(ctx, keys.Payout(b, ext))
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return nil, fmt.Errorf("view: find payout %s: %w", ext, err)
	}
	var out []ledger.Payout
	for i, c := range cmds {
		if m := c.Val(); len(m) > 0 {
			out = append(out, ledger.PayoutFromFields(ids[i], m))
		}
	}
	return out, nil
}

// maxIndexedBriefs bounds the payouts of one state that briefsInIndex
// reads (in one script call): more, and the caller scans the batch.
const maxIndexedBriefs = 10_000

// stateIndex reads, in one MULTI/EXEC, batch's counts per state and the
// size of its index of every state but queued (keys.StateIndex), plus
// the commands more queues in the same transaction. The index is complete
// when each size is the count: the transition that changes a count
// changes the index in the same script, so a batch whose payouts moved
// while the index was not kept shows a difference and is scanned instead.
func (r *Reader) stateIndex(ctx context.Context, batch string, more func(redis.Pipeliner)) (ledger.Counts, bool, error) {
	var counts *redis.MapStringStringCmd
	sizes := map[lifecycle.State]*redis.IntCmd{}
	_, err := r.rdb.TxPipelined(ctx, func(pipe redis.Pipeliner) error {
		counts = pipe.HGetAll(ctx, keys.Counts(batch))
		for _, st := range lifecycle.States {
			if st != lifecycle.Queued {
				sizes[st] = pipe.ZCard(ctx, keys.StateIndex(batch, string(st)))
			}
		}
		more(pipe)
		return nil
	})
	if err != nil {
		return ledger.Counts{}, false, fmt.Errorf("view: read state index of %s: %w", batch, err)
	}
	c := ledger.CountsFromFields(counts.Val())
	for st, n := range sizes {
		if n.Val() != c.Rows[st] {
			return c, false, nil
		}
	}
	return c, true, nil
}

// pageInState returns the payouts offset..offset+limit-1 of batch in
// state st, in file line order, and how many are in st, from the index per
// state at the cost of the page; ok is false when the index is not
// complete (or st is queued and some payout has left it): the caller
// scans instead.
func (r *Reader) pageInState(ctx context.Context, batch string, st lifecycle.State, offset, limit int) (ps []ledger.Payout, total int, ok bool, err error) {
	offset = max(offset, 0)
	var ids *redis.StringSliceCmd
	c, ok, err := r.stateIndex(ctx, batch, func(pipe redis.Pipeliner) {
		if st != lifecycle.Queued && limit > 0 {
			ids = pipe.ZRange(ctx, keys.StateIndex(batch, string(st)), int64(offset), int64(offset+limit-1))
		}
	})
	switch {
	case err != nil || !ok:
		return nil, 0, false, err
	case st == lifecycle.Queued:
		if c.Rows[lifecycle.Queued] != c.Total() {
			return nil, 0, false, nil
		}
		ps, total, err := r.pageByLine(ctx, batch, offset, limit)
		return ps, total, err == nil, err
	}
	total = int(c.Rows[st])
	if ids == nil {
		return nil, total, true, nil
	}
	ps, err = r.payouts(ctx, batch, ids.Val())
	return ps, total, err == nil, err
}

// briefsInIndex returns the payouts of batch in state st, in file line
// order, from the index per state: briefsScript over the state's zset.
// ok is false when the index is not complete, st is queued, or st holds
// more than maxIndexedBriefs payouts: the caller scans instead.
func (r *Reader) briefsInIndex(ctx context.Context, batch string, st lifecycle.State) (bs []brief, ok bool, err error) {
	if st == lifecycle.Queued {
		return nil, false, nil
	}
	c, ok, err := r.stateIndex(ctx, batch, func(redis.Pipeliner) {})
	if err != nil || !ok || c.Rows[st] > maxIndexedBriefs {
		return nil, false, err
	}
	res := briefsScript.Run(ctx, r.rdb, []string{keys.StateIndex(batch, string(st))}, keys.Payout(batch, ""), string(st))
	if bs, err = appendBriefs(nil, res); err != nil {
		return nil, false, fmt.Errorf("view: read payouts of %s in %s: %w", batch, st, err)
	}
	return bs, true, nil
}
