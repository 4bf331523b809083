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

local key = KEYS[1]
local limit = tonumber(ARGV[1])
local window = tonumber(ARGV[2])
local cost = tonumber(ARGV[3])

-- now:begin  (Redis server time, ms; the callers' clocks never decide)
local time = redis.call('TIME')
local now = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
-- now:end

-- Time never runs backwards for one log: if the server clock stepped back (NTP, a failover
-- to a server whose clock is behind), the newest entry's time stands in for now, so member
-- names stay unique and nothing is re-admitted.
local clock_now = now
local newest = redis.call('ZRANGE', key, -1, -1, 'WITHSCORES')
if newest[2] and tonumber(newest[2]) > now then now = tonumber(newest[2]) end

-- An entry admitted at time s is in the window while s > now - window.
redis.call('ZREMRANGEBYSCORE', key, '-inf', string.format('%d', now - window))
local count = redis.call('ZCARD', key)

local reset = 0
if count > 0 then reset = tonumber(newest[2]) + window - now end

if cost > limit then
  return { 0, math.max(limit - count, 0), reset, -1 }
end

if count + cost > limit then
  -- Denied: nothing is added. The take fits once the (count + cost - limit)-th oldest
  -- entry has left the window.
  local k = count + cost - limit
  local entry = redis.call('ZRANGE', key, k - 1, k - 1, 'WITHSCORES')
  return { 0, math.max(limit - count, 0), reset, tonumber(entry[2]) + window - now }
end

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
-- The newest entry leaves the window at now + window (now may be ahead of the clock).
redis.call('PEXPIRE', key, window + now - clock_now)
return { 1, limit - count - cost, window, 0 }
