package ledger

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// resolveScript is an operator's decision on a payout in needs_review: the
// only way out of that state. It records who decided and why (fields rby,
// rnote, rat, the latter on the Redis clock) and nothing else.
// KEYS: payout, counts; ARGV: to (checking|created|rejected), orderId,
// pspStatus, by, note, op.
//
//	to checking  a fresh status-check episode: seq+1, misses, lastmiss and
//	             faults reset; the caller enqueues status check seq (never a
//	             create). The review reason stays until a check answers.
//	to created   order id (and PSP status) recorded, the reason cleared.
//	to rejected  the reason stays.
//
// Replies {'ok', seq, to, hash...} or {'conflict', state} (the payout is
// not in needs_review) or {'nopayout'}.
var resolveScript = Person.script(luaReplay + `
local first, h = fetch(KEYS[1], 'state', 'units')
if first then return reply(first, KEYS[1]) end
local st = h[1]
if not st then return {'nopayout', ''} end
if st ~= 'needs_review' then return {'conflict', st} end
local to = ARGV[1]
if not may(st, to) then
  return redis.error_reply('resolve: bad target state ' .. to)
end
local now = nowms()
AUD.extra = {'order', ARGV[2], 'note', 'resolved: ' .. ARGV[5]}
redis.call('HSET', KEYS[1], 'state', to, 'updated', now, 'rby', ARGV[4], 'rnote', ARGV[5], 'rat', now, entered())
local seq = 0
if to == 'checking' then
  seq = redis.call('HINCRBY', KEYS[1], 'seq', 1)
  redis.call('HSET', KEYS[1], 'misses', 0, 'lastmiss', 0, 'faults', 0)
elseif to == 'created' then
  redis.call('HSET', KEYS[1], 'order', ARGV[2], 'pspstatus', ARGV[3], 'error', '')
end
move(KEYS[2], st, to, h[2])
return reply(remember(KEYS[1], {'ok', tostring(seq), to}), KEYS[1])
`)

// ErrBadResolution is returned, before anything is written, for a
// resolution that lacks its operator, its note, or (as created) the PSP
// order id.
var ErrBadResolution = errors.New("ledger: incomplete resolution")

// Resolution is who decided about a payout in needs_review, and why.
type Resolution struct {
	By   string // operator name (required)
	Note string // the reason, for the result file (required)
}

// Resolved is what a resolution did.
type Resolved struct {
	From   State  // always NeedsReview
	To     State  // Checking, Created or Rejected
	Seq    int    // with To == Checking: the status check to enqueue
	Payout Payout // the payout as it stands after the resolution
}

// Recheck moves a payout from needs_review back to checking with a fresh
// budget of status checks. The caller must enqueue status check
// Resolved.Seq; nothing is ever created by this call.
func (l *Ledger) Recheck(ctx context.Context, batch, ext string, r Resolution) (Resolved, error) {
	return l.resolve(ctx, batch, ext, Checking, "", "", r)
}

// ResolveAsCreated records that the PSP holds order orderID for a payout in
// needs_review (an operator saw it there): the payout becomes created.
// pspStatus is optional.
func (l *Ledger) ResolveAsCreated(ctx context.Context, batch, ext, orderID, pspStatus string, r Resolution) (Resolved, error) {
	if strings.TrimSpace(orderID) == "" {
		return Resolved{}, fmt.Errorf("resolve %s as created: the PSP order id is required: %w", ext, ErrBadResolution)
	}
	return l.resolve(ctx, batch, ext, Created, orderID, pspStatus, r)
}

// ResolveAsRejected records that a payout in needs_review will not be paid:
// the payout becomes rejected.
func (l *Ledger) ResolveAsRejected(ctx context.Context, batch, ext string, r Resolution) (Resolved, error) {
	return l.resolve(ctx, batch, ext, Rejected, "", "", r)
}

// resolve runs resolveScript. A payout not in needs_review is a
// *ConflictError naming the state found.
func (l *Ledger) resolve(ctx context.Context, batch, ext string, to State, orderID, pspStatus string, r Resolution) (Resolved, error) {
	r, orderID, pspStatus, err := typedResolution(r, orderID, pspStatus)
	if err != nil {
		return Resolved{}, fmt.Errorf("resolve %s: %w", ext, err)
	}
	if strings.TrimSpace(r.By) == "" || strings.TrimSpace(r.Note) == "" {
		return Resolved{}, fmt.Errorf("resolve %s: operator name and note are required: %w", ext, ErrBadResolution)
	}
	res, err := l.As(r.By).transition(ctx, resolveScript, batch, ext,
		string(to), orderID, pspStatus, r.By, r.Note).StringSlice()
	if err != nil {
		return Resolved{}, fmt.Errorf("ledger: resolve %s: %w", ext, err)
	}
	switch res[0] {
	case "ok":
		seq, _ := strconv.Atoi(res[1])
		return Resolved{From: NeedsReview, To: State(res[2]), Seq: seq, Payout: parsePayout(batch, pairs(res[3:]))}, nil
	case replyNoPayout:
		return Resolved{}, fmt.Errorf("payout %s of batch %s: %w", ext, batch, ErrNotFound)
	}
	return Resolved{}, fmt.Errorf("resolve %s: only a payout in %s can be resolved: %w", ext, NeedsReview,
		&ConflictError{ExternalID: ext, Found: State(res[1])})
}
