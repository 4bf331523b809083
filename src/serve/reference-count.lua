-- The reference service's counting (envoyproxy/ratelimit), for `sluice serve --compat
-- reference`: every matched descriptor of a request is incremented by its hits, in
-- clock-aligned fixed windows (a minute window starts at :00 of Redis's clock), whether or
-- not another descriptor of the request is over. One atomic call for the whole request.
--
-- Bounded state: each counter expires at the end of its window (PEXPIREAT), so no key lives
-- longer than its unit; a counter without a TTL or with one past its window end (a hand
-- edit) gets the window's end; a value that is not a count (not an integer >= 0) is foreign
-- state, deleted.
--
-- KEYS[i]      the counter of descriptor i (all of one request share a hash slot)
-- ARGV[1]      stop: "1" = when any descriptor would go over, increment none
--              (STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT), else "0"
-- ARGV[3i-1]   hits of descriptor i, integer >= 0 (0 = read only)
-- ARGV[3i]     limit of descriptor i, integer >= 1
-- ARGV[3i+1]   unit of descriptor i in ms, integer >= 1
--
-- Returns a flat array, three integers per descriptor:
--   count    the counter after this call
--   over     1 when count (with this call's hits) is above the limit, else 0
--   resetMs  ms until the counter's window ends
--
-- Run by hand: redis-cli --eval reference-count.lua demo:a , 0 1 10 60000

local now_parts = redis.call('TIME')
local now = tonumber(now_parts[1]) * 1000 + math.floor(tonumber(now_parts[2]) / 1000)
local stop = ARGV[1] == '1'
local n = #KEYS

local counts, hits, limits, ends = {}, {}, {}, {}
local any_over = false
for i = 1, n do
  hits[i] = tonumber(ARGV[3 * i - 1])
  limits[i] = tonumber(ARGV[3 * i])
  local unit = tonumber(ARGV[3 * i + 1])
  ends[i] = (math.floor(now / unit) + 1) * unit
  local raw = redis.call('GET', KEYS[i])
  local count = 0
  if raw then
    count = tonumber(raw)
    if count == nil or count < 0 or count ~= math.floor(count) or string.find(raw, '^%d+$') == nil then
      redis.call('DEL', KEYS[i])
      count = 0
    end
  end
  counts[i] = count
  if count + hits[i] > limits[i] then any_over = true end
end

local reply = {}
for i = 1, n do
  local count = counts[i]
  local write = hits[i] > 0 and not (stop and any_over)
  if write then
    count = redis.call('INCRBY', KEYS[i], hits[i])
    local pttl = redis.call('PTTL', KEYS[i])
    if pttl < 0 or now + pttl > ends[i] then redis.call('PEXPIREAT', KEYS[i], ends[i]) end
  end
  local over = 0
  if (write and count > limits[i]) or (not write and count + hits[i] > limits[i]) then over = 1 end
  reply[3 * i - 2] = count
  reply[3 * i - 1] = over
  reply[3 * i] = ends[i] - now
end
return reply
