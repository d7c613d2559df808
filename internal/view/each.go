package view

import (
	"context"
	"fmt"

	"github.com/acme/payout/internal/ledger"
	"github.com/acme/payout/internal/ledger/keys"
	"github.com/redis/go-redis/v9"
)

// eachChunk is how many payouts Each and EachRaw read per round trip.
const eachChunk = 1000

// chunksPerRead is how many chunks of the line index (keys.LineChunkOf,
// keys.LineChunk lines each) Each reads per round trip.
const chunksPerRead = eachChunk / keys.LineChunk

// Each calls fn for every payout of a batch in file line order, reading
// eachChunk payouts per pipelined round trip. A payout the line index
// names but whose hash is gone (deleted by an archive run) comes as the
// zero Payout of the batch.
func (r *Reader) Each(ctx context.Context, batch string, fn func(ledger.Payout) error) error {
	return r.EachRaw(ctx, batch, func(_ string, f map[string]string) error {
		return fn(ledger.PayoutFromFields(batch, f))
	})
}

// EachRaw calls fn for every payout of batch in file line order with its
// externalId and all of its stored fields (nil when the line index names
// the payout but its hash is gone), eachChunk per pipelined round trip:
// what the archive writes.
func (r *Reader) EachRaw(ctx context.Context, batch string, fn func(ext string, fields map[string]string) error) error {
	chunks, err := r.l.LineIndex(ctx, batch)
	if err != nil {
		return err
	}
	for len(chunks) > 0 {
		pipe := r.rdb.Pipeline()
		cmds := make([]*redis.StringSliceCmd, 0, chunksPerRead)
		for _, c := range chunks[:min(chunksPerRead, len(chunks))] {
			cmds = append(cmds, pipe.ZRange(ctx, keys.LineChunkOf(batch, c), 0, -1))
		}
		chunks = chunks[len(cmds):]
		if _, err := pipe.Exec(ctx); err != nil {
			return fmt.Errorf("view: list payouts of %s: %w", batch, err)
		}
		var ids []string
		for _, c := range cmds {
			ids = append(ids, c.Val()...)
		}
		if err := r.eachHash(ctx, batch, ids, fn); err != nil {
			return err
		}
	}
	return nil
}

// eachHash reads the hashes of ids in one pipelined round trip and calls
// fn with each (nil fields for a payout that is gone).
func (r *Reader) eachHash(ctx context.Context, batch string, ids []string, fn func(string, map[string]string) error) error {
	if len(ids) == 0 {
		return nil
	}
	pipe := r.rdb.Pipeline()
	cmds := make([]*redis.MapStringStringCmd, len(ids))
	for i, id := range ids {
		cmds[i] = pipe.HGetAll(ctx, keys.Payout(batch, id))
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return fmt.Errorf("view: read payouts of %s: %w", batch, err)
	}
	for i, c := range cmds {
		var f map[string]string
		if m := c.Val(); len(m) > 0 {
			f = m
		}
		if err := fn(ids[i], f); err != nil {
			return err
		}
	}
	return nil
}
