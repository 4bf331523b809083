/**
 * The concurrency policy on a real Redis (through the script connection, the fast path) and
 * on MemoryStore: at most `limit` leases held at once; a release frees a slot once however
 * often it is sent; a renewal extends only a live lease; an expired lease frees its slot by
 * itself and its holder cannot release anyone else's; an acquisition with a live lease's id
 * returns that lease; a lease stacks with a rate policy in `takeAll`, all or nothing; the set
 * is bounded and its key expires within `leaseMs`, whatever was written into it.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import {
  concurrency,
  InvalidInputError,
  MemoryStore,
  RateLimiter,
  type RateLimiterOptions,
  tokenBucket,
} from 'sluice';
import { keyFor, randomTenant, useRedis } from '../helpers/redis.js';

const redis = useRedis();
const route = 'POST/exports';

const STORES: Record<string, () => Promise<RateLimiterOptions>> = {
  redis: async () => ({ client: await redis.client(), timeoutMs: 2000 }),
  memory: async () => ({ store: new MemoryStore(), timeoutMs: 2000 }),
};

for (const [name, options] of Object.entries(STORES)) {
  describe(`concurrency on ${name}`, () => {
    it('holds at most limit leases; a release frees one slot, once', async () => {
      const limiter = new RateLimiter(await options());
      const policy = concurrency({ limit: 3, leaseMs: 60_000 });
      const scope = { tenant: randomTenant(), route };
      const leases = await Promise.all([1, 2, 3, 4].map(() => limiter.acquire(scope, policy)));
      assert.deepEqual(
        leases.map((l) => l.allowed),
        [true, true, true, false],
      );
      assert.deepEqual(
        leases.map((l) => l.remaining),
        [2, 1, 0, 0],
      );
      const refused = leases[3] as (typeof leases)[number];
      assert.ok(refused.retryAfterMs > 59_000 && refused.retryAfterMs <= 60_000);
      assert.equal(await refused.release(), false);
      const first = leases[0] as (typeof leases)[number];
      assert.equal(first.resetMs, 60_000);
      const released = await Promise.all([first.release(), first.release(), first.release()]);
      assert.deepEqual(released.sort(), [false, false, true]);
      const again = await Promise.all([
        limiter.acquire(scope, policy),
        limiter.acquire(scope, policy),
      ]);
      assert.deepEqual(
        again.map((l) => l.allowed),
        [true, false],
      );
      const stats = limiter.stats();
      assert.equal(stats.leasesReleased, 1);
      assert.equal(stats.leasesLost, 2);
      assert.equal(stats.allowed, 4);
      assert.equal(stats.limited, 2);
    });

    it('an acquisition with the id of a live lease returns it and holds one slot', async () => {
      const limiter = new RateLimiter(await options());
      const policy = concurrency({ limit: 2, leaseMs: 60_000 });
      const scope = { tenant: randomTenant() };
      const a = await limiter.acquire(scope, policy, { id: 'job-1' });
      const b = await limiter.acquire(scope, policy, { id: 'job-1' });
      assert.equal(a.id, 'job-1');
      assert.ok(a.allowed && b.allowed);
      assert.equal(b.remaining, 1);
      assert.equal((await limiter.peek(scope, policy)).remaining, 1);
      assert.equal(await limiter.release(scope, policy, 'job-1'), true);
      assert.equal((await limiter.peek(scope, policy)).remaining, 2);
    });

    it('renew extends a live lease only; release and renew race: applied once', async () => {
      const limiter = new RateLimiter(await options());
      const policy = concurrency({ limit: 50, leaseMs: 60_000 });
      const scope = { tenant: randomTenant() };
      const leases = await Promise.all(
        Array.from({ length: 40 }, () => limiter.acquire(scope, policy)),
      );
      // Each lease: a release and a renewal sent together, in either order.
      const outcomes = await Promise.all(
        leases.map(async (lease, i) => {
          const [released, renewed] =
            i % 2 === 0
              ? await Promise.all([lease.release(), lease.renew()])
              : await Promise.all([lease.renew(), lease.release()]).then(
                  ([n, l]) => [l, n] as const,
                );
          return { released, renewed: renewed.allowed };
        }),
      );
      for (const o of outcomes) assert.equal(o.released, true);
      // Every slot is free: no renewal revived a released lease.
      assert.equal((await limiter.peek(scope, policy)).remaining, 50);
      const renewal = await (leases[0] as (typeof leases)[number]).renew();
      assert.equal(renewal.allowed, false);
      assert.equal(renewal.retryAfterMs, Number.POSITIVE_INFINITY);
    });

    it("an expired lease frees its slot; its holder cannot release the next holder's", async () => {
      const limiter = new RateLimiter(await options());
      // Long enough that a loaded machine's stall between two calls does not end a lease
      // early (it was 150 ms).
      const policy = concurrency({ limit: 1, leaseMs: 500 });
      const scope = { tenant: randomTenant() };
      const paused = await limiter.acquire(scope, policy);
      assert.ok(paused.allowed);
      const refused = await limiter.acquire(scope, policy);
      assert.equal(refused.allowed, false);
      assert.ok(
        refused.retryAfterMs >= 1 && refused.retryAfterMs <= 500,
        `${refused.retryAfterMs}`,
      );
      await sleep(refused.retryAfterMs + 5);
      const next = await limiter.acquire(scope, policy);
      assert.ok(next.allowed, 'the slot was freed by the expiry');
      assert.equal(await paused.release(), false);
      assert.equal((await paused.renew()).allowed, false);
      assert.equal((await limiter.acquire(scope, policy)).allowed, false, 'next still holds it');
      assert.equal(await next.release(), true);
    });

    it('stacks with a rate policy in takeAll: all or nothing, leases returned', async () => {
      const limiter = new RateLimiter({ ...(await options()), denialCache: false });
      const running = concurrency({ limit: 2, leaseMs: 60_000 });
      const perHour = tokenBucket({ capacity: 3, refillTokens: 3, refillIntervalMs: 3_600_000 });
      const tenant = randomTenant();
      const items = [
        { scope: { tenant }, policy: perHour },
        { scope: { tenant, route }, policy: running },
      ];
      const r1 = await limiter.takeAll(items);
      const r2 = await limiter.takeAll(items);
      const r3 = await limiter.takeAll(items);
      assert.deepEqual([r1.allowed, r2.allowed, r3.allowed], [true, true, false]);
      assert.equal(r1.leases?.length, 1);
      assert.equal(r3.leases, undefined);
      // The refusal (no slot) took no token.
      assert.equal((await limiter.peek({ tenant }, perHour)).remaining, 1);
      await r1.leases?.[0]?.release();
      const r4 = await limiter.takeAll(items);
      assert.equal(r4.allowed, true);
      // No token left: refused, and no lease taken.
      await r2.leases?.[0]?.release();
      const r5 = await limiter.takeAll(items);
      assert.equal(r5.allowed, false);
      assert.equal((await limiter.peek({ tenant, route }, running)).remaining, 1);
    });

    it('refuses bad input with InvalidInputError, nothing sent', async () => {
      const limiter = new RateLimiter(await options());
      const policy = concurrency({ limit: 2, leaseMs: 1000 });
      const rate = tokenBucket({ capacity: 1, refillTokens: 1, refillIntervalMs: 1000 });
      const scope = { tenant: randomTenant() };
      await assert.rejects(limiter.acquire(scope, rate), InvalidInputError);
      await assert.rejects(limiter.acquire(scope, policy, { id: '' }), /options\.id/);
      await assert.rejects(limiter.acquire(scope, policy, { id: 'a b' }), /options\.id/);
      await assert.rejects(limiter.release(scope, policy, 'x'.repeat(129)), /id/);
      await assert.rejects(limiter.take(scope, policy), /policy/);
      // A lease holds one slot: any other cost is refused, as in wait.
      await assert.rejects(limiter.takeAll([{ scope, policy, cost: 2 }]), /items\[0\]\.cost/);
      await assert.rejects(limiter.peek(scope, policy, { cost: 2 }), /cost/);
      assert.throws(() => concurrency({ limit: 10_001, leaseMs: 1 }), /policy\.limit/);
      assert.throws(() => concurrency({ limit: 1, leaseMs: 0 }), /policy\.leaseMs/);
      assert.throws(() => concurrency({ limit: 1, leaseMs: 99 }), /policy\.leaseMs.*100/);
      assert.equal(concurrency({ limit: 1, leaseMs: 100 }).leaseMs, 100);
      assert.equal(limiter.stats().invalid, 7);
    });
  });
}

describe('concurrency state on Redis', () => {
  it('is bounded: at most limit members, a TTL of at most leaseMs, healed when edited', async () => {
    const client = await redis.client();
    const admin = (await redis.admin()).client;
    const limiter = new RateLimiter({ client, timeoutMs: 2000 });
    const policy = concurrency({ limit: 5, leaseMs: 500 });
    const tenant = randomTenant();
    const key = keyFor(policy, tenant);
    for (let round = 0; round < 6; round++) {
      await Promise.all(Array.from({ length: 10 }, () => limiter.acquire({ tenant }, policy)));
      assert.ok((await admin.zCard(key)) <= 5);
      const ttl = await admin.pTTL(key);
      assert.ok(ttl > 0 && ttl <= 500, `ttl ${ttl}`);
      await sleep(60);
    }
    // A hand edit: no TTL, a member that expires in a year, and more than limit of them.
    await admin.del(key);
    const far = Date.now() + 365 * 86_400_000;
    for (let i = 0; i < 12; i++) await admin.zAdd(key, { score: far, value: `edited-${i}` });
    const denied = await limiter.acquire({ tenant }, policy);
    assert.equal(denied.allowed, false);
    assert.ok(denied.retryAfterMs <= 500, `capped wait ${denied.retryAfterMs}`);
    const ttl = await admin.pTTL(key);
    assert.ok(ttl > 0 && ttl <= 500, `healed ttl ${ttl}`);
    await sleep(ttl + 10);
    assert.equal((await limiter.acquire({ tenant }, policy)).allowed, true);
  });
});
