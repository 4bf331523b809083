-- Batch: many decisions in one script call, applied in order, each isolated from the others.
--
-- The decision path coalesces the takes issued in the same event-loop turn into one call of
-- this script. Each item runs the very same algorithm body as the single-decision script
-- (the bodies are inserted below as functions of (i, base) when the script is built, see
-- batch.ts), so a batch of N items decides exactly as N separate calls in that order would.
-- One item's error (say, a key of the wrong type) is caught and reported for that item only.
--
-- KEYS[i]  the key of item i
-- ARGV     for each item i, in order: algorithm id, n (argument count), then its n arguments
--
-- Returns one flat array (one RESP array for the whole batch, cheap to decode): for each
-- item i, four integers at 4(i-1)+1 … 4i — the algorithm's reply { allowed, remaining,
-- resetMs, retryAfterMs }, or { -1, k, 0, 0 } when the item failed — followed by the error
-- messages, the k-th failed item's message at 4N + k.

local ALGORITHMS = {}
--[[ALGORITHMS]]--

local out = {}
local errors = {}
local a = 1
local o = 1
for i = 1, #KEYS do
  local algorithm = ALGORITHMS[tonumber(ARGV[a])]
  local base = a + 1 -- ARGV[base] is the argument count; the arguments follow it
  a = base + 1 + tonumber(ARGV[base])
  local ok, reply
  if algorithm == nil then
    ok, reply = false, 'ERR unknown algorithm id ' .. tostring(ARGV[base - 1])
  else
    ok, reply = pcall(algorithm, i, base)
  end
  if ok then
    out[o], out[o + 1], out[o + 2], out[o + 3] = reply[1], reply[2], reply[3], reply[4]
  else
    if type(reply) == 'table' and reply.err then reply = reply.err end
    errors[#errors + 1] = tostring(reply)
    out[o], out[o + 1], out[o + 2], out[o + 3] = -1, #errors, 0, 0
  end
  o = o + 4
end
for k = 1, #errors do out[o + k - 1] = errors[k] end
return out
