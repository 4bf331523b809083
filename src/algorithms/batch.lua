-- Batch: many requests in one script call, applied in order, each isolated from the others.
--
-- The decision path coalesces the requests issued in the same event-loop turn into one call
-- of this script. Each item runs the very same algorithm body as the single-decision script
-- (the bodies are inserted below as functions of (i, base, dry, probe, known) when the script is
-- built, see batch.ts), so a batch decides exactly as the same requests one by one in that
-- order would. One request's error (say, a key of the wrong type) is caught and reported for
-- that request only.
--
-- A request is a group of items with an operation:
--   t  take: all or nothing. One item is decided as a lone take. Several (takeAll) are first
--      decided dry (nothing written); only when every item is admitted are they all taken,
--      else nothing is consumed and each item reports the state as it is (an item that would
--      have fitted reports retryAfterMs 0). A refused takeAll still repairs what a denied take
--      repairs (a TTL to heal, foreign state to clear): each item is then run as a probe — a
--      take whose cost can never fit, which writes nothing else.
--   p  peek: every item decided dry; nothing is written.
--   r  reset: UNLINK of the item's key (its reply: 1 when the key existed, else 0; a large
--      value is freed off Redis's main thread).
--   i  a take with an id (retry-safe): a take (t) of every item but the last; the last item is
--      the id's record (batch id 0; its arguments: its TTL in ms, the policies' horizon, the
--      request's ask, a digest of its items' keys and costs, then per item its key's digest
--      and cost, recorded with the item's mark and generation for a refund of it, see
--      settle/priced.lua). When the record holds the
--      request's slots, they are replayed as recorded and nothing is taken; when it holds
--      another request's (another ask), nothing is done; else the take is decided and, if
--      admitted, its slots recorded, in this same call (a refusal is not recorded). The
--      record's own reply: { 1 when replayed, 2 when the id was another request's, else 0,
--      0, 0, 0 }.
--   u  a run of n lone takes (t, one item each) of one algorithm with the same arguments (one
--      policy, one cost), its n keys in KEYS and its algorithm id, argument count and
--      arguments in ARGV once: each take decided, failed and answered as a request of its own.
--   k, s, f, g, m  reserve, settle, refund, charge, reserve all (see settle/priced.lua).
--   w, y  prefetch grant and give-back (see settle/prefetch.lua, inserted below).
--
-- KEYS     every item's key, in order
-- ARGV     for each request: op, n (its item count), then for each item: algorithm id (0 for
--          a reset), argument count, then the arguments (a run, u: once for its n items)
--
-- Returns one flat array (one RESP array for the whole batch, cheap to decode): for each
-- item, four integers — the algorithm's reply { allowed, remaining, resetMs, retryAfterMs },
-- or { -1, k, 0, 0 } when its request failed — followed by the error messages, the k-th at
-- 4N + k (N the number of items). A failed request reports its error on every item.

-- A call of this script runs its whole chunk, so every function defined at the top is a
-- closure made on every call (see bench/PROFILE.md, "Nothing gets slower"): an algorithm's
-- function, the block functions and the priced and prefetch operations are made by the first
-- item of a call that needs them, once per call.
local ALGORITHMS = {}
-- ALGORITHMS[id], made on first use (nil for an unknown id).
local function algorithm_of(id)
--[[ALGORITHMS]]--
  return ALGORITHMS[id]
end

local out = {}
local errors = {}
local o = 1

--[[BLOCK]]--

-- argc: the item's argument count (ARGV[base]) when the caller has read it already. known:
-- the item's admitting dry reply earlier in this call, for a takeAll's take pass (an
-- algorithm may spare reading its key again; a blocked item never gets it).
local function decide(i, id, base, dry, probe, argc, known)
  local algorithm = ALGORITHMS[id] or algorithm_of(id)
  if algorithm == nil then return false, 'ERR unknown algorithm id ' .. tostring(id) end
  -- A block's marker and its four integers follow the algorithm's ARGV (at least three): an
  -- item of fewer than eight arguments has none, and a plain take looks no further.
  if (argc or tonumber(ARGV[base])) >= 8 then
    local ms, factor, max, within = block_of(base)
    if ms then
      if not decide_blocked then load_blocks() end
      return pcall(decide_blocked, algorithm, i, base, dry, probe, ms, factor, max, within)
    end
  end
  return pcall(algorithm, i, base, dry, probe, known)
end

local function emit(a, b, c, d)
  out[o], out[o + 1], out[o + 2], out[o + 3] = a, b, c, d
  o = o + 4
end

local function failed(n, reply)
  if type(reply) == 'table' and reply.err then reply = reply.err end
  errors[#errors + 1] = tostring(reply)
  for _ = 1, n do emit(-1, #errors, 0, 0) end
end

-- The recorded slots of a take with an id (op i): a table of 8n integers (each item's four
-- slots, then its mark, generation, key digest and units left to refund) when the record
-- holds an admission of this very request (its last number, `ask`, the digest of what was
-- asked: every item's key and cost, in order), 'mismatch' when it holds an admission of
-- another request under this id, false when there is none. A record of another shape (a
-- hand edit, a key of another type) is untrusted: it is removed and counts as none (decided
-- afresh; so is one without a TTL). Only admissions are recorded (a refusal consumed nothing: its repeat is decided
-- afresh), so every recorded item is { 1, remaining >= 0, resetMs >= 0, 0, … }.
local function recorded(key, n, ask)
  local ok, stored = pcall(redis.call, 'GET', key)
  if ok and not stored then return false end
  local slots = {}
  if ok and redis.call('PTTL', key) < 0 then slots = nil end -- a record always has a TTL
  if slots and ok then
    for v in string.gmatch(stored, '[^,]+') do
      local x = tonumber(v)
      if not x or x ~= math.floor(x) or x < 0 then
        slots = nil
        break
      end
      slots[#slots + 1] = x
    end
  end
  local m = slots and (#slots - 1) / 8
  if slots and m >= 1 and m == math.floor(m) then
    for j = 1, 8 * m, 8 do
      if slots[j] ~= 1 or slots[j + 3] ~= 0 then
        m = nil
        break
      end
    end
    if m and m == n and slots[#slots] == tonumber(ask) then return slots end
    if m then return 'mismatch' end
  end
  redis.call('DEL', key)
  return false
end

-- The priced and prefetch operations (settle/priced.lua, then settle/prefetch.lua), made by
-- the first request of a call that needs them: a batch of plain takes makes none of theirs.
local priced, prefetch, take_marks
local function load_priced()
--[[PRICED]]--
  return priced, prefetch, take_marks
end

local a = 1 -- ARGV cursor
local k = 0 -- KEYS cursor
local argc = #ARGV
while a <= argc do
  local op = ARGV[a]
  local n = tonumber(ARGV[a + 1])
  a = a + 2
  local first = k + 1
  k = k + n

  -- A take with an id: its record is the last item (KEYS[k]; its ARGV after the others').
  local record, ttl, replay, items_at, record_at
  if op == 'i' then
    local r = a
    for _ = 2, n do r = r + 2 + tonumber(ARGV[r + 1]) end
    record, ttl, items_at, record_at = KEYS[k], ARGV[r + 2], a, r
    n, op = n - 1, 't'
    replay = recorded(record, n, ARGV[r + 3])
  end
  local start = o

  -- Ops other than take and peek only: a plain take makes one comparison here.
  local other = op ~= 't' and op ~= 'p'
  if other and (op == 'k' or op == 's' or op == 'f' or op == 'g' or op == 'm') then
    if not priced then priced, prefetch, take_marks = load_priced() end
    a = priced(op, n, first, a)
  elseif other and (op == 'w' or op == 'y') then
    if not prefetch then priced, prefetch, take_marks = load_priced() end
    a = prefetch(op, n, first, a)
  elseif replay then
    for _ = 1, n do a = a + 2 + tonumber(ARGV[a + 1]) end
    if replay == 'mismatch' then
      for _ = 1, n do emit(0, 0, 0, 0) end
    else
      for j = 1, 8 * n, 8 do emit(replay[j], replay[j + 1], replay[j + 2], replay[j + 3]) end
    end
  elseif op == 'u' then
    -- A run of lone takes: the same arguments (ARGV[base] their count) for each of its keys.
    local id, base, count = tonumber(ARGV[a]), a + 1, tonumber(ARGV[a + 1])
    a = a + 2 + count
    for i = first, k do
      local ok, r = decide(i, id, base, false, false, count)
      if ok then emit(r[1], r[2], r[3], r[4]) else failed(1, r) end
    end
  elseif n == 1 then
    -- One item (most requests), read in place. ARGV[base] is its argument count.
    local id, base, count = tonumber(ARGV[a]), a + 1, tonumber(ARGV[a + 1])
    a = a + 2 + count
    if op == 'r' then
      -- Under pcall like every item: a key this node does not serve (a cluster batch) fails
      -- this request alone.
      local ok, r = pcall(redis.call, 'UNLINK', KEYS[first])
      -- The scope's block too, if its policy has one (see block.lua); the reply is the key's.
      if ok then pcall(redis.call, 'UNLINK', KEYS[first] .. ':b') end
      -- A scope with reservations: a new generation (see settle/priced.lua), above every
      -- earlier one, so that no settle or cancel of a reservation taken before reaches the
      -- fresh state.
      local gkey = KEYS[first] .. ':g'
      local gok, old = pcall(redis.call, 'GET', gkey)
      old = gok and old and tonumber(old)
      if ok and old then
        local t = redis.call('TIME')
        local g = tonumber(t[1]) * 1000000 + tonumber(t[2])
        if old >= g then g = old + 1 end
        pcall(redis.call, 'SET', gkey, string.format('%d', g), 'KEEPTTL')
      end
      if ok then emit(r, 0, 0, 0) else failed(1, r) end
    elseif op == 'c' then
      -- A retry id claimed for serving (see serve-claim.ts): the first claim within the TTL.
      local ok, r = pcall(redis.call, 'SET', KEYS[first], '1', 'NX', 'PX', ARGV[base + 1])
      if ok then emit(r and 1 or 0, 0, 0, 0) else failed(1, r) end
    else
      -- A take decides as a lone take; a peek decides dry (nothing written). Every item goes
      -- through decide(): the one place an item is run (the soak test's decision log
      -- instruments it).
      local ok, r = decide(first, id, base, op ~= 't', false, count)
      if ok then emit(r[1], r[2], r[3], r[4]) else failed(1, r) end
    end
  else
    local ids, bases = {}, {}
    for j = 1, n do
      ids[j] = tonumber(ARGV[a])
      bases[j] = a + 1 -- ARGV[base] is the argument count; the arguments follow it
      a = a + 2 + tonumber(ARGV[a + 1])
    end
    -- Every item decided dry first: nothing written yet.
    local replies = {}
    local all = true
    local ok, r
    for j = 1, n do
      ok, r = decide(first + j - 1, ids[j], bases[j], true, false)
      if not ok then break end
      replies[j] = r
      if r[1] ~= 1 then all = false end
    end
    if not ok then
      failed(n, r)
    elseif op == 'p' then
      for j = 1, n do
        r = replies[j]
        emit(r[1], r[2], r[3], r[4])
      end
    elseif all then
      -- Every item fits: take them all, in order (distinct keys: each decides as it did dry).
      local results = {}
      for j = 1, n do
        ok, r = decide(first + j - 1, ids[j], bases[j], false, false, nil, replies[j])
        if not ok then break end
        results[j] = r
      end
      if not ok then
        failed(n, r)
      else
        for j = 1, n do
          r = results[j]
          emit(r[1], r[2], r[3], r[4])
        end
      end
    else
      -- Refused: nothing is consumed. Each item runs as a probe, which repairs what a denial
      -- repairs and nothing else. A blocking item reports its denial; an item that would have
      -- fitted reports the state as it is (the probe's), with retryAfterMs 0.
      for j = 1, n do
        local probed
        ok, probed = decide(first + j - 1, ids[j], bases[j], false, true)
        if not ok then probed = { 0, 0, 0, 0 } end
        r = replies[j]
        if r[1] == 1 then
          emit(0, probed[2], probed[3], 0)
        else
          r = refused_block(first + j - 1, bases[j], r)
          emit(0, r[2], r[3], r[4])
        end
      end
    end
  end
  if record then
    a = a + 2 + tonumber(ARGV[a + 1]) -- the record item: batch id 0, its TTL and ask
    if replay == 'mismatch' then
      emit(2, 0, 0, 0) -- the id was used for another request: nothing done
    elseif replay then
      emit(1, 0, 0, 0)
    else
      local admitted = out[start] ~= -1
      for j = start, o - 1, 4 do
        if out[j] ~= 1 then admitted = false end
      end
      if admitted then
        -- Per item: its slots, then what a refund of it needs (settle/priced.lua, op f): the
        -- mark and generation a reservation records, its key's digest, its cost (the record
        -- item's ARGV after the ask: a digest and a cost per item).
        if not take_marks then priced, prefetch, take_marks = load_priced() end
        local marks = take_marks(n, first, items_at, ttl)
        local text = {}
        for j = 1, n do
          local at = start + 4 * (j - 1)
          for l = at, at + 3 do text[#text + 1] = string.format('%d', out[l]) end
          text[#text + 1] = string.format('%d', marks[2 * j - 1])
          text[#text + 1] = string.format('%d', marks[2 * j])
          text[#text + 1] = ARGV[record_at + 2 + 2 * j]
          text[#text + 1] = ARGV[record_at + 3 + 2 * j]
        end
        text[#text + 1] = ARGV[record_at + 3]
        -- Recorded with the decision; a failed write (OOM) leaves it unrecorded: a retry
        -- is then decided afresh.
        pcall(redis.call, 'SET', record, table.concat(text, ','), 'PX', ttl)
      end
      emit(0, 0, 0, 0)
    end
  end
end
for e = 1, #errors do out[o + e - 1] = errors[e] end
return out
