package ledger

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/acme/payout/internal/lifecycle"
	"github.com/redis/go-redis/v9"
)

// Schedule is the ledger's side of scheduled release: a payout registered
// with a release time waits in state scheduled, in its batch's due index
// (keys.DueOf, scored by release time), until the workers' releaser
// (package schedule) moves it to queued by compare-and-set (Release) once
// its time has come on Redis's clock and its batch is loaded (approved).
// The batches that hold scheduled payouts are in the global due index
// (keys.Due), scored by their earliest pending release: what the releaser
// looks at, whether or not any loader runs that day.
type Schedule struct{ l *Ledger }

// Schedule returns the ledger's schedule.
func (l *Ledger) Schedule() Schedule { return Schedule{l} }

// Release is the answer of Schedule.Release.
type Release string

// The answers of Schedule.Release.
const (
	Released    Release = "ok"    // scheduled -> queued: its create is due now
	NotDue      Release = "early" // its release time is later on Redis's clock: nothing moved
	HeldBatch   Release = "hold"  // its batch is not loaded (awaiting approval, loading): nothing moved
	NotSchedule Release = "no"    // not scheduled (released already, cancelled): left out of the due index
)

// scheduleScript moves queued payouts of a batch being loaded that were
// never sent to scheduled, each with its release time (field rel, Unix
// ms), and adds each to the batch's due index. A payout scheduled already
// is skipped: a resumed load runs it again. With an owner it moves nothing
// unless owner holds the load lock (reply -1) and the batch is loading (-2).
// KEYS: counts, meta, load lock, audit, due index, payout...; ARGV: owner,
// actor, then per payout its release time (ms) and the audit note.
var scheduleScript = script(lifecycle.RoleLoader, `
if ARGV[1] ~= '' then
  if redis.call('GET', KEYS[3]) ~= ARGV[1] then return -1 end
  if redis.call('HGET', KEYS[2], 'phase') ~= 'loading' then return -2 end
end
AUD.key = KEYS[4]
AUD.actor = ARGV[2]
local n = 0
for i = 6, #KEYS do
  local rel, note = ARGV[2 * (i - 6) + 3], ARGV[2 * (i - 6) + 4]
  local h = redis.call('HMGET', KEYS[i], 'units', 'creates', 'line', 'ext', 'state')
  if h[5] == 'queued' and num(h[2]) == 0 then
    AUD.payout, AUD.line, AUD.ext, AUD.entered = KEYS[i], h[3], h[4], nil
    AUD.extra = {'note', note}
    redis.call('HSET', KEYS[i], 'state', 'scheduled', 'rel', rel, 'updated', nowms(), entered())
    move(KEYS[1], 'queued', 'scheduled', h[1])
    redis.call('ZADD', KEYS[5], rel, h[4])
    n = n + 1
  end
end
return n
`)

// Scheduled is a payout to put on schedule, and when it is released.
type Scheduled struct {
	ExternalID string
	At         time.Time
}

// PutLocked moves the payouts of ps, registered and still queued, of a
// batch being loaded by owner, to scheduled, each with its release time.
// It reports how many moved (a resumed load's payouts scheduled already
// are skipped). Like RegisterLocked it writes nothing unless owner holds
// the load lock (ErrLoadLockLost) and the batch is loading.
func (s Schedule) PutLocked(ctx context.Context, batch, owner string, ps []Scheduled) (int, error) {
	if len(ps) == 0 {
		return 0, nil
	}
	keys := []string{countsKey(batch), metaKey(batch), loadLockKey(batch), auditKey(batch), dueOfKey(batch)}
	args := []any{owner, s.l.actor}
	for _, p := range ps {
		keys = append(keys, payoutKey(batch, p.ExternalID))
		args = append(args, p.At.UnixMilli(), "scheduled: released at "+p.At.UTC().Format(time.RFC3339))
	}
	n, err := scheduleScript.Run(ctx, s.l.rdb, keys, args...).Int()
	switch {
	case err != nil:
		return 0, fmt.Errorf("ledger: schedule payouts of %s: %w", batch, err)
	case n == -1:
		return 0, fmt.Errorf("ledger: schedule payouts of %s: %w", batch, ErrLoadLockLost)
	case n == -2:
		return 0, fmt.Errorf("ledger: schedule payouts of %s: %w", batch, errNotLoading)
	}
	return n, nil
}

// Index puts batch in the global due index at its earliest pending release
// (or takes it out when it has none): after a load scheduled payouts, after
// its approval (so that what is due is released at once), and from the
// reconciler's sweep (so that no scheduled payout is ever without its
// reminder).
func (s Schedule) Index(ctx context.Context, batch string) error {
	first, err := s.l.rdb.ZRangeWithScores(ctx, dueOfKey(batch), 0, 0).Result()
	if err != nil {
		return fmt.Errorf("ledger: due index of %s: %w", batch, err)
	}
	if len(first) == 0 {
		return s.l.rdb.ZRem(ctx, dueKey(), batch).Err()
	}
	return s.l.rdb.ZAdd(ctx, dueKey(), redis.Z{Score: first[0].Score, Member: batch}).Err()
}

// Later moves batch in the global due index to at: a batch not loaded yet
// (awaiting approval) is looked at again then, so that it does not hold up
// the batches behind it.
func (s Schedule) Later(ctx context.Context, batch string, at time.Time) error {
	return s.l.rdb.ZAddXX(ctx, dueKey(), redis.Z{Score: float64(at.UnixMilli()), Member: batch}).Err()
}

// DueBatches lists at most limit batches of the global due index whose
// earliest pending release is at or before now.
func (s Schedule) DueBatches(ctx context.Context, now time.Time, limit int) ([]string, error) {
	ids, err := s.l.rdb.ZRangeByScore(ctx, dueKey(), &redis.ZRangeBy{Min: "-inf", Max: strconv.FormatInt(now.UnixMilli(), 10), Count: int64(limit)}).Result()
	if err != nil {
		return nil, fmt.Errorf("ledger: due batches: %w", err)
	}
	return ids, nil
}

// Due lists at most limit scheduled payouts of batch whose release time is
// at or before now, earliest first.
func (s Schedule) Due(ctx context.Context, batch string, now time.Time, limit int) ([]string, error) {
	ids, err := s.l.rdb.ZRangeByScore(ctx, dueOfKey(batch), &redis.ZRangeBy{Min: "-inf", Max: strconv.FormatInt(now.UnixMilli(), 10), Count: int64(limit)}).Result()
	if err != nil {
		return nil, fmt.Errorf("ledger: due payouts of %s: %w", batch, err)
	}
	return ids, nil
}

// Forget takes ext out of its batch's due index, once its release is done
// (its create enqueued) or found not scheduled.
func (s Schedule) Forget(ctx context.Context, batch, ext string) error {
	return s.l.rdb.ZRem(ctx, dueOfKey(batch), ext).Err()
}

// releaseScript moves a scheduled payout to queued when its release time
// (rel) is at or before Redis's clock and its batch is loaded: the
// compare-and-set of scheduled release. It leaves the due index to the
// caller, which takes the payout out once its create is enqueued.
// KEYS: payout, counts, audit, meta; ARGV: actor and op (luaReplay).
// Replies {'ok', 'scheduled'}, {'early', rel}, {'hold', phase} or {'no', state}.
var releaseDueScript = script(lifecycle.RoleWorker, luaReplay+`
local first, h = fetch(KEYS[1], 'state', 'units', 'rel')
if first then return first end
if not h[1] then return {'nopayout', ''} end
if h[1] ~= 'scheduled' then return {'no', h[1]} end
local now = nowms()
if num(h[3]) > tonumber(now) then return {'early', h[3]} end
local phase = redis.call('HGET', KEYS[4], 'phase')
if phase ~= 'loaded' then return {'hold', phase or ''} end
AUD.extra = {'note', 'released: its release time came'}
redis.call('HSET', KEYS[1], 'state', 'queued', 'updated', now, entered())
move(KEYS[2], 'scheduled', 'queued', h[2])
return remember(KEYS[1], {'ok', 'scheduled'})
`)

// Release moves a scheduled payout whose time has come (Redis's clock) to
// queued, by compare-and-set, only if its batch is loaded; a replayed call
// answers as the first. With Released, or NotSchedule and the payout
// queued, its create is due (queue.NextStep); phase is the batch's phase
// with HeldBatch, state the payout's state with NotSchedule.
func (s Schedule) Release(ctx context.Context, batch, ext string) (r Release, found string, err error) {
	cmd := s.l.transitionKeys(ctx, releaseDueScript, []string{payoutKey(batch, ext), countsKey(batch), auditKey(batch), metaKey(batch)}, noArgs{})
	res, err := replyOf(cmd, batch, ext, "release", 2)
	if err != nil {
		if errors.Is(err, ErrNotFound) {
			return NotSchedule, "", nil
		}
		return "", "", err
	}
	return Release(res[0]), res[1], nil
}

// noArgs is the ARGV of a transition script that takes only the actor and
// the operation id.
type noArgs struct{}

func (noArgs) argv() []any { return nil }

// ReleaseTime is ext's release time (zero when it has none).
func (s Schedule) ReleaseTime(ctx context.Context, batch, ext string) (time.Time, error) {
	ms, err := s.l.rdb.HGet(ctx, payoutKey(batch, ext), "rel").Int64()
	if errors.Is(err, redis.Nil) {
		return time.Time{}, nil
	}
	if err != nil {
		return time.Time{}, fmt.Errorf("ledger: release time of %s: %w", ext, err)
	}
	return time.UnixMilli(ms).UTC(), nil
}

// Next is the earliest pending release time of batch's scheduled payouts,
// from its due index (zero when it has none). A payout released a moment
// ago stays in the index until its create is enqueued (Forget): Next may
// so name a time just past.
func (s Schedule) Next(ctx context.Context, batch string) (time.Time, error) {
	first, err := s.l.rdb.ZRangeWithScores(ctx, dueOfKey(batch), 0, 0).Result()
	if err != nil {
		return time.Time{}, fmt.Errorf("ledger: next release of %s: %w", batch, err)
	}
	if len(first) == 0 {
		return time.Time{}, nil
	}
	return time.UnixMilli(int64(first[0].Score)).UTC(), nil
}
