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
--   remaining     units admissible now after this decision
--   resetMs       ms until both windows are empty (the end of the next window)
--   retryAfterMs  0 when admitted; when denied, ms until `cost` fits absent other traffic;
--                 -1 when cost > limit, which can never fit

local key = KEYS[1]
local limit = tonumber(ARGV[1])
local window = tonumber(ARGV[2])
local cost = tonumber(ARGV[3])

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

local index = floor_div(now, window)
local elapsed = now - index * window
local state = redis.call('HMGET', key, 'w', 'c', 'p')
local current, previous = 0, 0
if state[1] then
  local stored = tonumber(state[1])
  if stored > index then
    -- The server clock stepped back: time stands still at the start of the stored window.
    index, elapsed = stored, 0
  end
  if stored == index then
    current, previous = tonumber(state[2]), tonumber(state[3])
  elseif stored == index - 1 then
    previous = tonumber(state[2])
  end
end

-- Units admissible now, scaled by W: limit·W − p·(W − e) − c·W.
local room = limit * window - previous * (window - elapsed) - current * window
local remaining = math.max(floor_div(room, window), 0)
local reset = 2 * window - elapsed
if current == 0 then reset = window - elapsed end
if current == 0 and previous == 0 then reset = 0 end

if cost > limit then
  return { 0, remaining, reset, -1 }
end

if room < cost * window then
  -- Denied, nothing written. Earliest time the same cost fits, absent other traffic:
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
  return { 0, remaining, reset, math.max(retry, 1) }
end

current = current + cost
redis.call('HSET', key, 'w', string.format('%d', index), 'c', current, 'p', previous)
-- The count matters until the end of the next window.
redis.call('PEXPIRE', key, (index + 2) * window - now)
return { 1, floor_div(room - cost * window, window), 2 * window - elapsed, 0 }
