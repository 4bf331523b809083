/**
 * rate-limit-redis's `RedisStore` (the Redis store of express-rate-limit) on node-redis v6,
 * driven as express-rate-limit drives it: `init({ windowMs })`, then `increment(key)` and
 * allowed when `totalHits <= limit` (it counts denied hits too).
 */
import type { Options as ExpressRateLimitOptions } from 'express-rate-limit';
import { type RedisReply, RedisStore } from 'rate-limit-redis';
import { createClient } from 'redis';
import type { Contender } from '../types.js';

export const contender: Contender = {
  name: 'rate-limit-redis',
  description: 'RedisStore (express-rate-limit) via sendCommand on node-redis v6 (EVALSHA)',
  async setup(url, { limit, windowMs }) {
    const client = createClient({ url });
    client.on('error', () => {}); // failures surface as rejected calls
    await client.connect();
    const store = new RedisStore({
      sendCommand: (...args: string[]) => client.sendCommand(args) as Promise<RedisReply>,
    });
    // express-rate-limit passes its whole configuration; the store reads only windowMs.
    await store.init({ windowMs } as ExpressRateLimitOptions);
    return {
      take: (key) => store.increment(key).then(({ totalHits }) => totalHits <= limit),
      close: () => client.close(),
    };
  },
};
