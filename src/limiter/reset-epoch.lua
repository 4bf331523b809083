-- The reset epoch of one namespace: a random token that `reset` replaces, so that every
-- limiter sharing the Redis learns that some scope was reset and drops its local denial
-- cache (see reset-epoch.ts).
--
-- KEYS[1]  the epoch key (a string)
-- ARGV[1]  '' to read the epoch; else a new token to store
-- ARGV[2]  the key's TTL in ms when storing
--
-- Returns the token now stored ('' when none).

if ARGV[1] ~= '' then
  redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
  return ARGV[1]
end
return redis.call('GET', KEYS[1]) or ''
