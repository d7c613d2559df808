package ledger

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/acme/payout/internal/decide"
	"github.com/acme/payout/internal/lifecycle"
	"github.com/redis/go-redis/v9"
)

// replyNoPayout is every transition script's answer for a payout that
// does not exist: ErrNotFound. It is not an answer of the PSP (a status
// query's 404 is the CheckOutcome Missing).
const replyNoPayout = "nopayout"

// interruptedNote is the error BeginCreate keeps on a payout whose
// earlier create delivery died before recording its answer.
const interruptedNote = "create interrupted before its answer was recorded; checking status"

// Begin is BeginCreate's decision and the payout as it stands after it.
type Begin struct {
	Action decide.BeginAction
	Seq    int
	Phase  string // with Hold: the batch's phase ("" when it has no metadata)
	// Epoch, with Proceed, is the batch's create epoch this mark took:
	// higher than every value this batch answered before, unless the
	// ledger went back in time (0 with the other decisions).
	Epoch int64
	KeyID string // with Foreign: the key id the card number is sealed with
	// Payout holds the fields a create task uses: Batch, ExternalID,
	// State, Creates, Seq, Amount, Destination, Sealed, Telecom, Extra,
	// Tries.
	Payout Payout
}

// beginKeys are the keys of beginCreateScript.
func beginKeys(batch, ext string) []string {
	return []string{payoutKey(batch, ext), countsKey(batch), auditKey(batch), metaKey(batch)}
}

// notFound is the error of a transition on a payout that does not exist.
func notFound(batch, ext string) error {
	return fmt.Errorf("payout %s of batch %s: %w", ext, batch, ErrNotFound)
}

// replyOf reads a transition script's reply: an array of strings whose
// first element is the decision, at least n elements unless the payout
// does not exist.
func replyOf(cmd *redis.Cmd, batch, ext, what string, n int) ([]string, error) {
	res, err := cmd.StringSlice()
	if err != nil {
		return nil, fmt.Errorf("ledger: %s of %s: %w", what, ext, err)
	}
	if len(res) > 0 && res[0] == replyNoPayout {
		return nil, notFound(batch, ext)
	}
	if len(res) < n {
		return nil, fmt.Errorf("ledger: %s of %s: reply %q has %d elements, want %d", what, ext, res, len(res), n)
	}
	return res, nil
}

// replyInts parses the decimal elements of a reply at the indexes idx.
func replyInts(res []string, what string, idx ...int) ([]int, error) {
	out := make([]int, len(idx))
	for i, j := range idx {
		n, err := strconv.Atoi(res[j])
		if err != nil {
			return nil, fmt.Errorf("ledger: %s: element %d of reply %q: %w", what, j, res, err)
		}
		out[i] = n
	}
	return out, nil
}

// parseBegin reads beginCreateScript's reply: {action, seq, phase, state,
// creates, seq field, amount, dest, sealed, tel, extra, tries, epoch}.
func parseBegin(batch, ext string, cmd *redis.Cmd) (Begin, error) {
	res, err := replyOf(cmd, batch, ext, "begin create", 13)
	if err != nil {
		return Begin{}, err
	}
	n, err := replyInts(res, "begin create of "+ext, 1, 4, 5, 11, 12)
	if err != nil {
		return Begin{}, err
	}
	b := Begin{Action: decide.BeginAction(res[0]), Seq: n[0], Phase: res[2], Epoch: int64(n[4]), Payout: Payout{
		Batch: batch, ExternalID: ext, State: lifecycle.State(res[3]), Creates: n[1], Seq: n[2], Tries: n[3],
		Amount: res[6], Destination: res[7], Sealed: unpackSealed(res[8]), Telecom: res[9], Extra: res[10],
	}}
	if b.Action == decide.Foreign {
		b.KeyID, b.Phase = b.Phase, ""
	}
	return b, nil
}

// OpeningKeys returns a copy of l whose BeginCreate holds back a payout
// whose card number is sealed with a data key whose id is not in ids
// (vault.Keyring.KeyIDs; "plain" for unencrypted values): the decision
// Foreign, nothing changed. A worker that cannot open a card number thus
// leaves the payout as it was, never marked submitting. Malformed sealed
// values are not held back: they fail to open, a problem of that payout.
func (l *Ledger) OpeningKeys(ids []string) *Ledger {
	c := *l
	c.keys = ""
	if len(ids) > 0 {
		c.keys = "|" + strings.Join(ids, "|") + "|"
	}
	return &c
}

// beginArgs is beginCreateScript's ARGV in the order the script reads
// them (transition appends the actor and the operation id, luaReplay).
type beginArgs struct {
	Attempt int    // ARGV[1] the create attempt the task is for
	Note    string // ARGV[2] the error kept when an interrupted create is moved to checking
	// ARGV[3] "|ID|ID|": the data key ids the worker opens card numbers
	// with (Ledger.OpeningKeys); "": any
	Keys string
}

func (a beginArgs) argv() []any { return []any{a.Attempt, a.Note, a.Keys} }

// beginCreateScript is run by a create task before anything is sent.
//
//	KEYS[1] payout    KEYS[2] counts    KEYS[3] audit    KEYS[4] batch meta
//	ARGV    beginArgs, then actor and op (luaReplay)
//
// Replies {action, seq, phase, state, creates, seq field, amount, dest,
// sealed, tel, extra, tries, epoch}: the decision, then the fields a create
// task uses, as they stand after the call (beginFields), then the batch's
// create epoch: each proceed increments the batch's field epoch and answers
// its new value (0 for the other decisions), so a worker that got a value
// it had already seen knows the ledger went back in time (epoch.go).
//
//	proceed  queued -> submitting: POST now
//	hold     queued, but the batch is not loaded (its load has not
//	         completed, it awaits approval or was discarded): nothing
//	         changes, nothing is sent; phase is the batch's phase
//	foreign  queued, the batch loaded, but the card number is sealed with
//	         a key not in keys: nothing changes, nothing is sent; phase
//	         is the key id
//	check    submitting with this attempt (a worker died mid-request or the
//	         task was delivered twice) -> checking: enqueue status check seq
//	ensure   already checking: make sure status check seq is enqueued
//	skip     final state, or a stale attempt: nothing to do
//	nopayout no such payout (nothing else follows)
var beginCreateScript = script(lifecycle.RoleWorker, luaReplay+beginCreateLua)

const beginCreateLua = `
local attempt = tonumber(ARGV[1])
local note = ARGV[2]
local first, h = fetch(KEYS[1], 'state', 'creates', 'units', 'seq', 'amount', 'dest', 'sealed', 'tel', 'extra', 'tries')
local st = h[1]
if not st then return {'nopayout'} end
local creates, seq = tostring(num(h[2])), tostring(num(h[4]))
local function answer(head)
  return {head[1], head[2], head[3] or '', st, creates, seq,
    h[5] or '', h[6] or '', h[7] or '', h[8] or '', h[9] or '', tostring(num(h[10])), head[4] or '0'}
end
if first then return answer(first) end
local units = h[3]
AUD.extra = {'attempt', attempt}
if st == 'queued' and attempt == num(h[2]) + 1 then
  -- No create for a batch whose load has not completed (or that awaits
  -- approval, or was discarded): hold the task, decide nothing.
  local phase = redis.call('HGET', KEYS[4], 'phase')
  if phase ~= 'loaded' then return answer({'hold', '0', phase or ''}) end
  -- No create by a worker that cannot open the card number: the payout
  -- stays as it is for one that can.
  local sealed, keys = h[7], ARGV[3]
  if keys ~= '' and sealed and sealed ~= '' then
    local id
    if string.byte(sealed, 1) == 1 and #sealed > 5 then
      id = string.format('%02x%02x%02x%02x', string.byte(sealed, 2, 5))
    elseif string.sub(sealed, 1, 6) == 'plain:' then
      id = 'plain'
    else
      id = string.match(sealed, '^v1:(%x%x%x%x%x%x%x%x):')
    end
    if id and not string.find(keys, '|' .. id .. '|', 1, true) then return answer({'foreign', '0', id}) end
  end
  local head = {'proceed', '0', '', tostring(redis.call('HINCRBY', KEYS[4], 'epoch', 1))}
  local f = {'state', 'submitting', 'creates', attempt, 'updated', nowms(), entered()}
  redis.call('HSET', KEYS[1], unpack(push(f, decided(head))))
  move(KEYS[2], st, 'submitting', units)
  st, creates = 'submitting', tostring(attempt)
  return answer(head)
end
if st == 'submitting' and attempt == num(h[2]) then
  seq = tostring(num(h[4]) + 1)
  local head = {'check', seq}
  AUD.extra = {'attempt', attempt, 'seq', seq, 'note', note}
  local f = {'state', 'checking', 'seq', seq, 'misses', 0, 'lastmiss', 0, 'faults', 0,
    'error', note, 'updated', nowms(), entered()}
  redis.call('HSET', KEYS[1], unpack(push(f, decided(head))))
  move(KEYS[2], st, 'checking', units)
  st = 'checking'
  return answer(head)
end
if st == 'checking' then return answer({'ensure', seq}) end
return answer({'skip', '0'})
`

// BeginCreate moves a payout from queued to submitting for create attempt
// attempt, BEFORE the request is sent. A payout found in submitting with the
// same attempt is moved to checking instead: that request may have reached
// the PSP, so it must never be sent again. A queued payout of a batch that
// is not loaded is held (Hold): no create before the whole batch is
// registered (and approved, where approval applies).
func (l *Ledger) BeginCreate(ctx context.Context, batch, ext string, attempt int) (Begin, error) {
	return parseBegin(batch, ext, l.transitionKeys(ctx, beginCreateScript, beginKeys(batch, ext),
		beginArgs{Attempt: attempt, Note: interruptedNote, Keys: l.keys}))
}

// finishArgs is finishCreateScript's ARGV in the order the script reads
// them (transition appends the actor and the operation id, luaReplay).
type finishArgs struct {
	Attempt  int             // ARGV[1] the create attempt answered
	To       lifecycle.State // ARGV[2] the state the answer leads to
	WindowMS int64           // ARGV[3] outcome window in ms (0: created is final)
	OrderID  string          // ARGV[4] the PSP's order id (to created)
	Status   string          // ARGV[5] the PSP's status word (to created)
	Note     string          // ARGV[6] the error to keep
	// ARGV[7] > 0: the request provably did not reach the PSP, and this
	// is the payout's count of such tries with it (decide.Finish: To is
	// needs_review once they exceed the budget); 0: not counted
	Tries int
	// ARGV[8] with Tries > 0: the count BeginCreate read; the stored one
	// must still be it
	TriesRead int
	HTTP      int // ARGV[9] HTTP status of the answer (audit)
}

func (a finishArgs) argv() []any {
	return []any{a.Attempt, string(a.To), a.WindowMS, a.OrderID, a.Status, a.Note, a.Tries, a.TriesRead, a.HTTP}
}

// finishCreateScript records the classified answer of a create.
//
//	KEYS[1] payout    KEYS[2] counts    KEYS[3] audit
//	ARGV    finishArgs, then actor and op (luaReplay)
//
// Allowed: submitting -> any of created, rejected, checking, queued,
// needs_review; checking -> created or rejected (a definite answer of the
// same attempt that arrived after another delivery moved it to checking).
// Replies {'ok', seq, newState, awaiting (1: outcome check 1 is due)},
// {'conflict', state} or {'nopayout'}.
var finishCreateScript = script(lifecycle.RoleWorker, luaReplay+finishCreateLua)

const finishCreateLua = `
local attempt, to, windowms = tonumber(ARGV[1]), ARGV[2], ARGV[3]
local order, pspstatus, note = ARGV[4], ARGV[5], ARGV[6]
local tries, triesread, http = tonumber(ARGV[7]), tonumber(ARGV[8]), ARGV[9]
local first, h = fetch(KEYS[1], 'state', 'creates', 'units', 'tries', 'seq')
if first then return first end
local st = h[1]
if not st then return {'nopayout'} end
if num(h[2]) ~= attempt then return {'conflict', st} end
if not (st == 'submitting' or (st == 'checking' and (to == 'created' or to == 'rejected'))) then
  return {'conflict', st}
end
allow(st, to)
local units = h[3]
local now = nowms()
local f = {'updated', now}
if tries > 0 then
  if num(h[4]) ~= triesread then return {'conflict', st} end
  push(f, 'tries', tries)
end
AUD.extra = {'attempt', attempt, 'http', http, 'order', order, 'note', note}
local seq, awaiting = 0, '0'
push(f, 'state', to, 'error', note)
if to == 'created' then
  push(f, 'order', order, 'pspstatus', pspstatus)
  if await(f, KEYS[2], units, windowms, now) then awaiting = '1' end
elseif to == 'checking' then
  seq = num(h[5]) + 1
  push(f, 'seq', seq, 'misses', 0, 'lastmiss', 0, 'faults', 0)
elseif to == 'queued' then
  push(f, 'creates', attempt - 1)
end
local head = {'ok', tostring(seq), to, awaiting}
push(f, entered())
push(f, decided(head))
redis.call('HSET', KEYS[1], unpack(f))
move(KEYS[2], st, to, units)
return head
`

// FinishCreate records the answer to create attempt attempt. A
// *ConflictError means another delivery of the task already decided.
func (l *Ledger) FinishCreate(ctx context.Context, batch, ext string, attempt int, r decide.CreateResult) (decide.Finished, error) {
	to, note, tries := decide.Finish(r)
	res, err := replyOf(l.transition(ctx, finishCreateScript, batch, ext, finishArgs{
		Attempt: attempt, To: to, WindowMS: r.OutcomeWindow.Milliseconds(), OrderID: r.OrderID, Status: r.PSPStatus,
		Note: note, Tries: tries, TriesRead: r.Tries, HTTP: r.HTTPStatus,
	}),
		batch, ext, "finish create", 2)
	if err != nil {
		return decide.Finished{}, err
	}
	if res[0] != "ok" {
		return decide.Finished{}, &ConflictError{ExternalID: ext, Found: lifecycle.State(res[1])}
	}
	if len(res) < 4 {
		return decide.Finished{}, fmt.Errorf("ledger: finish create of %s: reply %q has %d elements, want 4", ext, res, len(res))
	}
	n, err := replyInts(res, "finish create of "+ext, 1)
	if err != nil {
		return decide.Finished{}, err
	}
	return decide.Finished{State: lifecycle.State(res[2]), Seq: n[0], Awaiting: res[3] == "1", Error: note}, nil
}

// checkArgs is applyCheckScript's ARGV in the order the script reads them
// (transition appends the actor and the operation id, luaReplay): the
// payout as read, what decide.Check decided, the answer for the audit
// entry and the decision's reply.
type checkArgs struct {
	// ARGV[1..6] the payout as read: the check answered (seq), its
	// misses, lastmiss (ms), faults, creates and due (ms)
	Seq, Misses int
	LastMissMS  int64
	Faults      int
	Creates     int
	DueMS       int64
	To          lifecycle.State // ARGV[7] the state it moves to; "": it stays checking, check seq+1 due WaitMS after now
	Error       string          // ARGV[8] the error kept, unless KeepError
	KeepError   bool            // ARGV[9]
	NewMisses   int             // ARGV[10]
	CountMiss   bool            // ARGV[11] lastmiss is stamped now
	NewFaults   int             // ARGV[12]
	WaitMS      int64           // ARGV[13]
	WindowMS    int64           // ARGV[14] to created: the outcome window (await; 0: final)
	OrderID     string          // ARGV[15] to created
	PSPStatus   string          // ARGV[16] to created
	HTTP        int             // ARGV[17] the answer, for the audit entry
	Note        string          // ARGV[18]
	Head        [4]string       // ARGV[19..22] the decision's reply, stored as the replay memo
}

func (a checkArgs) argv() []any {
	return []any{a.Seq, a.Misses, a.LastMissMS, a.Faults, a.Creates, a.DueMS,
		string(a.To), a.Error, boolField(a.KeepError), a.NewMisses, boolField(a.CountMiss), a.NewFaults, a.WaitMS,
		a.WindowMS, a.OrderID, a.PSPStatus, a.HTTP, a.Note,
		a.Head[0], a.Head[1], a.Head[2], a.Head[3]}
}

// applyCheckScript writes what decide.Check decided of a status check's
// answer, if the payout is still as the decision read it: checking, under
// the same seq, with the same counts and times. Every time it writes is
// Redis's clock at the write.
//
//	KEYS[1] payout    KEYS[2] counts    KEYS[3] audit
//	ARGV    checkArgs, then actor and op (luaReplay)
//
// Replies the decision's reply, {'changed', state, seq, '0'} when the
// payout is not as read (nothing written), or {'nopayout', ...}.
var applyCheckScript = script(lifecycle.RoleWorker, luaReplay+applyCheckLua)

const applyCheckLua = `
local first, h = fetch(KEYS[1], 'state', 'seq', 'misses', 'lastmiss', 'faults', 'creates', 'due', 'units')
if first then return first end
if not h[1] then return {'nopayout', '0', '0', '0'} end
if h[1] ~= 'checking' then return {'changed', h[1], tostring(num(h[2])), '0'} end
for i = 2, 7 do
  if num(h[i]) ~= tonumber(ARGV[i - 1]) then return {'changed', h[1], tostring(num(h[2])), '0'} end
end
local to, units, now = ARGV[7], h[8], nowms()
local head = {ARGV[19], ARGV[20], ARGV[21], ARGV[22]}
-- one more status check answered, counted on the payout and its batch
-- (payout history); a replay returned above, so it counts once.
redis.call('HINCRBY', KEYS[1], 'checks', 1)
redis.call('HINCRBY', KEYS[2], 'checks', 1)
AUD.extra = {'seq', ARGV[1], 'http', ARGV[17], 'order', ARGV[15], 'note', ARGV[18]}
local f = {'updated', now, 'misses', ARGV[10], 'faults', ARGV[12]}
if ARGV[11] == '1' then push(f, 'lastmiss', now) end
if ARGV[9] ~= '1' then push(f, 'error', ARGV[8]) end
if #to == 0 then
  push(f, 'seq', tonumber(ARGV[1]) + 1, 'due', string.format('%.0f', tonumber(now) + tonumber(ARGV[13])))
  redis.call('HSET', KEYS[1], unpack(push(f, decided(head))))
  return head
end
push(f, 'state', to)
if to == 'created' then
  push(f, 'order', ARGV[15], 'pspstatus', ARGV[16])
  await(f, KEYS[2], units, ARGV[14], now)
end
push(f, entered())
redis.call('HSET', KEYS[1], unpack(push(f, decided(head))))
move(KEYS[2], 'checking', to, units)
return head
`

// RecordCheck records the answer a to status check seq of the payout read
// as s (decide.Snapshot, before the PSP was asked), as decide.Check decides under
// policy p, in one round trip: the write checks that the payout is still
// as read. A payout that moved meanwhile gets CheckSkip or CheckStale, as if
// read afterwards; one that changed otherwise under the same check is an
// ErrConflict (the task runs again and reads it afresh).
func (l *Ledger) RecordCheck(ctx context.Context, s decide.Snapshot, seq int, a decide.CheckAnswer, p decide.CheckPolicy) (decide.CheckStep, error) {
	d := decide.Check(s, seq, a, p)
	if !d.Write {
		return d.Step, nil
	}
	batch, ext := s.Batch, s.ExternalID
	head := [4]string{string(d.Step.Action), "0", "0", "0"}
	switch d.Step.Action {
	case decide.CheckDone:
		head[1] = boolField(d.Step.Awaiting)
	case decide.CheckAgain:
		head[1], head[2], head[3] = strconv.Itoa(d.Step.Seq), strconv.Itoa(d.Step.Faults), strconv.FormatInt(d.Step.Wait.Milliseconds(), 10)
	case decide.CheckRecreate:
		head[1] = strconv.Itoa(d.Step.Attempt)
	}
	res, err := replyOf(l.transition(ctx, applyCheckScript, batch, ext, checkArgs{
		Seq: s.Seq, Misses: s.Misses, LastMissMS: unixMilli(s.LastMiss), Faults: s.Faults, Creates: s.Creates, DueMS: unixMilli(s.CheckDue),
		To: d.To, Error: d.ErrText, KeepError: d.KeepError, NewMisses: d.Misses, CountMiss: d.CountMiss, NewFaults: d.Faults,
		WaitMS: d.Step.Wait.Milliseconds(), WindowMS: p.OutcomeWindow.Milliseconds(),
		OrderID: a.OrderID, PSPStatus: a.PSPStatus, HTTP: a.HTTPStatus, Note: a.Message, Head: head,
	}),
		batch, ext, "record status check", 4)
	if err != nil {
		return decide.CheckStep{}, err
	}
	now, err := readApplied(res, head[:], "record status check of "+ext)
	switch {
	case err != nil:
		return decide.CheckStep{}, err
	case now == nil:
		return d.Step, nil
	}
	// As if read after the other write: skip or stale, else a conflict.
	if step, ask := (decide.Snapshot{State: now.state, Seq: now.seq}).PreCheck(seq); !ask {
		return step, nil
	}
	return decide.CheckStep{}, fmt.Errorf("ledger: status check %d of %s changed while the PSP was asked: %w", seq, ext,
		&ConflictError{ExternalID: ext, Found: lifecycle.Checking})
}

// unapplied is the payout as an apply script found it when it was not as
// the decision read it (nothing written): its state, the check sequence
// it awaits, and (outcome checks) whether it awaits its outcome.
type unapplied struct {
	state   lifecycle.State
	seq     int
	tracked bool
}

// readApplied reads the reply of an apply script (applyCheckScript,
// applyOutcomeScript): nil when it wrote the decision head (which it
// returns), else the payout as it stands: {'changed', state, seq, track}.
func readApplied(res, head []string, what string) (*unapplied, error) {
	if res[0] != "changed" {
		if len(res) < len(head) || !slices.Equal(res[:len(head)], head) {
			return nil, fmt.Errorf("ledger: %s: reply %q, decided %q", what, res, head)
		}
		return nil, nil
	}
	if len(res) < 4 {
		return nil, fmt.Errorf("ledger: %s: reply %q has %d elements, want 4", what, res, len(res))
	}
	n, err := replyInts(res, what, 2)
	if err != nil {
		return nil, err
	}
	return &unapplied{state: lifecycle.State(res[1]), seq: n[0], tracked: res[3] == "1"}, nil
}

// unixMilli is t in Unix milliseconds, 0 for the zero time (as the
// scripts store "none").
func unixMilli(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixMilli()
}

// outcomeArgs is applyOutcomeScript's ARGV in the order the script reads
// them (transition appends the actor and the operation id, luaReplay).
type outcomeArgs struct {
	// ARGV[1..3] the payout as read: the outcome check answered (oseq),
	// its polls and its due time (ms)
	Seq, Polls int
	DueMS      int64
	// ARGV[4] paid | failed | needs_review; "": it stays created,
	// awaiting outcome check Seq+1 (Polls+1 answered)
	To        lifecycle.State
	Error     string    // ARGV[5] the error kept with To
	PSPStatus string    // ARGV[6] the PSP's status word ("": the stored one stays)
	HTTP      int       // ARGV[7] the answer, for the audit entry
	Reason    string    // ARGV[8]
	Head      [3]string // ARGV[9..11] the decision's reply, stored as the replay memo
	// ARGV[12] to paid: the watch window in ms (0: a paid payout is not
	// watched); ARGV[13] the wait before watch check 1 (watch.go)
	WatchMS, WatchFirstMS int64
}

func (a outcomeArgs) argv() []any {
	return []any{a.Seq, a.Polls, a.DueMS, string(a.To), a.Error, a.PSPStatus, a.HTTP, a.Reason, a.Head[0], a.Head[1], a.Head[2],
		a.WatchMS, a.WatchFirstMS}
}

// applyOutcomeScript writes what decide.Outcome decided of an outcome
// check's answer, if the payout is still as the decision read it: created,
// awaiting outcome check oseq, with the same polls and window.
//
//	KEYS[1] payout    KEYS[2] counts    KEYS[3] audit    KEYS[4] watch
//	ARGV    outcomeArgs, then actor and op (luaReplay)
//
// To paid with a watch window, the payout is watched (luaWatchPaid).
// Replies the decision's reply, {'changed', state, oseq, track} when the
// payout is not as read (nothing written), or {'nopayout', ...}.
var applyOutcomeScript = script(lifecycle.RoleWorker, luaReplay+luaWatchPaid+applyOutcomeLua)

const applyOutcomeLua = `
local first, h = fetch(KEYS[1], 'state', 'track', 'oseq', 'opolls', 'odue', 'units')
if first then return first end
if not h[1] then return {'nopayout', '0', '0'} end
if h[1] ~= 'created' or h[2] ~= '1' or num(h[3]) ~= tonumber(ARGV[1]) or num(h[4]) ~= tonumber(ARGV[2]) or num(h[5]) ~= tonumber(ARGV[3]) then
  return {'changed', h[1], tostring(num(h[3])), h[2] or '0'}
end
local to, units, now = ARGV[4], h[6], nowms()
local head = {ARGV[9], ARGV[10], ARGV[11]}
redis.call('HINCRBY', KEYS[1], 'checks', 1)
redis.call('HINCRBY', KEYS[2], 'checks', 1)
AUD.extra = {'oseq', ARGV[1], 'http', ARGV[7], 'psp', ARGV[6], 'note', ARGV[8]}
local f = {'updated', now}
if ARGV[6] ~= '' then push(f, 'pspstatus', ARGV[6]) end
if #to == 0 then
  redis.call('HSET', KEYS[1], unpack(push(f, 'opolls', num(h[4]) + 1, 'oseq', num(h[3]) + 1, decided(head))))
  return head
end
push(f, 'state', to, 'track', 0, 'error', ARGV[5], entered())
if to == 'paid' then watchPaid(f, KEYS[2], KEYS[4], units, ARGV[12], ARGV[13], now) end
redis.call('HSET', KEYS[1], unpack(push(f, decided(head))))
move(KEYS[2], 'created', to, units)
redis.call('HINCRBY', KEYS[2], 'n:awaiting', -1)
redis.call('HINCRBY', KEYS[2], 'u:awaiting', '-' .. units)
return head
`

// RecordOutcome records the answer a to outcome check oseq of the payout
// read as s (decide.Snapshot, before the PSP was asked), as decide.Outcome decides,
// in one round trip: the write checks that the payout is still as read. A
// payout that moved meanwhile gets OutcomeSkip or OutcomeStale, as if read
// afterwards; one that changed otherwise under the same check is an
// ErrConflict.
func (l *Ledger) RecordOutcome(ctx context.Context, s decide.Snapshot, oseq int, a decide.OutcomeAnswer) (decide.OutcomeStep, error) {
	d := decide.Outcome(s, oseq, a)
	if !d.Write {
		return d.Step, nil
	}
	var err error
	batch, ext := s.Batch, s.ExternalID
	head := [3]string{string(d.Step.Action), "0", "0"}
	switch d.Step.Action {
	case decide.OutcomeDone:
		head[1] = string(d.Step.State)
	case decide.OutcomeAgain:
		head[1], head[2] = strconv.Itoa(d.Step.Seq), strconv.Itoa(d.Step.Polls)
	}
	args := outcomeArgs{
		Seq: s.OutcomeSeq, Polls: s.OutcomePolls, DueMS: unixMilli(s.OutcomeDue),
		To: d.To, Error: d.ErrText, PSPStatus: a.PSPStatus, HTTP: a.HTTPStatus, Reason: a.Reason, Head: head,
	}
	if d.To == lifecycle.Paid {
		if args.WatchMS, args.WatchFirstMS, err = l.watchPaid(ctx, s); err != nil {
			return decide.OutcomeStep{}, err
		}
	}
	res, err := replyOf(l.transitionKeys(ctx, applyOutcomeScript, outcomeKeys(batch, ext), args),
		batch, ext, "record outcome", 3)
	if err != nil {
		return decide.OutcomeStep{}, err
	}
	now, err := readApplied(res, head[:], "record outcome of "+ext)
	switch {
	case err != nil:
		return decide.OutcomeStep{}, err
	case now == nil:
		return d.Step, nil
	}
	// As if read after the other write: skip or stale, else a conflict.
	read := decide.Snapshot{State: now.state, Awaiting: now.tracked && now.state == lifecycle.Created, OutcomeSeq: now.seq}
	if step, ask := read.PreOutcome(oseq); !ask {
		return step, nil
	}
	return decide.OutcomeStep{}, fmt.Errorf("ledger: outcome check %d of %s changed while the PSP was asked: %w", oseq, ext,
		&ConflictError{ExternalID: ext, Found: lifecycle.Created})
}
