package ledger

import (
	"github.com/acme/payout/internal/lifecycle"
	"github.com/redis/go-redis/v9"
)

// luaMove is prepended to every script that changes a payout's state
// (script(role, body), after the machine's prelude luaMachine): it moves one row and
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
//
// Every move of a payout also appends its event to the batch's outbox
// (keys.Events, events.go): the event is written with the transition, in
// the same script, so no crash can keep one without the other.
var luaMove = luaEventTypes() + luaMoveBody

const luaMoveBody = `
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
    -- the payout event of this move (events.go): its per-payout sequence
    -- number, type (EVTYPE, from the Go table), time and public fields.
    local evseq = redis.call('HINCRBY', AUD.payout, 'evseq', 1)
    local pub = redis.call('HMGET', AUD.payout, 'amount', 'dest')
    redis.call('XADD', base .. 'ev', '*', 'ext', ext, 'seq', evseq, 'type', EVTYPE[to] or ('payout.' .. to),
      'from', from or '', 'to', to, 't', nowms(), 'amount', pub[1] or '', 'dest', pub[2] or '')
  end
  if AUD.key then
    local f = {'t', nowms(), 'actor', AUD.actor, 'ext', AUD.ext, 'from', from or '', 'to', to}
    if AUD.role then f[#f + 1] = 'role'; f[#f + 1] = AUD.role end
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
-- roleField is the audit entry's pair 'role', role, or nothing for no
-- role (ledger.WithRole): an entry of a worker has none.
local function roleField(role)
  if role == nil or role == '' then return {} end
  return {'role', role}
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
  -- the role the person acted in, after US (ledger.actorArg)
  local us = string.find(AUD.actor, '\031', 1, true)
  if us then
    AUD.role = string.sub(AUD.actor, us + 1)
    AUD.actor = string.sub(AUD.actor, 1, us - 1)
  end
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
var registerScript = script(lifecycle.RoleLoader, `
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
