/**
 * Regressions from the algorithm review, on MemoryStore with an injected clock (no Redis):
 * the denial cache follows the store's clock, answers only what it knows exactly, and only
 * for the policy it was decided under; time stepping back never re-admits.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import {
  fixedWindow,
  gcra,
  InvalidInputError,
  MemoryStore,
  RateLimiter,
  slidingWindowCounter,
  slidingWindowLog,
  tokenBucket,
} from 'sluice';

function clocked(start = 1_000_000) {
  const clock = { now: start };
  const limiter = new RateLimiter({ store: new MemoryStore({ clock: () => clock.now }) });
  return { clock, limiter };
}
const scope = { tenant: 't', route: 'r' };

describe('local denial cache on an injected clock', () => {
  it('moving the store’s clock past the window clears a cached denial', async () => {
    const { clock, limiter } = clocked();
    const policy = fixedWindow({ limit: 1, windowMs: 60_000 });
    assert.equal((await limiter.take(scope, policy)).allowed, true);
    assert.equal((await limiter.take(scope, policy)).allowed, false);
    clock.now += 120_000;
    assert.equal((await limiter.take(scope, policy)).allowed, true);
  });

  it('a cost-1 denial is never used to answer a larger cost with a too-short retryAfterMs', async () => {
    const { limiter } = clocked();
    const policy = tokenBucket({ capacity: 10, refillTokens: 1, refillIntervalMs: 1000 });
    assert.equal((await limiter.take(scope, policy, { cost: 10 })).allowed, true);
    const one = await limiter.take(scope, policy);
    assert.deepEqual([one.allowed, one.retryAfterMs], [false, 1000]);
    const five = await limiter.take(scope, policy, { cost: 5 });
    assert.deepEqual([five.allowed, five.retryAfterMs], [false, 5000]);
    assert.equal(
      (await limiter.take(scope, policy)).retryAfterMs,
      1000,
      'cost 1 still answered from the cache',
    );
    assert.ok(limiter.stats().cachedDenials >= 1);
  });

  it('a cached denial never answers a different policy with the same limit and version', async () => {
    const { clock, limiter } = clocked();
    const slow = tokenBucket({ capacity: 1, refillTokens: 1, refillIntervalMs: 3_600_000 });
    const fast = tokenBucket({ capacity: 1, refillTokens: 3600, refillIntervalMs: 3_600_000 });
    await limiter.take(scope, slow);
    assert.equal((await limiter.take(scope, slow)).allowed, false);
    clock.now += 1000;
    assert.equal((await limiter.take(scope, fast)).allowed, true);
  });
});

describe('the server clock stepping back never re-admits', () => {
  const policies = {
    'sliding window log': slidingWindowLog({ limit: 2, windowMs: 100 }),
    'sliding window counter': slidingWindowCounter({ limit: 2, windowMs: 100 }),
    'token bucket': tokenBucket({ capacity: 2, refillTokens: 2, refillIntervalMs: 100 }),
    GCRA: gcra({ limit: 2, periodMs: 100 }),
  };
  for (const [name, policy] of Object.entries(policies)) {
    it(`${name}: a full scope stays full when the clock steps back`, async () => {
      const clock = { now: 10_000 };
      const limiter = new RateLimiter({
        store: new MemoryStore({ clock: () => clock.now }),
        denialCache: false,
      });
      await limiter.take(scope, policy);
      await limiter.take(scope, policy);
      clock.now = 9_950;
      const results = [];
      for (let i = 0; i < 4; i++) results.push((await limiter.take(scope, policy)).allowed);
      assert.deepEqual(results, [false, false, false, false]);
    });
  }

  it('token bucket: the step back is not refilled twice once the clock catches up', async () => {
    const clock = { now: 10_000 };
    const limiter = new RateLimiter({
      store: new MemoryStore({ clock: () => clock.now }),
      denialCache: false,
    });
    const policy = tokenBucket({ capacity: 10, refillTokens: 1, refillIntervalMs: 1000 });
    assert.equal((await limiter.take(scope, policy, { cost: 5 })).remaining, 5);
    clock.now = 0; // 10 s back: no refill, the 5 tokens left can still be spent
    assert.equal((await limiter.take(scope, policy)).remaining, 4);
    clock.now = 10_000; // back to the real time: no time has passed since the first take
    assert.equal((await limiter.take(scope, policy)).remaining, 3);
  });
});

describe('limits stay far inside exact integers', () => {
  it('limit, capacity and burst above 10^15 − 1 (the largest Structured Field integer) are refused', () => {
    const tooLarge = 10 ** 15;
    assert.throws(() => fixedWindow({ limit: tooLarge, windowMs: 1000 }), InvalidInputError);
    assert.throws(() => fixedWindow({ limit: 2 ** 50, windowMs: 1000 }), InvalidInputError);
    assert.throws(
      () => tokenBucket({ capacity: tooLarge, refillIntervalMs: 1 }),
      InvalidInputError,
    );
    assert.throws(() => gcra({ limit: 1, periodMs: 1, burst: tooLarge }), InvalidInputError);
    assert.equal(fixedWindow({ limit: tooLarge - 1, windowMs: 1000 }).limit, 999_999_999_999_999);
    assert.throws(() => gcra({ limit: 1, periodMs: 315_360_000_000, burst: 10 }), {
      field: 'policy.burst',
    });
  });
});
