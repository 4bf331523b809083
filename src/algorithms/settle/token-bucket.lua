-- Settle, refund and charge on a token bucket: tokens moved by `delta` units, within the
-- bucket's state now (never above its capacity, never below empty).
--
-- Run as a function of (i, base, delta, mark, cost) inside the batch script (see
-- settle/registry.ts); it reads the token bucket's own ARGV (capacity, refillTokens,
-- refillIntervalMs, cost).
--   delta  nil: return the mark of the bucket after a reservation (absolute ms at which the
--          tokens it took have all been refilled), else the units to move (< 0 gives back)
--   mark   a reservation's (or a refunded take's) mark, or nil (a charge: the bucket as it is)
--   cost   the units the reservation (or take) took and has not had refunded
-- Returns { applied, remaining }: whole units moved (signed, rounded toward 0), the whole
-- tokens now; { 0, 0, 1 } when `mark` or `cost` is not one this state could have given. A
-- give-back against a mark (a refund) also returns { …, 0, mark', spent }: the mark once the
-- tokens given back are out of its deficit (earlier by their refill time, in whole ms down),
-- and the units of the reservation's cost they used up (rounded up, so that refunds of it
-- never return more than its cost in all).
--
-- Only into the bucket state it was taken from: the tokens are refilled oldest deficit
-- first, so at time t a reservation's tokens not refilled yet are min(cost, (mark − t) ×
-- rate); a give-back returns at most those (none once its tokens are back), and never fills
-- the bucket above its capacity. A charge takes tokens down to an empty bucket at most (the
-- debt a bucket can hold within its horizon); a take then waits exactly for the refill.

local key = KEYS[1]
local capacity = tonumber(ARGV[1])
local rate = tonumber(ARGV[2])
local interval = tonumber(ARGV[3])

-- now:begin  (Redis server time, ms)
local time = redis.call('TIME')
local now = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
-- now:end

local full = capacity * interval
local horizon = ceil_div(full, rate)
local state = redis.call('HMGET', key, 's', 't')
local s, t = tonumber(state[1]), tonumber(state[2])
local scaled, stamp = full, now
if s and t and s >= 0 and s <= full and s == math.floor(s) and t >= 0 and t == math.floor(t)
    and t <= now + horizon then
  if t > now then
    stamp, scaled = t, s -- the clock stepped back: time stands still at the last write
  else
    scaled = s + (now - t) * rate
    if scaled > full then scaled = full end
  end
elseif state[1] or state[2] then
  if delta == nil then return 0 end
  return { 0, 0 } -- foreign state: the next take clears it
end

if delta == nil then return stamp + ceil_div(full - scaled, rate) end
-- A mark past a full refill from now, or a cost above the capacity: not a reservation of
-- this bucket (a hand edit): unknown, nothing moves.
if mark and (mark > stamp + horizon or cost > capacity) then return { 0, 0, 1 } end

local moved, applied = 0, 0
if delta < 0 then
  local owed = full - scaled
  if mark then owed = math.min(owed, cost * interval, math.max(0, (mark - stamp) * rate)) end
  moved = math.min(-delta * interval, owed)
  applied = -floor_div(moved, interval)
else
  moved = -math.min(delta * interval, scaled)
  applied = floor_div(-moved, interval)
end
if moved ~= 0 then
  scaled = scaled + moved
  local reset = ceil_div(full - scaled, rate) + (stamp - now)
  redis.call('HSET', key, 's', string.format('%d', scaled), 't', string.format('%d', stamp))
  redis.call('PEXPIRE', key, math.min(math.max(reset, 1), horizon))
end
if mark and delta < 0 then
  return { applied, floor_div(scaled, interval), 0, mark - floor_div(moved, rate), ceil_div(moved, interval) }
end
return { applied, floor_div(scaled, interval) }
