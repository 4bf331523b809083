/**
 * Blocks (`blockMs`, `escalate`), on a real Redis: a refusal keeps the scope refused for the
 * block, on every replica, after the window resets, answered from the denial cache; an
 * escalating block grows by its factor up to its maximum; a refused takeAll blocks its
 * blocking item; over HTTP a block is `abnormal-usage-detected` with a `Retry-After` that
 * says how long; bad options are refused; the block's key stays within the horizon.
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
  slidingWindowLog,
  tokenBucket,
} from 'sluice';
import { ABNORMAL_USAGE_DETECTED_TYPE, limitedResponse, QUOTA_EXCEEDED_TYPE } from 'sluice/http';
import { randomTenant, TEST_TIMEOUT_MS, useRedis } from '../helpers/redis.js';

const redis = useRedis();
const route = 'POST/login';

async function limiter(): Promise<RateLimiter> {
  return new RateLimiter({ timeoutMs: TEST_TIMEOUT_MS, client: await redis.client() });
}

describe('a refusal blocks the scope for blockMs', () => {
  it('holds on a second replica after the window resets; answered from its denial cache', async () => {
    const a = await limiter();
    const b = await limiter();
    const policy = fixedWindow({ limit: 2, windowMs: 200, blockMs: 1200 });
    const scope = { tenant: randomTenant(), route };
    assert.equal((await a.take(scope, policy)).allowed, true);
    assert.equal((await a.take(scope, policy)).allowed, true);
    const refusedAt = performance.now();
    const refused = await a.take(scope, policy);
    assert.deepEqual([refused.allowed, refused.blocked, refused.resetMs], [false, true, 1200]);
    assert.ok(refused.retryAfterMs >= 1200);
    await sleep(300); // the window has ended: without the block, a take would be admitted
    const onB = await b.take(scope, policy);
    assert.deepEqual([onB.allowed, onB.remaining, onB.blocked], [false, 0, true]);
    // What is left of the block: 1200 ms less the time since the refusal (≥ 300 ms, more on
    // a loaded machine), within a millisecond of rounding.
    const sinceMs = performance.now() - refusedAt;
    assert.ok(
      onB.retryAfterMs >= 1200 - sinceMs - 1 && onB.retryAfterMs <= 900,
      `${onB.retryAfterMs} (${sinceMs.toFixed(0)} ms after the refusal)`,
    );
    const cached = b.stats().cachedDenials;
    const again = await b.take(scope, policy);
    assert.deepEqual([again.allowed, again.blocked], [false, true]);
    assert.equal(b.stats().cachedDenials, cached + 1, 'answered from the denial cache');
    // Retry-After says how long the block lasts, and the problem says why.
    const response = limitedResponse(onB, [policy.name]);
    assert.ok(Number(response.headers['retry-after']) >= 1);
    assert.equal(JSON.parse(response.body).type, ABNORMAL_USAGE_DETECTED_TYPE);
    assert.equal(JSON.parse(response.body).error, 'blocked');
    await sleep(onB.retryAfterMs + 50);
    assert.equal((await b.take(scope, policy)).allowed, true, 'the block has ended');
  });

  it('an ordinary denial stays quota-exceeded', () => {
    const response = limitedResponse(
      { allowed: false, remaining: 0, limit: 1, resetMs: 10, retryAfterMs: 10 },
      ['p'],
    );
    assert.equal(JSON.parse(response.body).type, QUOTA_EXCEEDED_TYPE);
  });

  it('escalates: each block within withinMs of the last is factor × longer, up to maxMs', async () => {
    const l = await limiter();
    const policy = tokenBucket({
      capacity: 1,
      refillIntervalMs: 60_000,
      blockMs: 100,
      escalate: { factor: 3, maxMs: 500, withinMs: 2000 },
    });
    assert.equal(policy.horizonMs, 60_000, 'the bucket outlasts the block (500 + 2000 ms)');
    const scope = { tenant: randomTenant(), route };
    await l.take(scope, policy);
    const blocks: number[] = [];
    for (let i = 0; i < 4; i++) {
      const d = await l.take(scope, policy);
      assert.equal(d.blocked, true);
      blocks.push(d.resetMs);
      await sleep(d.resetMs + 20);
    }
    assert.deepEqual(blocks, [100, 300, 500, 500]);
  });

  it('a refused takeAll blocks its blocking item, not the others', async () => {
    const l = await limiter();
    const perUser = fixedWindow({ limit: 1, windowMs: 60_000, blockMs: 5000, name: 'user' });
    const perIp = fixedWindow({ limit: 100, windowMs: 60_000, blockMs: 5000, name: 'ip' });
    const tenant = randomTenant();
    const items = [
      { scope: { tenant, route, user: 'u' }, policy: perUser },
      { scope: { tenant, route }, policy: perIp },
    ];
    assert.equal((await l.takeAll(items)).allowed, true);
    const refused = await l.takeAll(items);
    assert.equal(refused.allowed, false);
    assert.deepEqual(
      refused.decisions.map((d) => d.blocked),
      [true, undefined],
    );
    assert.equal((await l.take({ tenant, route }, perIp)).allowed, true, 'per IP: not blocked');
  });

  it('a reset ends the block with the rest of the scope', async () => {
    const l = await limiter();
    const policy = fixedWindow({ limit: 1, windowMs: 60_000, blockMs: 60_000 });
    const scope = { tenant: randomTenant(), route };
    await l.take(scope, policy);
    assert.equal((await l.take(scope, policy)).blocked, true);
    assert.equal(await l.reset(scope, policy), true);
    assert.equal((await l.take(scope, policy)).allowed, true);
  });

  it("the block's key lives no longer than the policy's horizon", async () => {
    const l = await limiter();
    const admin = await redis.admin();
    const policy = fixedWindow({
      limit: 1,
      windowMs: 100,
      blockMs: 300,
      escalate: { factor: 2, maxMs: 600, withinMs: 400 },
    });
    assert.equal(policy.horizonMs, 1000);
    const scope = { tenant: randomTenant(), route };
    await l.take(scope, policy);
    await l.take(scope, policy);
    const pttl = await admin.client.pTTL(`${l.keyOf(scope, policy)}:b`);
    assert.ok(pttl > 0 && pttl <= policy.horizonMs, `PTTL ${pttl}`);
  });

  it('blockMs and escalate are checked, and part of the identity', () => {
    const bad = (options: object, field: string) =>
      assert.throws(
        () => fixedWindow({ limit: 1, windowMs: 1000, ...options } as never),
        (error: unknown) => error instanceof InvalidInputError && error.field === field,
      );
    bad({ blockMs: 0 }, 'policy.blockMs');
    bad({ blockMs: 1.5 }, 'policy.blockMs');
    bad({ escalate: { factor: 2, maxMs: 10, withinMs: 10 } }, 'policy.blockMs');
    bad(
      { blockMs: 10, escalate: { factor: 1, maxMs: 10, withinMs: 10 } },
      'policy.escalate.factor',
    );
    for (const factor of [1001, 2.5]) {
      assert.throws(
        () =>
          fixedWindow({
            limit: 1,
            windowMs: 1000,
            blockMs: 10,
            escalate: { factor, maxMs: 10, withinMs: 10 },
          }),
        /policy\.escalate\.factor must be an integer from 2 to 1000/,
      );
    }
    assert.throws(
      () => fixedWindow({ limit: 1, windowMs: 1000, escalate: { factor: 2 } } as never),
      /policy\.blockMs must be a positive safe integer number of ms \(required when escalate/,
    );
    bad({ blockMs: 10, escalate: { factor: 2, maxMs: 5, withinMs: 10 } }, 'policy.escalate.maxMs');
    bad({ blockMs: 10, escalate: { factor: 2, maxMs: 50 } }, 'policy.escalate.withinMs');
    bad(
      { blockMs: 10, escalate: { factor: 2, maxMs: 50, withinMs: 9, x: 1 } },
      'policy.escalate.x',
    );
    const plain = fixedWindow({ limit: 1, windowMs: 1000 });
    const blocking = fixedWindow({ limit: 1, windowMs: 1000, blockMs: 100 });
    assert.notEqual(plain.id, blocking.id);
    assert.equal(slidingWindowLog({ limit: 1, windowMs: 10, blockMs: 50 }).horizonMs, 50);
  });
});

describe('a blocked answer waits until a take would pass', () => {
  it('retryAfterMs is the later of the block and the window: obeying it never escalates (Redis and twin)', async () => {
    for (const l of [await limiter(), new RateLimiter({ store: new MemoryStore() })]) {
      const policy = fixedWindow({
        limit: 2,
        windowMs: 8000,
        blockMs: 1000,
        escalate: { factor: 2, maxMs: 16_000, withinMs: 10_000 },
      });
      const scope = { tenant: randomTenant(), route };
      await l.take(scope, policy);
      await l.take(scope, policy);
      const first = await l.take(scope, policy);
      const second = await l.take(scope, policy);
      assert.equal(second.blocked, true);
      assert.ok(
        second.retryAfterMs > 6000,
        `the window's wait, not the block's: ${second.retryAfterMs}`,
      );
      assert.ok(second.retryAfterMs <= first.retryAfterMs);
      const g = gcra({ limit: 1, periodMs: 10_000, blockMs: 500 });
      await l.take(scope, g);
      await l.take(scope, g);
      assert.ok((await l.take(scope, g)).retryAfterMs > 9000);
    }
  });

  it('a cost that can never fit starts no block (Redis and twin)', async () => {
    for (const l of [await limiter(), new RateLimiter({ store: new MemoryStore() })]) {
      const policy = fixedWindow({ limit: 5, windowMs: 60_000, blockMs: 20_000 });
      const scope = { tenant: randomTenant(), route };
      const huge = await l.take(scope, policy, { cost: 6 });
      assert.equal(huge.allowed, false);
      assert.equal(huge.retryAfterMs, Number.POSITIVE_INFINITY);
      assert.notEqual(huge.blocked, true);
      assert.equal((await l.take(scope, policy, { cost: 1 })).allowed, true);
      const all = await l.takeAll([{ scope, policy, cost: 9 }]);
      assert.equal(all.allowed, false);
      assert.equal((await l.take(scope, policy)).allowed, true, 'a takeAll neither');
    }
  });
});
