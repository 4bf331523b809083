/**
 * The conformance suite: one table of scenarios, run for every policy on both stores
 * (Redis and MemoryStore), on real time. A new algorithm joins by adding one row to
 * POLICIES.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { fixedWindow } from '../../src/algorithms/fixed-window.js';
import { gcra } from '../../src/algorithms/gcra.js';
import type { Policy } from '../../src/algorithms/policy.js';
import { slidingWindowCounter } from '../../src/algorithms/sliding-window-counter.js';
import { slidingWindowLog } from '../../src/algorithms/sliding-window-log.js';
import { tokenBucket } from '../../src/algorithms/token-bucket.js';
import { RateLimiter } from '../../src/limiter.js';
import { MemoryStore } from '../../src/stores/memory.js';
import { randomTenant, useRedis } from '../helpers/redis.js';

const redis = useRedis();
const route = 'POST/orders';

/** Every policy as "limit units per window of windowMs, all at once at most". */
const POLICIES: Record<string, (limit: number, windowMs: number) => Policy> = {
  'fixed window': (limit, windowMs) => fixedWindow({ limit, windowMs, version: 'conf' }),
  'sliding window log': (limit, windowMs) => slidingWindowLog({ limit, windowMs, version: 'conf' }),
  'sliding window counter': (limit, windowMs) =>
    slidingWindowCounter({ limit, windowMs, version: 'conf' }),
  'token bucket': (limit, windowMs) =>
    tokenBucket({
      capacity: limit,
      refillTokens: limit,
      refillIntervalMs: windowMs,
      version: 'conf',
    }),
  GCRA: (limit, windowMs) => gcra({ limit, periodMs: windowMs, burst: limit, version: 'conf' }),
};

/** Three limiters sharing one store: three Redis connections, or one MemoryStore. */
const STORES: Record<string, () => Promise<RateLimiter[]>> = {
  redis: () =>
    Promise.all(
      [0, 1, 2].map(
        async () => new RateLimiter({ client: await redis.client(), namespace: 'conf' }),
      ),
    ),
  memory: async () => {
    const store = new MemoryStore();
    return [0, 1, 2].map(() => new RateLimiter({ store, namespace: 'conf' }));
  },
};

for (const [storeName, makeLimiters] of Object.entries(STORES)) {
  for (const [policyName, policyOf] of Object.entries(POLICIES)) {
    describe(`conformance: ${policyName} on ${storeName}`, () => {
      it('30 concurrent takes over 3 limiters, capacity 10 → exactly 10, remaining 9…0 once each', async () => {
        const limiters = await makeLimiters();
        const policy = policyOf(10, 60_000);
        const tenant = randomTenant();
        const decisions = await Promise.all(
          Array.from({ length: 30 }, (_, i) =>
            (limiters[i % 3] as RateLimiter).take({ tenant, route }, policy),
          ),
        );
        const admitted = decisions.filter((d) => d.allowed);
        assert.equal(admitted.length, 10);
        assert.deepEqual(
          admitted.map((d) => d.remaining).sort((a, b) => a - b),
          [0, 1, 2, 3, 4, 5, 6, 7, 8, 9],
        );
        for (const d of decisions) assert.ok(d.remaining >= 0 && d.remaining <= d.limit);
      });

      it('case C05: a rejected weighted take consumes nothing', async () => {
        const [limiter] = (await makeLimiters()) as [RateLimiter];
        const policy = policyOf(10, 600_000);
        const scope = { tenant: randomTenant(), route };
        const a = await limiter.take(scope, policy, { cost: 8 });
        assert.deepEqual([a.allowed, a.remaining], [true, 2]);
        const b = await limiter.take(scope, policy, { cost: 5 });
        assert.deepEqual([b.allowed, b.remaining], [false, 2]);
        assert.ok(b.retryAfterMs > 0 && Number.isFinite(b.retryAfterMs));
        const c = await limiter.take(scope, policy, { cost: 2 });
        assert.deepEqual([c.allowed, c.remaining], [true, 0]);
      });

      it('case C06: a cost above the limit never fits, says so, and changes nothing', async () => {
        const [limiter] = (await makeLimiters()) as [RateLimiter];
        const policy = policyOf(10, 60_000);
        const scope = { tenant: randomTenant(), route };
        const huge = await limiter.take(scope, policy, { cost: 11 });
        assert.deepEqual([huge.allowed, huge.remaining, huge.retryAfterMs], [false, 10, Infinity]);
        const big = await limiter.take(scope, policy, { cost: 1_000_000 });
        assert.deepEqual([big.allowed, big.retryAfterMs], [false, Infinity]);
        const all = await limiter.take(scope, policy, { cost: 10 });
        assert.deepEqual([all.allowed, all.remaining], [true, 0]);
      });

      it('case C07: exhaust, then waiting out retryAfterMs (+5 ms) admits again', async () => {
        const [limiter] = (await makeLimiters()) as [RateLimiter];
        const policy = policyOf(1, 700);
        const scope = { tenant: randomTenant(), route };
        assert.equal((await limiter.take(scope, policy)).allowed, true);
        const denied = await limiter.take(scope, policy);
        assert.equal(denied.allowed, false);
        assert.ok(
          denied.retryAfterMs > 0 && denied.retryAfterMs <= 1401,
          `retryAfterMs ${denied.retryAfterMs}`,
        );
        await sleep(denied.retryAfterMs + 5);
        assert.equal((await limiter.take(scope, policy)).allowed, true);
      });

      it('steady rate: takes at half the rate (spaced 2 × windowMs / limit) are all admitted', async () => {
        const [limiter] = (await makeLimiters()) as [RateLimiter];
        const policy = policyOf(4, 400);
        const scope = { tenant: randomTenant(), route };
        const results: boolean[] = [];
        for (let i = 0; i < 8; i++) {
          results.push((await limiter.take(scope, policy)).allowed);
          await sleep(200);
        }
        assert.deepEqual(results, Array(8).fill(true));
      });
    });
  }
}

describe('conformance: the boundary burst side by side (case C11)', () => {
  it('fixed window admits 2 × limit across its edge; the sliding log never more than limit in a window', async () => {
    const limiter = new RateLimiter({ client: await redis.client(), namespace: 'conf' });
    const afterEdge: Record<string, number> = {};
    for (const name of ['fixed window', 'sliding window log'] as const) {
      const policy = (POLICIES[name] as (l: number, w: number) => Policy)(10, 2000);
      const scope = { tenant: randomTenant(), route };
      const burst = (n: number) =>
        Promise.all(Array.from({ length: n }, () => limiter.take(scope, policy)));
      const first = await limiter.take(scope, policy); // t = 0
      await sleep(1600);
      const late = await burst(9); // t ≈ 1.6 s
      assert.equal(late.filter((d) => d.allowed).length, 9, name);
      await sleep(first.resetMs - 1600 + 50);
      afterEdge[name] = (await burst(10)).filter((d) => d.allowed).length; // t ≈ 2.05 s
    }
    // Fixed window: a new window, 10 more — 19 within ~0.45 s (the documented 2 × limit).
    assert.equal(afterEdge['fixed window'], 10);
    // Sliding log: only the take at t = 0 has left the window, so exactly one more fits.
    assert.equal(afterEdge['sliding window log'], 1);
  });
});

describe('case C04: the application server’s clock never decides', () => {
  it('token bucket 4, refill 2/s: replica B with a clock 10 s behind (then ahead) is denied like A would be', async () => {
    const a = new RateLimiter({ client: await redis.client(), namespace: 'conf' });
    const b = new RateLimiter({ client: await redis.client(), namespace: 'conf' });
    const policy = tokenBucket({
      capacity: 4,
      refillTokens: 2,
      refillIntervalMs: 1000,
      version: 'c04',
    });
    const scope = { tenant: randomTenant(), route };
    const realNow = Date.now;
    try {
      const first = [];
      for (let i = 0; i < 4; i++) first.push((await a.take(scope, policy)).remaining);
      assert.deepEqual(first, [3, 2, 1, 0]);
      for (const skewMs of [-10_000, 10_000]) {
        Date.now = () => realNow() + skewMs;
        const skewed = await b.take(scope, policy);
        Date.now = realNow;
        assert.equal(skewed.allowed, false, `skew ${skewMs} ms`);
        assert.ok(
          skewed.retryAfterMs > 0 && skewed.retryAfterMs <= 500,
          `retryAfterMs ${skewed.retryAfterMs}`,
        );
      }
      const started = realNow();
      const more = await Promise.all([1, 2, 3, 4].map(() => a.take(scope, policy)));
      const elapsedS = (realNow() - started + 60) / 1000;
      assert.ok(more.filter((d) => d.allowed).length <= Math.floor(2 * elapsedS) + 1);
    } finally {
      Date.now = realNow;
    }
  });
});

describe('conformance: every key has a bounded TTL after the run', () => {
  it('PTTL of every key the suite wrote on Redis is positive and at most its window (× 2 for the counter)', async () => {
    const admin = await redis.admin();
    const keys = await admin.keys('conf:*');
    assert.ok(keys.length > 0);
    for (const key of keys) {
      const pttl = await admin.pTTL(key);
      assert.ok(pttl > 0 && pttl <= 1_200_000, `${key} PTTL ${pttl}`);
    }
  });
});
