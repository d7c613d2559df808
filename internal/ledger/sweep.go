package ledger

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/acme/payout/internal/lifecycle"
	"github.com/redis/go-redis/v9"
)

// OpenPayout is what the reconciler needs to know of an open payout.
type OpenPayout struct {
	Batch       string
	ExternalID  string
	State       lifecycle.State // queued, submitting, checking, or created awaiting its outcome
	Creates     int
	Seq         int
	OutcomeSeq  int // created: the outcome check due
	Amount      string
	Destination string
	UpdatedAt   time.Time // Redis time of the last transition (registration: loader time)
}

// EachOpen calls fn for every payout of batch in an open state (queued,
// submitting, checking, or created and awaiting its outcome), reading eachChunk payouts per pipelined round trip
// and only the fields a sweep needs.
func (l *Ledger) EachOpen(ctx context.Context, batch string, fn func(OpenPayout) error) error {
	return l.eachIDs(ctx, batch, func(ids []string) error {
		pipe := l.rdb.Pipeline()
		cmds := make([]*redis.SliceCmd, len(ids))
		for i, id := range ids {
			cmds[i] = pipe.HMGet(ctx, payoutKey(batch, id), "state", "creates", "seq", "amount", "dest", "updated", "track", "oseq")
		}
		if _, err := pipe.Exec(ctx); err != nil {
			return fmt.Errorf("ledger: read payouts of %s: %w", batch, err)
		}
		for i, c := range cmds {
			v := c.Val()
			st := lifecycle.State(str(v[0]))
			awaiting := st == lifecycle.Created && str(v[6]) == "1"
			if !st.Open() && !awaiting {
				continue
			}
			creates, _ := strconv.Atoi(str(v[1]))
			seq, _ := strconv.Atoi(str(v[2]))
			oseq, _ := strconv.Atoi(str(v[7]))
			op := OpenPayout{Batch: batch, ExternalID: ids[i], State: st, Creates: creates, Seq: seq, OutcomeSeq: oseq,
				Amount: str(v[3]), Destination: str(v[4]), UpdatedAt: msTime(str(v[5]))}
			if err := fn(op); err != nil {
				return err
			}
		}
		return nil
	})
}

// queuedScript reads, of each payout in KEYS, the fields a create task
// needs, and replies them for the queued ones only: per payout, its index
// in KEYS (1-based), creates, amount, dest.
var queuedScript = redis.NewScript(`
local out = {}
for i, k in ipairs(KEYS) do
  local h = redis.call('HMGET', k, 'state', 'creates', 'amount', 'dest')
  if h[1] == 'queued' then
    out[#out+1] = tostring(i)
    out[#out+1] = h[2] or ''
    out[#out+1] = h[3] or ''
    out[#out+1] = h[4] or ''
  end
end
return out
`)

// EachQueued calls fn for every payout of batch in state queued, with
// what its create task needs (ExternalID, Creates, Amount, Destination;
// the other fields of OpenPayout are not read). It reads eachChunk ids per
// round trip, as EachOpen, then their payouts with one script call per
// lineChunk payouts, pipelined (all keys share the batch's slot): a few
// commands per thousand payouts instead of one per payout.
func (l *Ledger) EachQueued(ctx context.Context, batch string, fn func(OpenPayout) error) error {
	return l.eachIDs(ctx, batch, func(ids []string) error {
		pipe := l.rdb.Pipeline()
		var calls []*redis.Cmd
		var keys [][]string
		for part := ids; len(part) > 0; part = part[min(lineChunk, len(part)):] {
			ks := make([]string, min(lineChunk, len(part)))
			for i := range ks {
				ks[i] = payoutKey(batch, part[i])
			}
			calls = append(calls, queuedScript.EvalSha(ctx, pipe, ks))
			keys = append(keys, ks)
		}
		_, _ = pipe.Exec(ctx) // each call's error is read below
		for c, call := range calls {
			if redis.HasErrorPrefix(call.Err(), "NOSCRIPT") {
				call = queuedScript.Eval(ctx, l.rdb, keys[c]) // not cached: EVAL caches it
			}
			v, err := call.StringSlice()
			if err != nil {
				return fmt.Errorf("ledger: read queued payouts of %s: %w", batch, err)
			}
			for j := 0; j+3 < len(v); j += 4 {
				i, _ := strconv.Atoi(v[j])
				creates, _ := strconv.Atoi(v[j+1])
				op := OpenPayout{Batch: batch, ExternalID: ids[c*lineChunk+i-1], State: lifecycle.Queued, Creates: creates,
					Amount: v[j+2], Destination: v[j+3]}
				if err := fn(op); err != nil {
					return err
				}
			}
		}
		return nil
	})
}

func str(v any) string {
	s, _ := v.(string)
	return s
}

// Time returns Redis's clock: the clock every transition is stamped with.
func (l *Ledger) Time(ctx context.Context) (time.Time, error) {
	if l.clock != nil {
		return l.clock(), nil
	}
	t, err := l.rdb.Time(ctx).Result()
	if err != nil {
		return time.Time{}, fmt.Errorf("ledger: redis time: %w", err)
	}
	return t, nil
}

// interruptScript moves a payout that is submitting for create attempt
// attempt, untouched for at least minAge ms of Redis time, to checking: a
// worker began that create and its task is gone, so the request may have
// been sent and must never be sent again. Nothing else is moved.
// KEYS: payout, counts, audit; ARGV: interruptArgs, then actor and op
// (luaReplay).
// Replies {'check', seq} or {'current', state}.
var interruptScript = script(lifecycle.RoleReconciler, luaReplay+interruptLua)

// interruptArgs is interruptScript's ARGV in the order the script reads
// them.
type interruptArgs struct {
	Attempt  int   // ARGV[1] the create attempt found submitting
	MinAgeMS int64 // ARGV[2] untouched for at least this long (Redis time)
}

func (a interruptArgs) argv() []any { return []any{a.Attempt, a.MinAgeMS} }

const interruptLua = `
local first, h = fetch(KEYS[1], 'state', 'creates', 'units', 'updated')
if first then return first end
local st = h[1]
if not st then return {'nopayout', ''} end
local now = nowms()
if st ~= 'submitting' or num(h[2]) ~= tonumber(ARGV[1]) or tonumber(now) - num(h[4]) < tonumber(ARGV[2]) then
  return {'current', st}
end
local seq = redis.call('HINCRBY', KEYS[1], 'seq', 1)
AUD.extra = {'attempt', ARGV[1], 'seq', seq, 'note', 'create task lost while submitting (reconciler)'}
redis.call('HSET', KEYS[1], 'state', 'checking', 'misses', 0, 'lastmiss', 0, 'faults', 0,
  'error', 'create task lost while submitting; checking status', 'updated', now, entered())
move(KEYS[2], st, 'checking', h[3])
return remember(KEYS[1], {'check', tostring(seq)})
`

// InterruptSubmitting moves a payout found submitting for create attempt
// attempt, with no transition for minAge (Redis time), to checking, and
// returns the status check to enqueue. ok is false when the payout is in
// another state or attempt, or was touched more recently: nothing changed.
func (l *Ledger) InterruptSubmitting(ctx context.Context, batch, ext string, attempt int, minAge time.Duration) (seq int, ok bool, err error) {
	res, err := l.transition(ctx, interruptScript, batch, ext, interruptArgs{Attempt: attempt, MinAgeMS: minAge.Milliseconds()}).StringSlice()
	if err != nil {
		return 0, false, fmt.Errorf("ledger: interrupt submitting %s: %w", ext, err)
	}
	switch res[0] {
	case "check":
		seq, _ = strconv.Atoi(res[1])
		return seq, true, nil
	case replyNoPayout:
		return 0, false, fmt.Errorf("payout %s of batch %s: %w", ext, batch, ErrNotFound)
	}
	return 0, false, nil
}
