/**
 * The fast decision path against a real Redis: coalesced batches decide exactly as single
 * calls would, isolate a failing item, and the local denial cache answers only what is
 * certain.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { createClient } from 'redis';
import type { Decision, Policy, Scope } from 'sluice';
import {
  fixedWindow,
  gcra,
  RateLimiter,
  StoreError,
  slidingWindowCounter,
  slidingWindowLog,
  tokenBucket,
} from 'sluice';
import { commandCalls, keyFor, randomTenant, TEST_TIMEOUT_MS, useRedis } from '../helpers/redis.js';

const redis = useRedis();
const route = 'POST/orders';

async function scriptCalls(): Promise<number> {
  const admin = await redis.admin();
  return (await commandCalls(admin, 'evalsha')) + (await commandCalls(admin, 'eval'));
}

describe('coalescing', () => {
  it('3 connections × 400 concurrent takes, limit 137 → exactly 137, remaining 136…0 once each, in few script calls', async () => {
    const limiters = await Promise.all(
      [0, 1, 2].map(
        // A deadline far above a cold burst's latency on a loaded machine: exactness and the
        // batching are under test here, not the time.
        async () =>
          new RateLimiter({ client: await redis.client(), denialCache: false, timeoutMs: 5000 }),
      ),
    );
    const tenant = randomTenant();
    const policy = fixedWindow({ limit: 137, windowMs: 60_000 });
    // Load the batch script first, so that NOSCRIPT retries do not count below.
    await Promise.all(
      [1, 2].map(() =>
        (limiters[0] as RateLimiter).take({ tenant: randomTenant(), route }, policy),
      ),
    );
    const before = await scriptCalls();
    const decisions = await Promise.all(
      Array.from({ length: 1200 }, (_, i) =>
        (limiters[i % 3] as RateLimiter).take({ tenant, route }, policy),
      ),
    );
    const calls = (await scriptCalls()) - before;
    const admitted = decisions.filter((d) => d.allowed);
    assert.equal(admitted.length, 137);
    assert.deepEqual(
      admitted.map((d) => d.remaining).sort((a, b) => a - b),
      Array.from({ length: 137 }, (_, i) => i),
    );
    // Each connection's burst goes in batches of a growing share of what it has in flight
    // (test/unit/coalescer.test.ts), at most 128 each: a short ramp, not one call per take.
    assert.ok(calls >= 3 * Math.ceil(400 / 128), `${calls} script calls for 1200 takes`);
    assert.ok(calls <= 3 * 16, `${calls} script calls for 1200 takes`);
  });

  it("on the application's own node-redis client (scriptConnection: false), a turn's takes go as full batches only", async () => {
    // node-redis writes a turn's commands together (in a setImmediate): batches sent early in
    // the turn would reach Redis no sooner, only as more script calls.
    const client = createClient({ url: redis.server.url, disableOfflineQueue: true });
    await client.connect();
    try {
      const limiter = new RateLimiter({
        timeoutMs: TEST_TIMEOUT_MS,
        client,
        denialCache: false,
        scriptConnection: false,
      });
      const policy = fixedWindow({ limit: 1000, windowMs: 60_000 });
      await Promise.all([1, 2].map(() => limiter.take({ tenant: randomTenant(), route }, policy)));
      const before = await scriptCalls();
      const decisions = await Promise.all(
        Array.from({ length: 300 }, () => limiter.take({ tenant: randomTenant(), route }, policy)),
      );
      assert.ok(decisions.every((d) => d.allowed));
      assert.equal((await scriptCalls()) - before, Math.ceil(300 / 128));
    } finally {
      await client.close();
    }
  });

  // Interleaved, every take is its own batch entry; in runs (one policy and cost four takes
  // in a row), the takes of a run share one entry of the wire format (`u`, batch-wire.ts).
  for (const [order, at] of [
    ['interleaved', (i: number) => i],
    ['in runs of four', (i: number) => Math.floor(i / 4)],
  ] as const) {
    it(`mixed policies, versions and costs in one batch (${order}) decide as the same takes one by one`, async () => {
      const batched = new RateLimiter({
        timeoutMs: TEST_TIMEOUT_MS,
        client: await redis.client(),
        denialCache: false,
      });
      const single = new RateLimiter({
        timeoutMs: TEST_TIMEOUT_MS,
        client: await redis.client(),
        maxBatchSize: 1,
        denialCache: false,
      });
      const policies = [
        fixedWindow({ limit: 3, windowMs: 60_000 }),
        fixedWindow({ limit: 5, windowMs: 60_000, version: 2 }),
        fixedWindow({ limit: 1, windowMs: 30_000, version: 'x' }),
        tokenBucket({ capacity: 4, refillTokens: 1, refillIntervalMs: 60_000 }),
        slidingWindowLog({ limit: 4, windowMs: 60_000 }),
        slidingWindowCounter({ limit: 4, windowMs: 600_000 }),
        gcra({ limit: 4, periodMs: 60_000 }),
      ];
      const plan = Array.from({ length: 140 }, (_, i) => ({
        tenant: `mix-${i % 4}`,
        policy: policies[at(i) % policies.length] as (typeof policies)[number],
        cost: 1 + (at(i) % 2),
      }));
      const saltA = randomTenant();
      const saltB = randomTenant();
      const started = performance.now();
      const a = await Promise.all(
        plan.map((p) =>
          batched.take({ tenant: saltA + p.tenant, route }, p.policy, { cost: p.cost }),
        ),
      );
      const b: Decision[] = [];
      for (const p of plan)
        b.push(await single.take({ tenant: saltB + p.tenant, route }, p.policy, { cost: p.cost }));
      const shape = (d: Decision) => [
        d.allowed,
        d.remaining,
        d.limit,
        d.retryAfterMs === Number.POSITIVE_INFINITY,
      ];
      assert.deepEqual(a.map(shape), b.map(shape));
      // The times are read on Redis's real clock (the fixed window's TTL, the others' TIME),
      // and both runs move on it: a's and b's decision on item i are at most the two runs'
      // span apart (+1 ms for each side's rounding).
      const slack = Math.ceil(performance.now() - started) + 2;
      const near = (x: number, y: number) =>
        Number.isFinite(x) || Number.isFinite(y) ? Math.abs(x - y) <= slack : x === y;
      a.forEach((x, i) => {
        const y = b[i] as Decision;
        const what = `item ${i} (${plan[i]?.policy.algorithm}, cost ${plan[i]?.cost}): batched ${JSON.stringify(x)} vs one by one ${JSON.stringify(y)}, slack ${slack} ms`;
        assert.ok(near(x.resetMs, y.resetMs), `resetMs of ${what}`);
        if (x.allowed) assert.equal(x.retryAfterMs, y.retryAfterMs, `retryAfterMs of ${what}`);
        else
          assert.ok(
            x.retryAfterMs > 0 && near(x.retryAfterMs, y.retryAfterMs),
            `retryAfterMs of ${what}`,
          );
      });
    });
  }

  it('one failing item (a key of the wrong type) fails alone, also in the middle of a run; its batch neighbours are decided', async () => {
    const limiter = new RateLimiter({
      timeoutMs: TEST_TIMEOUT_MS,
      client: await redis.client(),
      denialCache: false,
    });
    const admin = await redis.admin();
    const policy = fixedWindow({ limit: 10, windowMs: 60_000 });
    const bad = randomTenant();
    await admin.client.hSet(keyFor(policy, bad, route), 'x', '1');
    const alsoBad = randomTenant();
    await admin.client.sAdd(keyFor(policy, alsoBad, route), 'x');
    const results = await Promise.allSettled([
      limiter.take({ tenant: randomTenant(), route }, policy),
      limiter.take({ tenant: bad, route }, policy),
      limiter.take({ tenant: randomTenant(), route }, policy),
      limiter.take({ tenant: alsoBad, route }, policy, { cost: 11 }), // fits no window, still an error
      limiter.take({ tenant: alsoBad, route }, policy),
    ]);
    assert.deepEqual(
      results.map((r) => r.status),
      ['fulfilled', 'rejected', 'fulfilled', 'rejected', 'rejected'],
    );
    for (const i of [1, 3, 4]) {
      const reason = (results[i] as PromiseRejectedResult).reason;
      assert.ok(reason instanceof StoreError && reason.redisCode === 'WRONGTYPE', String(reason));
    }
    assert.equal((results[2] as PromiseFulfilledResult<{ remaining: number }>).value.remaining, 9);
  });

  it('more takes than maxBatchSize are split into several batches, all decided', async () => {
    const limiter = new RateLimiter({
      timeoutMs: TEST_TIMEOUT_MS,
      client: await redis.client(),
      maxBatchSize: 7,
      denialCache: false,
    });
    const policy = fixedWindow({ limit: 1000, windowMs: 60_000 });
    const tenant = randomTenant();
    const before = await scriptCalls();
    const decisions = await Promise.all(
      Array.from({ length: 50 }, () => limiter.take({ tenant, route }, policy)),
    );
    assert.equal(decisions.filter((d) => d.allowed).length, 50);
    // At most 7 per call (the sizes themselves: test/unit/coalescer.test.ts).
    const calls = (await scriptCalls()) - before;
    assert.ok(calls >= Math.ceil(50 / 7) && calls <= 50 / 4, `${calls} script calls`);
  });
});

/**
 * Brings a scope whose quota is used up into the local denial cache: a denial from Redis
 * makes the limiter read the reset epoch; once read, the next denial is cached under it.
 */
async function primeCache(limiter: RateLimiter, scope: Scope, policy: Policy): Promise<void> {
  for (let i = 0; i < 2; i++) {
    assert.equal((await limiter.take(scope, policy)).allowed, false);
    await sleep(25);
  }
}

describe('local denial cache', () => {
  it('a full window is answered locally until it ends, then Redis admits again', async () => {
    const limiter = new RateLimiter({ timeoutMs: TEST_TIMEOUT_MS, client: await redis.client() });
    const policy = fixedWindow({ limit: 3, windowMs: 800 });
    const scope = { tenant: randomTenant(), route };
    for (let i = 0; i < 3; i++) assert.equal((await limiter.take(scope, policy)).allowed, true);
    await primeCache(limiter, scope, policy);
    const stats = limiter.stats();
    const before = await scriptCalls();
    const denied = await Promise.all(
      Array.from({ length: 200 }, () => limiter.take(scope, policy)),
    );
    assert.ok(
      denied.every(
        (d) => !d.allowed && d.remaining === 0 && d.retryAfterMs > 0 && d.retryAfterMs <= 801,
      ),
    );
    assert.equal((await scriptCalls()) - before, 0, 'no Redis call for cached denials');
    assert.equal(limiter.stats().cachedDenials - stats.cachedDenials, 200);
    assert.equal(limiter.stats().limited - stats.limited, 200);
    const wait = Math.max(...denied.map((d) => d.retryAfterMs));
    await sleep(wait + 5);
    assert.equal((await limiter.take(scope, policy)).allowed, true);
  });

  it('case C06 with the cache: a cost above the limit on a full window still says "never fits"', async () => {
    const limiter = new RateLimiter({ timeoutMs: TEST_TIMEOUT_MS, client: await redis.client() });
    const policy = fixedWindow({ limit: 2, windowMs: 60_000 });
    const scope = { tenant: randomTenant(), route };
    await limiter.take(scope, policy, { cost: 2 });
    await primeCache(limiter, scope, policy);
    const before = limiter.stats().cachedDenials;
    const cached = await limiter.take(scope, policy, { cost: 3 });
    assert.deepEqual([cached.allowed, cached.remaining, cached.retryAfterMs], [false, 0, Infinity]);
    assert.equal(limiter.stats().cachedDenials - before, 1);
    const one = await limiter.take(scope, policy);
    assert.ok(one.retryAfterMs > 59_000 && one.retryAfterMs <= 60_001);
  });

  it('a denial that does not cover every cost is not cached (remaining > 0)', async () => {
    const limiter = new RateLimiter({ timeoutMs: TEST_TIMEOUT_MS, client: await redis.client() });
    const policy = fixedWindow({ limit: 10, windowMs: 60_000 });
    const scope = { tenant: randomTenant(), route };
    await limiter.take(scope, policy, { cost: 8 });
    assert.equal((await limiter.take(scope, policy, { cost: 5 })).allowed, false);
    const small = await limiter.take(scope, policy, { cost: 2 });
    assert.deepEqual([small.allowed, small.remaining], [true, 0]);
    assert.equal(limiter.stats().cachedDenials, 0);
  });

  it('two policies on one scope share neither state nor a cached denial', async () => {
    const limiter = new RateLimiter({ timeoutMs: TEST_TIMEOUT_MS, client: await redis.client() });
    const scope = { tenant: randomTenant(), route };
    const low = fixedWindow({ limit: 1, windowMs: 60_000 });
    const high = fixedWindow({ limit: 5, windowMs: 60_000 });
    await limiter.take(scope, low);
    await primeCache(limiter, scope, low);
    assert.equal((await limiter.take(scope, low)).allowed, false);
    const d = await limiter.take(scope, high);
    assert.deepEqual([d.allowed, d.remaining], [true, 4]);
  });

  it('denialCache: false sends every take to Redis', async () => {
    const limiter = new RateLimiter({
      timeoutMs: TEST_TIMEOUT_MS,
      client: await redis.client(),
      denialCache: false,
    });
    const policy = fixedWindow({ limit: 1, windowMs: 60_000 });
    const scope = { tenant: randomTenant(), route };
    await limiter.take(scope, policy);
    const before = await scriptCalls();
    for (let i = 0; i < 5; i++) await limiter.take(scope, policy);
    assert.equal((await scriptCalls()) - before, 5);
    assert.equal(limiter.stats().cachedDenials, 0);
  });
});
