/**
 * The records of retry-safe takes and reservations (issue 21's gaps), on a real Redis:
 * a cancel after an unknown outcome (a reply held back with CLIENT PAUSE) leaves nothing
 * consumed, in the library and through the guard, and a cancel that comes first leaves a
 * tombstone that refuses the late reserve; records of a shape this library could not have
 * written are unknown, move nothing and never outlive the horizon; a settlement's
 * `remaining` is what a peek reports right after, on every policy and in the edge cases.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import {
  fixedWindow,
  gcra,
  MemoryStore,
  type Policy,
  RateLimiter,
  type Scope,
  slidingWindowCounter,
  TimeoutError,
  tokenBucket,
} from 'sluice';
import { fetchRateLimit } from 'sluice/fetch';
import { digest, tenantTag } from '../../src/key.js';
import { randomTenant, useRedis } from '../helpers/redis.js';

const redis = useRedis();
const route = 'POST/complete';

/** The reservation record of `id` on `scope` under `policy` (see `pricedRecord`). */
function reservationKey(l: RateLimiter, scope: Scope, policy: Policy, id: string): string {
  return `rate:${tenantTag(scope.tenant)}:rsv:${digest(['rsv', id, l.keyOf(scope, policy)])}`;
}

/** Every key of `tenant` with its PTTL. */
async function tenantTtls(tenant: string): Promise<[string, number][]> {
  const admin = await redis.admin();
  const keys = await admin.client.keys(`rate:${tenantTag(tenant)}:*`);
  return Promise.all(keys.map(async (k) => [k, await admin.client.pTTL(k)] as [string, number]));
}

async function assertBounded(tenant: string, horizonMs: number): Promise<void> {
  for (const [key, ttl] of await tenantTtls(tenant)) {
    assert.ok(ttl > 0 && ttl <= horizonMs, `${key}: PTTL ${ttl} not within (0, ${horizonMs}]`);
  }
}

describe('a cancel after an unknown outcome leaves nothing consumed', () => {
  it('library: a reserve whose reply was held back (CLIENT PAUSE), then cancelled by its id', async () => {
    const admin = await redis.admin();
    const l = new RateLimiter({ client: await redis.client(), timeoutMs: 150 });
    const policy = fixedWindow({ limit: 10, windowMs: 60_000 });
    const scope = { tenant: randomTenant(), route };
    await admin.client.sendCommand(['CLIENT', 'PAUSE', '500', 'ALL']);
    await assert.rejects(l.reserve(scope, policy, { cost: 4, id: 'lost' }), TimeoutError);
    // Sent behind the reserve (it is still held): applied after it, once the pause ends.
    await assert.rejects(l.cancel(scope, policy, 'lost'), TimeoutError);
    await sleep(600);
    assert.equal((await l.peek(scope, policy)).remaining, 10, 'nothing stays consumed');
    const again = await l.cancel(scope, policy, 'lost');
    assert.deepEqual([again.known, again.applied, again.replayed], [true, -4, true]);
  });

  it('library: a cancel that comes first leaves a tombstone; the late reserve takes nothing', async () => {
    for (const l of [
      new RateLimiter({ client: await redis.client(), timeoutMs: 5_000 }),
      new RateLimiter({ store: new MemoryStore() }),
    ]) {
      const policy = tokenBucket({ capacity: 10, refillTokens: 1, refillIntervalMs: 60_000 });
      const scope = { tenant: randomTenant(), route };
      const early = await l.cancel(scope, policy, 'early');
      assert.deepEqual([early.known, early.applied, early.remaining], [false, 0, 10]);
      const late = await l.reserve(scope, policy, { cost: 3, id: 'early' });
      assert.deepEqual(
        [late.allowed, late.replayed, late.remaining, late.retryAfterMs],
        [false, true, 10, 0],
      );
      assert.equal((await l.peek(scope, policy)).remaining, 10);
      const all = await l.reserveAll([{ scope, policy, cost: 2 }], { id: 'early' });
      assert.deepEqual([all.allowed, all.replayed], [false, true]);
      assert.equal((await l.peek(scope, policy)).remaining, 10);
      // A settle of more than 0 leaves no tombstone: its reserve, if it comes, is counted.
      assert.equal((await l.settle(scope, policy, 'other', 2)).known, false);
      assert.equal((await l.reserve(scope, policy, { cost: 3, id: 'other' })).allowed, true);
      await assertBounded(scope.tenant, policy.horizonMs); // none for the memory store
    }
  });

  it('the guard cancels its reservation whose reply timed out (CLIENT PAUSE)', async () => {
    const admin = await redis.admin();
    const l = new RateLimiter({ client: await redis.client(), timeoutMs: 150 });
    const perUser = fixedWindow({ limit: 3, windowMs: 60_000, name: 'gc-user' });
    const perTenant = fixedWindow({ limit: 10, windowMs: 60_000, name: 'gc-tenant' });
    const limit = fetchRateLimit({
      limiter: l,
      policy: [
        { policy: perUser, per: 'user' },
        { policy: perTenant, per: 'tenant' },
      ],
      route: 'POST/login',
      identify: (request) => request.headers.get('x-tenant') ?? undefined,
      user: (request) => request.headers.get('x-user') ?? undefined,
      settle: (_req, res) => (res.statusCode < 400 ? 0 : 1),
    });
    const tenant = randomTenant();
    const login = () =>
      new Request('http://x/login', {
        method: 'POST',
        headers: { 'x-tenant': tenant, 'x-user': 'ada' },
      });
    await admin.client.sendCommand(['CLIENT', 'PAUSE', '500', 'ALL']);
    const verdict = await limit.check(login());
    assert.equal('settle' in verdict && verdict.settle !== undefined, false, 'not reserved');
    await sleep(900); // the pause ends: the reserve runs, then the guard's cancel
    const scope = { tenant, user: 'ada' };
    assert.equal((await l.peek(scope, perUser)).remaining, 3, 'nothing stays consumed');
    assert.equal((await l.peek({ tenant }, perTenant)).remaining, 10);
    // The next request is reserved and settled as usual.
    const next = await limit.check(login());
    assert.equal(next.pass, true);
    if (next.pass) await next.settle?.(new Response('', { status: 401 }));
    assert.equal((await l.peek(scope, perUser)).remaining, 2);
  });
});

describe('the guard and a retry key reused for a different request', () => {
  it('answers it as a duplicate (409), changing nothing', async () => {
    const l = new RateLimiter({ client: await redis.client(), timeoutMs: 5_000 });
    const policy = fixedWindow({ limit: 10, windowMs: 60_000, name: 'reused-key' });
    const limit = fetchRateLimit({
      limiter: l,
      policy,
      route: 'POST/orders',
      identify: (request) => request.headers.get('x-tenant') ?? undefined,
      cost: (request) => Number(request.headers.get('x-cost') ?? '1'),
      retryId: (request) => request.headers.get('idempotency-key') ?? undefined,
    });
    const tenant = randomTenant();
    const order = (cost: number) =>
      new Request('http://x/orders', {
        method: 'POST',
        headers: { 'x-tenant': tenant, 'x-cost': String(cost), 'idempotency-key': 'k-1' },
      });
    assert.equal((await limit.check(order(2))).pass, true);
    const reused = await limit.check(order(3));
    assert.equal(reused.pass, false);
    if (!reused.pass) assert.equal(reused.response.status, 409);
    assert.equal((await l.peek({ tenant, route: 'POST/orders' }, policy)).remaining, 8);
  });
});

describe('records this library could not have written are unknown', () => {
  const policies: Policy[] = [
    fixedWindow({ limit: 5, windowMs: 60_000, name: 'bad-fw' }),
    tokenBucket({ capacity: 5, refillTokens: 1, refillIntervalMs: 60_000, name: 'bad-tb' }),
    gcra({ limit: 5, periodMs: 60_000, name: 'bad-gcra' }),
    slidingWindowCounter({ limit: 5, windowMs: 60_000, name: 'bad-swc' }),
  ];
  for (const policy of policies) {
    it(`${policy.algorithm}: settle, cancel and a repeated reserve over bad records move nothing; every key's TTL within the horizon`, async () => {
      const admin = await redis.admin();
      const l = new RateLimiter({
        client: await redis.client(),
        denialCache: false,
        timeoutMs: 5_000,
      });
      const scope = { tenant: randomTenant(), route };
      const key = l.keyOf(scope, policy);
      // A genuine reservation, to edit.
      const real = await l.reserve(scope, policy, { cost: 2, id: 'real' });
      assert.equal(real.allowed, true);
      const text = (await admin.client.get(reservationKey(l, scope, policy, 'real'))) as string;
      const fields = text.split(',');
      const edit = (j: number, value: string) =>
        fields.map((f, i) => (i === j ? value : f)).join(',');
      const far = String(Number(fields[5]) * 2 + 10 ** 12);
      const bad: [string, (k: string) => Promise<unknown>][] = [
        ['not numbers', (k) => admin.client.set(k, 'hello,world')],
        ['a fraction', (k) => admin.client.set(k, edit(1, '1.5'))],
        ['a negative cost', (k) => admin.client.set(k, edit(4, '-3'))],
        ['a cost above the limit', (k) => admin.client.set(k, edit(4, '999'))],
        ['a mark far in the future', (k) => admin.client.set(k, edit(5, far))],
        ['too few fields, no TTL', (k) => admin.client.set(k, fields.slice(0, 7).join(','))],
        ['a hash', (k) => admin.client.hSet(k, 'f', '1')],
        ['a genuine record without a TTL', (k) => admin.client.set(k, text)],
        ['a settled record without a TTL', (k) => admin.client.set(k, `${edit(8, '1')},-2,3`)],
      ];
      let before = await admin.client.dump(key);
      for (const [i, [name, write]] of bad.entries()) {
        for (const op of ['settle', 'cancel', 'reserve'] as const) {
          const id = `bad-${i}-${op}`;
          const recordKey = reservationKey(l, scope, policy, id);
          await write(recordKey);
          if (!name.includes('TTL') && name !== 'a hash') {
            await admin.client.pExpire(recordKey, 30_000);
          }
          if (op === 'reserve') {
            // Its own cost (the digest of what was asked matches the edited record's): a
            // shape the library never writes is decided afresh; a plausible one (a cost or
            // a mark edited) is replayed, and its cancel is unknown. Nothing stays moved.
            const r = await l.reserve(scope, policy, { cost: 2, id });
            const cancel = await r.cancel();
            if (r.replayed) {
              assert.deepEqual([cancel.known, cancel.applied], [false, 0], `${name}: cancel`);
            } else {
              assert.equal(r.allowed, true, `${name}: reserved afresh`);
              assert.ok(cancel.applied <= -1 && cancel.applied >= -2, `${name}: its cancel`);
              before = await admin.client.dump(key);
            }
          } else {
            const s =
              op === 'settle'
                ? await l.settle(scope, policy, id, 1)
                : await l.cancel(scope, policy, id);
            assert.deepEqual(
              [s.known, s.applied, s.replayed],
              [false, 0, false],
              `${name}: ${op} is unknown`,
            );
          }
          assert.deepEqual(await admin.client.dump(key), before, `${name}: ${op} moved nothing`);
          await assertBounded(scope.tenant, policy.horizonMs);
        }
      }
      // The genuine one still settles (a bucket's or GCRA's give-back rounds toward 0).
      const applied = (await l.cancel(scope, policy, 'real')).applied;
      assert.ok(applied <= -1 && applied >= -2, `applied ${applied}`);
    });
  }

  it('a take record of a bad shape is decided afresh; its TTL within the horizon', async () => {
    const admin = await redis.admin();
    const l = new RateLimiter({
      client: await redis.client(),
      denialCache: false,
      timeoutMs: 5_000,
    });
    const policy = fixedWindow({ limit: 5, windowMs: 60_000 });
    const scope = { tenant: randomTenant(), route };
    const recordKey = `rate:${tenantTag(scope.tenant)}:id:${digest(['t'])}`;
    for (const write of [
      () => admin.client.set(recordKey, 'x,y'),
      () => admin.client.set(recordKey, '0,5,0,7,1'), // a refusal: never recorded
      () => admin.client.set(recordKey, '1,-4,0,0,1'),
      () => admin.client.hSet(recordKey, 'f', '1'),
    ]) {
      await admin.client.del(recordKey);
      await write();
      const first = await l.take(scope, policy, { id: 't' });
      assert.deepEqual([first.allowed, first.replayed], [true, false]);
      assert.equal((await l.take(scope, policy, { id: 't' })).replayed, true);
      await assertBounded(scope.tenant, policy.horizonMs);
      await admin.client.del(recordKey);
    }
  });
});

describe('a settlement reports the remaining a peek reports right after', () => {
  const slow: Policy[] = [
    fixedWindow({ limit: 5, windowMs: 60_000, name: 'rem-fw' }),
    tokenBucket({ capacity: 5, refillTokens: 1, refillIntervalMs: 600_000, name: 'rem-tb' }),
    gcra({ limit: 5, periodMs: 600_000, name: 'rem-gcra' }),
    slidingWindowCounter({ limit: 5, windowMs: 600_000, name: 'rem-swc' }),
    fixedWindow({ limit: 5, windowMs: 60_000, name: 'rem-fw-b', blockMs: 60_000 }),
  ];
  const quick: Policy[] = [
    fixedWindow({ limit: 5, windowMs: 100, name: 'q-fw' }),
    tokenBucket({ capacity: 5, refillTokens: 5, refillIntervalMs: 100, name: 'q-tb' }),
    gcra({ limit: 5, periodMs: 100, name: 'q-gcra' }),
    slidingWindowCounter({ limit: 5, windowMs: 100, name: 'q-swc' }),
  ];
  for (const backend of ['redis', 'memory'] as const) {
    it(`${backend}: settle, overrun, replay, unknown id, after a reset, refund and charge, on every policy`, async () => {
      const l =
        backend === 'redis'
          ? new RateLimiter({ client: await redis.client(), denialCache: false, timeoutMs: 5_000 })
          : new RateLimiter({ store: new MemoryStore(), denialCache: false });
      for (const policy of slow) {
        const scope = { tenant: randomTenant(), route };
        const same = async (label: string, remaining: number) =>
          assert.equal(
            remaining,
            (await l.peek(scope, policy)).remaining,
            `${policy.name}: ${label}`,
          );
        const a = await l.reserve(scope, policy, { cost: 3, id: 'a' });
        assert.equal(a.allowed, true);
        await same('a give-back', (await a.settle(1)).remaining);
        await same('a replay', (await l.settle(scope, policy, 'a', 1)).remaining);
        await same('an unknown id', (await l.settle(scope, policy, 'nope', 2)).remaining);
        const b = await l.reserve(scope, policy, { cost: 2, id: 'b' });
        await same('past the limit', (await b.settle(9)).remaining);
        await same('a refused reserve', (await l.reserve(scope, policy, { cost: 5 })).remaining);
        await l.reset(scope, policy);
        const c = await l.reserve(scope, policy, { cost: 2, id: 'c' });
        await l.reset(scope, policy);
        await l.take(scope, policy, { cost: 1 });
        await same('another generation', (await c.cancel()).remaining);
        await l.take(scope, policy, { cost: 2, id: 't' });
        await same(
          'a refund',
          (await l.refund(scope, policy, 1, { id: 'f', takeId: 't' })).remaining,
        );
        await same(
          'a refund of an unknown take',
          (await l.refund(scope, policy, 1, { id: 'g', takeId: 'nope' })).remaining,
        );
        await same('a charge', (await l.charge(scope, policy, 2)).remaining);
        await same(
          'a replayed refund',
          (await l.refund(scope, policy, 1, { id: 'f', takeId: 't' })).remaining,
        );
      }
    });
  }

  it('after the window or bucket state ended', async () => {
    for (const l of [
      new RateLimiter({ client: await redis.client(), denialCache: false, timeoutMs: 5_000 }),
      new RateLimiter({ store: new MemoryStore(), denialCache: false }),
    ]) {
      const reservations = [];
      const scopes = quick.map(() => ({ tenant: randomTenant(), route }));
      for (const [i, policy] of quick.entries()) {
        reservations.push(await l.reserve(scopes[i] as Scope, policy, { cost: 4 }));
      }
      await sleep(250); // every window ended, every bucket refilled: all back by itself
      for (const [i, policy] of quick.entries()) {
        const settled = await (
          reservations[i] as { cancel(): Promise<{ remaining: number }> }
        ).cancel();
        const peeked = await l.peek(scopes[i] as Scope, policy);
        assert.equal(settled.remaining, peeked.remaining, `${policy.name}`);
        assert.equal(settled.remaining, 5, `${policy.name}: all back by itself`);
      }
    }
  });
});
