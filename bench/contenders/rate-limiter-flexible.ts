/**
 * rate-limiter-flexible's `RateLimiterRedis` on ioredis: `consume(key)` resolves when
 * allowed and rejects with a `RateLimiterRes` when limited (its script always INCRBYs).
 * `rate-limiter-flexible-3` is the reference of `sluice-takeall3`: three independent
 * limiters (tenant-wide, per route, per user; see stacked.ts) consumed together per request
 * with `Promise.all`, allowed when all three allow — not all or nothing: a limiter that
 * allows counts the request even when another refuses it.
 */
import { Redis } from 'ioredis';
import { RateLimiterRedis, RateLimiterRes } from 'rate-limiter-flexible';
import type { BenchPolicy, Contender } from '../types.js';
import { stackedUser } from './stacked.js';

const ROUTE = 'GET/bench';

async function connect(url: string): Promise<Redis> {
  const client = new Redis(url, { lazyConnect: true, maxRetriesPerRequest: 0 });
  client.on('error', () => {}); // failures surface as rejected calls
  await client.connect();
  return client;
}

function limiterOf(client: Redis, keyPrefix: string, { limit, windowMs }: BenchPolicy) {
  const limiter = new RateLimiterRedis({
    storeClient: client,
    keyPrefix,
    points: limit,
    duration: Math.max(1, Math.round(windowMs / 1000)),
  });
  return (key: string) =>
    limiter.consume(key).then(
      () => true,
      (reason: unknown) => {
        if (reason instanceof RateLimiterRes) return false;
        throw reason;
      },
    );
}

export const contender: Contender = {
  name: 'rate-limiter-flexible',
  description: 'RateLimiterRedis on ioredis (defineCommand → EVALSHA), points/duration',
  async setup(url, policy) {
    const client = await connect(url);
    const consume = limiterOf(client, 'rlf', policy);
    return {
      take: consume,
      async close() {
        await client.quit();
      },
    };
  },
};

export const stackedContender: Contender = {
  name: 'rate-limiter-flexible-3',
  description:
    'three RateLimiterRedis (tenant, route, route + user) consumed together per request (Promise.all; not all-or-nothing)',
  async setup(url, policy) {
    const client = await connect(url);
    const tenantWide = limiterOf(client, 'rlf-tenant', policy);
    const perRoute = limiterOf(client, 'rlf-route', policy);
    const perUser = limiterOf(client, 'rlf-user', policy);
    return {
      take: (tenant) =>
        Promise.all([
          tenantWide(tenant),
          perRoute(`${tenant}:${ROUTE}`),
          perUser(`${tenant}:${ROUTE}:${stackedUser()}`),
        ]).then((all) => all.every(Boolean)),
      async close() {
        await client.quit();
      },
    };
  },
};
