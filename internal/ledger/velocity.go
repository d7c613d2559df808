package ledger

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/acme/payout/internal/ledger/keys"
	"github.com/acme/payout/internal/lifecycle"
	"github.com/acme/payout/internal/money"
	"github.com/acme/payout/internal/scrub"
	"github.com/redis/go-redis/v9"
)

// The recipient velocity limit (docs/controls.md, "Recipient velocity"):
// per destination, at most so many payouts and so much money a day, over
// every batch. A destination is known here only by its tag, a keyed hash
// (vault.Keyring.DestinationTag): never the card number or the phone.
//
// One hash per destination and UTC day (Redis's clock, as the daily
// limit): keys.Velocity(day, tag), expiring 48 hours after its last
// write. Its field '#n' is the payouts counted, '#u' their sum in units of
// dailyScale, and one field per payout counted, BATCH/EXTERNALID -> its
// units: a payout is counted once whatever the number of calls (a resumed
// load counts nothing twice), and is given back once (Uncount).

// VelocityLimits are the limits per destination and day; zero: that
// limit is off.
type VelocityLimits struct {
	Count  int64        // payouts a day to one destination
	Amount money.Amount // the sum of those payouts
}

// On tells whether a limit is set.
func (v VelocityLimits) On() bool { return v.Count > 0 || !v.Amount.IsZero() }

// VelocityRow is one payout counted toward its destination's velocity.
type VelocityRow struct {
	Tag        string // the destination's keyed hash
	ExternalID string
	Amount     money.Amount
}

// The verdicts of Count on a row.
const (
	VelocityCounted    = 1 // counted now: within the limits
	VelocityOverCount  = 0 // not counted: one more payout than the count limit
	VelocityOverAmount = 2 // not counted: over the amount limit
	VelocityBefore     = 3 // counted by an earlier call (a resumed load): within
)

// VelocityResult is Count's verdict on one row and the destination's
// figures the row found (its own not included).
type VelocityResult struct {
	Verdict int
	Count   int64        // payouts counted today before the row
	Sum     money.Amount // their sum
}

// Within tells whether the row is within the limits (counted now or before).
func (r VelocityResult) Within() bool {
	return r.Verdict == VelocityCounted || r.Verdict == VelocityBefore
}

// Why says, for a person, why a row is over its destination's limit;
// dest is the destination as a person may read it (masked), scale the
// decimals of amounts.
func (r VelocityResult) Why(dest string, amount money.Amount, lim VelocityLimits, scale int) string {
	if r.Verdict == VelocityOverCount {
		return fmt.Sprintf("over the recipient velocity limit: %s has %d payouts today, the limit is %d a day", dest, r.Count, lim.Count)
	}
	return fmt.Sprintf("over the recipient velocity limit: %s more to %s would take today's sum from %s to %s, the limit is %s a day",
		amount.StringFixed(scale), dest, r.Sum.StringFixed(scale), r.Sum.Add(amount).StringFixed(scale), lim.Amount.StringFixed(scale))
}

// Velocity counts payouts per destination and day.
type Velocity struct{ l *Ledger }

// Velocity returns the ledger's recipient velocity counters.
func (l *Ledger) Velocity() Velocity { return Velocity{l} }

// velocityTTL is how long a day's counters live after their last write:
// past the day, as the daily limit's.
const velocityTTL = 48 * time.Hour

// Day is today on Redis's clock, as the counters name it.
func (v Velocity) Day(ctx context.Context) (string, error) {
	now, err := v.l.Time(ctx)
	if err != nil {
		return "", err
	}
	return keys.VelocityDay(now), nil
}

// velocityScript counts the rows of one destination (KEYS[1]), in order,
// each only if it stays within the limits, in one atomic step: two loads
// at once cannot both pass. A row counted before is left as it is.
// KEYS: the destination's day hash; ARGV: count limit (0: none), units
// limit (-1: none), ttl seconds, ceiling, force (1: count without
// limits: a person's release), then per row: member, units.
// Replies per row: verdict, count before, sum before (units, as Redis
// holds it).
var velocityScript = redis.NewScript(`
local nlim = tonumber(ARGV[1])
local ulim = tonumber(ARGV[2])
local ceiling = tonumber(ARGV[4])
local force = ARGV[5] == '1'
local out = {}
local wrote = false
for i = 6, #ARGV, 2 do
  local m, u = ARGV[i], ARGV[i + 1]
  local h = redis.call('HMGET', KEYS[1], m, '#n', '#u')
  local n, s = tonumber(h[2] or '0'), tonumber(h[3] or '0')
  local units = tonumber(u)
  local v = 1
  if h[1] then
    v = 3
  elseif not force and nlim > 0 and n >= nlim then
    v = 0
  elseif not force and (s > ceiling or units > ceiling - s or (ulim >= 0 and units > ulim - s)) then
    v = 2
  else
    redis.call('HSET', KEYS[1], m, u)
    redis.call('HINCRBY', KEYS[1], '#n', 1)
    redis.call('HINCRBY', KEYS[1], '#u', u)
    wrote = true
  end
  out[#out + 1] = v
  out[#out + 1] = h[2] or '0'
  out[#out + 1] = h[3] or '0'
end
if wrote then redis.call('EXPIRE', KEYS[1], ARGV[3]) end
return out
`)

// uncountScript gives back the payouts named (ARGV: members) of one
// destination's day (KEYS[1]): each only if it is counted there.
var uncountScript = redis.NewScript(`
local n = 0
for i = 1, #ARGV do
  local u = redis.call('HGET', KEYS[1], ARGV[i])
  if u then
    redis.call('HDEL', KEYS[1], ARGV[i])
    redis.call('HINCRBY', KEYS[1], '#n', -1)
    redis.call('HINCRBY', KEYS[1], '#u', '-' .. u)
    n = n + 1
  end
end
return n
`)

// velocityMember is a payout's field in its destination's day hash.
func velocityMember(batch, ext string) string { return batch + "/" + ext }

// VelocityMark is what a payout records of its count (field vel): the
// day and the destination's tag, "DAY:TAG".
func VelocityMark(day, tag string) string { return day + ":" + tag }

// Count counts rows of batch on day toward their destinations' limits
// and returns a verdict per row, in order. The rows of one destination
// are judged in the order given, in one atomic script call per
// destination (pipelined): a row over a limit is not counted, and a row
// after it may still be (a smaller amount). force counts every row
// whatever the limits (a person's release of a held payout).
func (v Velocity) Count(ctx context.Context, day, batch string, rows []VelocityRow, lim VelocityLimits, force bool) ([]VelocityResult, error) {
	out := make([]VelocityResult, len(rows))
	if len(rows) == 0 {
		return out, nil
	}
	ulim := int64(-1)
	if !lim.Amount.IsZero() {
		var err error
		if ulim, err = lim.Amount.Units(dailyScale); err != nil {
			ulim = money.MaxUnits
		}
	}
	byTag := map[string][]int{}
	var order []string
	for i, r := range rows {
		if _, ok := byTag[r.Tag]; !ok {
			order = append(order, r.Tag)
		}
		byTag[r.Tag] = append(byTag[r.Tag], i)
	}
	f := "0"
	if force {
		f = "1"
	}
	calls := make([][]any, len(order))
	for k, tag := range order {
		args := []any{lim.Count, ulim, int64(velocityTTL.Seconds()), money.MaxUnits, f}
		for _, i := range byTag[tag] {
			units, err := rows[i].Amount.Units(dailyScale)
			if err != nil {
				return nil, fmt.Errorf("ledger: velocity of %s: %w", rows[i].ExternalID, err)
			}
			args = append(args, velocityMember(batch, rows[i].ExternalID), units)
		}
		calls[k] = args
	}
	replies, err := v.l.evalEach(ctx, velocityScript, order, func(tag string) string { return keys.Velocity(day, tag) }, calls)
	if err != nil {
		return nil, fmt.Errorf("ledger: velocity: %w", err)
	}
	for k, tag := range order {
		rep := replies[k]
		for j, i := range byTag[tag] {
			if 3*j+2 >= len(rep) {
				return nil, fmt.Errorf("ledger: velocity: reply of %d elements", len(rep))
			}
			verdict, _ := rep[3*j].(int64)
			n, _ := strconv.ParseInt(fmt.Sprint(rep[3*j+1]), 10, 64)
			sum, perr := money.ParseStored(fmt.Sprint(rep[3*j+2]))
			if perr != nil {
				sum = money.Zero
			}
			out[i] = VelocityResult{Verdict: int(verdict), Count: n, Sum: money.FromMinor(sum.Decimal().IntPart(), dailyScale)}
		}
	}
	return out, nil
}

// Uncount gives back the counts of payouts of batch, by their marks
// (VelocityMark, "" skipped): each ext's count under its day and tag is
// removed if it is there. It is idempotent.
func (v Velocity) Uncount(ctx context.Context, batch string, exts, marks []string) error {
	byKey := map[string][]any{}
	var order []string
	for i, m := range marks {
		day, tag, ok := strings.Cut(m, ":")
		if !ok || tag == "" {
			continue
		}
		k := keys.Velocity(day, tag)
		if _, seen := byKey[k]; !seen {
			order = append(order, k)
		}
		byKey[k] = append(byKey[k], velocityMember(batch, exts[i]))
	}
	calls := make([][]any, len(order))
	for i, k := range order {
		calls[i] = byKey[k]
	}
	_, err := v.l.evalEach(context.WithoutCancel(ctx), uncountScript, order, func(k string) string { return k }, calls)
	if err != nil {
		return fmt.Errorf("ledger: give back velocity counts of %s: %w", batch, err)
	}
	return nil
}

// evalEach runs s once per name (its key: key(name)) with its args, in
// one pipelined round trip (each call on its own key, so each may go to
// its own Redis Cluster node), and returns each call's reply as a list.
func (l *Ledger) evalEach(ctx context.Context, s *redis.Script, names []string, key func(string) string, args [][]any) ([][]any, error) {
	if len(names) == 0 {
		return nil, nil
	}
	if err := s.Load(ctx, l.rdb).Err(); err != nil {
		return nil, err
	}
	pipe := l.rdb.Pipeline()
	cmds := make([]*redis.Cmd, len(names))
	for i, n := range names {
		cmds[i] = s.EvalSha(ctx, pipe, []string{key(n)}, args[i]...)
	}
	_, _ = pipe.Exec(ctx) // each call's error is read below
	out := make([][]any, len(cmds))
	for i, c := range cmds {
		if c.Err() != nil && redis.HasErrorPrefix(c.Err(), "NOSCRIPT") {
			c = s.Eval(ctx, l.rdb, []string{key(names[i])}, args[i]...)
		}
		v, err := c.Result()
		if err != nil {
			return nil, err
		}
		switch r := v.(type) {
		case []any:
			out[i] = r
		default:
			out[i] = []any{r}
		}
	}
	return out, nil
}

// holdOverScript moves a queued payout of a batch still loading to held:
// its row is over its recipient's velocity limit (--velocity-action
// hold). A payout held once (field vh) is never held again: a person may
// have released it while a rerun of its load goes on.
// KEYS: payout, counts, audit, meta; ARGV: holdArgs, then actor and op
// (luaReplay). Replies {'ok', 'queued'}, {'no', state} or {'nopayout', ”}.
var holdOverScript = script(lifecycle.RoleLoader, luaReplay+holdOverLua)

// holdArgs is holdOverScript's ARGV in the order the script reads them.
type holdArgs struct {
	Reason string // ARGV[1] why, for the payout's error and the audit
	Tag    string // ARGV[2] the destination's tag, counted on release
}

func (a holdArgs) argv() []any { return []any{a.Reason, a.Tag} }

const holdOverLua = `
local first, h = fetch(KEYS[1], 'state', 'units', 'vh')
if first then return first end
if not h[1] then return {'nopayout', ''} end
if h[1] ~= 'queued' or h[3] or redis.call('HGET', KEYS[4], 'phase') ~= 'loading' then return {'no', h[1]} end
AUD.extra = {'note', ARGV[1]}
redis.call('HSET', KEYS[1], 'state', 'held', 'updated', nowms(), 'vh', '1', 'vtag', ARGV[2], 'error', ARGV[1], entered())
move(KEYS[2], 'queued', 'held', h[2])
return remember(KEYS[1], {'ok', 'queued'})
`

// HoldOverVelocity holds payout ext of a batch still loading (no task
// exists for it yet) because its row is over its recipient's velocity
// limit: queued -> held, with the reason and the destination's tag. It
// reports whether it moved the payout; one held before, or no longer
// queued, is left as it is.
func (l *Ledger) HoldOverVelocity(ctx context.Context, batch, ext, reason, tag string) (bool, error) {
	res, err := l.transitionKeys(ctx, holdOverScript, []string{payoutKey(batch, ext), countsKey(batch), auditKey(batch), metaKey(batch)},
		holdArgs{Reason: scrub.Text(reason, 0), Tag: tag}).StringSlice()
	if err != nil {
		return false, fmt.Errorf("ledger: hold %s: %w", ext, err)
	}
	if res[0] == replyNoPayout {
		return false, fmt.Errorf("payout %s of batch %s: %w", ext, batch, ErrNotFound)
	}
	return res[0] == "ok", nil
}

// releaseHeldScript moves a held payout back to queued: a person lets it
// go over its recipient's velocity limit. KEYS: payout, counts, audit;
// ARGV: releaseArgs, then actor and op (luaReplay).
// Replies {'ok', 'held'}, {'no', state} or {'nopayout', ”}.
var releaseHeldScript = script(lifecycle.RolePerson, luaReplay+releaseHeldLua)

// releaseArgs is releaseHeldScript's ARGV in the order the script reads them.
type releaseArgs struct {
	By   string // ARGV[1] the person who releases
	Note string // ARGV[2] why
	Mark string // ARGV[3] the count the release made (VelocityMark), or ""
}

func (a releaseArgs) argv() []any { return []any{a.By, a.Note, a.Mark} }

const releaseHeldLua = `
local first, h = fetch(KEYS[1], 'state', 'units')
if first then return first end
if not h[1] then return {'nopayout', ''} end
if h[1] ~= 'held' then return {'no', h[1]} end
local now = nowms()
AUD.extra = {'note', 'released: ' .. ARGV[2]}
redis.call('HSET', KEYS[1], 'state', 'queued', 'updated', now, 'rby', ARGV[1], 'rnote', ARGV[2], 'rat', now, 'vel', ARGV[3], entered())
redis.call('HDEL', KEYS[1], 'error')
move(KEYS[2], 'held', 'queued', h[2])
return remember(KEYS[1], {'ok', 'held'})
`

// ErrNotHeld is the refusal of a release of a payout that is not held.
var ErrNotHeld = errors.New("ledger: the payout is not held")

// Release lets a held payout go: it is counted toward its recipient's
// velocity today (whatever the limit: the person decided), then moved
// held -> queued by compare-and-set; the caller enqueues its create
// (queue.NextStep). A payout that is not held is refused with an error
// matching ErrNotHeld, and nothing is counted.
func (l *Ledger) Release(ctx context.Context, batch, ext, by, note string) (Payout, error) {
	if by == "" || note == "" {
		return Payout{}, fmt.Errorf("release %s: operator name and note are required: %w", ext, ErrBadResolution)
	}
	by, note, err := typedNote(by, note, scrub.MaxNote)
	if err != nil {
		return Payout{}, fmt.Errorf("release %s: %w", ext, err)
	}
	p, err := l.Get(ctx, batch, ext)
	if err != nil {
		return p, err
	}
	if p.State != lifecycle.Held {
		return p, fmt.Errorf("payout %s of batch %s is %s: %w", ext, batch, p.State.Label(), ErrNotHeld)
	}
	mark, err := l.countReleased(ctx, p)
	if err != nil {
		return p, err
	}
	res, err := l.As(by).transition(ctx, releaseHeldScript, batch, ext, releaseArgs{By: by, Note: note, Mark: mark}).StringSlice()
	if err != nil || res[0] != "ok" {
		if mark != "" {
			_ = l.Velocity().Uncount(ctx, batch, []string{ext}, []string{mark})
		}
	}
	switch {
	case err != nil:
		return p, fmt.Errorf("ledger: release %s: %w", ext, err)
	case res[0] == replyNoPayout:
		return p, fmt.Errorf("payout %s of batch %s: %w", ext, batch, ErrNotFound)
	case res[0] != "ok":
		return p, fmt.Errorf("payout %s of batch %s is %s: %w", ext, batch, lifecycle.State(res[1]).Label(), ErrNotHeld)
	}
	return l.Get(ctx, batch, ext)
}

// countReleased counts a held payout toward its destination today,
// whatever the limit, and returns its mark ("" when the payout records
// no destination tag).
func (l *Ledger) countReleased(ctx context.Context, p Payout) (string, error) {
	tag, err := l.rdb.HGet(ctx, payoutKey(p.Batch, p.ExternalID), "vtag").Result()
	if err == redis.Nil || tag == "" {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("ledger: release %s: %w", p.ExternalID, err)
	}
	amount, err := money.ParseStored(p.Amount)
	if err != nil {
		return "", fmt.Errorf("ledger: release %s: amount %q: %w", p.ExternalID, p.Amount, err)
	}
	v := l.Velocity()
	day, err := v.Day(ctx)
	if err != nil {
		return "", err
	}
	if _, err := v.Count(ctx, day, p.Batch, []VelocityRow{{Tag: tag, ExternalID: p.ExternalID, Amount: amount}}, VelocityLimits{}, true); err != nil {
		return "", err
	}
	return VelocityMark(day, tag), nil
}
