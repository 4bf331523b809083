-- GCRA, the Generic Cell Rate Algorithm (virtual scheduling form of ITU-T I.371 / the ATM
-- Forum TM 4.0 spec; the same formulation as Brandur Leach's `throttled` and redis-cell),
-- on Redis server time in microseconds.
--
-- Units arrive at a sustained rate of `limit` per `periodMs` (emission interval
-- T = periodMs / limit, rounded up to a whole microsecond: never faster than the policy),
-- with up to `burst` units at once (tolerance τ = burst × T). The state is one number, the
-- theoretical arrival time (TAT): a take of `cost` units at time t is admitted when
-- max(TAT, t) + cost × T − τ ≤ t, and moves TAT there.
--
-- KEYS[1]  the TAT in µs (a string integer); absent = no debt
-- ARGV[1]  emission interval T in µs, integer >= 1
-- ARGV[2]  burst    units admissible at once, integer >= 1
-- ARGV[3]  cost     units this take needs, integer >= 1
--
-- Returns { allowed, remaining, resetMs, retryAfterMs } (times rounded up to whole ms):
--   remaining     units admissible at once now, after this decision
--   resetMs       ms until TAT ≤ now, when the full burst is available again
--   retryAfterMs  0 when admitted; when denied, ms until the same cost is admitted;
--                 -1 when cost > burst, which can never fit
-- The key lives until TAT, when an absent key means the same.

local key = KEYS[1]
local interval = tonumber(ARGV[1])
local burst = tonumber(ARGV[2])
local cost = tonumber(ARGV[3])

-- now:begin  (Redis server time, µs; the callers' clocks never decide)
local time = redis.call('TIME')
local now = tonumber(time[1]) * 1000000 + tonumber(time[2])
-- now:end

local function floor_div(a, b)
  local q = math.floor(a / b)
  if q * b > a then q = q - 1 end
  if (q + 1) * b <= a then q = q + 1 end
  return q
end

local function ms_up(us)
  if us <= 0 then return 0 end
  return floor_div(us + 999, 1000)
end

local tolerance = burst * interval
local tat = tonumber(redis.call('GET', key) or '0')
if tat < now then tat = now end

local remaining = math.max(floor_div(tolerance - (tat - now), interval), 0)

if cost > burst then
  return { 0, remaining, ms_up(tat - now), -1 }
end

local new_tat = tat + cost * interval
local allow_at = new_tat - tolerance
if allow_at > now then
  -- Denied: TAT does not move, so a rejected take consumes nothing.
  return { 0, remaining, ms_up(tat - now), ms_up(allow_at - now) }
end

redis.call('SET', key, string.format('%d', new_tat), 'PX', ms_up(new_tat - now))
return { 1, floor_div(tolerance - (new_tat - now), interval), ms_up(new_tat - now), 0 }
