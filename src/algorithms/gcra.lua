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
--   remaining     units admissible at once now, after this decision; dry and admitted (a
--                 peek), the units admissible at once now, the cost not taken
--   resetMs       ms until TAT ≤ now, when the full burst is available again; dry and
--                 admitted (a peek), from the TAT now, the cost not taken (0: no debt)
--   retryAfterMs  0 when admitted; when denied, ms until the same cost is admitted;
--                 -1 when cost > burst, which can never fit
-- The key lives until TAT, when an absent key means the same.
--
-- Bounded state: the horizon is the tolerance τ (the time the whole burst takes to come
-- back); no key lives longer. After an admission TAT ≤ now + τ. A TAT further ahead, by at
-- most one more τ, is a server clock that stepped back: decided as stored (nothing is
-- re-admitted), with waits capped by the key's life. Anything else (further ahead, not an
-- integer, negative) is foreign state: the scope starts afresh.

local key = KEYS[1]
local interval = tonumber(ARGV[1])
local burst = tonumber(ARGV[2])
local cost = tonumber(ARGV[3])

-- mode:begin  (a take; the batch script sets these per item: dry = decide without writing
-- anything, probe = dry with a cost that can never fit, to read the state as it is)
local dry, probe = false, false
-- mode:end
if probe then cost = burst + 1 end

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
local horizon = ms_up(tolerance)
local stored = redis.call('GET', key)
local tat = tonumber(stored)
if stored and not (tat and tat >= 0 and tat == math.floor(tat) and tat <= now + 2 * tolerance) then
  -- Foreign state: start afresh.
  if not dry then
    redis.call('UNLINK', key)
  end
  stored, tat = false, nil
end
tat = tat or 0
if tat < now then tat = now end
-- True when a server clock step back left TAT beyond now + τ.
local stepped = tat > now + tolerance

-- The key's life, checked where nothing rewrites it (a denial): a key without a TTL, or with
-- one longer than the horizon, gets the time to TAT, at most the horizon (self-healing).
local ttl = -2
local function check_ttl()
  if not stored then return end
  ttl = redis.call('PTTL', key)
  if ttl < 0 or ttl > horizon then
    ttl = math.max(math.min(ms_up(tat - now), horizon), 1)
    if not dry then
      redis.call('PEXPIRE', key, ttl)
    end
  end
end

-- A wait, capped by the key's life where a clock step made it longer.
local function real(ms, slack)
  if stepped and ms > ttl + slack then return ttl + slack end
  return ms
end

local remaining = math.max(floor_div(tolerance - (tat - now), interval), 0)
local new_tat = tat + cost * interval
local allow_at = new_tat - tolerance
if cost > burst or allow_at > now then
  -- Denied: TAT does not move, so a rejected take consumes nothing.
  check_ttl()
  local retry = -1
  if cost <= burst then retry = real(ms_up(allow_at - now), 1) end
  return { 0, remaining, real(ms_up(tat - now), 0), retry }
end

-- A peek: the state now (admitted, so TAT ≤ now + τ: no clock step to cap).
if dry then return { 1, remaining, ms_up(tat - now), 0 } end
redis.call('SET', key, string.format('%d', new_tat), 'PX', ms_up(new_tat - now))
return { 1, floor_div(tolerance - (new_tat - now), interval), ms_up(new_tat - now), 0 }
