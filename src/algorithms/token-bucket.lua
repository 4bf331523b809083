-- Token bucket with lazy refill, on Redis server time.
--
-- A bucket holds up to `capacity` tokens and gains `refillTokens` every `refillIntervalMs`,
-- continuously (pro rata per millisecond); a take of `cost` tokens is admitted when the
-- bucket holds at least `cost`. Tokens are kept as an exact integer in units of
-- 1/refillIntervalMs of a token, so refill never rounds.
--
-- KEYS[1]  the bucket: a hash { s = scaled tokens, t = ms of the last write }; absent = full
-- ARGV[1]  capacity          tokens, integer >= 1
-- ARGV[2]  refillTokens      tokens added per interval, integer >= 1
-- ARGV[3]  refillIntervalMs  interval in ms, integer >= 1
-- ARGV[4]  cost              tokens this take needs, integer >= 1
--
-- Returns { allowed, remaining, resetMs, retryAfterMs }:
--   remaining     whole tokens left after this decision
--   resetMs       ms until the bucket is full again
--   retryAfterMs  0 when admitted; when denied, ms until `cost` tokens are there;
--                 -1 when cost > capacity, which can never fit
-- The key lives exactly until the bucket is full again (an absent bucket is a full one).

local key = KEYS[1]
local capacity = tonumber(ARGV[1])
local rate = tonumber(ARGV[2])
local interval = tonumber(ARGV[3])
local cost = tonumber(ARGV[4])

-- now:begin  (Redis server time, ms; the callers' clocks never decide)
local time = redis.call('TIME')
local now = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
-- now:end

local full = capacity * interval
local need = cost * interval
local state = redis.call('HMGET', key, 's', 't')
local scaled = full
local stamp = now
if state[1] then
  local elapsed = now - tonumber(state[2])
  if elapsed < 0 then
    -- The server clock stepped back: no tokens now, and the last write's time is kept so
    -- that the step is not refilled twice once the clock catches up.
    elapsed = 0
    stamp = tonumber(state[2])
  end
  scaled = tonumber(state[1]) + elapsed * rate
  if scaled > full then scaled = full end
end

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

-- No refill until the clock is back at the last write's time (0 unless it stepped back).
local lag = stamp - now

if cost > capacity then
  return { 0, floor_div(scaled, interval), ceil_div(full - scaled, rate) + lag, -1 }
end

if scaled < need then
  -- Denied: nothing is written, so a rejected take consumes nothing.
  return { 0, floor_div(scaled, interval), ceil_div(full - scaled, rate) + lag, ceil_div(need - scaled, rate) + lag }
end

scaled = scaled - need
local reset = ceil_div(full - scaled, rate) + lag
redis.call('HSET', key, 's', string.format('%d', scaled), 't', string.format('%d', stamp))
redis.call('PEXPIRE', key, math.max(reset, 1))
return { 1, floor_div(scaled, interval), reset, 0 }
