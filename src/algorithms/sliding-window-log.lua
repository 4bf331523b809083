-- Sliding window log: exact. At most `limit` units are admitted in any window of
-- `windowMs` ending now, on Redis server time.
--
-- Every admitted unit is one member of a sorted set scored by its admission time (ms);
-- members `<ms>:<n>` are unique because, within one millisecond, the count in the window
-- never decreases. Entries that left the window are trimmed on every call.
-- Memory: one member per admitted unit in the window, so about 60 bytes × limit per key;
-- the policy builder caps `limit` at 10,000.
--
-- KEYS[1]  the log: a sorted set of admitted units, score = admission time in ms
-- ARGV[1]  limit     units per window, integer >= 1
-- ARGV[2]  windowMs  window length in ms, integer >= 1
-- ARGV[3]  cost      units this take needs, integer >= 1
--
-- Returns { allowed, remaining, resetMs, retryAfterMs }:
--   remaining     units admissible now after this decision
--   resetMs       ms until the window holds nothing (the newest entry leaves)
--   retryAfterMs  0 when admitted; when denied, ms until enough old entries have left for
--                 `cost` to fit; -1 when cost > limit, which can never fit
-- The key expires `windowMs` after the newest admission, when it would be empty anyway.
--
-- Bounded state: the horizon is the window; no key lives longer. An entry ahead of now by at
-- most one window is a server clock that stepped back: time stands still at the newest entry
-- (nothing is re-admitted, member names stay unique), waits are capped by the key's life.
-- An entry further ahead is foreign state: the scope starts afresh.

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

local clock_now = now
local count = 0
local newest = redis.call('ZRANGE', key, -1, -1, 'WITHSCORES')
local top = tonumber(newest[2])
if top and (top > now + window or top < 0 or top ~= math.floor(top)) then
  -- Foreign state: start afresh.
  if not dry then
    redis.call('DEL', key)
  end
  top = nil
elseif top then
  -- Time never runs backwards for one log: after a server clock step back the newest
  -- entry's time stands in for now.
  if top > now then now = top end
  -- An entry admitted at time s is in the window while s > now - window.
  if not dry then
    redis.call('ZREMRANGEBYSCORE', key, '-inf', string.format('%d', now - window))
  end
  count = redis.call('ZCOUNT', key, string.format('(%d', now - window), '+inf')
end
local lag = now - clock_now

local reset = 0
if count > 0 then reset = top + window - now + lag end

-- The key's life, checked where nothing rewrites it (a denial): a key without a TTL, or with
-- one longer than the window, gets the window (S6).
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
  -- Denied: nothing is added. The take fits once the (count + cost - limit)-th oldest
  -- entry in the window has left it.
  check_ttl()
  local k = count + cost - limit
  local entry = redis.call('ZRANGEBYSCORE', key, string.format('(%d', now - window), '+inf',
    'WITHSCORES', 'LIMIT', k - 1, 1)
  local wait = math.ceil(tonumber(entry[2]) + window - now + lag)
  return { 0, math.max(limit - count, 0), real(reset, 0), real(wait, 1) }
end

if not dry then
  local stamp = string.format('%d', now)
  local args = {}
  for i = 1, cost do
    args[#args + 1] = stamp
    args[#args + 1] = stamp .. ':' .. (count + i - 1)
    if #args >= 1000 or i == cost then
      redis.call('ZADD', key, unpack(args))
      args = {}
    end
  end
  -- The newest entry leaves the window `window` from now (later, if now stands ahead of the
  -- clock: the key still expires within one window).
  redis.call('PEXPIRE', key, window)
end
return { 1, limit - count - cost, window, 0 }
