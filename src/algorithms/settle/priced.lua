-- Priced operations of the batch script (inserted into batch.lua; see settle/registry.ts and
-- limiter/priced.ts). Each request is one scope item, then its record item (optional for
-- a charge without an id). The scope item's ARGV are its policy's, then one more: the units
-- of the operation. The record item has batch id 0 and one argument: its TTL in ms.
--   k  reserve: a take of `units`; an admitted one also records its mark (the window or
--      bucket state it was taken from, see the SETTLE bodies). Replies the take's slots.
--      The record: "allowed,remaining,resetMs,retryAfterMs,cost,mark,gen,settled[,applied,left]",
--      gen the scope's generation (see generation below).
--   s  settle a reservation with `units` actual: moves `units − cost` into the state it was
--      taken from, once (a cancel is a settle of 0). An unknown (expired) reservation, a
--      refused one, or one of another generation (the scope was reset since) changes nothing.
--   f  refund `units` into the current state; g  charge `units` past the limit.
--   m  reserve all (reserveAll): pairs of a scope item and its record, all or nothing as a
--      takeAll: every scope decided dry first; only when all are admitted is each reserved
--      (taken, its mark recorded), else none is and each reports the state as a refused
--      takeAll's item does (probes repair). Every record is written, refused or not (so a
--      repeat replays the refusal and its settle does nothing); a repeat that finds any record
--      replays them all (an item whose record is gone, by a hand edit: { 0, 0, 0, 0 }).
-- The reply of s, f and g: { known (0: no such reservation), applied (signed units moved),
-- remaining, 0 } (the first slot is never -1, the batch's mark of a failed request). The
-- record item's reply: { 1 when replayed else 0, 0, 0, 0 }.

-- Integer division exact for |values| <= 2^53 (as the algorithms' own), shared by the SETTLE
-- bodies below.
local function floor_div(a, b)
  local q = math.floor(a / b)
  if q * b > a then q = q - 1 end
  if (q + 1) * b <= a then q = q + 1 end
  return q
end

local function ceil_div(a, b)
  local q = math.floor(a / b)
  if q * b < a then q = q + 1 end
  if (q - 1) * b >= a then q = q - 1 end
  return q
end

local function ms_up(us)
  if us <= 0 then return 0 end
  return floor_div(us + 999, 1000)
end

local SETTLE = {}
--[[SETTLE]]--

-- The scope's generation, in `<key>:g`: a reserve (`ttl` given) creates it, as the µs time
-- now, and keeps it for its record's TTL, so that it outlives every reservation of the scope;
-- a reset (batch.lua, op r) replaces it by a value above every earlier one. A settle of a
-- reservation of another generation moves nothing. 0 when absent (or not a number).
local function generation(i, ttl)
  local gkey = KEYS[i] .. ':g'
  local g = tonumber(redis.call('GET', gkey) or '0') or 0
  if ttl then
    if g == 0 then
      local t = redis.call('TIME')
      g = tonumber(t[1]) * 1000000 + tonumber(t[2])
      redis.call('SET', gkey, string.format('%d', g), 'PX', ttl)
    else
      redis.call('PEXPIRE', gkey, ttl)
    end
  end
  return g
end

local function record_get(k)
  return redis.call('GET', k)
end

local function record_set(k, v, ttl)
  if ttl then
    redis.call('SET', k, v, 'PX', ttl)
  else
    redis.call('SET', k, v, 'KEEPTTL')
  end
end

-- A record's integers, or nil when absent or not all integers.
local function record_numbers(k)
  local text = record_get(k)
  if not text then return nil end
  local out = {}
  for v in string.gmatch(text, '[^,]+') do
    local x = tonumber(v)
    if not x or x ~= math.floor(x) then return nil end
    out[#out + 1] = x
  end
  return out
end

local function record_text(values)
  local text = {}
  for j = 1, #values do text[j] = string.format('%d', values[j]) end
  return table.concat(text, ',')
end

-- One priced request; returns its item's four slots and whether it was replayed.
local function priced_request(op, i, id, base, units, record, ttl)
  local adjust = SETTLE[id]
  if adjust == nil then
    error({ err = 'ERR reserve, settle, refund and charge do not support this algorithm' })
  end
  if op == 'k' then
    local rec = record_numbers(record)
    if rec and #rec >= 8 then return { rec[1], rec[2], rec[3], rec[4] }, 1 end
    local ok, r = decide(i, id, base, false, false)
    if not ok then error(r) end
    local mark, gen = 0, 0
    if r[1] == 1 then
      mark = adjust(i, base, nil, nil, units)
      gen = generation(i, ttl)
    end
    record_set(record, record_text({ r[1], r[2], r[3], r[4], units, mark, gen, 0 }), ttl)
    return r, 0
  end
  if op == 's' then
    local rec = record_numbers(record)
    if not rec or #rec < 8 then return { 0, 0, 0, 0 }, 0 end
    if rec[8] == 1 and #rec == 10 then return { 1, rec[9], rec[10], 0 }, 1 end
    local applied, left = 0, rec[2]
    if rec[1] == 1 and generation(i, nil) == rec[7] then
      local r = adjust(i, base, units - rec[5], rec[6], rec[5])
      applied, left = r[1], r[2]
    end
    record_set(
      record,
      record_text({ rec[1], rec[2], rec[3], rec[4], rec[5], rec[6], rec[7], 1, applied, left })
    )
    return { 1, applied, left, 0 }, 0
  end
  if record then
    local rec = record_numbers(record)
    if rec and #rec == 2 then return { 1, rec[1], rec[2], 0 }, 1 end
  end
  local delta = units
  if op == 'f' then delta = -units end
  local r = adjust(i, base, delta, nil, units)
  if record then record_set(record, record_text({ r[1], r[2] }), ttl) end
  return { 1, r[1], r[2], 0 }, 0
end

-- The slots of a reserve-all of m scopes (item j at KEYS[first + 2j - 2], its record next)
-- and whether it was replayed.
local function reserve_all_request(m, first, ids, bases, units, records, ttls)
  local slots, any = {}, false
  for j = 1, m do
    if SETTLE[ids[j]] == nil then
      error({ err = 'ERR reserve, settle, refund and charge do not support this algorithm' })
    end
    local rec = record_numbers(records[j])
    if rec and #rec >= 8 then
      slots[j], any = { rec[1], rec[2], rec[3], rec[4] }, true
    end
  end
  if any then
    for j = 1, m do slots[j] = slots[j] or { 0, 0, 0, 0 } end
    return slots, 1
  end
  local dry, all = {}, true
  for j = 1, m do
    local ok, r = decide(first + 2 * j - 2, ids[j], bases[j], true, false)
    if not ok then error(r) end
    dry[j] = r
    if r[1] ~= 1 then all = false end
  end
  for j = 1, m do
    local i, r, mark, gen = first + 2 * j - 2, dry[j], 0, 0
    if all then
      local ok
      ok, r = decide(i, ids[j], bases[j], false, false)
      if not ok then error(r) end
      mark = SETTLE[ids[j]](i, bases[j], nil, nil, units[j])
      gen = generation(i, ttls[j])
    else
      local ok, probed = decide(i, ids[j], bases[j], false, true)
      if not ok then probed = { 0, 0, 0, 0 } end
      if r[1] == 1 then
        r = { 0, probed[2], probed[3], 0 }
      else
        r = refused_block(i, bases[j], r)
        r = { 0, r[2], r[3], r[4] }
      end
    end
    record_set(
      records[j],
      record_text({ r[1], r[2], r[3], r[4], units[j], mark, gen, 0 }),
      ttls[j]
    )
    slots[j] = r
  end
  return slots, 0
end

-- Runs the reserve-all of n items (n / 2 pairs) from KEYS[first], ARGV[a]; returns the cursor.
local function reserve_all(n, first, a)
  local ids, bases, units, records, ttls = {}, {}, {}, {}, {}
  local m = n / 2
  for j = 1, m do
    ids[j], bases[j] = tonumber(ARGV[a]), a + 1
    local argc = tonumber(ARGV[a + 1])
    units[j] = tonumber(ARGV[a + 1 + argc])
    a = a + 2 + argc
    records[j], ttls[j] = KEYS[first + 2 * j - 1], ARGV[a + 2]
    a = a + 2 + tonumber(ARGV[a + 1])
  end
  local ok, slots, replayed = pcall(reserve_all_request, m, first, ids, bases, units, records, ttls)
  if ok then
    for j = 1, m do
      local r = slots[j]
      emit(r[1], r[2], r[3], r[4])
      emit(replayed, 0, 0, 0)
    end
  else
    failed(n, slots)
  end
  return a
end

-- Runs the priced request of n items starting at KEYS[first] and ARGV[a]; returns the ARGV
-- cursor after it.
local function priced(op, n, first, a)
  if op == 'm' then return reserve_all(n, first, a) end
  local id, base = tonumber(ARGV[a]), a + 1
  local argc = tonumber(ARGV[base])
  local units = tonumber(ARGV[base + argc])
  local after = a + 2 + argc
  local record, ttl
  if n == 2 then
    record, ttl = KEYS[first + 1], ARGV[after + 2]
    after = after + 2 + tonumber(ARGV[after + 1])
  end
  local ok, r, replayed = pcall(priced_request, op, first, id, base, units, record, ttl)
  if ok then
    emit(r[1], r[2], r[3], r[4])
    if record then emit(replayed, 0, 0, 0) end
  else
    failed(n, r)
  end
  return after
end
