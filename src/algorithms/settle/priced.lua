-- Priced operations of the batch script (inserted into batch.lua; see settle/registry.ts and
-- limiter/priced.ts). Each request is one scope item, then its record item (optional for
-- a charge without an id). The scope item's ARGV are its policy's, then one more: the units
-- of the operation. The record item has batch id 0 and its arguments: its TTL in ms, then
-- (but for a settle) the request's ask, a 48-bit digest of what was asked (every item's key
-- and cost, in order; see limiter/retry-safe.ts). A record found with another ask is another
-- request's: nothing is done, and the record item replies 2 (an InvalidInputError, field id).
--   k  reserve: a take of `units`; an admitted one is recorded with its mark (the window or
--      bucket state it was taken from, see the SETTLE bodies). Replies the take's slots. A
--      refused one records nothing (it consumed nothing: a repeat is decided afresh).
--      The record: "1,remaining,resetMs,0,cost,mark,gen,ask,settled[,applied,left]", gen the
--      scope's generation (see generation below); "-1", a tombstone (see s): the reserve is
--      refused, takes nothing, and is answered as replayed.
--   s  settle a reservation with `units` actual: moves `units − cost` into the state it was
--      taken from, once (a cancel is a settle of 0). An unknown reservation (never made,
--      refused, expired, or untrusted: see reservation below) changes nothing (known 0); a
--      cancel of one leaves a tombstone for the TTL, so its reserve, arriving after it (its
--      reply timed out), takes nothing. One of another generation (the scope was reset since)
--      moves nothing.
--   f  refund `units` of the take or reservation it names (its anchor), into the state that
--      one was taken from; g  charge `units` past the limit. Their record: "applied,left,ask"
--      (a refund's ask names its anchor too). A refund is four items: the scope, its record,
--      the anchor's reservation record (`rsv`, TTL) and the anchor's take record (`id`, TTL,
--      the scope key's digest: which item of a takeAll). A reservation of the id is used
--      first, else the take. The anchor's record keeps what is left to give back (its cost,
--      lowered by every refund, so that all refunds of one take return at most its cost) and
--      its mark (moved with a token bucket's or GCRA's give-back). A refund of an unknown
--      anchor (never recorded, refused, expired, untrusted, another scope) moves nothing, is
--      not recorded, and answers known 0; one of a settled reservation, of another
--      generation (a reset since), or of a state that has ended moves nothing (known 1).
--   The record of a take with an id (op i in batch.lua) holds, per item, its four slots, its
--   mark, its generation, its key's digest and the units left to refund (see take_marks).
--   m  reserve all (reserveAll): pairs of a scope item and its record, all or nothing as a
--      takeAll: every scope decided dry first; only when all are admitted is each reserved
--      (taken, its mark recorded), else none is and each reports the state as a refused
--      takeAll's item does (probes repair), and nothing is recorded. A repeat that finds any
--      record replays them all (an item whose record is gone, by a hand edit: { 0, 0, 0, 0 });
--      one that finds a tombstone is refused, nothing taken.
-- The reply of s, f and g: { known (0: no such reservation), applied (signed units moved),
-- remaining (as a peek reports it right after: read now, a replay's too), 0 } (the first
-- slot is never -1, the batch's mark of a failed request). The record item's reply: { 1 when
-- replayed, 2 when the id was another request's, else 0, 0, 0, 0 }.

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
-- reservation of another generation moves nothing. 0 when absent (or not a number, or a key
-- of another type: a reserve then writes it afresh).
local function generation(i, ttl)
  local gkey = KEYS[i] .. ':g'
  local ok, text = pcall(redis.call, 'GET', gkey)
  local g = ok and tonumber(text or '0') or 0
  if g ~= math.floor(g) or g < 0 then g = 0 end
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

local function record_del(k)
  redis.call('DEL', k)
end

-- A record's PTTL (-1: none, so not one this library wrote).
local function record_ttl(k)
  return redis.call('PTTL', k)
end

-- A record's TTL, capped at `cap` ms: a record never outlives its horizon.
local function record_cap(k, cap)
  local left = redis.call('PTTL', k)
  if left < 0 or left > tonumber(cap) then redis.call('PEXPIRE', k, cap) end
end

-- Writes a record: with `ttl`, a new one for that long; without, over an existing one, its TTL
-- kept (capped at `cap`).
local function record_set(k, v, ttl, cap)
  if ttl then
    redis.call('SET', k, v, 'PX', ttl)
  else
    redis.call('SET', k, v, 'KEEPTTL')
    record_cap(k, cap)
  end
end

-- A record's integers, or nil when absent or untrusted: not all integers, no TTL, or a key of
-- another type. An untrusted record (a hand edit, a foreign key) is removed: it counts as none.
local function record_numbers(k)
  local ok, text = pcall(record_get, k)
  if ok and not text then return nil end
  local out = {}
  if ok and record_ttl(k) < 0 then out = nil end
  if out and ok then
    for v in string.gmatch(text, '[^,]+') do
      local x = tonumber(v)
      if not x or x ~= math.floor(x) then
        out = nil
        break
      end
      out[#out + 1] = x
    end
  end
  if out and #out > 0 then return out end
  record_del(k)
  return nil
end

local function record_text(values)
  local text = {}
  for j = 1, #values do text[j] = string.format('%d', values[j]) end
  return table.concat(text, ',')
end

local TOMBSTONE = '-1'

-- A reservation record: "1,remaining,resetMs,0,cost,mark,gen,ask,0" when reserved,
-- "…,1,applied,left" once settled, TOMBSTONE when cancelled before any reserve of the id
-- arrived (see op s). Returns the record's numbers, 'tombstone', or nil: none, or untrusted
-- (another shape, a negative cost, mark or generation; removed). The cost is what is left of
-- it: refunds lower it, down to 0.
local function reservation(k)
  local rec = record_numbers(k)
  if not rec then return nil end
  if #rec == 1 and rec[1] == -1 then return 'tombstone' end
  local good = (#rec == 9 and rec[9] == 0) or (#rec == 11 and rec[9] == 1 and rec[11] >= 0)
  if good then
    good = rec[1] == 1 and rec[2] >= 0 and rec[3] >= 0 and rec[4] == 0 and rec[5] >= 0
      and rec[6] >= 0 and rec[7] >= 0 and rec[8] >= 0
  end
  if good then return rec end
  record_del(k)
  return nil
end

-- The record of a take with an id (op i): per item "1,remaining,resetMs,0,mark,gen,keyhash,
-- left", then the ask. Its numbers, or nil when absent or of another shape (left alone: op i
-- judges its own records).
local function take_record(k)
  local ok, text = pcall(record_get, k)
  if not ok or not text or record_ttl(k) < 0 then return nil end
  local out = {}
  for v in string.gmatch(text, '[^,]+') do
    local x = tonumber(v)
    if not x or x ~= math.floor(x) or x < 0 then return nil end
    out[#out + 1] = x
  end
  local m = (#out - 1) / 8
  if m < 1 or m ~= math.floor(m) then return nil end
  for j = 1, 8 * m, 8 do
    if out[j] ~= 1 or out[j + 3] ~= 0 then return nil end
  end
  return out
end

-- Gives back up to `units` of an anchor (`left` units still refundable, taken with `mark` in
-- generation `gen`) into its own state. Returns the units moved (signed), the units of `left`
-- used up and the mark after it; nil when the body finds the mark or cost untrusted.
local function give_back(i, base, adjust, units, left, mark, gen)
  local want = math.min(units, left)
  if want <= 0 or generation(i, nil) ~= gen then return 0, 0, mark end
  local r = adjust(i, base, -want, mark, left)
  if r[3] == 1 then return nil end
  return r[1], r[5] or math.max(-r[1], 0), r[4] or mark
end

-- A refund of the anchor named by `anchor` ({ rsv, take, keyhash }): the units moved, or nil
-- when the anchor is unknown (nothing moved).
local function refund_anchor(i, base, adjust, units, anchor, ttl)
  local rsv = reservation(anchor.rsv)
  if rsv == 'tombstone' then return nil end
  if rsv then
    if rsv[9] == 1 then return 0 end -- settled: what was used is final
    local moved, spent, mark = give_back(i, base, adjust, units, rsv[5], rsv[6], rsv[7])
    if moved == nil then
      record_del(anchor.rsv)
      return nil
    end
    if spent > 0 then
      rsv[5], rsv[6] = rsv[5] - spent, mark
      record_set(anchor.rsv, record_text(rsv), nil, ttl)
    end
    return moved
  end
  local take = take_record(anchor.take)
  if not take then return nil end
  for at = 0, #take - 2, 8 do
    if take[at + 7] == anchor.keyhash then
      local moved, spent, mark =
        give_back(i, base, adjust, units, take[at + 8], take[at + 5], take[at + 6])
      if moved == nil then return nil end
      if spent > 0 then
        take[at + 8], take[at + 5] = take[at + 8] - spent, mark
        -- Its TTL kept: a takeAll's record lives for the longest horizon of its policies.
        redis.call('SET', anchor.take, record_text(take), 'KEEPTTL')
      end
      return moved
    end
  end
  return nil
end

-- The marks of an admitted take with an id (op i), items from KEYS[first] and ARGV[a]: for
-- each, its mark and generation (kept for the record's TTL, as a reserve's), as a
-- reservation records them; 0, 0 for an algorithm without a settle body (not refundable).
local function take_marks(n, first, a, ttl)
  local out = {}
  for j = 1, n do
    local id, base = tonumber(ARGV[a]), a + 1
    local adjust, mark, gen = SETTLE[id], 0, 0
    if adjust then
      mark = math.max(adjust(first + j - 1, base, nil, nil, 0), 0)
      gen = generation(first + j - 1, ttl)
    end
    out[2 * j - 1], out[2 * j] = mark, gen
    a = a + 2 + tonumber(ARGV[a + 1])
  end
  return out
end

-- The units admissible now on item i, as a peek reports them (a blocked scope: 0).
local function left_now(i, id, base)
  local ok, r = decide(i, id, base, true, false)
  if not ok then error(r) end
  if r[2] < 0 then return 0 end
  return r[2]
end

-- A reserve whose id was cancelled first (a tombstone): refused, nothing taken; the state
-- as a peek reports it.
local function cancelled(i, id, base)
  local ok, r = decide(i, id, base, true, false)
  if not ok then error(r) end
  return { 0, math.max(r[2], 0), r[3], 0 }
end

-- One priced request; returns its item's four slots and its record's reply (0 decided now,
-- 1 replayed, 2 the id was another request's: nothing done).
local function priced_request(op, i, id, base, units, record, ttl, ask, anchor)
  local adjust = SETTLE[id]
  if adjust == nil then
    error({ err = 'ERR reserve, settle, refund and charge do not support this algorithm' })
  end
  if op == 'k' then
    local rec = reservation(record)
    if rec == 'tombstone' then return cancelled(i, id, base), 1 end
    if rec then
      if rec[8] ~= tonumber(ask) then return { 0, 0, 0, 0 }, 2 end
      return { rec[1], rec[2], rec[3], rec[4] }, 1
    end
    local ok, r = decide(i, id, base, false, false)
    if not ok then error(r) end
    if r[1] == 1 then
      -- Only an admission is recorded: a refusal consumed nothing (its repeat is decided
      -- afresh), and records at the rate of refusals would grow Redis for a horizon.
      local mark = adjust(i, base, nil, nil, units)
      local gen = generation(i, ttl)
      record_set(record, record_text({ r[1], r[2], r[3], r[4], units, mark, gen, ask, 0 }), ttl)
    end
    return r, 0
  end
  if op == 's' then
    local rec = reservation(record)
    if rec == nil and units == 0 then
      -- A cancel before its reserve (one whose reply timed out may arrive later): a
      -- tombstone, so that reserve is refused and takes nothing. A settle of more than 0
      -- leaves none: its reserve, if it comes, stays consumed (never under-counted).
      record_set(record, TOMBSTONE, ttl)
    end
    if rec == nil or rec == 'tombstone' then return { 0, 0, left_now(i, id, base), 0 }, 0 end
    if rec[9] == 1 then return { 1, rec[10], left_now(i, id, base), 0 }, 1 end
    -- Of another generation (a reset since): nothing moves; the settle body still checks
    -- the record (a delta of 0 moves nothing).
    local delta = 0
    if generation(i, nil) == rec[7] then delta = units - rec[5] end
    local r = adjust(i, base, delta, rec[6], rec[5])
    if r[3] == 1 then
      -- A mark or cost this state could not have given: untrusted, as none.
      record_del(record)
      if units == 0 then record_set(record, TOMBSTONE, ttl) end
      return { 0, 0, left_now(i, id, base), 0 }, 0
    end
    local left = left_now(i, id, base)
    rec[9], rec[10], rec[11] = 1, r[1], left
    record_set(record, record_text(rec), nil, ttl)
    return { 1, r[1], left, 0 }, 0
  end
  if record then
    local rec = record_numbers(record)
    if rec and #rec == 3 and rec[2] >= 0 and rec[3] >= 0 then
      if rec[3] ~= tonumber(ask) then return { 0, 0, 0, 0 }, 2 end
      return { 1, rec[1], left_now(i, id, base), 0 }, 1
    end
    if rec then record_del(record) end
  end
  local applied
  if op == 'f' then
    applied = refund_anchor(i, base, adjust, units, anchor, ttl)
    -- An unknown anchor: nothing moved, nothing recorded (a retry is decided afresh).
    if applied == nil then return { 0, 0, left_now(i, id, base), 0 }, 0 end
  else
    applied = adjust(i, base, units, nil, units)[1]
  end
  local left = left_now(i, id, base)
  if record then record_set(record, record_text({ applied, left, ask }), ttl) end
  return { 1, applied, left, 0 }, 0
end

-- The slots of a reserve-all of m scopes (item j at KEYS[first + 2j - 2], its record next)
-- and its records' reply (as priced_request's).
local function reserve_all_request(m, first, ids, bases, units, records, ttls, ask)
  local slots, recs, any, tomb = {}, {}, false, false
  for j = 1, m do
    if SETTLE[ids[j]] == nil then
      error({ err = 'ERR reserve, settle, refund and charge do not support this algorithm' })
    end
  end
  for j = 1, m do
    local rec = reservation(records[j])
    recs[j] = rec
    if rec == 'tombstone' then
      tomb = true
    elseif rec then
      any = true
      if rec[8] ~= tonumber(ask) then
        for l = 1, m do slots[l] = { 0, 0, 0, 0 } end
        return slots, 2
      end
    end
  end
  if tomb then
    -- Cancelled before it arrived (see op s): refused, nothing taken, nothing written.
    for j = 1, m do slots[j] = cancelled(first + 2 * j - 2, ids[j], bases[j]) end
    return slots, 1
  end
  if any then
    for j = 1, m do
      local rec = recs[j]
      slots[j] = rec and { rec[1], rec[2], rec[3], rec[4] } or { 0, 0, 0, 0 }
    end
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
    local i, r = first + 2 * j - 2, dry[j]
    if all then
      local ok
      ok, r = decide(i, ids[j], bases[j], false, false, nil, r)
      if not ok then error(r) end
      local mark = SETTLE[ids[j]](i, bases[j], nil, nil, units[j])
      local gen = generation(i, ttls[j])
      record_set(
        records[j],
        record_text({ r[1], r[2], r[3], r[4], units[j], mark, gen, ask, 0 }),
        ttls[j]
      )
    else
      -- Refused: nothing consumed and nothing recorded (a repeat is decided afresh).
      local ok, probed = decide(i, ids[j], bases[j], false, true)
      if not ok then probed = { 0, 0, 0, 0 } end
      if r[1] == 1 then
        r = { 0, probed[2], probed[3], 0 }
      else
        r = refused_block(i, bases[j], r)
        r = { 0, r[2], r[3], r[4] }
      end
    end
    slots[j] = r
  end
  return slots, 0
end

-- Runs the reserve-all of n items (n / 2 pairs) from KEYS[first], ARGV[a]; returns the cursor.
-- Every record item carries the call's TTL and ask.
local function reserve_all(n, first, a)
  local ids, bases, units, records, ttls, ask = {}, {}, {}, {}, {}, nil
  local m = n / 2
  for j = 1, m do
    ids[j], bases[j] = tonumber(ARGV[a]), a + 1
    local argc = tonumber(ARGV[a + 1])
    units[j] = tonumber(ARGV[a + 1 + argc])
    a = a + 2 + argc
    records[j], ttls[j], ask = KEYS[first + 2 * j - 1], ARGV[a + 2], ARGV[a + 3]
    a = a + 2 + tonumber(ARGV[a + 1])
  end
  local ok, slots, replayed =
    pcall(reserve_all_request, m, first, ids, bases, units, records, ttls, ask)
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
-- cursor after it. A record item carries its TTL and, but for a settle, the request's ask.
local function priced(op, n, first, a)
  if op == 'm' then return reserve_all(n, first, a) end
  local id, base = tonumber(ARGV[a]), a + 1
  local argc = tonumber(ARGV[base])
  local units = tonumber(ARGV[base + argc])
  local after = a + 2 + argc
  local record, ttl, ask, anchor
  if n >= 2 then
    record, ttl, ask = KEYS[first + 1], ARGV[after + 2], ARGV[after + 3]
    after = after + 2 + tonumber(ARGV[after + 1])
  end
  if n == 4 then
    -- A refund's anchor: its reservation record (TTL), then its take record (TTL, keyhash).
    after = after + 2 + tonumber(ARGV[after + 1])
    anchor = { rsv = KEYS[first + 2], take = KEYS[first + 3], keyhash = tonumber(ARGV[after + 3]) }
    after = after + 2 + tonumber(ARGV[after + 1])
  end
  local ok, r, replayed =
    pcall(priced_request, op, first, id, base, units, record, ttl, ask, anchor)
  if ok then
    emit(r[1], r[2], r[3], r[4])
    if record then emit(replayed, 0, 0, 0) end
    for _ = 3, n do emit(0, 0, 0, 0) end
  else
    failed(n, r)
  end
  return after
end
