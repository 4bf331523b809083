-- Sliding window log: exact. At most `limit` units are admitted in any window of
-- `windowMs` ending now, on Redis server time.
--
-- A weighted log: every admitted take (not every unit) is one member of a sorted set, scored
-- by its admission time (ms), named `<total>:<cost>`: its cost, and `total` = the units this
-- log has admitted so far, this take's included, written as 16 digits (a running total,
-- strictly increasing, so members are unique and, within one ms, their order is the order of
-- admission). The units in the window are total(newest) − (total − cost)(first in window);
-- a denial's wait comes from a binary search over ranks for the first entry whose total
-- reaches what must leave. Every call is O(log n) in the n members (a denial O(log² n): at
-- most 15 more one-member reads at n = 10,000), whatever the cost: a take of 10,000 units
-- writes one member.
--
-- Bounded trimming: a call (not dry) removes at most TRIM members that left the window (the
-- oldest, by rank: O(log n + TRIM)), never all of them at once. Memory stays bounded: an
-- admission adds one member; when it finds s >= 1 stale members it removes min(s, TRIM) >= 1
-- of them, so the log does not grow; when it finds none, the log is then the members in the
-- window, at most `limit` of them (each holds >= 1 unit, and the units fit). A denial adds
-- nothing. So a log started empty never holds more than `limit` members. The key itself
-- expires one window after its newest admission, when everything in it has left the window
-- (Redis frees it on its main thread unless `lazyfree-lazy-expire yes`, in time that grows
-- with its members, which a call reading the key just then includes: bench/script-time.ts
-- measures it). Memory grows with the members, not with their costs: a take of cost 10,000
-- is one member. The policy builder caps `limit` at 10,000.
--
-- KEYS[1]  the log: a sorted set of admitted takes, score = admission time in ms
-- ARGV[1]  limit     units per window, integer >= 1
-- ARGV[2]  windowMs  window length in ms, integer >= 1
-- ARGV[3]  cost      units this take needs, integer >= 1
--
-- Returns { allowed, remaining, resetMs, retryAfterMs }:
--   remaining     units admissible now after this decision; dry and admitted (a peek),
--                 the units admissible now, the cost not taken
--   resetMs       ms until the window holds nothing (the newest entry leaves); dry and
--                 admitted (a peek), from the log now, the cost not taken (0: nothing in it)
--   retryAfterMs  0 when admitted; when denied, ms until enough old entries have left for
--                 `cost` to fit; -1 when cost > limit, which can never fit
-- The key expires `windowMs` after the newest admission, when it would be empty anyway.
--
-- Bounded state: the horizon is the window; no key lives longer. An entry ahead of now by at
-- most one window is a server clock that stepped back: time stands still at the newest entry
-- (nothing is re-admitted, totals keep increasing), waits are capped by the key's life.
-- Foreign state — a member read that is not `<16 digits>:<cost>` with 1 <= cost <= total
-- <= 2^53 - 1, a score that is not an integer, a newest score negative or further ahead,
-- totals that decrease or count more than `limit` units in the window — starts the scope
-- afresh. (The running total reaches 2^53 only after 28 years of a key admitting 10,000
-- units every ms without a pause of one window; the scope then starts afresh.)

local key = KEYS[1]
local limit = tonumber(ARGV[1])
local window = tonumber(ARGV[2])
local cost = tonumber(ARGV[3])

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
local MAX_TOTAL = 9007199254740991

-- A member read with its score ({ member, score }, or empty): its total, cost and score;
-- nothing when it is not this log's.
local function entry(reply)
  local total, n = string.match(reply[1] or '',
    '^(%d%d%d%d%d%d%d%d%d%d%d%d%d%d%d%d):([1-9]%d*)$')
  local score = tonumber(reply[2])
  if not total or not score or score ~= math.floor(score) then return nil end
  total, n = tonumber(total), tonumber(n)
  if total > MAX_TOTAL or n > total then return nil end
  return total, n, score
end

local clock_now = now
local count = 0 -- units in the window
local top = nil -- the newest entry's score
local total = 0 -- its running total
local found = nil -- a denial: the score of the entry whose leaving lets `cost` fit

-- Reads the log (trimming it unless dry); false for foreign state.
local function read()
  local newest = redis.call('ZRANGE', key, -1, -1, 'WITHSCORES')
  if not newest[1] then return true end
  local top_total, _, top_score = entry(newest)
  if not top_total or top_score > now + window or top_score < 0 then return false end
  top, total = top_score, top_total
  -- Time never runs backwards for one log: after a server clock step back the newest
  -- entry's time stands in for now.
  if top > now then now = top end
  -- An entry admitted at time s is in the window while s > now - window.
  local stale = redis.call('ZCOUNT', key, '-inf', string.format('%d', now - window))
  local card = redis.call('ZCARD', key)
  if stale > 0 and not dry then
    local removed = math.min(stale, TRIM)
    redis.call('ZREMRANGEBYRANK', key, 0, removed - 1)
    stale, card = stale - removed, card - removed
  end
  if stale == card then return true end -- nothing in the window
  local first_total, first_cost, first_score = entry(
    redis.call('ZRANGE', key, stale, stale, 'WITHSCORES'))
  if not first_total or first_total > total then return false end
  local before = first_total - first_cost -- the total before the window
  count = total - before
  if count > limit then return false end
  if cost > limit or count + cost <= limit then return true end
  -- Denied: k = count + cost - limit units must leave. The entries leave in rank order;
  -- the one sought is the first whose total reaches before + k. Each entry holds >= 1
  -- unit, so it is among the first k in the window.
  local k = count + cost - limit
  local need = before + k
  if first_total >= need then
    found = first_score
    return true
  end
  local lo, hi = stale + 1, math.min(stale + k - 1, card - 1)
  local at = nil -- the score at hi, once read
  if hi == card - 1 then at = top end
  while lo < hi do
    local mid = math.floor((lo + hi) / 2)
    local t, _, s = entry(redis.call('ZRANGE', key, mid, mid, 'WITHSCORES'))
    if not t then return false end
    if t >= need then
      hi, at = mid, s
    else
      lo = mid + 1
    end
  end
  if not at then
    local t, _, s = entry(redis.call('ZRANGE', key, hi, hi, 'WITHSCORES'))
    if not t then return false end
    at = s
  end
  found = at
  return true
end

if not read() then
  -- Foreign state: start afresh. UNLINK: a large set is freed off the main thread (a DEL
  -- would hold Redis while it frees every member).
  if not dry then
    redis.call('UNLINK', key)
  end
  now, count, top, total, found = clock_now, 0, nil, 0, nil
end
local lag = now - clock_now

local reset = 0
if count > 0 then reset = top + window - now + lag end

-- The key's life, checked where nothing rewrites it (a denial): a key without a TTL, or with
-- one longer than the window, gets the window (self-healing).
local ttl = -2
local function check_ttl()
  if not top then return end
  ttl = redis.call('PTTL', key)
  if ttl < 0 or ttl > window then
    ttl = math.max(math.min(reset, window), 1)
    if not dry then
      redis.call('PEXPIRE', key, ttl)
    end
  end
end

-- A wait, capped by the key's life where a clock step made it longer.
local function real(ms, slack)
  if lag > 0 and ms > ttl + slack then return ttl + slack end
  return ms
end

if cost > limit then
  check_ttl()
  return { 0, math.max(limit - count, 0), real(reset, 0), -1 }
end

if count + cost > limit then
  -- Denied: nothing is added. The take fits once the entry found above has left.
  check_ttl()
  local wait = math.ceil(found + window - now + lag)
  return { 0, math.max(limit - count, 0), real(reset, 0), real(wait, 1) }
end

if dry then
  -- A peek: the state now, the cost not taken. A wait a clock step made longer is capped by
  -- the life the newest admission gave the key, as its answer was (no PTTL read).
  ttl = window
  return { 1, limit - count, real(reset, 0), 0 }
end
redis.call('ZADD', key, string.format('%d', now), string.format('%016d:%d', total + cost, cost))
-- The newest entry leaves the window `window` from now (later, if now stands ahead of the
-- clock: the key still expires within one window).
redis.call('PEXPIRE', key, window)
return { 1, limit - count - cost, window, 0 }
