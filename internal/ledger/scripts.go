package ledger

import (
	"github.com/redis/go-redis/v9"
)

// luaMove is prepended to every script that changes a payout's state
// (Role.script, after the machine's prelude luaMachine): it moves one row and
// its minor units between the per-state counters, and refuses a move the
// state machine does not give the script's role (Transitions).
// Units travel as strings so that Redis parses them as int64 (Lua numbers
// are doubles and would lose cents above 2^53).
//
// When the script names an audit stream (AUD.key, set by luaReplay from
// KEYS[3]), every move also appends one entry to it: Redis time, actor,
// externalId, from, to, and the context the script put in AUD.extra
// (attempt, status sequence, HTTP status, note). A replayed call returns
// before it moves anything, so a transition is audited once.
const luaMove = `
local AUD = {extra = {}}
-- nowms is the Redis server's clock in milliseconds, as decimal text (Lua
-- turns it into a number in arithmetic): every timestamp a decision depends
-- on comes from here, never from a worker's clock.
-- It is read once per call: the transition and its audit entry carry the
-- same time.
local NOWMS
local function nowms()
  if not NOWMS then
    local t = redis.call('TIME')
    NOWMS = string.format('%.0f', tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000))
  end
  return NOWMS
end
-- may tells whether this script's role may move a payout from from (nil:
-- a new payout) to to (MOVES, from luaMachine).
local function may(from, to)
  from, to = from or '', tostring(to)
  if string.find(from .. to, '[|>]') then return false end
  return string.find(MOVES, '|' .. from .. '>' .. to .. '|', 1, true) ~= nil
end
-- allow raises a MACHINE error for a move the machine does not give this
-- script's role. A script whose target comes from its arguments calls it
-- before it writes; move calls it before it counts or audits anything.
local function allow(from, to)
  if not may(from, to) then
    error('MACHINE ' .. ROLE .. ' may not move a payout from ' .. (from or '(new)') .. ' to ' .. tostring(to), 0)
  end
end
local function move(counts, from, to, units)
  allow(from, to)
  if AUD.payout and not AUD.entered then
    -- when the payout entered its state (its age in that state for the
    -- on-call gauges, Ledger.Oldest) is written by the script's own HSET
    -- of the move, with entered().
    error('MACHINE a move of ' .. AUD.payout .. ' without entered() in its HSET', 0)
  end
  if from then
    redis.call('HINCRBY', counts, 'n:' .. from, -1)
    redis.call('HINCRBY', counts, 'u:' .. from, '-' .. units)
  end
  redis.call('HINCRBY', counts, 'n:' .. to, 1)
  redis.call('HINCRBY', counts, 'u:' .. to, units)
  if AUD.payout then
    -- the console's index per state (stateIndexKey: PREFIX:{B}:s:STATE,
    -- every state but queued, externalIds scored by line), kept in the
    -- same script as the counters, so its sizes are the counts.
    local base = string.sub(counts, 1, -7)
    local ext = string.match(AUD.payout, ':p:(.*)$')
    if from and from ~= 'queued' then redis.call('ZREM', base .. 's:' .. from, ext) end
    if to ~= 'queued' then
      -- the line, as fetch read it with the payout's fields
      redis.call('ZADD', base .. 's:' .. to, AUD.line or 0, ext)
    end
  end
  if AUD.key then
    local f = {'t', nowms(), 'actor', AUD.actor, 'ext', AUD.ext, 'from', from or '', 'to', to}
    for i = 1, #AUD.extra, 2 do
      local v = AUD.extra[i + 1]
      if v ~= nil and v ~= '' and v ~= '0' then
        f[#f + 1] = AUD.extra[i]
        f[#f + 1] = tostring(v)
      end
    end
    redis.call('XADD', AUD.key, '*', unpack(f))
  end
end
-- entered is the pair 'entered', now that a script adds to its own HSET of
-- a payout it moves (as the last arguments, so both values count): when
-- the payout entered its new state. move() refuses a move without it.
local function entered()
  AUD.entered = true
  return 'entered', nowms()
end
local function num(v) return tonumber(v) or 0 end
local function reply(head, key)
  local all = redis.call('HGETALL', key)
  for i = 1, #all do head[#head + 1] = all[i] end
  return head
end
-- await marks a payout just created as awaiting its outcome when windowms
-- (the outcome window) is positive: outcome check 1 is due, and after
-- now + windowms without a final status the payout needs review. It
-- appends the payout's fields to f (the caller's one HSET) and moves the
-- awaiting counters; it returns whether the payout awaits its outcome.
local function await(f, counts, units, windowms, now)
  if (tonumber(windowms) or 0) <= 0 then return false end
  f[#f+1] = 'track'; f[#f+1] = 1; f[#f+1] = 'oseq'; f[#f+1] = 1; f[#f+1] = 'opolls'; f[#f+1] = 0
  f[#f+1] = 'odue'; f[#f+1] = string.format('%.0f', tonumber(now) + tonumber(windowms))
  redis.call('HINCRBY', counts, 'n:awaiting', 1)
  redis.call('HINCRBY', counts, 'u:awaiting', units)
  return true
end
-- push appends name/value pairs to f.
local function push(f, ...)
  local a = {...}
  for i = 1, #a do f[#f+1] = a[i] end
  return f
end
`

// luaReplay is prepended to every transition script. Each call carries a
// fresh operation id (the last ARGV). A transition that writes stores its id
// and its decision (the head of its reply) in the payout's hash, fields op
// and opr (read with the payout's own fields by fetch, written with them by
// decided); a call whose id is the stored one is a replay of that same call
// (go-redis or the autopipeliner sent it again after the first reply was
// lost) and gets the first run's decision back, so the caller still does the
// follow-up step it decided (enqueue the status check, return the retry).
// The decision is stored as its elements joined by US (0x1F): heads are
// short words and decimal numbers, and a join is cheaper than cjson.
//
// The argument before the operation id is the actor (a worker's host:pid,
// or an operator's name), and KEYS[3], when given, the batch's audit
// stream.
const luaReplay = `
local OP = ARGV[#ARGV]
AUD.payout = KEYS[1]
if KEYS[3] then
  AUD.key = KEYS[3]
  AUD.actor = ARGV[#ARGV - 1]
  AUD.ext = string.match(KEYS[1], ':p:(.*)$') or ''
end
-- unjoin splits a stored decision back into its elements.
local function unjoin(s)
  local t, i = {}, 1
  while true do
    local j = string.find(s, '\031', i, true)
    if not j then t[#t + 1] = string.sub(s, i) return t end
    t[#t + 1] = string.sub(s, i, j - 1)
    i = j + 1
  end
end
-- fetch reads the payout's fields named in ... and, in the same HMGET, the
-- stored operation and the payout's line (AUD.line, for the index per
-- state that move() keeps). It returns the first run's decision on a
-- replay (else nil) and the fields (false when missing), in the order
-- named.
local function fetch(key, ...)
  local m = redis.call('HMGET', key, 'op', 'opr', 'line', ...)
  AUD.line = m[3]
  local h = {}
  for i = 4, #m do h[i - 3] = m[i] end
  if m[1] == OP and m[2] then return unjoin(m[2]), h end
  return nil, h
end
-- decided is the field/value pairs that store head as this call's
-- decision: the last arguments of the HSET that writes the transition, so
-- the state change and its decision are one write.
local function decided(head)
  return 'op', OP, 'opr', table.concat(head, '\031')
end
-- remember stores head as this call's decision on its own.
local function remember(key, head)
  redis.call('HSET', key, decided(head))
  return head
end
`

// registerScript adds payouts that do not exist yet, in state queued. The
// caller builds each payout's hash fields (registerFields): the script
// stores them as given. The line index is chunked: PREFIX:{B}:l:K holds
// the lines of chunk K (line / 128), PREFIX:{B}:lk the chunk numbers; each
// chunk gets one ZADD per call, its lines in descending order (a small
// sorted set is a listpack, scanned from its head: a line below the
// head's goes in first thing). The counters are written once per call:
// the units with ARGV[2], the call's sum computed by the caller, when
// every payout was new and the sum fits an int64; else one HINCRBY per new
// payout (a resumed load, whose rows may be stored).
// With an owner (a loader's load lock token) it registers nothing unless
// owner holds the batch's load lock (reply -1) and the batch is loading
// (reply -2).
// KEYS: counts, lk, meta, load lock, payout..., then the chunks the
// payouts' lines fall in (declared for Redis Cluster; the script names
// them itself); ARGV: owner ("": not checked), sum ("": per payout), then
// per payout: the number n of its hash arguments, its chunk number, and
// n arguments: line L ext E amount A units U, then the other fields.
var registerScript = Loader.script(`
if ARGV[1] ~= '' then
  if redis.call('GET', KEYS[4]) ~= ARGV[1] then return -1 end
  if redis.call('HGET', KEYS[3], 'phase') ~= 'loading' then return -2 end
end
local base = string.sub(KEYS[2], 1, -3) .. 'l:'
local units, chunks, order = {}, {}, {}
local i, b = 4, 3
while b <= #ARGV do
  i = i + 1
  local e = b + 1 + ARGV[b]
  if redis.call('EXISTS', KEYS[i]) == 0 then
    redis.call('HSET', KEYS[i], unpack(ARGV, b + 2, e))
    local c = ARGV[b + 1]
    local z = chunks[c]
    if not z then z = {}; chunks[c] = z; order[#order + 1] = c end
    z[#z + 1] = b
    units[#units + 1] = ARGV[b + 9]
  end
  b = e + 1
end
if #units == 0 then return 0 end
local lk = {}
for _, c in ipairs(order) do
  local z, m = chunks[c], {}
  for j = #z, 1, -1 do m[#m + 1] = ARGV[z[j] + 3]; m[#m + 1] = ARGV[z[j] + 5] end
  redis.call('ZADD', base .. c, unpack(m))
  lk[#lk + 1] = c; lk[#lk + 1] = c
end
redis.call('ZADD', KEYS[2], unpack(lk))
redis.call('HINCRBY', KEYS[1], 'n:queued', #units)
if #units == i - 4 and ARGV[2] ~= '' then
  redis.call('HINCRBY', KEYS[1], 'u:queued', ARGV[2])
else
  for _, u in ipairs(units) do redis.call('HINCRBY', KEYS[1], 'u:queued', u) end
end
return #units
`)

// beginCreateScript is run by a create task before anything is sent.
//
//	KEYS[1] payout    KEYS[2] counts    KEYS[3] audit    KEYS[4] batch meta
//	ARGV[1] attempt   the create attempt the task is for
//	ARGV[2] note      the error kept when an interrupted create is moved
//	                  to checking (built by the caller)
//	ARGV[3] keys      "|ID|ID|": the data key ids the worker opens card
//	                  numbers with (Ledger.OpeningKeys); "": any
//	ARGV[4] actor     ARGV[5] op (luaReplay)
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
var beginCreateScript = Worker.script(luaReplay + `
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
`)

// finishCreateScript records the classified answer of a create.
//
//	KEYS[1] payout    KEYS[2] counts    KEYS[3] audit
//	ARGV[1] attempt     the create attempt answered
//	ARGV[2] to          the state the answer leads to
//	ARGV[3] windowms    outcome window in ms (0: created is final)
//	ARGV[4] order       the PSP's order id (to created)
//	ARGV[5] pspstatus   the PSP's status word (to created)
//	ARGV[6] note        the error to keep
//	ARGV[7] tries       > 0: the request provably did not reach the PSP,
//	                    and this is the payout's count of such tries with
//	                    it (decideFinish: to is needs_review once they
//	                    exceed the budget); 0: not counted
//	ARGV[8] triesread   with tries > 0: the count BeginCreate read; the
//	                    stored one must still be it
//	ARGV[9] http        HTTP status of the answer (audit)
//	ARGV[10] actor      ARGV[11] op (luaReplay)
//
// Allowed: submitting -> any of created, rejected, checking, queued,
// needs_review; checking -> created or rejected (a definite answer of the
// same attempt that arrived after another delivery moved it to checking).
// Replies {'ok', seq, newState, awaiting (1: outcome check 1 is due)},
// {'conflict', state} or {'nopayout'}.
var finishCreateScript = Worker.script(luaReplay + `
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
`)

// applyCheckScript writes what decideCheck decided of a status check's
// answer, if the payout is still as the decision read it: checking, under
// the same seq, with the same counts and times. Every time it writes is
// Redis's clock at the write.
//
//	KEYS[1] payout    KEYS[2] counts    KEYS[3] audit
//	ARGV[1] seq        the check answered       the payout as read:
//	ARGV[2] misses     ARGV[3] lastmiss (ms)    ARGV[4] faults
//	ARGV[5] creates    ARGV[6] due (ms)
//	ARGV[7] to         the state it moves to; "": it stays checking, and
//	                   check seq+1 is due waitms after now
//	ARGV[8] error      the error kept, unless ARGV[9] keeperror is "1"
//	ARGV[10] misses    ARGV[11] countmiss "1": lastmiss is stamped now
//	ARGV[12] faults    ARGV[13] waitms
//	ARGV[14] windowms  to created: the outcome window (await; 0: final)
//	ARGV[15] order     ARGV[16] pspstatus: to created
//	ARGV[17] http      ARGV[18] note: the answer, for the audit entry
//	ARGV[19..22]       the decision's reply, stored as the replay memo
//	ARGV[23] actor     ARGV[24] op (luaReplay)
//
// Replies the decision's reply, {'changed', state, seq, '0'} when the
// payout is not as read (nothing written), or {'nopayout', ...}.
var applyCheckScript = Worker.script(luaReplay + `
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
`)

// releaseScript deletes an externalId claim only if this batch holds it.
// KEYS: owner; ARGV: batch.
var releaseScript = redis.NewScript(`
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0
`)

// beginBatchScript creates the batch metadata unless it exists, and returns
// the stored metadata either way. KEYS: meta; ARGV: field/value pairs.
var beginBatchScript = redis.NewScript(`
local created = 0
if redis.call('EXISTS', KEYS[1]) == 0 then
  redis.call('HSET', KEYS[1], unpack(ARGV))
  created = 1
end
local r = {tostring(created)}
local all = redis.call('HGETALL', KEYS[1])
for i = 1, #all do r[#r + 1] = all[i] end
return r
`)

// refreshLockScript extends a lock only if owner holds it.
// KEYS: lock; ARGV: owner, ttl ms.
var refreshLockScript = redis.NewScript(`
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('PEXPIRE', KEYS[1], ARGV[2]) end
return 0
`)

// applyOutcomeScript writes what decideOutcome decided of an outcome
// check's answer, if the payout is still as the decision read it: created,
// awaiting outcome check oseq, with the same polls and window.
//
//	KEYS[1] payout    KEYS[2] counts    KEYS[3] audit
//	ARGV[1] oseq       the check answered       the payout as read:
//	ARGV[2] opolls     ARGV[3] odue (ms)
//	ARGV[4] to         paid | failed | needs_review; "": it stays created,
//	                   awaiting outcome check oseq+1 (opolls+1 answered)
//	ARGV[5] error      the error kept with to
//	ARGV[6] pspstatus  the PSP's status word ("": the stored one stays)
//	ARGV[7] http       ARGV[8] reason: the answer, for the audit entry
//	ARGV[9..11]        the decision's reply, stored as the replay memo
//	ARGV[12] actor     ARGV[13] op (luaReplay)
//
// Replies the decision's reply, {'changed', state, oseq, track} when the
// payout is not as read (nothing written), or {'nopayout', ...}.
var applyOutcomeScript = Worker.script(luaReplay + `
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
redis.call('HSET', KEYS[1], unpack(push(f, decided(head))))
move(KEYS[2], 'created', to, units)
redis.call('HINCRBY', KEYS[2], 'n:awaiting', -1)
redis.call('HINCRBY', KEYS[2], 'u:awaiting', '-' .. units)
return head
`)
