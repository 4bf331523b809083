-- Settle, refund and charge on a fixed window: the counter of the window the operation
-- belongs to, moved by `delta` units, within [0, limit].
--
-- Run as a function of (i, base, delta, mark, cost) inside the batch script (see
-- settle/registry.ts); it reads the fixed window's own ARGV (limit, windowMs, cost).
--   delta  nil: return the window's mark (its expiry time, absolute ms), else the
--          units to move: < 0 gives back, > 0 charges
--   mark   the window a reservation (or a refunded take) was taken from (its expiry), or
--          nil (a charge): the current window
-- Returns { applied, remaining }: the units moved (signed), the units left in the window;
-- { 0, 0, 1 } when `mark` or `cost` is not one this state could have given (unknown).
--
-- Only into the window it came from: once that window has ended (its key expired, or
-- another window began), a settle or cancel changes nothing. A give-back stops at 0; a
-- charge past the limit fills the window (refused until it ends: the excess does not carry
-- into the next window, whose state is not this one). A charge on a scope without a window
-- starts one. Foreign state is left for the next take to clear.

local key = KEYS[1]
local limit = tonumber(ARGV[1])
local window = tonumber(ARGV[2])

-- now:begin  (Redis server time, ms: only to check a reservation's mark)
local time = redis.call('TIME')
local now = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
-- now:end

if delta == nil then return redis.call('PEXPIRETIME', key) end
if mark then
  -- A mark no window of this policy could have (it ends within a window of now), or a cost
  -- above the limit: not a reservation of this state (a hand edit): unknown, nothing moves.
  if mark > now + window or cost > limit then return { 0, 0, 1 } end
end

local current = redis.call('GET', key)
local used
if current then
  if #current <= 16 and (current == '0' or string.match(current, '^[1-9]%d*$')) then
    used = tonumber(current)
    if used > limit then used = nil end
  end
  if not used then return { 0, 0 } end
end
local at = redis.call('PEXPIRETIME', key)
if mark and at ~= mark then return { 0, limit - (used or 0) } end -- another window, or none
if not used and delta < 0 then return { 0, limit } end
used = used or 0
local new = used + delta
if new < 0 then new = 0 end
if new > limit then new = limit end
if new ~= used then
  if not current then
    redis.call('SET', key, string.format('%d', new), 'PX', window)
  else
    redis.call('SET', key, string.format('%d', new), 'KEEPTTL')
    local ttl = redis.call('PTTL', key)
    if ttl < 0 or ttl > window then redis.call('PEXPIRE', key, window) end
  end
end
return { new - used, limit - new }
