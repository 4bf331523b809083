-- Token bucket with lazy refill, on Redis server time.
--
-- A bucket holds up to `capacity` tokens and gains `refillTokens` every `refillIntervalMs`,
-- continuously (pro rata per millisecond); a take of `cost` tokens is admitted when the
-- bucket holds at least `cost`. Tokens are kept as an exact integer in units of
-- 1/refillIntervalMs of a token, so refill never rounds.
--
-- Bounded state: the horizon is the time an empty bucket takes to fill; no key lives longer.
-- A last-write time ahead of now by at most one horizon is a server clock that stepped back:
-- no refill until the clock is back there (nothing is re-admitted), the waits reported count
-- that lag, and the key still expires within one horizon (an absent bucket is a full one).
-- Anything else this policy could not have written (a time further ahead, tokens out of
-- range, not integers) is foreign state: the scope starts afresh.
--
-- KEYS[1]  the bucket: a hash { s = scaled tokens, t = ms of the last write }; absent = full
-- ARGV[1]  capacity          tokens, integer >= 1
-- ARGV[2]  refillTokens      tokens added per interval, integer >= 1
-- ARGV[3]  refillIntervalMs  interval in ms, integer >= 1
-- ARGV[4]  cost              tokens this take needs, integer >= 1
--
-- Returns { allowed, remaining, resetMs, retryAfterMs }:
--   remaining     whole tokens left after this decision; dry and admitted (a peek), the
--                 whole tokens there now, the cost not taken
--   resetMs       ms until the bucket is full again; dry and admitted (a peek), from the
--                 tokens there now, the cost not taken (0: full)
--   retryAfterMs  0 when admitted; when denied, ms until `cost` tokens are there;
--                 -1 when cost > capacity, which can never fit
-- The key lives until the bucket is full again, at most one horizon.

local key = KEYS[1]
local capacity = tonumber(ARGV[1])
local rate = tonumber(ARGV[2])
local interval = tonumber(ARGV[3])
local cost = tonumber(ARGV[4])

-- mode:begin  (a take; the batch script sets these per item: dry = decide without writing
-- anything, probe = dry with a cost that can never fit, to read the state as it is)
local dry, probe = false, false
-- mode:end
if probe then cost = capacity + 1 end

-- now:begin  (Redis server time, ms; the callers' clocks never decide)
local time = redis.call('TIME')
local now = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
-- now:end

local function ceil_div(a, b)
  local q = math.floor(a / b)
  if q * b < a then q = q + 1 end
  if (q - 1) * b >= a then q = q - 1 end
  return q
end

local function floor_div(a, b)
  local q = math.floor(a / b)
  if q * b > a then q = q - 1 end
  if (q + 1) * b <= a then q = q + 1 end
  return q
end

local full = capacity * interval
local horizon = ceil_div(full, rate)
local need = cost * interval
local state = redis.call('HMGET', key, 's', 't')
local s, t = tonumber(state[1]), tonumber(state[2])
local scaled = full
local stamp = now
if s and t and s >= 0 and s <= full and s == math.floor(s) and t >= 0 and t == math.floor(t)
    and t <= now + horizon then
  if t > now then
    -- The server clock stepped back: no tokens now; the last write's time is kept so that
    -- the step is not refilled twice once the clock catches up.
    stamp = t
    scaled = s
  else
    scaled = s + (now - t) * rate
    if scaled > full then scaled = full end
  end
elseif state[1] or state[2] then
  -- Foreign state: start afresh (a full bucket).
  if not dry then
    redis.call('UNLINK', key)
  end
  s = nil
end

-- No refill until the clock is back at the last write's time (0 unless it stepped back).
local lag = stamp - now
local reset = ceil_div(full - scaled, rate) + lag

-- The key's life, checked where nothing rewrites it (a denial): a key without a TTL, or with
-- one longer than the horizon, gets the time to full, at most the horizon (self-healing).
local ttl = -2
local function check_ttl()
  if not s then return end
  ttl = redis.call('PTTL', key)
  if ttl < 0 or ttl > horizon then
    ttl = math.min(math.max(reset, 1), horizon)
    if not dry then
      redis.call('PEXPIRE', key, ttl)
    end
  end
end

-- A wait, capped by the key's life where a clock step made it longer (the key then expires
-- first, and an absent bucket is a full one).
local function real(ms, slack)
  if lag > 0 and ms > ttl + slack then return ttl + slack end
  return ms
end

if cost > capacity or scaled < need then
  -- Denied: nothing is written, so a rejected take consumes nothing. (A key that holds
  -- none of the bucket's fields is foreign: cleared, so it cannot outlive a horizon.)
  if not s and not dry then
    redis.call('UNLINK', key)
  end
  check_ttl()
  local retry = -1
  if cost <= capacity then retry = real(ceil_div(need - scaled, rate) + lag, 1) end
  return { 0, floor_div(scaled, interval), real(reset, 0), retry }
end

if dry then
  -- A peek: the state now, the cost not taken. A wait a clock step made longer is capped by
  -- the life a write now would give the key, as the last take's answer was (no PTTL read).
  ttl = math.min(math.max(reset, 1), horizon)
  return { 1, floor_div(scaled, interval), real(reset, 0), 0 }
end
scaled = scaled - need
reset = ceil_div(full - scaled, rate) + lag
ttl = math.min(math.max(reset, 1), horizon)
redis.call('HSET', key, 's', string.format('%d', scaled), 't', string.format('%d', stamp))
redis.call('PEXPIRE', key, ttl)
return { 1, floor_div(scaled, interval), real(reset, 0), 0 }
