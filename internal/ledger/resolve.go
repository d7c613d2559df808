package ledger

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/acme/payout/internal/identity"
	"github.com/acme/payout/internal/lifecycle"
)

// resolveScript is an operator's decision on a payout in needs_review: the
// only way out of that state. It records who decided and why (fields rby,
// rnote, rat, the latter on the Redis clock) and nothing else.
// KEYS: payout, counts, audit; ARGV: resolveArgs, then actor and op
// (luaReplay).
//
//	to checking  a fresh status-check episode: seq+1, misses, lastmiss and
//	             faults reset; the caller enqueues status check seq (never a
//	             create). The review reason stays until a check answers.
//	to created   order id (and PSP status) recorded, the reason cleared;
//	             with windowms > 0 it awaits its outcome like any created
//	             payout (await): outcome check 1 is due, the caller enqueues
//	             it, and the workers follow the order to paid or failed.
//	to rejected  the reason stays.
//
// Under four-eyes a decision of money (created, rejected) is first a
// proposal: fields pto, porder, pstatus, pby, pkey, pnote, pat, and
// pentered (the payout's entered when proposed: a proposal holds for this
// stay in needs_review only). Nothing moves and the audit gets one entry
// needs_review -> needs_review with proposed=TO. The same decision (to and
// order id) by another person (pkey differs) carries it out; by the same
// person it is refused ({'sameperson', pby}); a different decision, by
// anyone, replaces the proposal and waits for a second person in turn.
//
// Replies {'ok', seq, to, awaiting, hash...} (to needs_review: proposed)
// or {'conflict', state} (the payout is not in needs_review) or
// {'sameperson', by} or {'nopayout'}.
var resolveScript = script(lifecycle.RolePerson, luaReplay+resolveLua)

// resolveArgs is resolveScript's ARGV in the order the script reads them
// (transition appends the actor and the operation id, luaReplay).
type resolveArgs struct {
	To        lifecycle.State // ARGV[1] checking, created or rejected
	OrderID   string          // ARGV[2] to created
	PSPStatus string          // ARGV[3] to created
	By        string          // ARGV[4] who decides
	Note      string          // ARGV[5] why
	WindowMS  int64           // ARGV[6] to created: the outcome window (await; 0: final)
	FourEyes  bool            // ARGV[7] a decision of money needs a second person
	Key       string          // ARGV[8] By's identity.Key, compared with the proposer's
}

func (a resolveArgs) argv() []any {
	return []any{string(a.To), a.OrderID, a.PSPStatus, a.By, a.Note, a.WindowMS, boolField(a.FourEyes), a.Key}
}

const resolveLua = `
local first, h = fetch(KEYS[1], 'state', 'units', 'pto', 'porder', 'pkey', 'pentered', 'entered', 'pby')
if first then return reply(first, KEYS[1]) end
local st = h[1]
if not st then return {'nopayout', ''} end
if st ~= 'needs_review' then return {'conflict', st} end
local to = ARGV[1]
if not may(st, to) then
  return redis.error_reply('resolve: bad target state ' .. to)
end
local now = nowms()
local proposer = ''
if ARGV[7] == '1' and to ~= 'checking' then
  local stay = h[7] or ''
  local pending = (h[5] or '') ~= '' and (h[6] or '') == stay
  if pending and h[3] == to and (h[4] or '') == ARGV[2] then
    if h[5] == ARGV[8] or ARGV[8] == '' then return {'sameperson', h[8] or ''} end
    proposer = h[8] or ''
  else
    redis.call('HSET', KEYS[1], 'pto', to, 'porder', ARGV[2], 'pstatus', ARGV[3], 'pby', ARGV[4], 'pkey', ARGV[8],
      'pnote', ARGV[5], 'pat', now, 'pentered', stay)
    redis.call('XADD', KEYS[3], '*', 't', now, 'actor', AUD.actor, 'ext', AUD.ext, 'from', st, 'to', st,
      'proposed', to, 'order', ARGV[2], 'note', 'proposed: ' .. ARGV[5], unpack(roleField(AUD.role)))
    return reply(remember(KEYS[1], {'ok', '0', st, '0'}), KEYS[1])
  end
end
AUD.extra = {'order', ARGV[2], 'proposedby', proposer, 'note', 'resolved: ' .. ARGV[5]}
local f = {'state', to, 'updated', now, 'rby', ARGV[4], 'rnote', ARGV[5], 'rat', now}
local seq, awaiting = 0, '0'
if to == 'checking' then
  seq = redis.call('HINCRBY', KEYS[1], 'seq', 1)
  push(f, 'misses', 0, 'lastmiss', 0, 'faults', 0)
elseif to == 'created' then
  push(f, 'order', ARGV[2], 'pspstatus', ARGV[3], 'error', '')
  if await(f, KEYS[2], h[2], ARGV[6], now) then awaiting = '1' end
end
push(f, entered())
redis.call('HSET', KEYS[1], unpack(f))
move(KEYS[2], st, to, h[2])
return reply(remember(KEYS[1], {'ok', tostring(seq), to, awaiting}), KEYS[1])
`

// ErrBadResolution is returned, before anything is written, for a
// resolution that lacks its operator, its note, or (as created) the PSP
// order id.
var ErrBadResolution = errors.New("ledger: incomplete resolution")

// Resolution is who decided about a payout in needs_review, and why.
type Resolution struct {
	By   string // operator name (required)
	Note string // the reason, for the result file (required)
	// OutcomeWindow, for a payout resolved as created: the workers follow
	// its order to paid or failed (outcome check 1 is due at once) and it
	// needs review again if no final status comes within the window, as
	// for any created payout (the workers' --outcome-window). 0: created
	// is final (--track-outcome=false).
	OutcomeWindow time.Duration
	// FourEyes: a decision of money (created, rejected) needs a second
	// person, as an approval does (the batch records four-eyes, or the
	// deployment's policy asks for it: operator.Resolve decides). The
	// first person's decision is recorded as the payout's Proposal and
	// nothing moves (Resolved.Proposed); another person taking the same
	// decision (the same target, the same order id) carries it out; the
	// same person is refused (errSamePerson); a different decision
	// replaces the proposal, which then waits for a second person in
	// turn. A recheck decides no money: it never needs a second person.
	FourEyes bool
}

// errSamePerson refuses, under four-eyes, the person who proposed a
// resolution as the second person who carries it out. It matches
// ErrFourEyes.
var errSamePerson = fmt.Errorf("%w: the person who proposed a resolution cannot also confirm it", ErrFourEyes)

// Resolved is what a resolution did.
type Resolved struct {
	From lifecycle.State // always lifecycle.NeedsReview
	To   lifecycle.State // lifecycle.Checking, lifecycle.Created or lifecycle.Rejected
	Seq  int             // with To == Checking: the status check to enqueue
	// Awaiting: with To == Created, the payout awaits its outcome and the
	// caller enqueues outcome check Payout.OutcomeSeq (1).
	Awaiting bool
	// Proposed: under four-eyes (Resolution.FourEyes) the decision was
	// recorded as the payout's Proposal, awaiting a second person; To is
	// then NeedsReview and nothing else changed.
	Proposed bool
	// ProposedBy, when a second person carried out a proposal: who
	// proposed it.
	ProposedBy string
	Payout     Payout // the payout as it stands after the resolution
}

// Recheck moves a payout from needs_review back to checking with a fresh
// budget of status checks. The caller must enqueue status check
// Resolved.Seq; nothing is ever created by this call.
func (l *Ledger) Recheck(ctx context.Context, batch, ext string, r Resolution) (Resolved, error) {
	return l.resolve(ctx, batch, ext, lifecycle.Checking, "", "", r, false)
}

// resolveAsCreated records that the PSP holds order orderID for a payout in
// needs_review (an operator saw it there): the payout becomes created.
// pspStatus is optional. Both are text a person typed, scrubbed as such
// (a number that passes the Luhn check is stored masked): a resolution
// whose order the PSP confirmed is ResolveAsConfirmed.
func (l *Ledger) resolveAsCreated(ctx context.Context, batch, ext, orderID, pspStatus string, r Resolution) (Resolved, error) {
	if strings.TrimSpace(orderID) == "" {
		return Resolved{}, fmt.Errorf("resolve %s as created: the PSP order id is required: %w", ext, ErrBadResolution)
	}
	return l.resolve(ctx, batch, ext, lifecycle.Created, orderID, pspStatus, r, false)
}

// PSPOrder is an order as the PSP confirmed it when asked about it: its
// order id and status word, as the PSP answered them.
type PSPOrder struct {
	OrderID string
	Status  string
}

// ResolveAsConfirmed records that the PSP confirmed order o for a payout
// in needs_review (operator.Verify asked it): the payout becomes created
// with the order id exactly as the PSP gave it, never masked, since the
// workers' outcome checks ask the PSP for that id (a numeric id that
// passes the Luhn check would otherwise be stored masked and answer 404).
// The name and note are scrubbed as for every resolution.
func (l *Ledger) ResolveAsConfirmed(ctx context.Context, batch, ext string, o PSPOrder, r Resolution) (Resolved, error) {
	return l.resolve(ctx, batch, ext, lifecycle.Created, o.OrderID, o.Status, r, true)
}

// ResolveAsRejected records that a payout in needs_review will not be paid:
// the payout becomes rejected.
func (l *Ledger) ResolveAsRejected(ctx context.Context, batch, ext string, r Resolution) (Resolved, error) {
	return l.resolve(ctx, batch, ext, lifecycle.Rejected, "", "", r, false)
}

// resolve runs resolveScript. A payout not in needs_review is a
// *ConflictError naming the state found. confirmed: orderID and pspStatus
// are the PSP's (confirmedResolution), else a person's (typedResolution).
func (l *Ledger) resolve(ctx context.Context, batch, ext string, to lifecycle.State, orderID, pspStatus string, r Resolution, confirmed bool) (Resolved, error) {
	var err error
	if confirmed {
		r, orderID, pspStatus, err = confirmedResolution(r, PSPOrder{OrderID: orderID, Status: pspStatus})
	} else {
		r, orderID, pspStatus, err = typedResolution(r, orderID, pspStatus)
	}
	if err != nil {
		return Resolved{}, fmt.Errorf("resolve %s: %w", ext, err)
	}
	if strings.TrimSpace(r.By) == "" || strings.TrimSpace(r.Note) == "" {
		return Resolved{}, fmt.Errorf("resolve %s: operator name and note are required: %w", ext, ErrBadResolution)
	}
	a := resolveArgs{To: to, OrderID: orderID, PSPStatus: pspStatus, By: r.By, Note: r.Note,
		WindowMS: r.OutcomeWindow.Milliseconds(), Key: identity.Key(r.By)}
	if r.FourEyes && to != lifecycle.Checking {
		if a.Key == "" {
			return Resolved{}, fmt.Errorf("resolve %s: a decision of money under four-eyes needs a person, and %s is a system: %w", ext, r.By, ErrFourEyes)
		}
		a.FourEyes = true
	}
	res, err := l.As(r.By).transition(ctx, resolveScript, batch, ext, a).StringSlice()
	if err != nil {
		return Resolved{}, fmt.Errorf("ledger: resolve %s: %w", ext, err)
	}
	switch res[0] {
	case "ok":
		seq, _ := strconv.Atoi(res[1])
		p := parsePayout(batch, pairs(res[4:]))
		out := Resolved{From: lifecycle.NeedsReview, To: lifecycle.State(res[2]), Seq: seq, Awaiting: res[3] == "1", Payout: p}
		if out.To == lifecycle.NeedsReview {
			out.Proposed = true
		} else if r.FourEyes && to != lifecycle.Checking {
			out.ProposedBy = p.proposedBy
		}
		return out, nil
	case replyNoPayout:
		return Resolved{}, fmt.Errorf("payout %s of batch %s: %w", ext, batch, ErrNotFound)
	case "sameperson":
		return Resolved{}, fmt.Errorf("resolve %s: %s proposed marking it %s and is waiting for a second person, who must be someone else: %w",
			ext, res[1], to, errSamePerson)
	}
	return Resolved{}, fmt.Errorf("resolve %s: only a payout in %s can be resolved: %w", ext, lifecycle.NeedsReview,
		&ConflictError{ExternalID: ext, Found: lifecycle.State(res[1])})
}

// contradictScript moves a payout a person resolved as rejected to
// needs_review: a PSP status answer shows an order for it, so "it will not
// be paid" may be false and a person must look again. Only a rejection
// made by a person (rby set) is contradicted this way; one the PSP gave
// itself stays. KEYS: payout, counts, audit; ARGV: contradictArgs, then
// actor and op (luaReplay).
// Replies {'ok', from} or {'conflict', state} or {'nopayout', ”}.
var contradictScript = script(lifecycle.RoleWorker, luaReplay+contradictLua)

// contradictArgs is contradictScript's ARGV in the order the script reads
// them (transition appends the actor and the operation id, luaReplay).
type contradictArgs struct {
	OrderID   string // ARGV[1] the order the PSP shows for the payout
	PSPStatus string // ARGV[2] its status word
	Note      string // ARGV[3] why the payout needs review again
}

func (a contradictArgs) argv() []any { return []any{a.OrderID, a.PSPStatus, a.Note} }

const contradictLua = `
local first, h = fetch(KEYS[1], 'state', 'units', 'rby')
if first then return first end
local st = h[1]
if not st then return {'nopayout', ''} end
if st ~= 'rejected' or not h[3] or h[3] == '' then return {'conflict', st} end
local now = nowms()
AUD.extra = {'order', ARGV[1], 'psp', ARGV[2], 'note', ARGV[3]}
local head = {'ok', st}
local f = {'state', 'needs_review', 'updated', now, 'order', ARGV[1], 'pspstatus', ARGV[2], 'error', ARGV[3]}
push(f, entered())
push(f, decided(head))
redis.call('HSET', KEYS[1], unpack(f))
move(KEYS[2], st, 'needs_review', h[2])
return head
`

// Contradiction is a PSP answer that contradicts a person's resolution.
type Contradiction struct {
	OrderID   string // the order the PSP shows for the payout
	PSPStatus string // its status word
	Note      string // why the payout needs review again (kept as its error)
}

// ContradictRejected moves a payout a person resolved as rejected to
// needs_review, recording the order the PSP showed for it. A payout in any
// other state, or rejected by the PSP itself, is a *ConflictError naming
// its state; nothing is written then.
func (l *Ledger) ContradictRejected(ctx context.Context, batch, ext string, c Contradiction) error {
	res, err := l.transition(ctx, contradictScript, batch, ext, contradictArgs(c)).StringSlice()
	if err != nil {
		return fmt.Errorf("ledger: contradict %s: %w", ext, err)
	}
	switch res[0] {
	case "ok":
		return nil
	case replyNoPayout:
		return fmt.Errorf("payout %s of batch %s: %w", ext, batch, ErrNotFound)
	}
	return fmt.Errorf("contradict %s: only a payout a person marked rejected: %w", ext, &ConflictError{ExternalID: ext, Found: lifecycle.State(res[1])})
}
