-- Concurrency: at most `limit` leases held at once per scope, each expiring `leaseMs` after
-- it was acquired or last renewed, on Redis server time.
--
-- One sorted set per scope: one member per lease, named by the lease's id, scored by the
-- lease's expiry time (ms). A lease is live while its expiry is after now; an expired lease
-- frees its slot by itself, so a crashed holder never blocks a scope for longer than
-- `leaseMs`. Only the lease's own id releases or renews it: the holder of an expired lease
-- cannot release or renew anyone else's.
--
-- Bounded trimming: a call (not dry) removes at most TRIM expired members (the oldest, by
-- rank) and re-scores at most TRIM members that expire later than `leaseMs` from now (a
-- server clock that stepped back, a hand edit) to expire `leaseMs` from now. Memory stays
-- bounded: an acquisition adds one member only when fewer than `limit` are live, and when it
-- finds s >= 1 expired members it has removed min(s, TRIM) >= 1 of them; so a set started
-- empty never holds more than `limit` members. The key expires `leaseMs` after the last
-- acquisition or renewal, when every lease in it has expired anyway; a call that writes
-- neither gives a key without a TTL, or with a longer one, `leaseMs` (self-healing). So no
-- stored state holds a scope longer than `leaseMs` past the first call that reads it.
--
-- KEYS[1]  the leases: a sorted set, member = lease id, score = expiry time in ms
-- ARGV[1]  limit    leases held at once, integer >= 1
-- ARGV[2]  leaseMs  a lease's life in ms, integer >= 1
-- ARGV[3]  cost     slots the call needs: 1 (a lease holds one slot; more never fits)
-- ARGV[4]  action   'a' acquire, 'l' release, 'n' renew
-- ARGV[5]  id       the lease's id
--
-- Returns { allowed, remaining, resetMs, retryAfterMs }:
--   acquire  allowed: the lease is held (an id already holding a live lease keeps it, its
--            expiry renewed); remaining: free slots after it; resetMs: ms until every lease
--            held now has expired (admitted: leaseMs, the lease's own life); retryAfterMs: 0
--            when admitted, else ms until the earliest live lease expires, -1 when cost > 1.
--            Dry (a peek or the first pass of a takeAll): the same decision, nothing written,
--            resetMs and remaining as they are now.
--   release  allowed: a live lease of this id was released (0: none, or it had expired);
--            remaining and resetMs after it; retryAfterMs 0.
--   renew    allowed: the live lease of this id now expires leaseMs from now (then resetMs
--            = leaseMs); else no live lease of this id exists (released, expired: an expired
--            lease is never revived, its slot may be someone else's), retryAfterMs -1.

local key = KEYS[1]
local limit = tonumber(ARGV[1])
local lease = tonumber(ARGV[2])
local cost = tonumber(ARGV[3])
local action = ARGV[4]
local id = ARGV[5]

-- mode:begin  (a take; the batch script sets these per item: dry = decide without writing
-- anything, probe = dry with a cost that can never fit, to read the state as it is)
local dry, probe = false, false
-- mode:end
if probe then cost = limit + 1 end

-- now:begin  (Redis server time, ms; the callers' clocks never decide)
local time = redis.call('TIME')
local now = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
-- now:end

local TRIM = 8
local expiry = now + lease

-- Expired members (score <= now): the lowest ranks.
local stale = redis.call('ZCOUNT', key, '-inf', string.format('%d', now))
if stale > 0 and not dry then
  local removed = math.min(stale, TRIM)
  redis.call('ZREMRANGEBYRANK', key, 0, removed - 1)
  stale = stale - removed
end
-- Members that expire later than a lease acquired now could: brought back to `expiry`.
if not dry then
  local ahead = redis.call('ZRANGEBYSCORE', key, '(' .. string.format('%d', expiry), '+inf',
    'LIMIT', 0, TRIM)
  for j = 1, #ahead do redis.call('ZADD', key, 'XX', string.format('%d', expiry), ahead[j]) end
end
local live = redis.call('ZCARD', key) - stale

-- ms until every live lease has expired (0: none live); a member still ahead (dry, or more
-- than TRIM of them) counts as expiring at `expiry`.
local function reset()
  if live <= 0 then return 0 end
  local top = tonumber(redis.call('ZRANGE', key, -1, -1, 'WITHSCORES')[2])
  return math.ceil(math.min(top, expiry) - now)
end

-- The key's life, checked where nothing renews it: no TTL, or one longer than a lease, gets
-- one lease.
local function check_ttl()
  if dry then return end
  local ttl = redis.call('PTTL', key)
  if ttl == -1 or ttl > lease then redis.call('PEXPIRE', key, lease) end
end

local function hold()
  redis.call('ZADD', key, string.format('%d', expiry), id)
  redis.call('PEXPIRE', key, lease)
end

local own = tonumber(redis.call('ZSCORE', key, id))
local held = own ~= nil and own > now

if action == 'l' then
  if own ~= nil and not dry then redis.call('ZREM', key, id) end
  if held then live = live - 1 end
  check_ttl()
  return { held and 1 or 0, math.max(limit - live, 0), reset(), 0 }
end

if action == 'n' then
  if held then
    if not dry then hold() end
    return { 1, math.max(limit - live, 0), lease, 0 }
  end
  if own ~= nil and not dry then
    redis.call('ZREM', key, id)
    stale = stale - 1
  end
  check_ttl()
  return { 0, math.max(limit - live, 0), reset(), -1 }
end

-- Acquire.
if cost > 1 then
  check_ttl()
  return { 0, math.max(limit - live, 0), reset(), -1 }
end
if held then
  if dry then return { 1, math.max(limit - live, 0), reset(), 0 } end
  hold()
  return { 1, math.max(limit - live, 0), lease, 0 }
end
if live >= limit then
  -- Denied: the earliest live lease (the first member after the expired ones) frees a slot.
  check_ttl()
  local first = tonumber(redis.call('ZRANGE', key, stale, stale, 'WITHSCORES')[2])
  return { 0, 0, reset(), math.ceil(math.min(first, expiry) - now) }
end
if dry then return { 1, limit - live, reset(), 0 } end
hold()
return { 1, limit - live - 1, lease, 0 }
