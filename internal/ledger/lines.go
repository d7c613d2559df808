package ledger

import (
	"context"
	"fmt"
	"strconv"

	"github.com/redis/go-redis/v9"
)

// A batch's line index is chunked by file line: lineChunksKey lists the
// chunk numbers, lineChunkKey(k) holds the externalIds of lines
// 128k..128k+127 scored by line. Batches registered before the index was
// chunked have it in one zset (linesKey); the first read of such a batch
// moves those entries into the chunks (moveUnchunkedLines), so every read
// walks one index.

// LineIndex returns the chunk numbers of batch's line index, in order,
// after moving any entry of the unchunked index into the chunks: the
// index every reader walks (eachIDs here, the pages of package view,
// through keys.LineChunkOf). Its Redis work is one round trip when there
// is nothing to move.
func (l *Ledger) LineIndex(ctx context.Context, batch string) ([]int64, error) {
	pipe := l.rdb.Pipeline()
	old := pipe.Exists(ctx, linesKey(batch))
	ms := pipe.ZRange(ctx, lineChunksKey(batch), 0, -1)
	if _, err := pipe.Exec(ctx); err != nil {
		return nil, fmt.Errorf("ledger: list line chunks of %s: %w", batch, err)
	}
	if old.Val() == 0 {
		return chunkNumbers(ms.Val()), nil
	}
	if err := l.moveUnchunkedLines(ctx, batch); err != nil {
		return nil, err
	}
	return l.lineChunks(ctx, batch)
}

// moveUnchunkedLines moves the entries of batch's unchunked line index into
// its chunks, eachChunk per MULTI/EXEC: each transaction adds entries to
// their chunks and removes them from linesKey together, so a reader never
// sees an entry in neither, and a concurrent mover's repeat is harmless
// (the same member with the same line). It ends when linesKey is empty
// (Redis deletes an empty zset); a loader of the old version that writes
// it again later has its rows moved by the next read.
func (l *Ledger) moveUnchunkedLines(ctx context.Context, batch string) error {
	for {
		zs, err := l.rdb.ZRangeWithScores(ctx, linesKey(batch), 0, eachChunk-1).Result()
		if err != nil {
			return fmt.Errorf("ledger: move line index of %s into chunks: %w", batch, err)
		}
		if len(zs) == 0 {
			return nil
		}
		byChunk := map[int64][]redis.Z{}
		members := make([]any, len(zs))
		for i, z := range zs {
			c := int64(z.Score) / lineChunk
			byChunk[c] = append(byChunk[c], z)
			members[i] = z.Member
		}
		_, err = l.rdb.TxPipelined(ctx, func(pipe redis.Pipeliner) error {
			chunks := make([]redis.Z, 0, len(byChunk))
			for c, zs := range byChunk {
				pipe.ZAdd(ctx, lineChunkKey(batch, c), zs...)
				chunks = append(chunks, redis.Z{Score: float64(c), Member: c})
			}
			pipe.ZAdd(ctx, lineChunksKey(batch), chunks...)
			pipe.ZRem(ctx, linesKey(batch), members...)
			return nil
		})
		if err != nil {
			return fmt.Errorf("ledger: move line index of %s into chunks: %w", batch, err)
		}
	}
}

// eachIDs calls fn with the externalIds of a batch in file line order
// (by line, then externalId: ZRANGE's order), at most eachChunk at a time:
// eachChunk/lineChunk chunks per pipelined round trip.
func (l *Ledger) eachIDs(ctx context.Context, batch string, fn func(ids []string) error) error {
	chunks, err := l.LineIndex(ctx, batch)
	if err != nil {
		return err
	}
	const per = eachChunk / lineChunk
	for len(chunks) > 0 {
		pipe := l.rdb.Pipeline()
		cmds := make([]*redis.StringSliceCmd, 0, per)
		for _, c := range chunks[:min(per, len(chunks))] {
			cmds = append(cmds, pipe.ZRange(ctx, lineChunkKey(batch, c), 0, -1))
		}
		chunks = chunks[len(cmds):]
		if _, err := pipe.Exec(ctx); err != nil {
			return fmt.Errorf("ledger: list payouts of %s: %w", batch, err)
		}
		ids := make([]string, 0, per*lineChunk)
		for _, c := range cmds {
			ids = append(ids, c.Val()...)
		}
		if len(ids) == 0 {
			continue
		}
		if err := fn(ids); err != nil {
			return err
		}
	}
	return nil
}

// lineChunks returns the chunk numbers of batch's line index, in order,
// as they stand (no entry of the unchunked index is moved).
func (l *Ledger) lineChunks(ctx context.Context, batch string) ([]int64, error) {
	ms, err := l.rdb.ZRange(ctx, lineChunksKey(batch), 0, -1).Result()
	if err != nil {
		return nil, fmt.Errorf("ledger: list line chunks of %s: %w", batch, err)
	}
	return chunkNumbers(ms), nil
}

// chunkNumbers parses the members of a lineChunksKey.
func chunkNumbers(ms []string) []int64 {
	out := make([]int64, 0, len(ms))
	for _, m := range ms {
		if c, err := strconv.ParseInt(m, 10, 64); err == nil {
			out = append(out, c)
		}
	}
	return out
}
