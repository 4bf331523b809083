/**
 * Retry-safe takes (`id`): a take whose reply was lost can be sent again with its id and
 * counts at most once — alone, through takeAll, on the fast path and through the local
 * denial cache; the record lives no longer than the policy's horizon.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import {
  fixedWindow,
  gcra,
  InvalidInputError,
  MemoryStore,
  RateLimiter,
  TimeoutError,
  tokenBucket,
} from 'sluice';
import { keyFor, randomTenant, TEST_TIMEOUT_MS, useRedis } from '../helpers/redis.js';

const redis = useRedis();
const route = 'POST/orders';
const policy = fixedWindow({ limit: 5, windowMs: 60_000 });

describe('a take with an id counts at most once', () => {
  it('a repeat returns the first answer, replayed, and consumes nothing', async () => {
    const client = await redis.client();
    const admin = await redis.admin();
    const limiter = new RateLimiter({ timeoutMs: TEST_TIMEOUT_MS, client });
    const tenant = randomTenant();
    const scope = { tenant, route };
    const first = await limiter.take(scope, policy, { id: 'op-1', cost: 2 });
    assert.deepEqual(
      { ...first, resetMs: 0 },
      { allowed: true, remaining: 3, limit: 5, resetMs: 0, retryAfterMs: 0, replayed: false },
    );
    for (let i = 0; i < 3; i++) {
      const again = await limiter.take(scope, policy, { id: 'op-1', cost: 2 });
      assert.deepEqual(again, { ...first, replayed: true });
    }
    assert.equal(await admin.client.get(keyFor(policy, tenant, route)), '2');
    // Another id is another operation; a take without an id has no `replayed`.
    assert.equal((await limiter.take(scope, policy, { id: 'op-2', cost: 2 })).remaining, 1);
    assert.equal('replayed' in (await limiter.take(scope, policy)), false);
    // A denial is not recorded (it consumed nothing): its repeat is decided afresh, and is
    // admitted once quota is back.
    const denied = await limiter.take(scope, policy, { id: 'op-3', cost: 2 });
    assert.deepEqual([denied.allowed, denied.replayed], [false, false]);
    await limiter.reset(scope, policy);
    const later = await limiter.take(scope, policy, { id: 'op-3', cost: 2 });
    assert.deepEqual([later.allowed, later.remaining, later.replayed], [true, 3, false]);
    assert.deepEqual(await limiter.take(scope, policy, { id: 'op-3', cost: 2 }), {
      ...later,
      replayed: true,
    });
  });

  it('refused takes with fresh ids leave no record keys (take, takeAll, reserve, reserveAll, blocked)', async () => {
    const admin = await redis.admin();
    const limiter = new RateLimiter({
      timeoutMs: TEST_TIMEOUT_MS,
      client: await redis.client(),
      denialCache: false,
    });
    const tenant = randomTenant();
    const scope = { tenant, route };
    const one = fixedWindow({ limit: 1, windowMs: 60_000, name: 'refused-one' });
    const blocking = fixedWindow({
      limit: 1,
      windowMs: 60_000,
      name: 'refused-b',
      blockMs: 30_000,
    });
    await limiter.take(scope, one, { cost: 1 });
    await limiter.take(scope, blocking, { cost: 1 });
    // KEYS answers in hash-table order, which other keys (generations, `<key>:g`) move: sorted.
    const keys = async (pattern: string) => (await admin.client.keys(pattern)).sort();
    const before = await keys('rate:*:id:*');
    const beforeRsv = await keys('rate:*:rsv:*');
    for (let i = 0; i < 50; i++) {
      assert.equal((await limiter.take(scope, one, { id: `t-${i}` })).allowed, false);
      const all = await limiter.takeAll(
        [
          { scope, policy: one },
          { scope: { tenant }, policy },
        ],
        { id: `a-${i}` },
      );
      assert.equal(all.allowed, false);
      assert.equal((await limiter.reserve(scope, one, { id: `r-${i}` })).allowed, false);
      const ra = await limiter.reserveAll(
        [
          { scope: { tenant }, policy },
          { scope, policy: one },
        ],
        { id: `ra-${i}` },
      );
      assert.equal(ra.allowed, false);
      const blocked = await limiter.take(scope, blocking, { id: `b-${i}` });
      assert.equal(blocked.allowed, false);
    }
    assert.deepEqual(await keys('rate:*:id:*'), before, 'no take record');
    assert.deepEqual(await keys('rate:*:rsv:*'), beforeRsv, 'no reservation record');
    // Nothing consumed on the item that would have fitted.
    assert.equal((await limiter.peek({ tenant }, policy)).remaining, 5);
  });

  it('an id reused for a different request is an InvalidInputError (field id) and changes nothing', async () => {
    const admin = await redis.admin();
    const limiter = new RateLimiter({ timeoutMs: TEST_TIMEOUT_MS, client: await redis.client() });
    const tenant = randomTenant();
    const scope = { tenant, route };
    const other = fixedWindow({ limit: 5, windowMs: 60_000, name: 'other' });
    const reshaped = fixedWindow({ limit: 6, windowMs: 60_000 }); // the same name, another shape
    const a = { scope, policy };
    const b = { scope: { tenant }, policy: other };
    const reused = (error: unknown) => {
      assert.ok(error instanceof InvalidInputError, String(error));
      assert.equal(error.field, 'id');
      assert.match(error.message, /used for a different request/);
      return true;
    };
    const snapshot = async () => {
      const keys = (await admin.client.keys('rate:*')).sort();
      return Promise.all(keys.map(async (k) => [k, await admin.client.dump(k)]));
    };
    assert.equal((await limiter.take(scope, policy, { id: 'x', cost: 2 })).allowed, true);
    assert.equal((await limiter.takeAll([a, b], { id: 'y' })).allowed, true);
    assert.equal((await limiter.reserve(scope, other, { id: 'r', cost: 2 })).allowed, true);
    assert.equal((await limiter.reserveAll([a, b], { id: 'ra' })).allowed, true);
    assert.equal((await limiter.refund(scope, policy, 1, { id: 'f', takeId: 'x' })).known, true);
    const state = await snapshot();
    // Another cost, other items, another order, another policy shape, another scope.
    await assert.rejects(limiter.take(scope, policy, { id: 'x', cost: 1 }), reused);
    await assert.rejects(limiter.take(scope, reshaped, { id: 'x', cost: 2 }), reused);
    await assert.rejects(limiter.take({ tenant }, policy, { id: 'x', cost: 2 }), reused);
    await assert.rejects(limiter.takeAll([b, a], { id: 'y' }), reused);
    await assert.rejects(limiter.takeAll([a], { id: 'y' }), reused);
    await assert.rejects(limiter.takeAll([{ ...a, cost: 2 }, b], { id: 'y' }), reused);
    await assert.rejects(limiter.reserve(scope, other, { id: 'r', cost: 3 }), reused);
    await assert.rejects(limiter.reserveAll([b, a], { id: 'ra' }), reused);
    await assert.rejects(limiter.reserveAll([a], { id: 'ra' }), reused);
    await assert.rejects(limiter.reserveAll([{ ...a, cost: 2 }, b], { id: 'ra' }), reused);
    await assert.rejects(limiter.refund(scope, policy, 2, { id: 'f', takeId: 'x' }), reused);
    await assert.rejects(limiter.refund(scope, policy, 1, { id: 'f', takeId: 'y' }), reused);
    assert.deepEqual(await snapshot(), state, 'nothing changed in Redis');
    // The same request is still replayed.
    assert.equal((await limiter.take(scope, policy, { id: 'x', cost: 2 })).replayed, true);
    assert.equal((await limiter.takeAll([a, b], { id: 'y' })).replayed, true);
    assert.equal((await limiter.reserve(scope, other, { id: 'r', cost: 2 })).replayed, true);
    assert.equal((await limiter.reserveAll([a, b], { id: 'ra' })).replayed, true);
    // The twin agrees.
    const memory = new RateLimiter({ store: new MemoryStore() });
    await memory.take(scope, policy, { id: 'x', cost: 2 });
    await assert.rejects(memory.take(scope, policy, { id: 'x', cost: 1 }), reused);
    await memory.reserveAll([a, b], { id: 'ra' });
    await assert.rejects(memory.reserveAll([b, a], { id: 'ra' }), reused);
  });

  it('repeats in one batch (the same turn): the first decides, the others replay', async () => {
    const limiter = new RateLimiter({ timeoutMs: TEST_TIMEOUT_MS, client: await redis.client() });
    const scope = { tenant: randomTenant(), route };
    const answers = await Promise.all(
      Array.from({ length: 8 }, () => limiter.take(scope, policy, { id: 'same' })),
    );
    assert.deepEqual(
      answers.map((a) => [a.remaining, a.replayed]),
      [[4, false], ...Array.from({ length: 7 }, () => [4, true])],
    );
  });

  it('the record expires with the policy horizon (its TTL never longer)', async () => {
    const admin = await redis.admin();
    const limiter = new RateLimiter({ timeoutMs: TEST_TIMEOUT_MS, client: await redis.client() });
    const tenant = randomTenant();
    const bucket = tokenBucket({ capacity: 10, refillTokens: 10, refillIntervalMs: 1000 });
    await limiter.take({ tenant }, bucket, { id: 'ttl' });
    await limiter.takeAll(
      [
        { scope: { tenant }, policy: bucket },
        { scope: { tenant, route }, policy },
      ],
      { id: 'ttl-all' },
    );
    const keys = await admin.client.keys(`rate:{*}:id:*`);
    const ttls = await Promise.all(keys.map((key) => admin.client.pTTL(key)));
    assert.ok(ttls.length >= 2);
    for (const ttl of ttls) assert.ok(ttl > 0 && ttl <= 60_000, `record TTL ${ttl}`);
    assert.ok(
      ttls.some((ttl) => ttl <= 1000),
      'the bucket record: its 1 s horizon',
    );
  });

  it('a short horizon: after it, the id is decided afresh', async () => {
    const limiter = new RateLimiter({ timeoutMs: TEST_TIMEOUT_MS, client: await redis.client() });
    const scope = { tenant: randomTenant() };
    const quick = gcra({ limit: 2, periodMs: 100 });
    assert.equal((await limiter.take(scope, quick, { id: 'q' })).replayed, false);
    assert.equal((await limiter.take(scope, quick, { id: 'q' })).replayed, true);
    await sleep(150);
    assert.equal((await limiter.take(scope, quick, { id: 'q' })).replayed, false);
  });

  it('bad ids are refused before Redis: empty, too long, not a string, on a peek', async () => {
    const limiter = new RateLimiter({ store: new MemoryStore() });
    const scope = { tenant: randomTenant() };
    for (const id of ['', 'x'.repeat(129), 7]) {
      await assert.rejects(limiter.take(scope, policy, { id } as never), (error: unknown) => {
        assert.ok(error instanceof InvalidInputError);
        assert.equal(error.field, 'options.id');
        return true;
      });
      await assert.rejects(
        limiter.takeAll([{ scope, policy }], { id } as never),
        InvalidInputError,
      );
    }
    await assert.rejects(limiter.peek(scope, policy, { id: 'p' } as never), InvalidInputError);
    assert.equal((await limiter.take(scope, policy, { id: 'x'.repeat(128) })).replayed, false);
  });
});

describe('a take whose reply was held back past the deadline (CLIENT PAUSE), retried with its id', () => {
  for (const fastPath of [true, false]) {
    it(`counts once (${fastPath ? 'fast path' : 'node-redis'}, take and takeAll)`, async () => {
      const client = await redis.client({ fastPath });
      const admin = await redis.admin();
      const limiter = new RateLimiter({ client, timeoutMs: 150 });
      const tenant = randomTenant();
      const scope = { tenant, route };
      const tenantWide = fixedWindow({ limit: 5, windowMs: 60_000, name: 'tenant' });
      await admin.client.sendCommand(['CLIENT', 'PAUSE', '500', 'ALL']);
      await assert.rejects(limiter.take(scope, policy, { id: 'lost' }), TimeoutError);
      await assert.rejects(
        limiter.takeAll(
          [
            { scope, policy, cost: 2 },
            { scope: { tenant }, policy: tenantWide },
          ],
          { id: 'lost-all' },
        ),
        TimeoutError,
      );
      await sleep(600); // the pause ends; both timed-out calls ran on the server
      const retried = await limiter.take(scope, policy, { id: 'lost' });
      assert.deepEqual([retried.allowed, retried.remaining, retried.replayed], [true, 4, true]);
      const all = await limiter.takeAll(
        [
          { scope, policy, cost: 2 },
          { scope: { tenant }, policy: tenantWide },
        ],
        { id: 'lost-all' },
      );
      assert.equal(all.replayed, true);
      assert.deepEqual(
        all.decisions.map((d) => d.remaining),
        [2, 4],
      );
      assert.equal(await admin.client.get(keyFor(policy, tenant, route)), '3', 'counted once each');
      assert.equal(await admin.client.get(keyFor(tenantWide, tenant)), '1');
    });
  }
});

describe('retry-safe takes and the local denial cache', () => {
  it('an admitted id replays "allowed" while the scope is held denied in the cache', async () => {
    const client = await redis.client();
    const limiter = new RateLimiter({ timeoutMs: TEST_TIMEOUT_MS, client });
    const scope = { tenant: randomTenant(), route };
    const first = await limiter.take(scope, policy, { id: 'early' });
    assert.equal(first.allowed, true);
    await limiter.take(scope, policy, { cost: 4 });
    assert.equal((await limiter.take(scope, policy)).allowed, false); // cached now
    assert.equal((await limiter.take(scope, policy)).allowed, false);
    const cachedBefore = limiter.stats().cachedDenials;
    assert.ok(cachedBefore >= 1, 'the scope is held in the cache');
    const again = await limiter.take(scope, policy, { id: 'early' });
    assert.deepEqual(again, { ...first, replayed: true });
    // A fresh id while held: decided on Redis (denied), not from the cache, and recorded.
    const fresh = await limiter.take(scope, policy, { id: 'late' });
    assert.deepEqual([fresh.allowed, fresh.replayed], [false, false]);
    assert.equal(limiter.stats().cachedDenials, cachedBefore);
  });

  it('takeAll with an id is not answered from the cache', async () => {
    const limiter = new RateLimiter({ timeoutMs: TEST_TIMEOUT_MS, client: await redis.client() });
    const scope = { tenant: randomTenant(), route };
    const first = await limiter.takeAll([{ scope, policy }], { id: 'g' });
    await limiter.take(scope, policy, { cost: 4 });
    assert.equal((await limiter.take(scope, policy)).allowed, false);
    const again = await limiter.takeAll([{ scope, policy }], { id: 'g' });
    assert.deepEqual(again, { ...first, replayed: true });
  });
});

describe('claimServe: an admission with an id goes to its work once', () => {
  it('the first claim wins, every later one is refused; Redis and its twin agree', async () => {
    const admin = await redis.admin();
    for (const limiter of [
      new RateLimiter({ timeoutMs: TEST_TIMEOUT_MS, client: await redis.client() }),
      new RateLimiter({ store: new MemoryStore() }),
    ]) {
      const scope = { tenant: randomTenant(), route };
      const items = [{ scope, policy }];
      assert.equal((await limiter.take(scope, policy, { id: 'op-9' })).allowed, true);
      const claims = await Promise.all([0, 1, 2].map(() => limiter.claimServe(items, 'op-9')));
      assert.deepEqual(claims.sort(), [false, false, true]);
      assert.equal(await limiter.claimServe(items, 'op-9'), false);
      assert.equal(await limiter.claimServe(items, 'op-10'), true, 'another id');
      // The claim is the id's, as its record is (one per id and tenant).
      const other = [{ scope: { ...scope, route: 'other' }, policy }];
      assert.equal(await limiter.claimServe(other, 'op-9'), false, 'the same id, another scope');
      await assert.rejects(limiter.claimServe(items, ''), InvalidInputError);
    }
    const keys = (await admin.client.keys('*:c')).filter((k) => k.includes(':id:'));
    for (const key of keys.slice(0, 5)) {
      const ttl = await admin.client.pTTL(key);
      assert.ok(ttl > 0 && ttl <= policy.horizonMs, `claim TTL ${ttl} within the horizon`);
    }
  });
});
