-- Fixed window anchored at the first hit (the seed's algorithm, with a cost).
--
-- The window starts when a take creates the counter; later takes share the counter and its
-- remaining lifetime. Time is the key's TTL on the Redis server, in milliseconds: the
-- callers' clocks never decide. Touches exactly one key; no loops, no scans.
--
-- KEYS[1]  the counter of one scope (string holding an integer)
-- ARGV[1]  limit     units admitted per window, integer >= 1
-- ARGV[2]  windowMs  window length in milliseconds, integer >= 1
-- ARGV[3]  cost      units this take consumes, integer >= 1
--
-- Returns { allowed, remaining, resetMs, retryAfterMs }:
--   allowed       1 = admitted and counted, 0 = denied and nothing written
--   remaining     units still admissible in this window, clamped to [0, limit]
--   resetMs       milliseconds until the window ends (0 when no window exists)
--   retryAfterMs  0 when admitted; when denied, ms until the same cost fits: resetMs + 1,
--                 because Redis expires a key only once its expiry time has passed;
--                 -1 when cost > limit, which can never fit
--
-- Run by hand: redis-cli --eval fixed-window.lua rate:demo , 10 1000 1

local key = KEYS[1]
local limit = tonumber(ARGV[1])
local window = tonumber(ARGV[2])
local cost = tonumber(ARGV[3])

local current = redis.call('GET', key)

if not current then
  -- No window yet.
  if cost > limit then
    return { 0, limit, 0, -1 } -- can never fit: write nothing
  end
  -- The first take starts the window: counter and TTL in one command.
  redis.call('SET', key, cost, 'PX', window)
  return { 1, limit - cost, window, 0 }
end

local used = tonumber(current)

if used + cost > limit then
  -- Denied: never increment, so a rejected request consumes nothing.
  local ttl = redis.call('PTTL', key)
  if ttl < 0 then
    -- Self-healing of an abnormal key without TTL (S6), not a window extension.
    redis.call('PEXPIRE', key, window)
    ttl = window
  end
  local retry = ttl + 1
  if cost > limit then retry = -1 end
  local remaining = limit - used
  if remaining < 0 then remaining = 0 end
  return { 0, remaining, ttl, retry }
end

used = redis.call('INCRBY', key, cost)
local ttl = redis.call('PTTL', key)
if ttl < 0 then
  -- A counter that lost its TTL gets one (S6); a live window keeps its own.
  redis.call('PEXPIRE', key, window)
  ttl = window
end
return { 1, limit - used, ttl, 0 }
