-- Settle, refund and charge on GCRA: the theoretical arrival time (TAT) moved by
-- `delta` × the emission interval, within the state now.
--
-- Run as a function of (i, base, delta, mark, cost) inside the batch script (see
-- settle/registry.ts); it reads GCRA's own ARGV (intervalUs, burst, cost).
--   delta  nil: return the mark after a reservation (the TAT it left, absolute µs), else
--          the units to move (< 0 gives back)
--   mark   a reservation's (or a refunded take's) mark, or nil (a charge: the TAT as it is)
--   cost   the units the reservation took
-- Returns { applied, remaining }: whole units moved (signed, rounded toward 0), the burst
-- left now; { 0, 0, 1 } when `mark` or `cost` is not one this state could have given. A
-- give-back against a mark (a refund) also returns { …, 0, mark', spent }: the mark moved back
-- as the TAT was, and the units of the reservation's cost it used up (rounded up, so that
-- refunds of it never return more than its cost in all).
--
-- Only into the state it was taken from: the TAT's lead over now drains oldest first, so at
-- time t the part of a reservation still pending is min(cost × interval, mark − t); a
-- give-back moves the TAT back by at most that (nothing once it has drained), and never
-- before now. A charge moves the TAT forward up to now + the burst tolerance at most (an
-- empty burst: the debt the state holds within its horizon); a take then waits exactly.

local key = KEYS[1]
local interval = tonumber(ARGV[1])
local burst = tonumber(ARGV[2])

-- now:begin  (Redis server time, µs)
local time = redis.call('TIME')
local now = tonumber(time[1]) * 1000000 + tonumber(time[2])
-- now:end

local tolerance = burst * interval
local stored = redis.call('GET', key)
local tat = tonumber(stored)
if stored and not (tat and tat >= 0 and tat == math.floor(tat) and tat <= now + 2 * tolerance) then
  if delta == nil then return 0 end
  return { 0, 0 } -- foreign state: the next take clears it
end
if delta == nil then return tat or 0 end
-- A mark past now + the burst tolerance (no take leaves a TAT beyond it), or a cost above
-- the burst: not a reservation of this state (a hand edit): unknown, nothing moves.
if mark and (mark > now + tolerance or cost > burst) then return { 0, 0, 1 } end
tat = tat or 0
if tat < now then tat = now end

local moved, applied = 0, 0
if delta < 0 then
  local pending = tat - now
  if mark then pending = math.min(pending, cost * interval, math.max(0, mark - now)) end
  moved = -math.min(-delta * interval, pending)
  applied = -floor_div(-moved, interval)
elseif tat < now + tolerance then
  moved = math.min(delta * interval, now + tolerance - tat)
  applied = floor_div(moved, interval)
end
if moved ~= 0 then
  tat = tat + moved
  if tat > now then
    -- Never beyond the horizon (a TAT a clock step left ahead: as the take caps it).
    redis.call('SET', key, string.format('%d', tat), 'PX', math.min(ms_up(tat - now), ms_up(tolerance)))
  else
    redis.call('DEL', key)
  end
end
local left = math.max(floor_div(tolerance - (tat - now), interval), 0)
if mark and delta < 0 then return { applied, left, 0, mark + moved, ceil_div(-moved, interval) } end
return { applied, left }
