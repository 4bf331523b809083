-- Sliding window counter: the previous and current fixed windows, the previous one
-- weighted by how much of it the sliding window still overlaps, on Redis server time.
--
-- With W = windowMs, e = ms elapsed in the current window, p and c the previous and current
-- windows' counts, the estimate of units in the last W ms is p × (W − e) / W + c. A take is
-- admitted when estimate + cost ≤ limit. All arithmetic is on integers scaled by W (the
-- builder requires limit × windowMs ≤ 2^53 − 1), so nothing rounds.
-- It assumes the previous window's units were spread evenly: against the exact log it can
-- admit more when they were bunched at the previous window's end (worst case: up to
-- 2 × limit in one sliding window) and less when bunched at its start.
--
-- KEYS[1]  a hash { w = index of the current window (floor(ms / W)), c = its count,
--          p = the previous window's count }
-- ARGV[1]  limit     units per window, integer >= 1
-- ARGV[2]  windowMs  window length in ms, integer >= 1
-- ARGV[3]  cost      units this take needs, integer >= 1
--
-- Returns { allowed, remaining, resetMs, retryAfterMs }:
--   remaining     units admissible now after this decision; dry and admitted (a peek),
--                 the units admissible now, the cost not taken
--   resetMs       ms until both windows are empty (the end of the next window); dry and
--                 admitted (a peek), from the counts now, the cost not taken (0: both empty)
--   retryAfterMs  0 when admitted; when denied, ms until `cost` fits absent other traffic;
--                 -1 when cost > limit, which can never fit
--
-- Bounded state: the horizon is two windows (a count matters until the end of the next
-- window); no key lives longer. A stored window ahead of now's by at most one horizon is a
-- server clock that stepped back: time stands still at the start of the stored window
-- (nothing is re-admitted), waits count the lag and are capped by the key's life. Anything
-- else this policy could not have written (a window further ahead, counts that are not
-- integers in [0, limit]) is foreign state: the scope starts afresh.

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

local function floor_div(a, b)
  local q = math.floor(a / b)
  if q * b > a then q = q - 1 end
  if (q + 1) * b <= a then q = q + 1 end
  return q
end

local function count_ok(n)
  return n and n >= 0 and n <= limit and n == math.floor(n)
end

local horizon = 2 * window
local index = floor_div(now, window)
local elapsed = now - index * window
local lag = 0
local state = redis.call('HMGET', key, 'w', 'c', 'p')
local stored, c, p = tonumber(state[1]), tonumber(state[2]), tonumber(state[3])
local current, previous = 0, 0
if stored and stored >= 0 and stored == math.floor(stored) and stored * window <= now + horizon
    and count_ok(c) and count_ok(p) then
  if stored > index then
    -- The server clock stepped back: time stands still at the start of the stored window.
    lag = stored * window - now
    index, elapsed = stored, 0
  end
  if stored == index then
    current, previous = c, p
  elseif stored == index - 1 then
    previous = c
  end
elseif state[1] or state[2] or state[3] then
  -- Foreign state: start afresh.
  if not dry then
    redis.call('UNLINK', key)
  end
  stored = nil
end

-- Units admissible now, scaled by W: limit·W − p·(W − e) − c·W.
local room = limit * window - previous * (window - elapsed) - current * window
local remaining = math.max(floor_div(room, window), 0)
local reset = 2 * window - elapsed
if current == 0 then reset = window - elapsed end
if current == 0 and previous == 0 then reset = 0 end

-- The key's life, checked where nothing rewrites it (a denial): a key without a TTL, or with
-- one longer than the horizon, gets the end of the next window, at most the horizon (self-healing).
local ttl = -2
local function check_ttl()
  if not stored then return end
  ttl = redis.call('PTTL', key)
  if ttl < 0 or ttl > horizon then
    ttl = math.max(math.min((index + 2) * window - now, horizon), 1)
    if not dry then
      redis.call('PEXPIRE', key, ttl)
    end
  end
end

-- A wait in real ms: the lag added, capped by the key's life where a clock step made it longer.
local function real(ms, slack)
  if lag > 0 then
    ms = ms + lag
    if ms > ttl + slack then return ttl + slack end
  end
  return ms
end

if cost > limit then
  -- (A key that holds none of the counter's fields is foreign: cleared.)
  if not stored and not dry then
    redis.call('UNLINK', key)
  end
  check_ttl()
  if reset == 0 then return { 0, remaining, 0, -1 } end
  return { 0, remaining, real(reset, 0), -1 }
end

if room < cost * window then
  -- Denied, nothing written. Earliest time the same cost fits, absent other traffic:
  check_ttl()
  local retry
  local spare = limit - current - cost
  if spare >= 0 and previous > 0 then
    -- Still in this window, once the previous window's weight has shrunk enough:
    -- p·(W − e − d) ≤ spare·W  ⇔  d ≥ (W − e) − spare·W / p
    retry = (window - elapsed) - floor_div(spare * window, previous)
  end
  if retry == nil or retry >= window - elapsed then
    -- In the next window, where this window's count becomes the weighted one:
    -- c·(W − e2) ≤ (limit − cost)·W  ⇔  e2 ≥ W − (limit − cost)·W / c
    local e2 = 0
    if current > 0 then e2 = math.max(window - floor_div((limit - cost) * window, current), 0) end
    retry = (window - elapsed) + e2
  end
  return { 0, remaining, real(reset, 0), real(math.max(retry, 1), 1) }
end

-- The count matters until the end of the next window (at most one horizon from now, also
-- when now stands still ahead of the clock).
ttl = math.min((index + 2) * window - now, horizon)
if dry then
  -- A peek: the state now, the cost not taken.
  if reset == 0 then return { 1, remaining, 0, 0 } end
  return { 1, remaining, real(reset, 0), 0 }
end
current = current + cost
redis.call('HSET', key, 'w', string.format('%d', index), 'c', current, 'p', previous)
redis.call('PEXPIRE', key, ttl)
return { 1, floor_div(room - cost * window, window), real(2 * window - elapsed, 0), 0 }
