/**
 * Priced at the end, on a real Redis: reserve then settle (3 processes, random actual
 * costs: the usage is the sum of what was used, never more admitted than the limit), a
 * settle after the window rolled over changes nothing in the new one, retried settles and
 * refunds apply once, charges past the limit make later takes wait exactly, bad input is
 * refused before Redis.
 */
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { createInterface } from 'node:readline';
import { describe, it } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import {
  fixedWindow,
  gcra,
  InvalidInputError,
  MemoryStore,
  type Policy,
  RateLimiter,
  slidingWindowCounter,
  slidingWindowLog,
  TimeoutError,
  tokenBucket,
} from 'sluice';
import { MAX_PRICED_LOG_LIMIT } from '../../src/index.js';
import { nodeScript } from '../helpers/node-script.js';
import { keyFor, randomTenant, TEST_TIMEOUT_MS, useRedis } from '../helpers/redis.js';

const redis = useRedis();
const reserver = new URL('../fixtures/reserver.ts', import.meta.url);
const route = 'POST/complete';

async function limiter(): Promise<RateLimiter> {
  return new RateLimiter({ timeoutMs: TEST_TIMEOUT_MS, client: await redis.client() });
}

describe('reserve, then settle with what was used', () => {
  for (const algorithm of ['fixed-window', 'token-bucket', 'sliding-window-log']) {
    it(`${algorithm}: 3 processes × 40 concurrent reservations, limit 50 → at most 50 reserved at once; the usage is the sum of the actual costs`, async () => {
      const tenant = randomTenant();
      const children = Array.from({ length: 3 }, () =>
        spawn(process.execPath, nodeScript(reserver), {
          env: {
            ...process.env,
            REDIS_URL: redis.server.url,
            TENANT: tenant,
            RESERVES: '40',
            LIMIT: '50',
            ALGORITHM: algorithm,
          },
          stdio: ['pipe', 'pipe', 'inherit'],
        }),
      );
      const lines = children.map((child) =>
        createInterface({ input: child.stdout })[Symbol.asyncIterator](),
      );
      const next = async <T>(line: AsyncIterator<string>) =>
        JSON.parse((await line.next()).value as string) as T;
      for (const line of lines) assert.equal((await line.next()).value, 'ready');
      for (const child of children) child.stdin.write('go\n');
      const reserved = await Promise.all(lines.map((line) => next<{ costs: number[] }>(line)));
      const costs = reserved.flatMap((r) => r.costs);
      const total = costs.reduce((sum, c) => sum + c, 0);
      // 120 reservations of 1–3 units ask for about 240: the limit holds, and is nearly used.
      assert.ok(total <= 50 && total >= 48, `reserved ${total} units at once`);
      for (const child of children) child.stdin.write('settle\n');
      const settled = await Promise.all(
        lines.map((line) => next<{ actual: number; applied: number }>(line)),
      );
      await Promise.all(
        children.map((child) => (child.exitCode === null ? once(child, 'exit') : undefined)),
      );
      const actual = settled.reduce((sum, s) => sum + s.actual, 0);
      const applied = settled.reduce((sum, s) => sum + s.applied, 0);
      // Each settle gave back its cost less what was used (a bucket: less what refilled
      // since, a fraction of a token here, so a reply may round a unit down).
      if (algorithm !== 'token-bucket') assert.equal(applied, actual - total);
      else assert.ok(applied >= actual - total && applied <= actual - total + costs.length);
      const policy =
        algorithm === 'token-bucket'
          ? tokenBucket({ capacity: 50, refillIntervalMs: 3_600_000 })
          : algorithm === 'sliding-window-log'
            ? slidingWindowLog({ limit: 50, windowMs: 60_000 })
            : fixedWindow({ limit: 50, windowMs: 60_000 });
      const peek = await (await limiter()).peek({ tenant, route }, policy);
      assert.equal(peek.remaining, 50 - actual, 'the usage is the sum of the actual costs');
    });
  }

  it('a reservation never settled stays consumed; a refused one consumes nothing, is not recorded, and its settle does nothing', async () => {
    const l = await limiter();
    const policy = fixedWindow({ limit: 5, windowMs: 60_000 });
    const scope = { tenant: randomTenant(), route };
    const kept = await l.reserve(scope, policy, { cost: 4 });
    assert.deepEqual([kept.allowed, kept.remaining, kept.replayed], [true, 1, false]);
    assert.match(kept.id, /^[0-9a-f-]{36}$/);
    const refused = await l.reserve(scope, policy, { cost: 2 });
    assert.equal(refused.allowed, false);
    // Not recorded (it consumed nothing): its settle finds no reservation.
    assert.deepEqual(await refused.settle(2), {
      applied: 0,
      remaining: 1,
      limit: 5,
      known: false,
      replayed: false,
    });
    assert.equal((await refused.cancel()).applied, 0);
    assert.equal((await l.peek(scope, policy)).remaining, 1);
  });

  it('settle (and cancel) apply once, however often they are sent, from any limiter', async () => {
    const a = await limiter();
    const b = await limiter();
    const policy = gcra({ limit: 10, periodMs: 60_000 });
    const scope = { tenant: randomTenant(), route };
    const r = await a.reserve(scope, policy, { cost: 6, id: 'call-1' });
    assert.equal(r.remaining, 4);
    const again = await b.reserve(scope, policy, { cost: 6, id: 'call-1' });
    assert.deepEqual([again.allowed, again.remaining, again.replayed], [true, 4, true]);
    const first = await b.settle(scope, policy, 'call-1', 2);
    assert.deepEqual([first.applied, first.remaining, first.replayed], [-4, 8, false]);
    for (let i = 0; i < 3; i++) {
      assert.deepEqual(await a.settle(scope, policy, 'call-1', 2), { ...first, replayed: true });
    }
    assert.equal((await a.cancel(scope, policy, 'call-1')).applied, -4, 'a replay of the settle');
    assert.equal((await a.peek(scope, policy)).remaining, 8);
    const unknown = await a.settle(scope, policy, 'never-made', 1);
    assert.deepEqual([unknown.known, unknown.applied], [false, 0]);
  });

  it('settling with more charges the excess past the limit; later takes wait for it, exactly', async () => {
    const l = await limiter();
    const policy = tokenBucket({ capacity: 10, refillIntervalMs: 100 });
    const scope = { tenant: randomTenant(), route };
    const r = await l.reserve(scope, policy, { cost: 4 });
    const settledAt = performance.now();
    const s = await r.settle(12);
    assert.deepEqual([s.applied, s.remaining], [6, 0], 'the excess, down to an empty bucket');
    const denied = await l.take(scope, policy);
    const since = performance.now() - settledAt;
    assert.equal(denied.allowed, false);
    // One token per 100 ms from the empty bucket the settle left.
    assert.ok(
      denied.retryAfterMs >= 100 - since - 1 && denied.retryAfterMs <= 100,
      `${denied.retryAfterMs} ms, ${since.toFixed(0)} ms after the settle`,
    );
  });
});

describe('a give-back and the denial caches', () => {
  it("a whole-token give-back that rounds to applied 0 still drops the other replicas' denials", async () => {
    const a = await limiter();
    const b = await limiter();
    const policy = tokenBucket({ capacity: 1, refillTokens: 1, refillIntervalMs: 30_000 });
    const scope = { tenant: randomTenant(), route };
    const r = await a.reserve(scope, policy);
    assert.equal((await b.take(scope, policy)).allowed, false);
    assert.equal((await b.take(scope, policy)).allowed, false, 'cached by b');
    assert.equal((await r.cancel()).applied, 0, 'rounded toward 0: the case at hand');
    // b keeps answering from its cache (its epoch reads stay fresh) until the epoch changes.
    let admitted = false;
    for (let i = 0; i < 24 && !admitted; i++) {
      admitted = (await b.take(scope, policy)).allowed;
      if (!admitted) await sleep(50);
    }
    assert.equal(admitted, true, 'the token is back for b too, within the epoch bound');
  });

  it('a cancel ends the cached denial here at once, and on another limiter within the epoch bound', async () => {
    const a = await limiter();
    const b = await limiter();
    const policy = fixedWindow({ limit: 3, windowMs: 60_000 });
    const scope = { tenant: randomTenant(), route };
    const r = await a.reserve(scope, policy, { cost: 3 });
    for (const l of [a, b]) {
      assert.equal((await l.take(scope, policy)).allowed, false);
      assert.equal((await l.take(scope, policy)).allowed, false); // held in the cache now
    }
    assert.ok(b.stats().cachedDenials >= 1);
    assert.equal((await r.cancel()).applied, -3);
    assert.equal((await a.take(scope, policy)).allowed, true, 'not refused from the cache');
    await sleep(900); // the reset epoch's bound (750 ms) and a poll
    assert.equal((await b.take(scope, policy)).allowed, true, 'the other cache let go');
  });
});

describe('only into the window (or bucket state) it was taken from', () => {
  const cases: [string, Policy, number][] = [
    ['fixed window', fixedWindow({ limit: 10, windowMs: 300 }), 400],
    ['sliding window counter', slidingWindowCounter({ limit: 10, windowMs: 150 }), 320],
    // Refilled the reservation's tokens (1 per 30 ms): its state is gone.
    ['token bucket', tokenBucket({ capacity: 10, refillIntervalMs: 30 }), 250],
    ['GCRA', gcra({ limit: 10, periodMs: 300 }), 250],
  ];
  for (const [name, policy, waitMs] of cases) {
    it(`${name}: a settle or cancel after the state rolled over leaves the new state untouched`, async () => {
      const l = await limiter();
      const scope = { tenant: randomTenant(), route };
      const r = await l.reserve(scope, policy, { cost: 5 });
      assert.equal(r.allowed, true);
      await sleep(waitMs);
      const taken = await l.take(scope, policy, { cost: 2 });
      assert.equal(taken.allowed, true);
      const settled = await r.cancel();
      assert.equal(settled.applied, 0, 'nothing given back into the new state');
      assert.equal((await l.peek(scope, policy)).remaining, taken.remaining);
    });
  }

  it('sliding window log: a settle or cancel once its member has left the window moves nothing (its record and the log still there)', async () => {
    const l = await limiter();
    const policy = slidingWindowLog({ limit: 60, windowMs: 1000 });
    const longer = fixedWindow({ limit: 10, windowMs: 60_000 });
    const scope = { tenant: randomTenant(), route };
    // 30 older members: a take trims 8 of them (at most 8 per call), the settle 8 more, which
    // leaves the reservation's member, out of the window, in the log. Its record lives as
    // long as the reserveAll's longest horizon (a minute), and takes keep the log alive.
    await Promise.all(Array.from({ length: 30 }, () => l.take(scope, policy)));
    const all = await l.reserveAll(
      [
        { scope, policy, cost: 5 },
        { scope, policy: longer },
      ],
      { id: 'left' },
    );
    assert.equal(all.allowed, true);
    await sleep(500);
    await l.take(scope, policy);
    await sleep(600);
    const taken = await l.take(scope, policy, { cost: 2 });
    const settled = await l.settle(scope, policy, 'left', 0);
    assert.deepEqual([settled.known, settled.applied], [true, 0], 'nothing into the new window');
    assert.equal((await l.peek(scope, policy)).remaining, taken.remaining);
  });

  it('sliding window log: a cancel in the middle of the log gives its units back now, and they do not come back when it leaves', async () => {
    const admin = await redis.admin();
    const l = await limiter();
    const policy = slidingWindowLog({ limit: 10, windowMs: 60_000 });
    const scope = { tenant: randomTenant(), route };
    await l.take(scope, policy, { cost: 2 });
    const r = await l.reserve(scope, policy, { cost: 4 });
    const s = await l.reserve(scope, policy, { cost: 3 });
    await l.take(scope, policy, { cost: 1 });
    assert.deepEqual(
      [
        (await s.settle(1)).applied,
        (await r.cancel()).applied,
        (await l.peek(scope, policy)).remaining,
      ],
      [-2, -4, 6],
    );
    // The log as takes of 2, 1 and 1 would have left it: totals 2, 3, 4.
    const key = keyFor(policy, scope.tenant, route);
    const members = await admin.client.sendCommand(['ZRANGE', key, '0', '-1']);
    assert.deepEqual(members, ['0000000000000002:2', '0000000000000003:1', '0000000000000004:1']);
    assert.deepEqual(
      [(await r.cancel()).replayed, (await l.peek(scope, policy)).remaining],
      [true, 6],
    );
  });

  const fresh: [string, Policy][] = [
    ['fixed window', fixedWindow({ limit: 10, windowMs: 60_000 })],
    ['sliding window counter', slidingWindowCounter({ limit: 10, windowMs: 60_000 })],
    ['token bucket', tokenBucket({ capacity: 10, refillIntervalMs: 60_000 })],
    ['GCRA', gcra({ limit: 10, periodMs: 60_000 })],
    ['sliding window log', slidingWindowLog({ limit: 10, windowMs: 60_000 })],
  ];
  for (const [name, policy] of fresh) {
    it(`${name}: a settle or cancel after a reset moves nothing into the fresh state (Redis and its twin)`, async () => {
      for (const l of [await limiter(), new RateLimiter({ store: new MemoryStore() })]) {
        const scope = { tenant: randomTenant(), route };
        const r = await l.reserve(scope, policy, { cost: 5 });
        const s = await l.reserve(scope, policy, { cost: 2 });
        await l.reset(scope, policy);
        assert.equal((await l.take(scope, policy, { cost: 10 })).allowed, true);
        assert.equal((await r.cancel()).applied, 0, 'nothing given back into the fresh state');
        assert.equal((await s.settle(0)).applied, 0);
        assert.equal((await l.peek(scope, policy)).remaining, 0);
        // Reserved after the reset: its own generation, given back as usual.
        await l.reset(scope, policy);
        const t = await l.reserve(scope, policy, { cost: 4 });
        assert.equal((await t.cancel()).applied !== 0, true, 'a reservation of this state');
      }
    });
  }

  it('fixed window: a reset and a take in the same millisecond never take a cancel', async () => {
    const l = await limiter();
    const policy = fixedWindow({ limit: 10, windowMs: 60_000 });
    let leaked = 0;
    for (let i = 0; i < 60; i++) {
      const scope = { tenant: randomTenant(), route };
      const r = await l.reserve(scope, policy, { cost: 3 });
      await Promise.all([l.reset(scope, policy), l.take(scope, policy, { cost: 3 })]);
      if ((await r.cancel()).applied !== 0) leaked++;
    }
    assert.equal(leaked, 0);
  });

  it('within its window, a cancel gives it all back', async () => {
    const l = await limiter();
    const policy = slidingWindowCounter({ limit: 10, windowMs: 60_000 });
    const scope = { tenant: randomTenant(), route };
    const r = await l.reserve(scope, policy, { cost: 5 });
    await l.take(scope, policy, { cost: 2 });
    assert.deepEqual(
      [(await r.cancel()).applied, (await l.peek(scope, policy)).remaining],
      [-5, 8],
    );
  });
});

describe('refund and charge', () => {
  it('a refund retried 5 times is applied once; refunds of one take give back at most its cost', async () => {
    const l = await limiter();
    const admin = await redis.admin();
    const policy = fixedWindow({ limit: 10, windowMs: 60_000 });
    const scope = { tenant: randomTenant(), route };
    await l.take(scope, policy, { cost: 7, id: 'take-1' });
    const answers = [];
    for (let i = 0; i < 5; i++) {
      answers.push(await l.refund(scope, policy, 3, { id: 'ref-1', takeId: 'take-1' }));
    }
    assert.deepEqual(
      answers.map((a) => [a.applied, a.replayed]),
      [[-3, false], ...Array.from({ length: 4 }, () => [-3, true])],
    );
    assert.equal(await admin.client.get(keyFor(policy, scope.tenant, route)), '4');
    // At most the take's cost: a refund of 9 gives back the 4 left of it.
    assert.equal((await l.refund(scope, policy, 9, { id: 'ref-2', takeId: 'take-1' })).applied, -4);
    assert.equal((await l.refund(scope, policy, 1, { id: 'ref-3', takeId: 'take-1' })).applied, 0);
    assert.equal((await l.peek(scope, policy)).remaining, 10);
  });

  it('a refund whose reply was held back (CLIENT PAUSE) and that is retried applies once', async () => {
    const client = await redis.client();
    const admin = await redis.admin();
    const l = new RateLimiter({ client, timeoutMs: 150 });
    const policy = fixedWindow({ limit: 10, windowMs: 60_000 });
    const scope = { tenant: randomTenant(), route };
    await l.take(scope, policy, { cost: 8, id: 'take' });
    await admin.client.sendCommand(['CLIENT', 'PAUSE', '500', 'ALL']);
    await assert.rejects(l.refund(scope, policy, 3, { id: 'late', takeId: 'take' }), TimeoutError);
    await sleep(600);
    const retried = await l.refund(scope, policy, 3, { id: 'late', takeId: 'take' });
    assert.deepEqual([retried.applied, retried.replayed], [-3, true]);
    assert.equal(await admin.client.get(keyFor(policy, scope.tenant, route)), '5');
  });

  it('a charge (a penalty) consumes whatever is left; the scope waits until the window ends', async () => {
    const l = await limiter();
    const policy = fixedWindow({ limit: 10, windowMs: 60_000 });
    const scope = { tenant: randomTenant(), route };
    await l.take(scope, policy);
    const charged = await l.charge(scope, policy, 25);
    assert.deepEqual([charged.applied, charged.remaining], [9, 0], 'up to a full window');
    const denied = await l.take(scope, policy);
    assert.equal(denied.allowed, false);
    assert.ok(denied.retryAfterMs > 59_000 && denied.retryAfterMs <= 60_001);
    // With an id, once.
    const fresh = { tenant: randomTenant(), route };
    await l.charge(fresh, policy, 2, { id: 'p' });
    assert.equal((await l.charge(fresh, policy, 2, { id: 'p' })).replayed, true);
    assert.equal((await l.peek(fresh, policy)).remaining, 8);
  });
});

describe('bad input is refused before Redis', () => {
  const l = new RateLimiter({ store: new MemoryStore() });
  const policy = fixedWindow({ limit: 10, windowMs: 1000 });
  const scope = { tenant: 't' };
  const field = (name: string) => (error: unknown) => {
    assert.ok(error instanceof InvalidInputError, String(error));
    assert.equal(error.field, name);
    return true;
  };

  it('names the field', async () => {
    await assert.rejects(l.settle(scope, policy, 'x', -1), field('actualCost'));
    await assert.rejects(l.settle(scope, policy, 'x', 1.5), field('actualCost'));
    await assert.rejects(l.settle(scope, policy, '', 1), field('id'));
    await assert.rejects(l.refund(scope, policy, 1, {} as never), field('options.id'));
    await assert.rejects(l.refund(scope, policy, 1, { id: 'r' } as never), field('options.takeId'));
    await assert.rejects(l.refund(scope, policy, 0, { id: 'r', takeId: 't' }), field('cost'));
    await assert.rejects(
      l.charge(scope, policy, 1, { id: 'r', extra: 1 } as never),
      field('options.extra'),
    );
    await assert.rejects(l.reserve(scope, policy, { cost: 0 }), field('options.cost'));
    await assert.rejects(l.reserve(scope, policy, { id: 'x'.repeat(129) }), field('options.id'));
    const r = await l.reserve(scope, policy);
    await assert.rejects(r.settle(-2), field('actualCost'));
  });

  it(`a sliding window log policy: priced up to a limit of ${MAX_PRICED_LOG_LIMIT} (policy.limit names the bound above it)`, async () => {
    const big = slidingWindowLog({ limit: MAX_PRICED_LOG_LIMIT + 1, windowMs: 1000 });
    const bound = (name: string) => (error: unknown) =>
      field(name)(error) &&
      (error as InvalidInputError).expected.includes(String(MAX_PRICED_LOG_LIMIT));
    await assert.rejects(l.reserve(scope, big), bound('policy.limit'));
    await assert.rejects(l.settle(scope, big, 'x', 1), bound('policy.limit'));
    await assert.rejects(l.refund(scope, big, 1, { id: 'r', takeId: 't' }), bound('policy.limit'));
    await assert.rejects(l.charge(scope, big, 1), bound('policy.limit'));
    await assert.rejects(
      l.reserveAll([
        { scope, policy },
        { scope, policy: big },
      ]),
      bound('items[1].policy.limit'),
    );
    assert.equal((await l.take(scope, big, { cost: MAX_PRICED_LOG_LIMIT + 1 })).allowed, true);
    const log = slidingWindowLog({ limit: MAX_PRICED_LOG_LIMIT, windowMs: 1000 });
    const r = await l.reserve(scope, log, { cost: 3 });
    assert.deepEqual([r.allowed, (await r.settle(1)).applied], [true, -2]);
  });
});
