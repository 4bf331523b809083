-- Settle, refund and charge on a sliding window log: the log's members rewritten so that its
-- running totals stay exact (see sliding-window-log.lua and docs/priced.md).
--
-- Run as a function of (i, base, delta, mark, cost) inside the batch script (see
-- settle/registry.ts); it reads the log's own ARGV (limit, windowMs, cost).
--   delta  nil: return the mark of the reservation just admitted (the score, ms, of the
--          newest member: its own), else the units to move: < 0 gives back, > 0 charges
--   mark   the score of a reservation's (or a refunded take's) member, or nil (a charge:
--          the log now)
--   cost   its units not given back yet (its member holds `<total>:<cost>`)
-- Returns { applied, remaining }: the units moved (signed), the units admissible now.
--
-- A member M (score s, total T, cost c) counts c units from s until it leaves the window.
-- Giving back d of them exactly means: M holds c − d, and every member after M (in rank
-- order) has its total lowered by d, so the count (total(newest) − (total − cost)(first in
-- window)) drops by d now, and by c − d (not c) when M leaves. A cancel removes M and lowers
-- the later totals by c. Members with one score and one cost leave the window together, so
-- whichever of them is rewritten, every later count is the same: M is the first member with
-- score `mark` and cost `cost`. Only while M is in the window (s > now − window); once it has
-- left, nothing moves. The rewrite is O(m log n) in the m members after M (m < limit: each
-- holds >= 1 unit of the window), which is why a log policy is priced only up to
-- MAX_PRICED_LOG_LIMIT (limiter/priced.ts; bench/script-time.ts measures the longest call).
--
-- A charge (or a settle's excess, while M is in the window) is a member at now of
-- min(units, limit − count) units: a take that is never refused, so the debt is at most one
-- full window. A refund is a give-back against its take's member, as a settle's (see
-- settle/priced.lua: the record's cost is lowered with the member). Every call trims stale members as a take
-- does (at most 8), so the members a charge adds never pile up. Foreign state (what the take
-- would start afresh, or a member read here that is not the log's, or totals that do not
-- rise) is left alone: nothing moves, the next take clears it.

local key = KEYS[1]
local limit = tonumber(ARGV[1])
local window = tonumber(ARGV[2])

-- now:begin  (Redis server time, ms)
local time = redis.call('TIME')
local now = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
-- now:end

local TRIM = 8
local MAX_TOTAL = 9007199254740991
local CHUNK = 500 -- members per ZADD (Lua's unpack takes a few thousand values)

if delta == nil then
  local newest = redis.call('ZRANGE', key, -1, -1, 'WITHSCORES')
  return tonumber(newest[2] or '-1') or -1
end

-- A member and its score as read: its total, cost and score; nothing when not the log's.
local function entry(member, score)
  local total, n = string.match(member or '',
    '^(%d%d%d%d%d%d%d%d%d%d%d%d%d%d%d%d):([1-9]%d*)$')
  score = tonumber(score)
  if not total or not score or score ~= math.floor(score) then return nil end
  total, n = tonumber(total), tonumber(n)
  if total > MAX_TOTAL or n > total then return nil end
  return total, n, score
end

local function name(total, n)
  return string.format('%016d:%d', total, n)
end

-- The log now, as the take reads it (trimmed): false for foreign state.
local count, total, stale, card = 0, 0, 0, 0
local function read()
  local newest = redis.call('ZRANGE', key, -1, -1, 'WITHSCORES')
  if not newest[1] then return true end
  local top_total, _, top = entry(newest[1], newest[2])
  if not top_total or top > now + window or top < 0 then return false end
  total = top_total
  if top > now then now = top end
  stale = redis.call('ZCOUNT', key, '-inf', string.format('%d', now - window))
  card = redis.call('ZCARD', key)
  if stale > 0 then
    local removed = math.min(stale, TRIM)
    redis.call('ZREMRANGEBYRANK', key, 0, removed - 1)
    stale, card = stale - removed, card - removed
  end
  if stale == card then return true end
  local first = redis.call('ZRANGE', key, stale, stale, 'WITHSCORES')
  local first_total, first_cost = entry(first[1], first[2])
  if not first_total or first_total > total then return false end
  count = total - (first_total - first_cost)
  return count <= limit
end

if not read() then return { 0, 0 } end

-- Replaces the newest m members (a tail of the log: a reservation's member and every later
-- one) by `new` (score, name pairs, chunked), keeping the
-- key's TTL (removing every member deletes the key, and the ZADD after it would make one
-- without a TTL). A key without a TTL, or with one beyond the window, gets the window.
local function rewrite(m, new)
  local ttl = redis.call('PTTL', key)
  if ttl < 1 or ttl > window then ttl = window end
  redis.call('ZREMRANGEBYRANK', key, -m, -1)
  for j = 1, #new, 2 * CHUNK do
    redis.call('ZADD', key, unpack(new, j, math.min(j + 2 * CHUNK - 1, #new)))
  end
  redis.call('PEXPIRE', key, ttl)
end

-- A charge: a member at now of what fits.
local function charge(units)
  local n = math.min(units, limit - count)
  if n <= 0 then return { 0, limit - count } end
  redis.call('ZADD', key, string.format('%d', now), name(total + n, n))
  redis.call('PEXPIRE', key, window)
  return { n, limit - count - n }
end

-- A charge (no mark). A give-back always has one: a settle's reservation, a refund's take.
if mark == nil then
  if delta > 0 then return charge(delta) end
  return { 0, limit - count }
end

-- A reservation's member, `mark`: nothing moves once it has left the window (or is gone).
if mark <= now - window then return { 0, limit - count } end
-- A reservation refunded in full (its cost 0): its member is gone; a settle charges what was
-- used, as of a member at now.
if cost == 0 then
  if delta > 0 then return charge(delta) end
  return { 0, limit - count }
end
local reply = redis.call('ZRANGE', key, string.format('%d', mark), '+inf', 'BYSCORE', 'WITHSCORES')
local at = nil
for j = 1, #reply - 1, 2 do
  local t, n, s = entry(reply[j], reply[j + 1])
  if t and s == mark and n == cost then
    at = j
    break
  end
  if not s or s ~= mark then break end
end
if not at then return { 0, limit - count } end
if delta > 0 then return charge(delta) end

local d = -delta
local new, below = {}, nil
for j = at, #reply - 1, 2 do
  local t, n, s = entry(reply[j], reply[j + 1])
  if not t or (below and t <= below) then return { 0, limit - count } end
  below = t
  if j == at then
    if d < n then
      new[#new + 1], new[#new + 2] = reply[j + 1], name(t - d, n - d)
    end
  else
    if t - d < n then return { 0, limit - count } end
    new[#new + 1], new[#new + 2] = reply[j + 1], name(t - d, n)
  end
end
rewrite((#reply - at + 1) / 2, new)
return { -d, limit - count + d }
