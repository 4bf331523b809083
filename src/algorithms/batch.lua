-- Batch: many decisions in one script call, applied in order, each isolated from the others.
--
-- The decision path coalesces the takes issued in the same event-loop turn into one call of
-- this script. Each item runs the very same algorithm body as the single-decision script
-- (the bodies are inserted below as functions of KEYS and ARGV when the script is built, see
-- batch.ts), so a batch of N items decides exactly as N separate calls in that order would.
-- One item's error (say, a key of the wrong type) is caught and reported for that item only.
--
-- KEYS[i]  the key of item i
-- ARGV     for each item i, in order: algorithm id, n (argument count), then its n arguments
--
-- Returns one entry per item: the algorithm's reply { allowed, remaining, resetMs,
-- retryAfterMs }, or { -1, message } when the item failed.

local ALGORITHMS = {}
--[[ALGORITHMS]]--

local replies = {}
local a = 1
for i = 1, #KEYS do
  local id = tonumber(ARGV[a])
  local n = tonumber(ARGV[a + 1])
  local args = {}
  for j = 1, n do args[j] = ARGV[a + 1 + j] end
  a = a + 2 + n
  local algorithm = ALGORITHMS[id]
  if algorithm == nil then
    replies[i] = { -1, 'ERR unknown algorithm id ' .. tostring(id) }
  else
    local ok, reply = pcall(algorithm, { KEYS[i] }, args)
    if ok then
      replies[i] = reply
    elseif type(reply) == 'table' and reply.err then
      replies[i] = { -1, reply.err }
    else
      replies[i] = { -1, tostring(reply) }
    end
  end
end
return replies
