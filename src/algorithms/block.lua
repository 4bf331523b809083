-- Blocks (inserted into batch.lua): a policy built with `blockMs` keeps a scope refused for
-- blockMs from a refusal, on every replica, whatever the algorithm would say meanwhile.
--
-- An item of such a policy carries, after its algorithm's ARGV, the marker 'b' and four
-- integers: blockMs, factor, maxMs, withinMs (factor 1, maxMs = blockMs, withinMs 0 without
-- escalation). Its block is one key beside the scope's, KEYS[i] .. ':b' (the same hash tag):
-- a string holding the escalation level n (the blocks so far within the period), with a TTL
-- of what is left of the block plus withinMs. The scope is blocked while that TTL exceeds
-- withinMs; a refusal while the key lives (within withinMs of the last block's end) blocks for
-- blockMs × factor^n, at most maxMs. The key never lives longer than maxMs + withinMs, which
-- the policy's horizon includes.
--
-- A blocked answer: { 0, -1, left, max(left, the algorithm's wait) }: remaining -1 marks it
-- (decoded as remaining 0, blocked), resetMs is what is left of the block; a refused take that
-- starts a block answers the same with its new block. A blocked item runs its algorithm dry
-- only (for its wait): nothing is consumed or written. A refusal whose cost can never fit
-- (wait -1: more than the limit) starts no block.

-- The block parameters of the item whose ARGV count is ARGV[base], or nil.
local function block_of(base)
  local argc = tonumber(ARGV[base])
  for j = 4, argc - 4 do
    if ARGV[base + j] == 'b' then
      return tonumber(ARGV[base + j + 1]), tonumber(ARGV[base + j + 2]),
        tonumber(ARGV[base + j + 3]), tonumber(ARGV[base + j + 4])
    end
  end
  return nil
end

-- The functions below are made by the first blocking item of a call (load_blocks): a batch
-- of a policy without blocks makes none of them.
local start_block, decide_blocked
local function load_blocks()
local function block_pttl(k)
  return redis.call('PTTL', k)
end

local function block_set(k, level, ttl)
  redis.call('SET', k, level, 'PX', ttl)
end

-- Starts (or escalates) the block of item i after the refusal r; returns the answer.
function start_block(i, r, ms, factor, max, within)
  local k = KEYS[i] .. ':b'
  local level = 0
  if block_pttl(k) > 0 then
    level = tonumber(redis.call('GET', k)) or 0
    if level ~= math.floor(level) or level < 0 then level = 0 end
  end
  local length = ms
  for _ = 1, level do
    if length >= max then break end
    length = length * factor
  end
  if length > max then length = max end
  block_set(k, string.format('%d', level + 1), length + within)
  local wait = r[4]
  if wait >= 0 and wait < length then wait = length end
  return { 0, -1, length, wait }
end

-- Decides item i of a blocking policy: blocked, or its algorithm (and a block on a refusal).
function decide_blocked(algorithm, i, base, dry, probe, ms, factor, max, within)
  local left = block_pttl(KEYS[i] .. ':b') - within
  if left > 0 then
    -- The wait is until a take would pass: the block's end, or the algorithm's own wait if
    -- later (decided dry: nothing consumed or written), so obeying it never escalates.
    local r = algorithm(i, base, true, false)
    local wait = left
    if r[1] == 0 and (r[4] < 0 or r[4] > left) then wait = r[4] end
    return { 0, -1, left, wait }
  end
  local r = algorithm(i, base, dry, probe)
  -- A cost that can never fit (wait -1) is refused without a block: waiting cannot help.
  if r[1] == 0 and r[4] >= 0 and not dry and not probe then
    return start_block(i, r, ms, factor, max, within)
  end
  return r
end
end

-- A blocking item of a refused takeAll (r: its dry answer): its block starts now, unless it is
-- blocked already (or its policy has none). Errors leave r as it is.
local function refused_block(i, base, r)
  local ms, factor, max, within = block_of(base)
  if not ms or r[2] == -1 or r[4] < 0 then return r end
  if not start_block then load_blocks() end
  local ok, blocked = pcall(start_block, i, r, ms, factor, max, within)
  if ok then return blocked end
  return r
end
