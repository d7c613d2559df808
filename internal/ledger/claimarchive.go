package ledger

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/acme/payout/internal/extid"
	"github.com/redis/go-redis/v9"
)

// Claims of archived batches.
//
// A live batch's claim on an externalId is one key, PREFIX:x:EXTID (about
// 100 bytes). When the batch is archived its claims move into bucketed
// hashes small enough for Redis's listpack encoding (at most
// hash-max-listpack-entries entries, 512 by default, of at most
// hash-max-listpack-value bytes, 64 by default), about 45 bytes a claim:
//
//	PREFIX:xa:gens       hash  per generation g: "n:g" claims held, "t:g" latest day; "swept" day of the last sweep
//	PREFIX:xa:G:K        hash  generation G, bucket K: field EXTID, value "BATCH:DAY"
//
// The bucket of an externalId is FNV-1a(EXTID) mod the generation's bucket
// count, claimBuckets0 << G. New claims go to the newest generation until
// it holds claimsPerBucket per bucket on average, then to a new one with
// twice the buckets, so the buckets stay listpack-sized whatever the
// volume; a lookup reads one bucket per generation still in use (a few).
//
// DAY is the last day (days since 1970-01-01 UTC) of the claim: it holds
// until the end of the day of the archive time plus the id window (at
// most a day longer than the window). Every write to a bucket first drops
// its expired fields, and the bucket key expires (PEXPIREAT) at the end of
// its latest claim's day; a generation whose latest claim has expired
// leaves the directory at the archiver's next write, in a script that
// re-reads its day (a lookup only skips it and writes nothing). A lookup
// ignores an expired field. Writes reach only the newest generation, so
// the archiver also sweeps every generation once a day
// (SweepArchivedClaims). n:g counts the claims a generation holds: those
// written less those dropped.
//
// Order, not atomicity, keeps an id unique: the bucketed claim is written
// before the live key is released (compare-and-delete on its owner), and a
// loader checks the buckets after it took the live key (SETNX). Either the
// loader's SETNX meets the live key, or its bucket read meets the bucketed
// claim. (A claim key and a bucket lie in different Redis Cluster slots,
// so one script cannot do both.)

const (
	claimBuckets0   = 256 // buckets of generation 0
	claimsPerBucket = 64  // average fill at which a new generation begins
	claimGensMax    = 20
)

const dayMs = int64(24 * time.Hour / time.Millisecond)

// claimDay is the day number (UTC) of t: a claim held till t lasts to the
// end of that day.
func claimDay(t time.Time) int64 { return t.UnixMilli() / dayMs }

// addArchivedClaimsScript writes claims into one bucket after dropping its
// expired ones, and makes the bucket expire at the end of its latest day;
// with no claims to write it only drops (the daily sweep). It returns the
// change in the claims the bucket holds (added less dropped) and the
// claims dropped.
// KEYS: bucket; ARGV: today (day number), then EXTID, "BATCH:DAY" pairs.
var addArchivedClaimsScript = redis.NewScript(`
local today = tonumber(ARGV[1])
local all = redis.call('HGETALL', KEYS[1])
local last = 0
local dropped = 0
local added = 0
for i = 1, #all, 2 do
  local d = tonumber(string.match(all[i + 1], ':(%d+)$')) or 0
  if d < today then
    redis.call('HDEL', KEYS[1], all[i])
    dropped = dropped + 1
  elseif d > last then
    last = d
  end
end
for i = 2, #ARGV, 2 do
  added = added + redis.call('HSET', KEYS[1], ARGV[i], ARGV[i + 1])
  local d = tonumber(string.match(ARGV[i + 1], ':(%d+)$')) or 0
  if d > last then last = d end
end
if last > 0 then
  redis.call('PEXPIREAT', KEYS[1], string.format('%.0f', (last + 1) * 86400000))
end
return {added - dropped, dropped}
`)

// raiseScript sets a hash field to ARGV[2] if that is greater.
// KEYS: hash; ARGV: field, value.
var raiseScript = redis.NewScript(`
if (tonumber(redis.call('HGET', KEYS[1], ARGV[1])) or 0) < tonumber(ARGV[2]) then
  redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
end
return 1
`)

type claimGen struct {
	n    int64 // claims held (see recount)
	till int64 // latest day
}

// claimGens reads the directory of generations, leaving out those whose
// every claim has expired before today. It writes nothing: only the
// archiver drops generations (dropClaimGens), so a reader's stale view can
// never remove a generation the archiver has just reused.
func (cl Claims) claimGens(ctx context.Context, today int64) (map[int]claimGen, error) {
	m, err := cl.l.rdb.HGetAll(ctx, claimGensKey()).Result()
	if err != nil {
		return nil, fmt.Errorf("ledger: read claim generations: %w", err)
	}
	gens := map[int]claimGen{}
	for k, v := range m {
		kind, gs, ok := strings.Cut(k, ":")
		g, err := strconv.Atoi(gs)
		if !ok || err != nil || g < 0 || g > claimGensMax {
			continue
		}
		c := gens[g]
		n, _ := strconv.ParseInt(v, 10, 64)
		if kind == "n" {
			c.n = n
		} else {
			c.till = n
		}
		gens[g] = c
	}
	for g, c := range gens {
		if c.till < today {
			delete(gens, g)
		}
	}
	return gens, nil
}

// dropClaimGensScript drops from the directory each generation whose
// latest day is before today, judged on the t:g it reads itself: a
// generation raised meanwhile (reused) stays. KEYS: directory; ARGV: today.
var dropClaimGensScript = redis.NewScript(`
local today = tonumber(ARGV[1])
local all = redis.call('HGETALL', KEYS[1])
local seen = {}
for i = 1, #all, 2 do
  local g = string.match(all[i], '^[nt]:(%d+)$')
  if g and not seen[g] then
    seen[g] = true
    if (tonumber(redis.call('HGET', KEYS[1], 't:' .. g)) or 0) < today then
      redis.call('HDEL', KEYS[1], 'n:' .. g, 't:' .. g)
    end
  end
end
return 1
`)

// dropClaimGens drops the generations whose every claim has expired before
// today from the directory. Only the archiver calls it.
func (cl Claims) dropClaimGens(ctx context.Context, today int64) error {
	if err := dropClaimGensScript.Run(ctx, cl.l.rdb, []string{claimGensKey()}, today).Err(); err != nil {
		return fmt.Errorf("ledger: drop expired claim generations: %w", err)
	}
	return nil
}

// claimToday is the day by which claims are judged expired when one is
// dropped: the earlier of now's (the archive's clock) and Redis's, which
// lookups judge by. A clock ahead of Redis's must never drop a claim a
// lookup would still honour.
func (cl Claims) claimToday(ctx context.Context, now time.Time) (int64, error) {
	rt, err := cl.l.Time(ctx)
	if err != nil {
		return 0, err
	}
	return min(claimDay(now), claimDay(rt)), nil
}

// ArchiveClaims moves batch's claims on ids into the bucketed form, held
// until the end of the day of till, and releases their live keys. Expired
// bucketed claims met on the way are dropped, judged by now (the archive's
// clock) but never ahead of Redis's (claimToday). Claims another batch
// owns are left alone. It returns how many claims it moved; a re-run moves
// those still live.
func (cl Claims) ArchiveClaims(ctx context.Context, batch string, ids []string, till, now time.Time) (int, error) {
	moved, dropped := 0, false
	today, err := cl.claimToday(ctx, now)
	if err != nil {
		return 0, err
	}
	last := claimDay(till)
	value := batch + ":" + strconv.FormatInt(last, 10)
	for start := 0; start < len(ids); start += eachChunk {
		part := ids[start:min(start+eachChunk, len(ids))]
		owners, err := cl.liveOwners(ctx, batch, part)
		if err != nil {
			return moved, err
		}
		var mine []string
		for i, id := range part {
			if owners[i] == batch {
				mine = append(mine, id)
			}
		}
		if len(mine) == 0 {
			continue
		}
		if !dropped {
			if err := cl.dropClaimGens(ctx, today); err != nil {
				return moved, err
			}
			dropped = true
		}
		gens, err := cl.claimGens(ctx, today)
		if err != nil {
			return moved, err
		}
		g := 0
		for k := range gens {
			g = max(g, k)
		}
		if c := gens[g]; c.n+int64(len(mine)) > int64(claimsPerBucket)*int64(claimBucketCount(g)) && g < claimGensMax {
			g++
		}
		if err := cl.writeArchivedClaims(ctx, g, mine, value, today, last); err != nil {
			return moved, err
		}
		// Only now the live keys go: a loader meets one or the other.
		pipe := cl.l.rdb.Pipeline()
		for _, id := range mine {
			releaseForms(ctx, pipe, batch, id)
		}
		if _, err := pipe.Exec(ctx); err != nil {
			return moved, fmt.Errorf("ledger: release archived claims of %s: %w", batch, err)
		}
		moved += len(mine)
	}
	return moved, nil
}

// writeArchivedClaims writes ids into generation g's buckets, one script
// call per bucket, and counts them in the directory: n:g follows the
// claims a generation holds (recount).
func (cl Claims) writeArchivedClaims(ctx context.Context, g int, ids []string, value string, today, last int64) error {
	byBucket := map[string][]any{}
	for _, id := range ids {
		key := extid.Key(id) // a legacy claim moves under the key
		k := claimBucketKey(g, key)
		if byBucket[k] == nil {
			byBucket[k] = []any{today}
		}
		byBucket[k] = append(byBucket[k], key, value)
	}
	pipe := cl.l.rdb.Pipeline()
	// The directory first: a bucket is never in use without its generation.
	raiseScript.Eval(ctx, pipe, []string{claimGensKey()}, "t:"+strconv.Itoa(g), last)
	writes := make([]*redis.Cmd, 0, len(byBucket))
	for k, args := range byBucket {
		writes = append(writes, addArchivedClaimsScript.Eval(ctx, pipe, []string{k}, args...))
	}
	_, err := pipe.Exec(ctx)
	// The buckets that ran are counted even when others failed.
	_, cerr := cl.recount(ctx, g, writes)
	if err != nil {
		return fmt.Errorf("ledger: write archived claims: %w", err)
	}
	return cerr
}

// recount adds to generation g's count n:g what the bucket scripts cmds
// that ran changed (claims added less claims dropped; a claim written again
// is not added twice), and returns the claims they dropped; a script that
// failed (its pipeline's error is the caller's) counts nothing. n:g only
// sizes the generations: a count left off by a crash between the scripts
// and this HINCRBY, or by a bucket that expired by its own TTL, changes
// when the next generation begins, nothing else.
func (cl Claims) recount(ctx context.Context, g int, cmds []*redis.Cmd) (dropped int64, err error) {
	var change int64
	for _, c := range cmds {
		if c.Err() != nil {
			continue
		}
		r, err := c.Int64Slice()
		if err != nil {
			return dropped, fmt.Errorf("ledger: archived claims bucket answered %v: %w", c.Val(), err)
		}
		if len(r) != 2 {
			return dropped, fmt.Errorf("ledger: archived claims bucket answered %v, want {change, dropped}", r)
		}
		change += r[0]
		dropped += r[1]
	}
	if change == 0 {
		return dropped, nil
	}
	if err := cl.l.rdb.HIncrBy(ctx, claimGensKey(), "n:"+strconv.Itoa(g), change).Err(); err != nil {
		return dropped, fmt.Errorf("ledger: count archived claims: %w", err)
	}
	return dropped, nil
}

// sweptField is the directory's field holding the last day
// SweepArchivedClaims completed.
const sweptField = "swept"

// sweepChunk is how many buckets one round trip of the sweep cleans.
const sweepChunk = 1000

// SweepArchivedClaims drops, once a day, every archived claim that expired
// before today from every generation's buckets; today is judged by now,
// the archive's clock, but never ahead of Redis's (claimToday). A write to a bucket drops its expired claims too,
// but only the newest generation is written to: without the sweep an older
// one would keep its expired claims until its latest claim expired, up to
// the time it took to fill (weeks at high volume). It returns the claims
// dropped. Running it twice, or at once from two archivers, drops nothing
// more.
func (cl Claims) SweepArchivedClaims(ctx context.Context, now time.Time) (int64, error) {
	today, err := cl.claimToday(ctx, now)
	if err != nil {
		return 0, err
	}
	done, err := cl.l.rdb.HGet(ctx, claimGensKey(), sweptField).Int64()
	if err != nil && !errors.Is(err, redis.Nil) {
		return 0, fmt.Errorf("ledger: read claim sweep day: %w", err)
	}
	if done >= today {
		return 0, nil
	}
	// Every generation in the directory, expired ones too: the sweep
	// empties (and so deletes) their buckets before dropClaimGens forgets
	// them.
	// EVALSHA after a SCRIPT LOAD per chunk: the script's text once, not
	// once a bucket (a pipelined EVALSHA cannot fall back to EVAL; a
	// script cache emptied in between fails the sweep, and the next run
	// does it).
	var dropped int64
	err = cl.eachBucketChunk(ctx, func(g int, keys []string) error {
		if err := addArchivedClaimsScript.Load(ctx, cl.l.rdb).Err(); err != nil {
			return fmt.Errorf("ledger: sweep archived claims: %w", err)
		}
		pipe := cl.l.rdb.Pipeline()
		sweeps := make([]*redis.Cmd, len(keys))
		for i, k := range keys {
			sweeps[i] = addArchivedClaimsScript.EvalSha(ctx, pipe, []string{k}, today)
		}
		_, err := pipe.Exec(ctx)
		n, cerr := cl.recount(ctx, g, sweeps)
		dropped += n
		if err != nil {
			return fmt.Errorf("ledger: sweep archived claims: %w", err)
		}
		return cerr
	})
	if err != nil {
		return dropped, err
	}
	if err := cl.dropClaimGens(ctx, today); err != nil {
		return dropped, err
	}
	if err := raiseScript.Run(ctx, cl.l.rdb, []string{claimGensKey()}, sweptField, today).Err(); err != nil {
		return dropped, fmt.Errorf("ledger: record claim sweep day: %w", err)
	}
	return dropped, nil
}

// ArchivedClaimsHeld counts the claims the buckets of every generation
// hold, expired ones not yet dropped included (HLEN of every bucket): for
// the bench and tests, not for the hot path.
func (cl Claims) ArchivedClaimsHeld(ctx context.Context) (int64, error) {
	var held int64
	err := cl.eachBucketChunk(ctx, func(_ int, keys []string) error {
		pipe := cl.l.rdb.Pipeline()
		lens := make([]*redis.IntCmd, len(keys))
		for i, k := range keys {
			lens[i] = pipe.HLen(ctx, k)
		}
		if _, err := pipe.Exec(ctx); err != nil {
			return fmt.Errorf("ledger: count archived claims: %w", err)
		}
		for _, c := range lens {
			held += c.Val()
		}
		return nil
	})
	return held, err
}

// eachBucketChunk calls run with the keys of every bucket of every
// generation in the directory, expired generations included, sweepChunk
// keys at a time.
func (cl Claims) eachBucketChunk(ctx context.Context, run func(g int, keys []string) error) error {
	gens, err := cl.claimGens(ctx, math.MinInt64)
	if err != nil {
		return err
	}
	for g := range gens {
		n := claimBucketCount(g)
		for start := uint32(0); start < n; start += sweepChunk {
			keys := make([]string, 0, sweepChunk)
			for k := start; k < min(start+sweepChunk, n); k++ {
				keys = append(keys, claimBucketKeyAt(g, k))
			}
			if err := run(g, keys); err != nil {
				return err
			}
		}
	}
	return nil
}

// liveOwners returns the owner of each id's live claim ("" for none),
// under its key or, legacy, as written (claimForms): another batch's claim
// before batch's own.
func (cl Claims) liveOwners(ctx context.Context, batch string, ids []string) ([]string, error) {
	pipe := cl.l.rdb.Pipeline()
	cmds := make([][]*redis.StringCmd, len(ids))
	for i, id := range ids {
		for _, f := range claimForms(id) {
			cmds[i] = append(cmds[i], pipe.Get(ctx, ownerKey(f)))
		}
	}
	if err := execLookups(ctx, pipe); err != nil {
		return nil, fmt.Errorf("ledger: look up externalIds: %w", err)
	}
	out := make([]string, len(ids))
	for i, forms := range cmds {
		for _, c := range forms {
			if v := c.Val(); v != "" && (out[i] == "" || out[i] == batch) {
				out[i] = v
			}
		}
	}
	return out, nil
}

// archivedOwners returns, for each of ids with a claim of an archived
// batch unexpired on Redis's clock, that batch.
func (cl Claims) archivedOwners(ctx context.Context, ids []string) (map[string]string, error) {
	owned := map[string]string{}
	if len(ids) == 0 {
		return owned, nil
	}
	now, err := cl.l.Time(ctx)
	if err != nil {
		return nil, err
	}
	today := claimDay(now)
	gens, err := cl.claimGens(ctx, today)
	if err != nil || len(gens) == 0 {
		return owned, err
	}
	pipe := cl.l.rdb.Pipeline()
	cmds := make([]*redis.StringCmd, 0, len(ids)*len(gens))
	idOf := make([]string, 0, cap(cmds))
	for _, id := range ids {
		for _, f := range claimForms(id) {
			for g := range gens {
				cmds = append(cmds, pipe.HGet(ctx, claimBucketKey(g, f), f))
				idOf = append(idOf, id)
			}
		}
	}
	if err := execLookups(ctx, pipe); err != nil {
		return nil, fmt.Errorf("ledger: look up archived claims: %w", err)
	}
	for i, c := range cmds {
		b, d, ok := strings.Cut(c.Val(), ":")
		if day, err := strconv.ParseInt(d, 10, 64); ok && err == nil && day >= today {
			owned[idOf[i]] = b
		}
	}
	return owned, nil
}

// execLookups runs a pipeline of reads, a missing key (redis.Nil) being no
// error. Exec reports only the first failed command's error, so every
// command is checked: a real error after a Nil must not read as "no claim".
func execLookups(ctx context.Context, pipe redis.Pipeliner) error {
	cmds, err := pipe.Exec(ctx)
	if err != nil && !errors.Is(err, redis.Nil) {
		return err
	}
	for _, c := range cmds {
		if err := c.Err(); err != nil && !errors.Is(err, redis.Nil) {
			return err
		}
	}
	return nil
}
