-- Prefetch of the batch script (inserted into batch.lua after priced.lua; see
-- limiter/prefetch.ts and docs/prefetch.md): a replica takes a grant of a hot scope's quota
-- in one call, admits from it locally, and gives back what it did not use.
--   w  grant: a take of 1 (the policy's own ARGV, cost 1), then, when admitted, up to `units`
--      more (the scope item's last argument), at most an eighth of what is left after the
--      take (rounded down: the last 8 units of a window are decided one take at a time).
--      The extra units are consumed in the same call (the settle body's charge, within the
--      limit), so the fleet never admits more than the limit. Two items: the scope, replied
--      { allowed, remaining (after the grant), resetMs, granted (extra units; retryAfterMs
--      when refused) }, then a marker of the same key, replied { mark, 0, 0, 0 }: the
--      window the grant came from (see the SETTLE body; 0 when refused).
--   y  give back: `units` (the scope item's second-to-last argument) into the window `mark`
--      (its last), only if that window is still the current one (else nothing: the units
--      ended with their window). Replied { 1, applied (signed), remaining, 0 }.

local function prefetch_request(op, i, id, base, argc)
  local adjust = SETTLE[id]
  if adjust == nil then
    error({ err = 'ERR prefetch does not support this algorithm' })
  end
  if op == 'w' then
    local units = tonumber(ARGV[base + argc])
    local ok, r = decide(i, id, base, false, false)
    if not ok then error(r) end
    if r[1] ~= 1 then return r, 0 end
    local want = math.min(units, math.floor(r[2] / 8))
    local granted, left = 0, r[2]
    if want > 0 then
      local g = adjust(i, base, want, nil, want)
      granted, left = g[1], g[2]
    end
    return { 1, left, r[3], granted }, adjust(i, base, nil, nil, 0)
  end
  local units = tonumber(ARGV[base + argc - 1])
  local mark = tonumber(ARGV[base + argc])
  local g = adjust(i, base, -units, mark, units)
  return { 1, g[1], g[2], 0 }, nil
end

-- Runs the prefetch request of n items starting at KEYS[first] and ARGV[a]; returns the ARGV
-- cursor after it.
local function prefetch(op, n, first, a)
  local id, base = tonumber(ARGV[a]), a + 1
  local argc = tonumber(ARGV[base])
  local after = a + 2 + argc
  if n == 2 then after = after + 2 + tonumber(ARGV[after + 1]) end
  local ok, r, mark = pcall(prefetch_request, op, first, id, base, argc)
  if ok then
    emit(r[1], r[2], r[3], r[4])
    if n == 2 then emit(mark, 0, 0, 0) end
  else
    failed(n, r)
  end
  return after
end
