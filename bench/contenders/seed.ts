/**
 * The original lab approach sluice grew from: node-redis v6 `eval` with the whole script on
 * every call, a per-call `AbortSignal.timeout(150)`, and a SHA-256 hashed key.
 */
import { createHash } from 'node:crypto';
import { createClient } from 'redis';
import type { Contender } from '../types.js';

const ROUTE = 'GET/bench';

const LUA = `local limit = tonumber(ARGV[1])
local window = tonumber(ARGV[2])
local n = tonumber(redis.call('GET', KEYS[1]) or '0')
if n >= limit then
  local ttl = redis.call('PTTL', KEYS[1])
  if ttl < 0 then redis.call('PEXPIRE', KEYS[1], window); ttl = window end
  return {0, 0, ttl}
end
n = redis.call('INCR', KEYS[1])
local ttl = redis.call('PTTL', KEYS[1])
if ttl < 0 then redis.call('PEXPIRE', KEYS[1], window); ttl = window end
return {1, limit - n, ttl}
`;

export const contender: Contender = {
  name: 'seed',
  description: 'lab seed: node-redis v6 EVAL (full script each call), AbortSignal.timeout(150)',
  async setup(url, { limit, windowMs }) {
    const client = createClient({
      url,
      disableOfflineQueue: true,
      socket: { reconnectStrategy: false },
    });
    client.on('error', () => {}); // failures surface as rejected calls
    await client.connect();
    const args = [String(limit), String(windowMs)];
    return {
      async take(tenant) {
        const hash = createHash('sha256')
          .update(JSON.stringify([tenant, ROUTE]))
          .digest('hex');
        const reply = (await client
          .withCommandOptions({ abortSignal: AbortSignal.timeout(150) })
          .eval(LUA, { keys: [`rate:{${hash}}`], arguments: args })) as number[];
        return reply[0] === 1;
      },
      close: () => client.close(),
    };
  },
};
