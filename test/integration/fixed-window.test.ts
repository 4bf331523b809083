/**
 * The fixed-window limiter against a real Redis (S4–S10, S17, S18) and the cases that
 * concern it (C05, C06, C07, C10, C11 — fixed-window parts).
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import type { Decision, Policy } from 'sluice';
import { fixedWindow, MemoryStore, RateLimiter } from 'sluice';
import { commandCalls, keyFor, randomTenant, TEST_TIMEOUT_MS, useRedis } from '../helpers/redis.js';

const redis = useRedis();
const route = 'POST/orders';
const keyOf = (tenant: string, policy: Policy) => keyFor(policy, tenant, route);

async function limiters(count: number) {
  return Promise.all(
    Array.from(
      { length: count },
      async () => new RateLimiter({ timeoutMs: TEST_TIMEOUT_MS, client: await redis.client() }),
    ),
  );
}

describe('fixed window on Redis', () => {
  it('30 concurrent takes over 3 connections, limit 10 → exactly 10; after 1100 ms → allowed', async () => {
    const [a, b, c] = await limiters(3);
    const all = [a, b, c] as RateLimiter[];
    const tenant = randomTenant();
    const policy = fixedWindow({ limit: 10, windowMs: 1000 });
    const decisions = await Promise.all(
      Array.from({ length: 30 }, (_, i) =>
        (all[i % 3] as RateLimiter).take({ tenant, route }, policy),
      ),
    );
    const admitted = decisions.filter((d) => d.allowed);
    assert.equal(admitted.length, 10);
    assert.deepEqual(
      admitted.map((d) => d.remaining).sort((x, y) => x - y),
      [0, 1, 2, 3, 4, 5, 6, 7, 8, 9],
      'each remaining value 9…0 exactly once',
    );
    for (const d of decisions.filter((x) => !x.allowed)) {
      assert.equal(d.remaining, 0);
      assert.ok(d.retryAfterMs > 0 && d.retryAfterMs <= 1001, `retryAfterMs ${d.retryAfterMs}`);
    }
    assert.equal(await (await redis.admin()).client.get(keyOf(tenant, policy)), '10');
    await sleep(1100);
    assert.equal((await (a as RateLimiter).take({ tenant, route }, policy)).allowed, true);
  });

  it('remaining = limit − n at each step; denied takes leave the counter at the limit', async () => {
    // No denial cache: every denial below is decided by the script's denied branch on Redis.
    const limiter = new RateLimiter({
      timeoutMs: TEST_TIMEOUT_MS,
      client: await redis.client(),
      denialCache: false,
    });
    const admin = await redis.admin();
    const tenant = randomTenant();
    const policy = fixedWindow({ limit: 5, windowMs: 60_000 });
    for (let n = 1; n <= 5; n++) {
      const d = await limiter.take({ tenant, route }, policy);
      assert.deepEqual([d.allowed, d.remaining, d.limit, d.retryAfterMs], [true, 5 - n, 5, 0]);
      assert.ok(d.resetMs > 0 && d.resetMs <= 60_000);
    }
    for (let i = 0; i < 5; i++) {
      const before = await commandCalls(admin, 'evalsha');
      const d = await limiter.take({ tenant, route }, policy);
      assert.equal(
        await commandCalls(admin, 'evalsha'),
        before + 1,
        `denied take ${i + 1} ran the script on Redis`,
      );
      assert.deepEqual([d.allowed, d.remaining, d.limit], [false, 0, 5]);
      assert.equal(d.retryAfterMs, d.resetMs + 1);
      assert.equal(await admin.client.get(keyOf(tenant, policy)), '5');
    }
    assert.deepEqual([limiter.stats().limited, limiter.stats().cachedDenials], [5, 0]);
  });

  it('a denial reports retryAfterMs = resetMs + 1, on Redis and on MemoryStore (no denial cache)', async () => {
    // Redis expires a key only once its expiry time has passed: a retry after exactly
    // resetMs would still find the window, so the script reports resetMs + 1.
    const clock = { now: 5_000_000 };
    const byStore = {
      Redis: new RateLimiter({
        timeoutMs: TEST_TIMEOUT_MS,
        client: await redis.client(),
        denialCache: false,
      }),
      MemoryStore: new RateLimiter({
        store: new MemoryStore({ clock: () => clock.now }),
        denialCache: false,
      }),
    };
    const policy = fixedWindow({ limit: 3, windowMs: 60_000 });
    for (const [store, limiter] of Object.entries(byStore)) {
      const scope = { tenant: randomTenant(), route };
      assert.equal((await limiter.take(scope, policy, { cost: 2 })).allowed, true);
      clock.now += 250;
      const denials: Decision[] = [];
      denials.push(await limiter.take(scope, policy, { cost: 2 })); // 1 left: does not fit
      assert.equal((await limiter.take(scope, policy)).allowed, true);
      denials.push(await limiter.take(scope, policy)); // the window is full
      // Coalesced into one batch script call: the batch runs the same body.
      denials.push(
        ...(await Promise.all([limiter.take(scope, policy), limiter.take(scope, policy)])),
      );
      assert.deepEqual(
        denials.map((d) => [d.allowed, d.remaining]),
        [
          [false, 1],
          [false, 0],
          [false, 0],
          [false, 0],
        ],
        store,
      );
      for (const d of denials) {
        assert.ok(d.resetMs > 0 && d.resetMs <= 60_000, `${store}: resetMs ${d.resetMs}`);
        assert.equal(d.retryAfterMs, d.resetMs + 1, `${store}: retryAfterMs vs resetMs`);
        if (store === 'MemoryStore') assert.equal(d.resetMs, 59_750, 'MemoryStore: exact');
      }
      assert.equal(limiter.stats().cachedDenials, 0);
    }
  });

  it('the window is anchored at the first hit: later takes never extend the TTL', async () => {
    const [limiter] = (await limiters(1)) as [RateLimiter];
    const admin = await redis.admin();
    const tenant = randomTenant();
    const policy = fixedWindow({ limit: 100, windowMs: 5000 });
    await limiter.take({ tenant, route }, policy);
    await sleep(300);
    const d = await limiter.take({ tenant, route }, policy);
    const pttl = await admin.client.pTTL(keyOf(tenant, policy));
    assert.ok(pttl <= 4750 && pttl > 0, `PTTL ${pttl} should have kept counting down`);
    assert.ok(d.resetMs <= 4750, `resetMs ${d.resetMs}`);
  });

  it('a key at the limit without a TTL gets one (self-healing) and the quota recovers', async () => {
    const [limiter] = (await limiters(1)) as [RateLimiter];
    const admin = await redis.admin();
    const tenant = randomTenant();
    const policy = fixedWindow({ limit: 3, windowMs: 500 });
    await admin.client.set(keyOf(tenant, policy), '3'); // abnormal: no TTL
    const denied = await limiter.take({ tenant, route }, policy);
    assert.equal(denied.allowed, false);
    const pttl = await admin.client.pTTL(keyOf(tenant, policy));
    assert.ok(pttl > 0 && pttl <= 500, `PTTL ${pttl}`);
    assert.equal(denied.resetMs, 500);
    await sleep(denied.retryAfterMs + 50);
    assert.equal((await limiter.take({ tenant, route }, policy)).allowed, true);
  });

  it('a key below the limit without a TTL gets one on the next admitted take', async () => {
    const [limiter] = (await limiters(1)) as [RateLimiter];
    const admin = await redis.admin();
    const tenant = randomTenant();
    const policy = fixedWindow({ limit: 3, windowMs: 800 });
    await admin.client.set(keyOf(tenant, policy), '1');
    const d = await limiter.take({ tenant, route }, policy);
    assert.deepEqual([d.allowed, d.remaining], [true, 1]);
    const pttl = await admin.client.pTTL(keyOf(tenant, policy));
    assert.ok(pttl > 0 && pttl <= 800, `PTTL ${pttl}`);
  });

  it('every key the limiter writes has a TTL no longer than the window', async () => {
    const [limiter] = (await limiters(1)) as [RateLimiter];
    const admin = await redis.admin();
    const policy = fixedWindow({ limit: 2, windowMs: 2000, version: 'ttl-check' });
    const tenants = Array.from({ length: 20 }, () => randomTenant());
    await Promise.all(
      tenants.flatMap((tenant) => [1, 2, 3].map(() => limiter.take({ tenant, route }, policy))),
    );
    for (const tenant of tenants) {
      const pttl = await admin.client.pTTL(keyOf(tenant, policy));
      assert.ok(pttl > 0 && pttl <= 2000, `PTTL ${pttl}`);
    }
  });

  it('case C05 (fixed window): a rejected weighted take consumes nothing', async () => {
    const [limiter] = (await limiters(1)) as [RateLimiter];
    const admin = await redis.admin();
    const tenant = randomTenant();
    const policy = fixedWindow({ limit: 10, windowMs: 60_000 });
    const scope = { tenant, route };
    const first = await limiter.take(scope, policy, { cost: 8 });
    assert.deepEqual([first.allowed, first.remaining], [true, 2]);
    const greedy = await limiter.take(scope, policy, { cost: 5 });
    assert.deepEqual([greedy.allowed, greedy.remaining], [false, 2]);
    assert.ok(
      greedy.retryAfterMs > 59_000 && greedy.retryAfterMs <= 60_001,
      `retryAfterMs ${greedy.retryAfterMs}`,
    );
    const last = await limiter.take(scope, policy, { cost: 2 });
    assert.deepEqual([last.allowed, last.remaining], [true, 0]);
    assert.equal(await admin.client.get(keyOf(tenant, policy)), '10');

    const fresh = { tenant: randomTenant(), route };
    const huge = await limiter.take(fresh, policy, { cost: 1_000_000 });
    assert.deepEqual([huge.allowed, huge.remaining, huge.retryAfterMs], [false, 10, Infinity]);
    assert.equal(
      await admin.client.exists(keyOf(fresh.tenant, policy)),
      0,
      'nothing written for a denied oversize cost',
    );
    const one = await limiter.take(fresh, policy);
    assert.deepEqual([one.allowed, one.remaining], [true, 9]);
  });

  it('case C06 (fixed window): a cost above the limit is never admitted and says so', async () => {
    const [limiter] = (await limiters(1)) as [RateLimiter];
    const policy = fixedWindow({ limit: 10, windowMs: 60_000 });
    const scope = { tenant: randomTenant(), route };
    assert.deepEqual(pick(await limiter.take(scope, policy, { cost: 5 })), [true, 5, 0]);
    assert.deepEqual(pick(await limiter.take(scope, policy, { cost: 100 })), [false, 5, Infinity]);
    const fresh = { tenant: randomTenant(), route };
    assert.deepEqual(pick(await limiter.take(fresh, policy, { cost: 11 })), [false, 10, Infinity]);
    assert.deepEqual(pick(await limiter.take(fresh, policy, { cost: 10 })), [true, 0, 0]);
  });

  it('case C07 (fixed window): retryAfterMs is exact — waiting it out (+5 ms) admits', async () => {
    const [limiter] = (await limiters(1)) as [RateLimiter];
    const policy = fixedWindow({ limit: 1, windowMs: 1500 });
    const scope = { tenant: randomTenant(), route };
    assert.equal((await limiter.take(scope, policy)).allowed, true);
    const denied = await limiter.take(scope, policy);
    assert.equal(denied.allowed, false);
    assert.ok(
      denied.retryAfterMs > 0 && denied.retryAfterMs <= 1501,
      `retryAfterMs ${denied.retryAfterMs}`,
    );
    await sleep(denied.retryAfterMs + 5);
    assert.equal((await limiter.take(scope, policy)).allowed, true);
  });

  it('case C10: scopes whose joined text collides keep separate quotas', async () => {
    const [limiter] = (await limiters(1)) as [RateLimiter];
    const policy = fixedWindow({ limit: 2, windowMs: 60_000 });
    const salt = randomTenant();
    const pairs: [[string, string], [string, string]][] = [
      [
        [`${salt}a:b`, 'c'],
        [`${salt}a`, 'b:c'],
      ],
      [
        [`${salt}21`, '1'],
        [`${salt}2`, '11'],
      ],
      [
        [`{${salt}victim}`, 'r'],
        [`${salt}victim`, 'r'],
      ],
      [
        [`${salt}*`, 'r'],
        [`${salt}?`, 'r'],
      ],
    ];
    for (const [[t1, r1], [t2, r2]] of pairs) {
      await limiter.take({ tenant: t1, route: r1 }, policy);
      await limiter.take({ tenant: t1, route: r1 }, policy);
      const other = await limiter.take({ tenant: t2, route: r2 }, policy);
      assert.deepEqual([other.allowed, other.remaining], [true, 1], `${t1}/${r1} vs ${t2}/${r2}`);
    }
    const big = await limiter.take({ tenant: `${salt}${'x'.repeat(10_240)}`, route: 'r' }, policy);
    assert.deepEqual([big.allowed, big.remaining], [true, 1]);
  });

  it('two replicas with different policy versions never share a counter', async () => {
    const [a, b] = (await limiters(2)) as [RateLimiter, RateLimiter];
    const tenant = randomTenant();
    const v1 = fixedWindow({ limit: 3, windowMs: 60_000, version: 1 });
    const v2 = fixedWindow({ limit: 5, windowMs: 60_000, version: 2 });
    for (let i = 0; i < 3; i++) await a.take({ tenant, route }, v1);
    assert.equal((await a.take({ tenant, route }, v1)).allowed, false);
    const d = await b.take({ tenant, route }, v2);
    assert.deepEqual([d.allowed, d.remaining, d.limit], [true, 4, 5]);
    const admin = await redis.admin();
    assert.equal(await admin.client.get(keyOf(tenant, v1)), '3');
    assert.equal(await admin.client.get(keyOf(tenant, v2)), '1');
  });

  it('case C11: the boundary burst — up to 2 × limit pass across a window edge (documented worst case)', async () => {
    const [limiter] = (await limiters(1)) as [RateLimiter];
    const policy = fixedWindow({ limit: 10, windowMs: 2000 });
    const scope = { tenant: randomTenant(), route };
    const burst = (n: number) =>
      Promise.all(Array.from({ length: n }, () => limiter.take(scope, policy)));
    const first = await limiter.take(scope, policy); // the window starts
    await sleep(first.resetMs - 400); // late in the window (times from Redis, not assumed)
    const late = await burst(9);
    const lateAt = Date.now();
    await sleep(Math.max(...late.map((d) => d.resetMs)) + 20); // just past the edge
    const early = await burst(10);
    const span = Date.now() - lateAt;
    assert.equal([first, ...late].filter((d) => d.allowed).length, 10);
    assert.equal(early.filter((d) => d.allowed).length, 10);
    assert.ok(
      span < 2000,
      `19 admitted within ${span} ms < one window: the documented 2 × limit burst`,
    );
  });

  it('invalid input sends no command to Redis (INFO commandstats)', async () => {
    const [limiter] = (await limiters(1)) as [RateLimiter];
    const admin = await redis.admin();
    const policy = fixedWindow({ limit: 1, windowMs: 1000 });
    const before = (await commandCalls(admin, 'evalsha')) + (await commandCalls(admin, 'eval'));
    const bad: [unknown, unknown, unknown][] = [
      [{ tenant: '', route }, policy, undefined],
      [{ tenant: 'a', route: 7 }, policy, undefined],
      [{ tenant: 'a', route }, { limit: 1 }, undefined],
      [{ tenant: 'a', route }, policy, { cost: 0 }],
      [{ tenant: 'a', route }, policy, { cost: 1.5 }],
      [{ tenant: 'a', route }, policy, { cost: Number.NaN }],
    ];
    for (const [scope, p, options] of bad) {
      await assert.rejects(limiter.take(scope as never, p as never, options as never), {
        code: 'SLUICE_INVALID_INPUT',
      });
    }
    const after = (await commandCalls(admin, 'evalsha')) + (await commandCalls(admin, 'eval'));
    assert.equal(after, before);
  });
});

function pick(d: Decision): [boolean, number, number] {
  return [d.allowed, d.remaining, d.retryAfterMs];
}
