/**
 * rate-limiter-flexible's `RateLimiterRedis` on ioredis: `consume(key)` resolves when
 * allowed and rejects with a `RateLimiterRes` when limited (its script always INCRBYs).
 */
import { Redis } from 'ioredis';
import { RateLimiterRedis, RateLimiterRes } from 'rate-limiter-flexible';
import type { Contender } from '../types.js';

export const contender: Contender = {
  name: 'rate-limiter-flexible',
  description: 'RateLimiterRedis on ioredis (defineCommand → EVALSHA), points/duration',
  async setup(url, { limit, windowMs }) {
    const client = new Redis(url, { lazyConnect: true, maxRetriesPerRequest: 0 });
    client.on('error', () => {}); // failures surface as rejected calls
    await client.connect();
    const limiter = new RateLimiterRedis({
      storeClient: client,
      keyPrefix: 'rlf',
      points: limit,
      duration: Math.max(1, Math.round(windowMs / 1000)),
    });
    return {
      take: (key) =>
        limiter.consume(key).then(
          () => true,
          (reason: unknown) => {
            if (reason instanceof RateLimiterRes) return false;
            throw reason;
          },
        ),
      async close() {
        await client.quit();
      },
    };
  },
};
