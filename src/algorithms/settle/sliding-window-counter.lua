-- Settle, refund and charge on a sliding window counter: the current window's count moved
-- by `delta` units, within [0, limit].
--
-- Run as a function of (i, base, delta, mark, cost) inside the batch script (see
-- settle/registry.ts); it reads the counter's own ARGV (limit, windowMs, cost).
--   delta  nil: return the mark after a reservation (the index of its window), else the
--          units to move (< 0 gives back)
--   mark   a reservation's (or a refunded take's) window index, or nil (a charge: the
--          current window)
-- Returns { applied, remaining }: the units moved (signed), the units admissible now;
-- { 0, 0, 1 } when `mark` or `cost` is not one this state could have given (unknown).
--
-- Only into the window it came from: a settle or cancel applies only while the
-- reservation's window is the current one (once it is the previous window, its weight
-- already fades, and a give-back would reach into time that has passed: nothing changes); a
-- refund of a take likewise, against its mark. A give-back stops at 0; a charge past the
-- limit fills the current window (its weight then carries into the next window as any
-- count does, no further).

local key = KEYS[1]
local limit = tonumber(ARGV[1])
local window = tonumber(ARGV[2])

-- now:begin  (Redis server time, ms)
local time = redis.call('TIME')
local now = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
-- now:end

local function count_ok(n)
  return n and n >= 0 and n <= limit and n == math.floor(n)
end

local horizon = 2 * window
local index = floor_div(now, window)
local elapsed = now - index * window
local state = redis.call('HMGET', key, 'w', 'c', 'p')
local stored, c, p = tonumber(state[1]), tonumber(state[2]), tonumber(state[3])
local valid = stored and stored >= 0 and stored == math.floor(stored)
  and stored * window <= now + horizon and count_ok(c) and count_ok(p)
if not valid and (state[1] or state[2] or state[3]) then
  if delta == nil then return -1 end
  return { 0, 0 } -- foreign state: the next take clears it
end
if delta == nil then return stored or -1 end
if valid and stored > index then index, elapsed = stored, 0 end -- the clock stepped back
-- A window after the current one, or a cost above the limit: not a reservation of this
-- state (a hand edit): unknown, nothing moves.
if mark and (mark > index or cost > limit) then return { 0, 0, 1 } end

local current, previous = 0, 0
if valid then
  if stored == index then
    current, previous = c, p
  elseif stored == index - 1 then
    previous = c
  end
end
local applied = 0
if not (mark and mark ~= index) and not (delta < 0 and current == 0) then
  local new = current + delta
  if new < 0 then new = 0 end
  if new > limit then new = limit end
  applied = new - current
  current = new
  if applied ~= 0 then
    redis.call('HSET', key, 'w', string.format('%d', index), 'c', current, 'p', previous)
    redis.call('PEXPIRE', key, math.min((index + 2) * window - now, horizon))
  end
end
local room = limit * window - previous * (window - elapsed) - current * window
return { applied, math.max(floor_div(room, window), 0) }
