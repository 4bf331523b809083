-- Fixed window anchored at the first hit (the seed's algorithm, with a cost).
--
-- The window starts when a take creates the counter; later takes share the counter and its
-- remaining lifetime. Time is the key's TTL on the Redis server, in milliseconds: the
-- callers' clocks never decide. Touches exactly one key; no loops, no scans.
--
-- Bounded state: the key never lives longer than the window. A counter without a TTL, or
-- with one longer than the window (a hand edit), gets the window (self-healing, never a
-- way to extend a live window). A value that is not a count this policy could have written
-- (not a canonical integer that INCRBY takes, above the limit) is foreign state: it is
-- deleted and the scope starts afresh.
--
-- KEYS[1]  the counter of one scope (string holding an integer)
-- ARGV[1]  limit     units admitted per window, integer >= 1
-- ARGV[2]  windowMs  window length in milliseconds, integer >= 1
-- ARGV[3]  cost      units this take consumes, integer >= 1
--
-- ARGV[2] and ARGV[3] are canonical decimal integers (as the client writes them): the take
-- path passes their text to SET and INCRBY as is, which spares Redis formatting a Lua number
-- back into text on every take (about a tenth of a take's Redis CPU, see bench/PROFILE.md).
--
-- Returns { allowed, remaining, resetMs, retryAfterMs }:
--   allowed       1 = admitted and counted, 0 = denied and nothing written
--   remaining     units still admissible in this window, clamped to [0, limit]; dry and
--                 admitted (a peek), the units admissible now, the cost not taken
--   resetMs       milliseconds until the window ends (0 when no window exists); dry and
--                 admitted (a peek), the window now: 0 when there is none
--   retryAfterMs  0 when admitted; when denied, ms until the same cost fits: resetMs + 1,
--                 because Redis expires a key only once its expiry time has passed;
--                 -1 when cost > limit, which can never fit
--
-- Run by hand: redis-cli --eval fixed-window.lua rate:demo , 10 1000 1

local key = KEYS[1]
local limit = tonumber(ARGV[1])
local window = tonumber(ARGV[2])
local cost = tonumber(ARGV[3])

-- mode:begin  (a take; the batch script sets these per item: dry = decide without writing
-- anything, probe = dry with a cost that can never fit, to read the state as it is; known =
-- this item's admitting dry reply, earlier in the same call, when a takeAll takes its items)
local dry, probe, known = false, false, nil
-- mode:end
if probe then cost = limit + 1 end

-- A takeAll's take pass (batch.lua): the dry pass of this same call admitted this item, and
-- nothing changed its key since (the other items have other keys, and a script's clock stands
-- still), so the key is not read again. known[5]: nil when there was no window (or foreign
-- state, which this SET replaces), 1 when there was, 2 when its TTL needs the window.
if known then
  if not known[5] then
    redis.call('SET', key, ARGV[3], 'PX', ARGV[2])
    return { 1, limit - cost, window, 0 }
  end
  redis.call('INCRBY', key, ARGV[3])
  if known[5] == 2 then redis.call('PEXPIRE', key, ARGV[2]) end
  return { 1, known[2] - cost, known[3], 0 }
end

-- A take that fits an empty window creates the counter and reads it in one command: SET NX
-- writes only when there is no key, GET returns what was there (nil: created; Redis 7.0).
-- The cost and window as given (ARGV[3], ARGV[2]): here cost is ARGV[3]'s value unchanged.
local current
if dry or cost > limit then
  current = redis.call('GET', key)
else
  current = redis.call('SET', key, ARGV[3], 'PX', ARGV[2], 'NX', 'GET')
  if not current then return { 1, limit - cost, window, 0 } end
end
local used
if current then
  -- Only the canonical digits INCRBY accepts, at most the limit.
  if #current <= 16 and (current == '0' or string.match(current, '^[1-9]%d*$')) then
    used = tonumber(current)
    if used > limit then used = nil end
  end
  if not used and not dry then
    redis.call('UNLINK', key) -- foreign state: start afresh
  end
end

if not used then
  -- No window yet.
  if cost > limit then
    return { 0, limit, 0, -1 } -- can never fit: write nothing
  end
  -- The first take starts the window: counter and TTL in one command.
  if dry then return { 1, limit, 0, 0 } end -- a peek: no window now
  redis.call('SET', key, cost, 'PX', window)
  return { 1, limit - cost, window, 0 }
end

local ttl = redis.call('PTTL', key)
local heal = 1
if ttl < 0 or ttl > window then
  -- No TTL, or one longer than the window: the window, once.
  ttl = window
  heal = 2
  if not dry then redis.call('PEXPIRE', key, window) end
end

if used + cost > limit then
  -- Denied: never increment, so a rejected request consumes nothing.
  local retry = ttl + 1
  if cost > limit then retry = -1 end
  return { 0, limit - used, ttl, retry }
end

-- A peek, or a takeAll's dry pass (whose take pass reads the fifth slot, see known above).
if dry then return { 1, limit - used, ttl, 0, heal } end
redis.call('INCRBY', key, ARGV[3])
return { 1, limit - used - cost, ttl, 0 }
