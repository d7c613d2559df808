package ledger

import (
	"github.com/redis/go-redis/v9"
)

// luaMove is prepended to every script that changes a payout's state: it
// moves one row and its minor units between the per-state counters.
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
local function move(counts, from, to, units)
  if AUD.payout then
    -- when the payout entered its state: its age in that state for the
    -- on-call gauges (Ledger.Oldest); 'updated' moves with every check.
    redis.call('HSET', AUD.payout, 'entered', nowms())
  end
  if from then
    redis.call('HINCRBY', counts, 'n:' .. from, -1)
    redis.call('HINCRBY', counts, 'u:' .. from, '-' .. units)
  end
  redis.call('HINCRBY', counts, 'n:' .. to, 1)
  redis.call('HINCRBY', counts, 'u:' .. to, units)
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
local function num(v) return tonumber(v) or 0 end
local function reply(head, key)
  local all = redis.call('HGETALL', key)
  for i = 1, #all do head[#head + 1] = all[i] end
  return head
end
-- await marks a payout just created as awaiting its outcome when windowms
-- (the outcome window) is positive: outcome check 1 is due, and after
-- now + windowms without a final status the payout needs review.
local function await(key, counts, units, windowms, now)
  if (tonumber(windowms) or 0) <= 0 then return end
  redis.call('HSET', key, 'track', 1, 'oseq', 1, 'opolls', 0,
    'odue', string.format('%.0f', tonumber(now) + tonumber(windowms)))
  redis.call('HINCRBY', counts, 'n:awaiting', 1)
  redis.call('HINCRBY', counts, 'u:awaiting', units)
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
-- fetch reads the payout's fields named in ... and, in the same HMGET, the
-- stored operation: on a replay it returns the first run's decision, else
-- nil and the fields (false when missing), in the order named.
local function fetch(key, ...)
  local m = redis.call('HMGET', key, 'op', 'opr', ...)
  if m[1] == OP and m[2] then return cjson.decode(m[2]), nil end
  local h = {}
  for i = 3, #m do h[i - 2] = m[i] end
  return nil, h
end
-- decided is the field/value pairs that store head as this call's
-- decision: the last arguments of the HSET that writes the transition, so
-- the state change and its decision are one write.
local function decided(head)
  return 'op', OP, 'opr', cjson.encode(head)
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
var registerScript = redis.NewScript(luaMove + `
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
// KEYS: payout, counts, audit, the batch's meta; ARGV: attempt, actor, op.
// Replies {action, seq, hash...}:
//
//	proceed  queued -> submitting: POST now
//	hold     queued, but the batch is not loaded (its load has not
//	         completed, it awaits approval or was discarded): nothing
//	         changes, nothing is sent; the reply's third element is the
//	         batch's phase, then the hash
//	check    submitting with this attempt (a worker died mid-request or the
//	         task was delivered twice) -> checking: enqueue status check seq
//	ensure   already checking: make sure status check seq is enqueued
//	skip     final state, or a stale attempt: nothing to do
//	missing  no such payout
var beginCreateScript = redis.NewScript(luaMove + luaReplay + `
local first, h = fetch(KEYS[1], 'state', 'creates', 'units', 'seq')
if first then return reply(first, KEYS[1]) end
local st = h[1]
if not st then return {'missing', '0'} end
local attempt = tonumber(ARGV[1])
local creates = num(h[2])
local units = h[3]
local now = nowms()
AUD.extra = {'attempt', attempt}
if st == 'queued' and attempt == creates + 1 then
  -- No create for a batch whose load has not completed (or that awaits
  -- approval, or was discarded): hold the task, decide nothing.
  local phase = redis.call('HGET', KEYS[4], 'phase')
  if phase ~= 'loaded' then
    return reply({'hold', '0', phase or ''}, KEYS[1])
  end
  local head = {'proceed', '0'}
  redis.call('HSET', KEYS[1], 'state', 'submitting', 'creates', attempt, 'updated', now, decided(head))
  move(KEYS[2], st, 'submitting', units)
  return reply(head, KEYS[1])
end
if st == 'submitting' and attempt == creates then
  local seq = redis.call('HINCRBY', KEYS[1], 'seq', 1)
  local head = {'check', tostring(seq)}
  AUD.extra = {'attempt', attempt, 'seq', seq, 'note', 'create interrupted before its answer was recorded'}
  redis.call('HSET', KEYS[1], 'state', 'checking', 'misses', 0, 'lastmiss', 0, 'faults', 0,
    'error', 'create interrupted before its answer was recorded; checking status', 'updated', now, decided(head))
  move(KEYS[2], st, 'checking', units)
  return reply(head, KEYS[1])
end
if st == 'checking' then
  return reply({'ensure', tostring(num(h[4]))}, KEYS[1])
end
return reply({'skip', '0'}, KEYS[1])
`)

// finishCreateScript records the classified answer of a create.
// KEYS: payout, counts, audit; ARGV: attempt, to, outcome window ms (0:
// created is final), orderId, pspStatus, error, maxTries, HTTP status,
// actor, op. With to = queued and maxTries > 0 the request provably did not
// reach the PSP and counts against the payout's budget of such tries: past
// maxTries the payout goes to needs_review instead.
// Allowed: submitting -> any of created, rejected, checking, queued,
// needs_review; checking -> created or rejected (a definite answer of the
// same attempt that arrived after another delivery moved it to checking).
// Replies {'ok', seq, newState} or {'conflict', state}.
var finishCreateScript = redis.NewScript(luaMove + luaReplay + `
local first, h = fetch(KEYS[1], 'state', 'creates', 'units')
if first then return first end
local st = h[1]
if not st then return {'missing', ''} end
local attempt = tonumber(ARGV[1])
local creates = num(h[2])
local to = ARGV[2]
if creates ~= attempt then return {'conflict', st} end
if not (st == 'submitting' or (st == 'checking' and (to == 'created' or to == 'rejected'))) then
  return {'conflict', st}
end
local units = h[3]
local msg = ARGV[6]
local maxTries = tonumber(ARGV[7])
if to == 'queued' and maxTries > 0 then
  local tries = redis.call('HINCRBY', KEYS[1], 'tries', 1)
  if tries > maxTries then
    to = 'needs_review'
    msg = 'PSP did not take the request after ' .. tries .. ' tries (nothing was sent): ' .. msg
  end
end
local now = nowms()
AUD.extra = {'attempt', attempt, 'http', ARGV[8], 'order', ARGV[4], 'note', msg}
local seq = 0
if to == 'checking' then seq = redis.call('HINCRBY', KEYS[1], 'seq', 1) end
local head = {'ok', tostring(seq), to}
local f = {'state', to, 'updated', now, 'error', msg}
if to == 'created' then
  f[#f+1] = 'order'; f[#f+1] = ARGV[4]; f[#f+1] = 'pspstatus'; f[#f+1] = ARGV[5]
elseif to == 'checking' then
  f[#f+1] = 'misses'; f[#f+1] = 0; f[#f+1] = 'lastmiss'; f[#f+1] = 0; f[#f+1] = 'faults'; f[#f+1] = 0
elseif to == 'queued' then
  f[#f+1] = 'creates'; f[#f+1] = attempt - 1
end
for _, v in ipairs({decided(head)}) do f[#f+1] = v end
redis.call('HSET', KEYS[1], unpack(f))
if to == 'created' then await(KEYS[1], KEYS[2], units, ARGV[3], now) end
move(KEYS[2], st, to, units)
return head
`)

// recordCheckScript records the answer of status check seq.
// KEYS: payout, counts; ARGV: seq, outcome (found|missing|noanswer), outcome
// window ms (0: created is final), orderId, pspStatus, absentChecks K,
// absentSpacing D (ms), maxCreates M, maxFaults N, message, fault backoff
// base ms, fault backoff cap ms, HTTP status, actor, op. All times are Redis's: counted misses
// are D apart, and a check that runs before the due time the previous one
// set (a worker whose clock is behind schedules too early) counts nothing.
// Replies {action, value, extra, wait}:
//
//	done     -> created
//	again    next check seq = value, due in wait ms; extra: faults so far
//	recreate absence confirmed -> queued; create attempt = value
//	review   -> needs_review
//	early    check seq = value is not due for wait ms: nothing recorded
//	stale    payout is checking under another seq = value: ensure that one exists
//	skip     payout is not checking
var recordCheckScript = redis.NewScript(luaMove + luaReplay + `
local first, h = fetch(KEYS[1], 'state', 'seq', 'units', 'misses', 'lastmiss', 'creates', 'due')
if first then return first end
local st = h[1]
if not st then return {'missing', '0', '0', '0'} end
local cur = num(h[2])
if st ~= 'checking' then return {'skip', tostring(cur), '0', '0'} end
if tonumber(ARGV[1]) ~= cur then return {'stale', tostring(cur), '0', '0'} end
local nowtxt = nowms()
local now = tonumber(nowtxt)
local due = num(h[7])
if ARGV[2] ~= 'found' and now < due then
  return {'early', tostring(cur), '0', string.format('%.0f', due - now)}
end
AUD.extra = {'seq', ARGV[1], 'http', ARGV[13], 'order', ARGV[4], 'note', ARGV[10]}
local function later(wait)
  redis.call('HSET', KEYS[1], 'due', string.format('%.0f', now + wait))
end
local units = h[3]
local outcome = ARGV[2]
if outcome == 'found' then
  redis.call('HSET', KEYS[1], 'state', 'created', 'order', ARGV[4], 'pspstatus', ARGV[5], 'error', '', 'updated', nowtxt)
  move(KEYS[2], st, 'created', units)
  await(KEYS[1], KEYS[2], units, ARGV[3], nowtxt)
  return remember(KEYS[1], {'done', '0', '0', '0'})
end
if outcome == 'missing' then
  local misses = num(h[4])
  local last = num(h[5])
  local spacing = tonumber(ARGV[7])
  if last == 0 or now - last >= spacing then
    misses = misses + 1
    last = now
    redis.call('HSET', KEYS[1], 'misses', misses, 'lastmiss', nowtxt)
  end
  if misses >= tonumber(ARGV[6]) then
    local creates = num(h[6])
    if creates < tonumber(ARGV[8]) then
      redis.call('HSET', KEYS[1], 'state', 'queued', 'updated', nowtxt,
        'error', 'PSP confirmed it has no order after ' .. misses .. ' status checks; creating again')
      move(KEYS[2], st, 'queued', units)
      return remember(KEYS[1], {'recreate', tostring(creates + 1), '0', '0'})
    end
    redis.call('HSET', KEYS[1], 'state', 'needs_review', 'updated', nowtxt,
      'error', 'PSP has no order after ' .. creates .. ' creates; a person must decide')
    move(KEYS[2], st, 'needs_review', units)
    return remember(KEYS[1], {'review', '0', '0', '0'})
  end
  local seq = redis.call('HINCRBY', KEYS[1], 'seq', 1)
  local wait = spacing - (now - last)
  redis.call('HSET', KEYS[1], 'updated', nowtxt)
  later(wait)
  return remember(KEYS[1], {'again', tostring(seq), '0', string.format('%.0f', wait)})
end
local faults = redis.call('HINCRBY', KEYS[1], 'faults', 1)
if faults >= tonumber(ARGV[9]) then
  redis.call('HSET', KEYS[1], 'state', 'needs_review', 'updated', nowtxt,
    'error', 'status unknown after ' .. faults .. ' status checks without an answer: ' .. ARGV[10])
  move(KEYS[2], st, 'needs_review', units)
  return remember(KEYS[1], {'review', '0', '0', '0'})
end
local seq = redis.call('HINCRBY', KEYS[1], 'seq', 1)
local wait = tonumber(ARGV[11])
for i = 2, faults do
  wait = wait * 2
  if wait >= tonumber(ARGV[12]) then wait = tonumber(ARGV[12]) break end
end
redis.call('HSET', KEYS[1], 'updated', nowtxt, 'error', ARGV[10])
later(wait)
return remember(KEYS[1], {'again', tostring(seq), tostring(faults), string.format('%.0f', wait)})
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

// recordOutcomeScript records the answer of outcome check oseq of a created
// payout that awaits its outcome.
// KEYS: payout, counts, audit; ARGV: oseq, verdict
// (paid|failed|pending|noanswer), pspStatus, reason, HTTP status, actor, op.
// Replies {action, value, extra}:
//
//	done   -> paid or failed (value)
//	again  next outcome check = value; extra = checks so far (for the interval)
//	review the outcome window ended without a final status -> needs_review
//	stale  another check (value) is current
//	skip   the payout does not await an outcome (value: its state)
var recordOutcomeScript = redis.NewScript(luaMove + luaReplay + `
local first, h = fetch(KEYS[1], 'state', 'track', 'oseq', 'units', 'odue', 'pspstatus')
if first then return first end
local st = h[1]
if not st then return {'missing', '0', '0'} end
if st ~= 'created' or h[2] ~= '1' then return {'skip', st, '0'} end
local cur = num(h[3])
if tonumber(ARGV[1]) ~= cur then return {'stale', tostring(cur), '0'} end
local now = nowms()
local units = h[4]
local verdict = ARGV[2]
AUD.extra = {'oseq', ARGV[1], 'http', ARGV[5], 'psp', ARGV[3], 'note', ARGV[4]}
local last = h[6] or ''
if ARGV[3] ~= '' then
  last = ARGV[3]
  redis.call('HSET', KEYS[1], 'pspstatus', last)
end
local function leave(to, msg)
  redis.call('HSET', KEYS[1], 'state', to, 'track', 0, 'updated', now, 'error', msg)
  move(KEYS[2], 'created', to, units)
  redis.call('HINCRBY', KEYS[2], 'n:awaiting', -1)
  redis.call('HINCRBY', KEYS[2], 'u:awaiting', '-' .. units)
end
if verdict == 'paid' or verdict == 'failed' then
  leave(verdict, ARGV[4])
  return remember(KEYS[1], {'done', verdict, '0'})
end
if tonumber(now) >= num(h[5]) then
  if last == '' then last = '(none)' end
  leave('needs_review', 'no final status from the PSP within the outcome window; last status ' .. last ..
    '; ask the PSP whether the money was sent')
  return remember(KEYS[1], {'review', '0', '0'})
end
local polls = redis.call('HINCRBY', KEYS[1], 'opolls', 1)
local seq = redis.call('HINCRBY', KEYS[1], 'oseq', 1)
redis.call('HSET', KEYS[1], 'updated', now)
return remember(KEYS[1], {'again', tostring(seq), tostring(polls)})
`)
