package ledger

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/acme/payout/internal/access"
	"github.com/acme/payout/internal/identity"
	"github.com/acme/payout/internal/lifecycle"
	"github.com/acme/payout/internal/money"
	"github.com/acme/payout/internal/scrub"
	"github.com/redis/go-redis/v9"
)

// Typed refusals of the financial controls.
var (
	// ErrNotAwaiting: the batch is not awaiting approval (its Phase says
	// what it is).
	ErrNotAwaiting = errors.New("ledger: batch is not awaiting approval")
	// ErrFourEyes: the approver is the person who loaded the batch.
	ErrFourEyes = errors.New("ledger: four-eyes rule: the approver loaded the batch")
	// ErrDailyLimit: approving would take the day's approved sum over the
	// daily limit.
	ErrDailyLimit = errors.New("ledger: daily limit")
)

// Controls are the financial controls of the ledger: batches held for
// approval, the approval (four-eyes, the daily limit) or discard of a held
// batch, and the day's approved sums.
type Controls struct{ l *Ledger }

// Controls returns the ledger's financial controls.
func (l *Ledger) Controls() Controls { return Controls{l} }

// HoldBatch ends a load under approval: the batch goes from loading to
// awaiting_approval with the reason it waits, and no task exists for it.
// Its approval request never expires (HoldBatchFor).
func (c Controls) HoldBatch(ctx context.Context, id, reason string) error {
	return c.HoldBatchFor(ctx, id, reason, 0)
}

// holdScript moves a batch from loading to awaiting_approval with the
// reason it waits, when (held, Redis time) and, for an expiry ARGV[3] > 0
// ms, when its approval request expires (expat; expin the expiry), and
// audits it; another phase is left as it is.
//
//	KEYS[1] meta     KEYS[2] audit
//	ARGV[1] reason   ARGV[2] actor   ARGV[3] expiry (ms, 0: never)
var holdScript = script(lifecycle.RoleLoader, `
local ph = redis.call('HGET', KEYS[1], 'phase')
if ph == 'loading' then
  local now = nowms()
  redis.call('HSET', KEYS[1], 'phase', 'awaiting_approval', 'wait', ARGV[1], 'held', now)
  local exp = tonumber(ARGV[3]) or 0
  if exp > 0 then redis.call('HSET', KEYS[1], 'expat', string.format('%.0f', tonumber(now) + exp), 'expin', ARGV[3]) end
  redis.call('XADD', KEYS[2], '*', 't', nowms(), 'actor', ARGV[2], 'ext', '', 'from', 'loading',
    'to', 'awaiting_approval', 'note', ARGV[1])
end
return 1
`)

// dailyScale is the scale the approved sums of a day are kept at: exact for
// amounts with up to 4 decimals. A day's sum may not pass money.MaxUnits
// of these units (money.Ceiling(4), about 900 billion), so that the Lua
// of reserveScript compares it exactly.
const dailyScale = money.SumScale

// reserveScript adds a batch's units to the day's approved sum unless that
// would pass the limit (limit < 0: no limit) or the ceiling of every sum.
// Lua numbers are doubles: every figure compared is at most the ceiling
// (2^53-1), so each one and each difference is exact; the sum is added by
// INCRBY (int64) and sent back as Redis holds it, never through tostring.
// KEYS: day; ARGV: units, limit, ttl seconds, ceiling.
// Replies {1} added, or {0 (over the limit) | 2 (over the ceiling), sum}.
var reserveScript = redis.NewScript(`
local cur = redis.call('GET', KEYS[1]) or '0'
local sum = tonumber(cur)
local units = tonumber(ARGV[1])
local limit = tonumber(ARGV[2])
local ceiling = tonumber(ARGV[4])
if sum > ceiling or units > ceiling - sum then return {2, cur} end
if limit >= 0 and units > limit - sum then return {0, cur} end
redis.call('INCRBY', KEYS[1], ARGV[1])
redis.call('EXPIRE', KEYS[1], ARGV[3])
return {1}
`)

// ReserveDaily adds amount to the sum approved today (UTC, on Redis's
// clock) unless that would take it over limit (zero: no limit, always
// added), in one atomic step: two loaders or approvers at once cannot both
// pass. Over the limit it returns an error matching ErrDailyLimit that names
// the figures, with scale decimals (the batch's); over the ceiling of every
// sum (money.Ceiling(4)) one matching money.ErrCeiling. day and units let a
// caller that does not go on give the amount back (unreserveDaily).
func (c Controls) ReserveDaily(ctx context.Context, amount, limit money.Amount, scale int) (day string, units int64, err error) {
	now, err := c.l.Time(ctx)
	if err != nil {
		return "", 0, err
	}
	day = dailyKey(now)
	max := int64(-1)
	if !limit.IsZero() {
		if max, err = limit.Units(dailyScale); err != nil {
			max = money.MaxUnits // a limit above the ceiling is the ceiling
		}
	}
	if units, err = amount.Units(dailyScale); err != nil {
		return "", 0, fmt.Errorf("ledger: daily sum: %w", err)
	}
	res, err := reserveScript.Run(ctx, c.l.rdb, []string{day}, units, max, int64((48 * time.Hour).Seconds()), money.MaxUnits).Slice()
	if err != nil {
		return "", 0, fmt.Errorf("ledger: daily sum: %w", err)
	}
	if ok, _ := res[0].(int64); ok != 1 {
		return "", 0, dailyRefusal(ok, fmt.Sprint(res[1]), amount, limit, units, scale)
	}
	return day, units, nil
}

// dailyRefusal is the error of a reservation refused: over the limit
// (ErrDailyLimit) or over the ceiling of every sum (money.ErrCeiling).
// sum is the day's sum as Redis holds it, units the amount's.
func dailyRefusal(code int64, sum string, amount, limit money.Amount, units int64, scale int) error {
	if scale < 0 {
		scale = 0
	}
	before, err := money.ParseStored(sum)
	if err != nil {
		before = money.Zero
	}
	before = money.FromMinor(before.Decimal().IntPart(), dailyScale)
	after := before.Add(money.FromMinor(units, dailyScale))
	if code == 2 {
		return fmt.Errorf("%s more would take today's approved sum from %s to %s, over %s, the largest sum the ledger counts exactly: %w",
			amount.StringFixed(scale), before.Fixed(scale), after.Fixed(scale), money.Ceiling(dailyScale).Fixed(scale), money.ErrCeiling)
	}
	return fmt.Errorf("%s more would take today's approved sum from %s to %s, over the daily limit %s: %w",
		amount.StringFixed(scale), before.Fixed(scale), after.Fixed(scale), limit.StringFixed(scale), ErrDailyLimit)
}

// unreserveDaily gives back what ReserveDaily added.
func (c Controls) unreserveDaily(ctx context.Context, day string, units int64) error {
	if day == "" {
		return nil
	}
	return c.l.rdb.DecrBy(context.WithoutCancel(ctx), day, units).Err()
}

// Approval is one decision to let a batch's payouts go to the workers.
type Approval struct {
	By string
	// FourEyes is the deployment's policy as the approving program knows
	// it (payout approve --four-eyes, payout ui --four-eyes: the variable
	// PAYOUT_FOUR_EYES for all of them): refuse when By loaded the batch,
	// for every batch, those recorded before the batch carried the policy
	// included. It can only add the rule: a batch that records four-eyes
	// (Batch.FourEyes) refuses its loader whatever this says.
	FourEyes bool
	// DailyLimit, when positive, refuses the approval if the sum approved
	// today (UTC, Redis's clock) would pass it; the check and the addition
	// are one atomic step, so two approvals at once cannot both pass.
	// Approvals without a limit still add to the day's sum.
	DailyLimit money.Amount
	// Roles are the roles the approver holds (access.Principal.Roles):
	// a batch held under an approval rule counts the approval only of a
	// person holding the rule's role (Batch.NeedRole). A deployment
	// without a roles file passes access.Everyone.
	Roles access.Roles
	// Note is what the approver wrote (optional; at most scrub.MaxNote
	// characters, no control character), kept scrubbed in the batch and
	// its audit trail as "approved: NOTE".
	Note string
}

// mayApprove tells whether by may approve the batch under the four-eyes
// rule: nil, or an error matching ErrFourEyes that says why. The rule
// applies when the batch records it (FourEyes) or the deployment's policy
// asks for it (policy: payout approve/ui --four-eyes). Under it the person
// who loaded the batch may not approve it, and a batch whose loader is
// not known cannot be approved by anyone (only discarded): nobody can be
// shown to be a second person. A system identity (identity.IsSystem: the
// account that delivered a spool file) is not a person: as loader it
// refuses nobody, as approver it is refused. Names are compared by
// identity.Same, the one comparison of four-eyes.
// Approve checks it. It says nothing of the batch's phase.
func (b Batch) mayApprove(by string, policy bool) error {
	if !b.FourEyes && !policy {
		return nil
	}
	switch {
	case identity.IsSystem(by):
		return fmt.Errorf("batch %s needs a person's approval, and %s is a system: %w", b.ID, by, ErrFourEyes)
	case b.LoadedBy == "" && b.FourEyes:
		return fmt.Errorf("batch %s needs a second person's approval, and who loaded it is not recorded: discard it and load it again with --by: %w", b.ID, ErrFourEyes)
	case b.LoadedBy != "" && identity.Same(b.LoadedBy, by):
		return fmt.Errorf("batch %s was loaded by %s, and a second person must approve it: %w", b.ID, b.LoadedBy, ErrFourEyes)
	}
	return nil
}

// decideScript moves a batch awaiting approval to ARGV[1] (loaded or
// discarded), recording who and when (Redis time) in the batch and its
// audit trail. KEYS: meta, audit; ARGV: phase, by, note, the role by
// acted in (WithRole; "" none). Replies 1 when it moved the batch, 0 otherwise.
var decideScript = script(lifecycle.RolePerson, `
if redis.call('HGET', KEYS[1], 'phase') ~= 'awaiting_approval' then return 0 end
local now = nowms()
redis.call('HSET', KEYS[1], 'phase', ARGV[1], 'dby', ARGV[2], 'dat', now, 'note', ARGV[3])
redis.call('XADD', KEYS[2], '*', 't', now, 'actor', ARGV[2], 'ext', '', 'from', 'awaiting_approval',
  'to', ARGV[1], 'note', ARGV[3], unpack(roleField(ARGV[4])))
return 1
`)

// Discard refuses a batch awaiting approval: its phase becomes discarded
// and every payout still queued becomes cancelled. A rerun after a crash
// goes on cancelling.
func (c Controls) Discard(ctx context.Context, id, by, note string) (int, error) {
	if by == "" || note == "" {
		return 0, fmt.Errorf("discard %s: operator name and note are required: %w", id, ErrBadResolution)
	}
	by, note, err := typedNote(by, note, scrub.MaxNote)
	if err != nil {
		return 0, fmt.Errorf("discard %s: %w", id, err)
	}
	b, err := c.l.Batch(ctx, id)
	if err != nil {
		return 0, err
	}
	if b.Phase != lifecycle.PhaseDiscarded {
		moved, err := decideScript.Run(ctx, c.l.rdb, []string{metaKey(id), auditKey(id)}, lifecycle.PhaseDiscarded, by, note, roleOf(ctx)).Int()
		if err != nil {
			return 0, fmt.Errorf("ledger: discard %s: %w", id, err)
		}
		if moved != 1 {
			return 0, fmt.Errorf("batch %s is %s: %w", id, b.Phase, ErrNotAwaiting)
		}
	}
	return c.l.cancelQueued(ctx, id, by, "batch discarded: "+note)
}

// ErrEverSent is the refusal of cancel for a queued payout whose create was sent
// before (its absence was confirmed and it waits to be created again):
// the PSP may still hold and pay that order, so it is not "never sent".
var ErrEverSent = errors.New("ledger: the payout was sent to the PSP before")

// cancelScript moves a payout that was never sent (queued, held, or
// scheduled: then taken out of its batch's due index) to cancelled.
// A queued payout with creates > 0 went back to queued after a create
// (absence confirmed by K 404s at least D apart): refused, nothing
// written. KEYS: payout, counts, audit, due index; ARGV: cancelArgs, then
// actor and op (luaReplay).
// Replies {'ok', state found, velocity mark}, {'sent', creates} or {'no', state}.
var cancelScript = script(lifecycle.RolePerson, luaReplay+cancelLua)

// cancelArgs is cancelScript's ARGV in the order the script reads them.
type cancelArgs struct {
	By   string // ARGV[1] the person who cancels
	Note string // ARGV[2] why
}

func (a cancelArgs) argv() []any { return []any{a.By, a.Note} }

const cancelLua = `
local first, h = fetch(KEYS[1], 'state', 'units', 'creates', 'vel')
if first then return first end
if not h[1] then return {'nopayout', ''} end
if h[1] ~= 'queued' and h[1] ~= 'held' and h[1] ~= 'scheduled' then return {'no', h[1]} end
if num(h[3]) > 0 then return {'sent', tostring(num(h[3]))} end
local now = nowms()
AUD.extra = {'note', 'cancelled: ' .. ARGV[2]}
redis.call('HSET', KEYS[1], 'state', 'cancelled', 'updated', now, 'rby', ARGV[1], 'rnote', ARGV[2], 'rat', now,
  'error', 'cancelled by ' .. ARGV[1] .. ': ' .. ARGV[2], entered())
move(KEYS[2], h[1], 'cancelled', h[2])
if h[1] == 'scheduled' then redis.call('ZREM', KEYS[4], AUD.ext) end
return remember(KEYS[1], {'ok', h[1], h[4] or ''})
`

// Cancel moves a payout that is still queued or held (nothing sent), or
// scheduled, to cancelled,
// by compare-and-set: a worker that begins its create at the same moment
// either wins (the payout is submitting, and Cancel reports that) or finds
// it cancelled and sends nothing. It returns the state the payout was in.
// A payout counted toward its recipient's velocity is given back.
// A queued payout whose create was sent before (absence confirmed, to be
// created again) is refused with an error matching ErrEverSent.
func (l *Ledger) Cancel(ctx context.Context, batch, ext, by, note string) (lifecycle.State, error) {
	if by == "" || note == "" {
		return "", fmt.Errorf("cancel %s: operator name and note are required: %w", ext, ErrBadResolution)
	}
	by, note, err := typedNote(by, note, scrub.MaxNote+cancelNoteRoom)
	if err != nil {
		return "", fmt.Errorf("cancel %s: %w", ext, err)
	}
	return l.cancelWith(ctx, cancelScript, batch, ext, by, note)
}

// cancelWith runs cancel script s (cancelScript, or the reconciler's
// cancelExpiredScript) on a payout; by and note are checked already.
func (l *Ledger) cancelWith(ctx context.Context, s *redis.Script, batch, ext, by, note string) (lifecycle.State, error) {
	keys := []string{payoutKey(batch, ext), countsKey(batch), auditKey(batch), dueOfKey(batch)}
	res, err := l.As(by).transitionKeys(ctx, s, keys, cancelArgs{By: by, Note: note}).StringSlice()
	if err != nil {
		return "", fmt.Errorf("ledger: cancel %s: %w", ext, err)
	}
	switch res[0] {
	case replyNoPayout:
		return "", fmt.Errorf("payout %s of batch %s: %w", ext, batch, ErrNotFound)
	case "ok":
		if len(res) > 2 && res[2] != "" {
			// Stopped before it was sent: it no longer counts toward its
			// recipient's velocity (a crash here leaves it counted: the
			// safe side).
			if err := l.Velocity().Uncount(ctx, batch, []string{ext}, []string{res[2]}); err != nil {
				return lifecycle.State(res[1]), err
			}
		}
		return lifecycle.State(res[1]), nil
	case "sent":
		return lifecycle.Queued, fmt.Errorf("payout %s of batch %s went back to queued after %s create request(s) the PSP answered ambiguously and later did not find; "+
			"the PSP may still hold and pay that order, so it cannot be cancelled as never sent (it will be created again, or look at it in the console): %w", ext, batch, res[1], ErrEverSent)
	}
	return lifecycle.State(res[1]), nil
}
