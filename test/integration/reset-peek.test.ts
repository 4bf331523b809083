/**
 * `peek`, `reset` and `takeAll` on a real Redis and on MemoryStore: a peek is the decision a
 * take would get and writes nothing (not even a repair); a reset deletes one scope's state
 * under one policy and reaches every limiter's denial cache within 750 ms; `takeAll` checks
 * its whole input before sending anything and is all or nothing.
 */
import assert from 'node:assert/strict';
import { performance } from 'node:perf_hooks';
import { describe, it } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import type { Decision, Policy, Scope, TakeAllItem } from 'sluice';
import {
  fixedWindow,
  gcra,
  InvalidInputError,
  MemoryStore,
  RateLimiter,
  type RateLimiterOptions,
  slidingWindowCounter,
  slidingWindowLog,
  tokenBucket,
} from 'sluice';
import type { ScriptStore } from 'sluice/store';
import type { LuaScript } from '../../src/algorithms/script.js';
import {
  type Client,
  commandCalls,
  randomTenant,
  TEST_TIMEOUT_MS,
  useRedis,
} from '../helpers/redis.js';
import { logMember, logTakes } from '../helpers/sliding-log.js';

const redis = useRedis();
const route = 'POST/orders';

/** Every policy as "limit units per window of windowMs". */
const POLICIES: Record<string, (limit: number, windowMs: number) => Policy> = {
  'fixed window': (limit, windowMs) => fixedWindow({ limit, windowMs, version: 'rp' }),
  'sliding window log': (limit, windowMs) => slidingWindowLog({ limit, windowMs, version: 'rp' }),
  'sliding window counter': (limit, windowMs) =>
    slidingWindowCounter({ limit, windowMs, version: 'rp' }),
  'token bucket': (limit, windowMs) =>
    tokenBucket({
      capacity: limit,
      refillTokens: limit,
      refillIntervalMs: windowMs,
      version: 'rp',
    }),
  GCRA: (limit, windowMs) => gcra({ limit, periodMs: windowMs, burst: limit, version: 'rp' }),
};

/** A store that records every script call and runs it on a MemoryStore. */
class RecordingStore implements ScriptStore {
  readonly calls: { script: string; keys: readonly string[] }[] = [];
  readonly inner = new MemoryStore();

  evalScript(script: LuaScript, keys: readonly string[], args: readonly string[]) {
    this.calls.push({ script: script.name, keys: [...keys] });
    return this.inner.evalScript(script, keys, args);
  }

  get clock(): () => number {
    return this.inner.clock;
  }
}

/**
 * A store under test: makes limiters sharing it and, on Redis, reads raw state. `snapshot`
 * is undefined on MemoryStore (its state is not inspectable from outside).
 */
interface StoreUnderTest {
  limiter(options?: Omit<RateLimiterOptions, 'client' | 'store'>): Promise<RateLimiter>;
  /** The key's serialized value and absolute expiry (PEXPIRETIME), or null when absent. */
  snapshot?: (key: string) => Promise<{ dump: unknown; expireAt: unknown } | null>;
  /** Keys held (MemoryStore only). */
  size?: () => number;
}

const STORES: Record<string, () => Promise<StoreUnderTest>> = {
  redis: async () => {
    const admin = await redis.admin();
    return {
      limiter: async (options = {}) =>
        new RateLimiter({ timeoutMs: TEST_TIMEOUT_MS, ...options, client: await redis.client() }),
      snapshot: async (key) => {
        if ((await admin.client.exists(key)) === 0) return null;
        return {
          dump: await admin.client.sendCommand(['DUMP', key]),
          expireAt: await admin.client.sendCommand(['PEXPIRETIME', key]),
        };
      },
    };
  },
  memory: async () => {
    const store = new MemoryStore();
    return {
      limiter: async (options = {}) => new RateLimiter({ ...options, store }),
      size: () => store.size,
    };
  },
};

const pick = (d: Decision) => ({ allowed: d.allowed, remaining: d.remaining, limit: d.limit });

/**
 * `later` reports the `resetMs` of `earlier` (nothing changed the scope between them) within
 * the time between them: `since` is `performance.now()` before `earlier` was sent, and 1 ms
 * more for the rounding of each to whole ms.
 */
function sameReset(earlier: Decision, later: Decision, since: number, what: string): void {
  const slack = performance.now() - since + 1;
  assert.ok(
    Math.abs(later.resetMs - earlier.resetMs) <= slack,
    `${what}: resetMs ${earlier.resetMs} then ${later.resetMs} (slack ${slack.toFixed(1)} ms)`,
  );
}

for (const [storeName, makeStore] of Object.entries(STORES)) {
  for (const [policyName, policyOf] of Object.entries(POLICIES)) {
    describe(`peek and reset: ${policyName} on ${storeName}`, () => {
      it('peek reports the units left and the time to a clean state now, and whether a take of its cost fits; it writes nothing', async () => {
        const store = await makeStore();
        // No denial cache: every peek and take here is decided by the store.
        const limiter = await store.limiter({ denialCache: false });
        // An hour: a refill, a window boundary or an entry leaving cannot change a count of
        // units during the test.
        const policy = policyOf(5, 3_600_000);
        const scope: Scope = { tenant: randomTenant(), route };
        const key = limiter.keyOf(scope, policy);

        // A fresh scope: the whole quota is left, it is clean now (resetMs 0), and the peek
        // creates no key.
        const sizeBefore = store.size?.();
        const fresh = await limiter.peek(scope, policy);
        assert.deepEqual(pick(fresh), { allowed: true, remaining: 5, limit: 5 });
        assert.deepEqual([fresh.resetMs, fresh.retryAfterMs], [0, 0], 'fresh: clean now');
        const whole = await limiter.peek(scope, policy, { cost: 5 });
        assert.deepEqual(pick(whole), { allowed: true, remaining: 5, limit: 5 }, 'cost 5 fits');
        assert.equal(whole.resetMs, 0, 'fresh, cost 5: clean now');
        // A cost the policy can never admit: refused, and still clean now.
        const never = await limiter.peek(scope, policy, { cost: 6 });
        assert.deepEqual(pick(never), { allowed: false, remaining: 5, limit: 5 });
        assert.deepEqual([never.resetMs, never.retryAfterMs], [0, Number.POSITIVE_INFINITY]);
        if (store.snapshot) assert.equal(await store.snapshot(key), null, 'no key after a peek');
        if (store.size) assert.equal(store.size(), sizeBefore, 'no key after a peek');

        for (let k = 1; k <= 5; k++) {
          const since = performance.now();
          const taken = await limiter.take(scope, policy);
          assert.ok(taken.resetMs > 0, `take ${k}: resetMs ${taken.resetMs}`);
          // Peeks consume nothing: every take is admitted, one unit less each time.
          assert.deepEqual(pick(taken), { allowed: true, remaining: 5 - k, limit: 5 }, `take ${k}`);
          const left = taken.remaining;
          const before = await store.snapshot?.(key);
          // What the k-th take reported is what a peek reports now.
          // The units left and the time to a clean state, whatever the peek's cost.
          const peeked = await limiter.peek(scope, policy);
          assert.deepEqual(pick(peeked), { allowed: left >= 1, remaining: left, limit: 5 });
          sameReset(taken, peeked, since, `take ${k}, then a peek`);
          if (left >= 1) assert.equal(peeked.retryAfterMs, 0, `after take ${k}`);
          if (left >= 1) {
            // Exactly what is left fits.
            const exact = await limiter.peek(scope, policy, { cost: left });
            assert.deepEqual(pick(exact), { allowed: true, remaining: left, limit: 5 });
            assert.equal(exact.retryAfterMs, 0);
            sameReset(taken, exact, since, `take ${k}, then a peek of ${left}`);
          }
          // One unit more than is left: refused, with the wait until it fits.
          const over = await limiter.peek(scope, policy, { cost: left + 1 });
          assert.deepEqual(pick(over), { allowed: false, remaining: left, limit: 5 }, `k ${k}`);
          sameReset(taken, over, since, `take ${k}, then a peek of ${left + 1}`);
          assert.ok(
            over.retryAfterMs > 0 && over.retryAfterMs <= policy.horizonMs + 1,
            `after take ${k}: retryAfterMs ${over.retryAfterMs} for cost ${left + 1}`,
          );
          // More than the policy can ever admit.
          const huge = await limiter.peek(scope, policy, { cost: 6 });
          assert.deepEqual(pick(huge), { allowed: false, remaining: left, limit: 5 });
          assert.equal(huge.retryAfterMs, Number.POSITIVE_INFINITY);
          sameReset(taken, huge, since, `take ${k}, then a peek of 6`);
          if (store.snapshot) {
            assert.notEqual(before, null);
            assert.deepEqual(await store.snapshot(key), before, `after take ${k}: a peek wrote`);
          }
        }
        // Used up: the take is refused as the peek said, with the peek's wait and reset.
        const lastSince = performance.now();
        const last = await limiter.peek(scope, policy);
        const refused = await limiter.take(scope, policy);
        assert.deepEqual(pick(refused), pick(last));
        assert.ok(refused.retryAfterMs > 0 && refused.retryAfterMs <= last.retryAfterMs);
        sameReset(last, refused, lastSince, 'a peek, then a refused take');
        const stats = limiter.stats();
        assert.equal(stats.peeks, 3 + 4 * 4 + 3 + 1);
        assert.equal(stats.allowed + stats.limited, 6, 'peeks are not counted as takes');
      });

      it('reset resolves true when state existed, false when not; the next take starts afresh', async () => {
        const store = await makeStore();
        const limiter = await store.limiter();
        const policy = policyOf(3, 60_000);
        const other = policyOf(3, 120_000);
        const scope: Scope = { tenant: randomTenant(), route };
        assert.equal(await limiter.reset(scope, policy), false, 'nothing to delete');
        for (let i = 0; i < 3; i++) assert.equal((await limiter.take(scope, policy)).allowed, true);
        assert.equal((await limiter.take(scope, policy)).allowed, false);
        await limiter.take(scope, other);
        assert.equal(await limiter.reset(scope, policy), true);
        if (store.snapshot) assert.equal(await store.snapshot(limiter.keyOf(scope, policy)), null);
        const d = await limiter.take(scope, policy);
        assert.deepEqual(pick(d), { allowed: true, remaining: 2, limit: 3 });
        // Only that policy's state went: the other policy on the same scope keeps its count
        // (one unit taken, two left).
        assert.equal((await limiter.peek(scope, other)).remaining, 2);
        assert.equal(await limiter.reset(scope, policy), true);
        assert.equal(await limiter.reset(scope, policy), false, 'already gone');
        assert.equal(limiter.stats().resets, 4);
      });
    });
  }
}

for (const [storeName, makeStore] of Object.entries(STORES)) {
  describe(`peek after time passes: on ${storeName}`, () => {
    it('a peek’s resetMs counts down from the take’s (the same clean time), on every policy', async () => {
      const store = await makeStore();
      const limiter = await store.limiter({ denialCache: false });
      // A sliding window counter of 1 s: the peek comes in the next window, where the take's
      // count is the previous window's (clean at that window's end, as the take said). The
      // others an hour: nothing refills or leaves the window meanwhile.
      const counterMs = 1000;
      const policies: [string, Policy][] = Object.entries(POLICIES).map(([name, policyOf]) => [
        name,
        policyOf(5, name === 'sliding window counter' ? counterMs : 3_600_000),
      ]);
      const runs = await Promise.all(
        policies.map(async ([name, policy]) => {
          const scope: Scope = { tenant: randomTenant(), route };
          const takeSent = performance.now();
          const taken = await limiter.take(scope, policy);
          const takeDone = performance.now();
          return { name, policy, scope, taken, takeSent, takeDone };
        }),
      );
      // Past the next boundary of the counter's windows (server time is this machine's clock).
      await sleep(counterMs - (Date.now() % counterMs) + 50);
      await Promise.all(
        runs.map(async ({ name, policy, scope, taken, takeSent, takeDone }) => {
          const peekSent = performance.now();
          const peeked = await limiter.peek(scope, policy);
          const peekDone = performance.now();
          assert.deepEqual(pick(peeked), { allowed: true, remaining: 4, limit: 5 }, name);
          // Between the two decisions on the server: at least peekSent − takeDone, at most
          // peekDone − takeSent; 2 ms more for rounding to whole ms and the two clocks.
          const passed = taken.resetMs - peeked.resetMs;
          assert.ok(
            passed >= peekSent - takeDone - 2 && passed <= peekDone - takeSent + 2,
            `${name}: take resetMs ${taken.resetMs}, ${(peekSent - takeDone).toFixed(1)}–` +
              `${(peekDone - takeSent).toFixed(1)} ms later a peek ${peeked.resetMs}`,
          );
          if (name === 'sliding window counter') {
            assert.ok(peeked.resetMs <= counterMs, `counter: clean within its window`);
          }
        }),
      );
    });
  });
}

describe('peek never repairs state (Redis)', () => {
  const fw = fixedWindow({ limit: 5, windowMs: 10_000 });
  const tb = tokenBucket({ capacity: 5, refillTokens: 5, refillIntervalMs: 10_000 });
  const swl = slidingWindowLog({ limit: 5, windowMs: 10_000 });
  const swc = slidingWindowCounter({ limit: 5, windowMs: 10_000 });
  const gc = gcra({ limit: 5, periodMs: 10_000 });
  const window = () => String(Math.floor(Date.now() / 10_000));
  /** [label, policy, write (no TTL), whether a take would be admitted] */
  const cases: [string, Policy, (admin: Client, key: string) => Promise<unknown>, boolean][] = [
    [
      'fixed window: a valid count',
      fw,
      (admin, key) => admin.client.sendCommand(['SET', key, '2']),
      true,
    ],
    [
      "fixed window: count 'abc'",
      fw,
      (admin, key) => admin.client.sendCommand(['SET', key, 'abc']),
      true,
    ],
    [
      'token bucket: last written 1e12 ms ahead',
      tb,
      (admin, key) =>
        admin.client.sendCommand(['HSET', key, 's', '0', 't', String(Date.now() + 1e12)]),
      true,
    ],
    [
      'sliding window log: a member scored 1e15',
      swl,
      (admin, key) => admin.client.sendCommand(['ZADD', key, '1e15', logMember(1, 1)]),
      true,
    ],
    [
      'sliding window counter: counts 999',
      swc,
      (admin, key) => admin.client.sendCommand(['HSET', key, 'w', '1', 'c', '999', 'p', '999']),
      true,
    ],
    [
      'GCRA: a TAT of 1e18 µs',
      gc,
      (admin, key) => admin.client.sendCommand(['SET', key, '1000000000000000000']),
      true,
    ],
    // Denial paths, where a take heals the missing TTL and a peek must not.
    [
      'fixed window: count = limit',
      fw,
      (admin, key) => admin.client.sendCommand(['SET', key, '5']),
      false,
    ],
    [
      'token bucket: empty, last written now',
      tb,
      (admin, key) => admin.client.sendCommand(['HSET', key, 's', '0', 't', String(Date.now())]),
      false,
    ],
    [
      'sliding window log: the limit filled now',
      swl,
      (admin, key) => {
        return admin.client.sendCommand(['ZADD', key, ...logTakes(Date.now(), [1, 1, 3])]);
      },
      false,
    ],
    [
      'sliding window counter: the current window at the limit',
      swc,
      (admin, key) => admin.client.sendCommand(['HSET', key, 'w', window(), 'c', '5', 'p', '0']),
      false,
    ],
    [
      'GCRA: TAT = now + τ',
      gc,
      (admin, key) =>
        admin.client.sendCommand(['SET', key, String(Date.now() * 1000 + 10_000_000)]),
      false,
    ],
  ];
  for (const [label, policy, write, admits] of cases) {
    it(`${label}, no TTL: peek leaves it as it is (PTTL -1); the take then bounds it`, async () => {
      const limiter = new RateLimiter({
        timeoutMs: TEST_TIMEOUT_MS,
        client: await redis.client(),
        denialCache: false,
      });
      const admin = await redis.admin();
      const scope: Scope = { tenant: randomTenant(), route };
      const key = limiter.keyOf(scope, policy);
      await write(admin, key);
      assert.equal(await admin.client.pTTL(key), -1);
      const before = await admin.client.sendCommand(['DUMP', key]);
      const peeked = await limiter.peek(scope, policy);
      assert.equal(peeked.allowed, admits);
      assert.equal(await admin.client.pTTL(key), -1, 'the peek gave the key a TTL');
      assert.deepEqual(
        await admin.client.sendCommand(['DUMP', key]),
        before,
        'the peek rewrote it',
      );
      // The take decides as the peek said: admitted, one unit below what the peek saw left.
      const taken = await limiter.take(scope, policy);
      assert.deepEqual(pick(taken), {
        ...pick(peeked),
        remaining: peeked.remaining - (admits ? 1 : 0),
      });
      const pttl = await admin.client.pTTL(key);
      assert.ok(pttl > 0 && pttl <= policy.horizonMs, `PTTL ${pttl} after the take`);
    });
  }
});

describe('reset reaches every limiter’s denial cache (Redis)', () => {
  const policy = fixedWindow({ limit: 1, windowMs: 60_000, name: 'reset-propagation' });

  /** `a` uses the scope up and takes until its denial is answered from its cache. */
  async function cacheDenial(a: RateLimiter, scope: Scope): Promise<void> {
    assert.equal((await a.take(scope, policy)).allowed, true);
    const start = a.stats().cachedDenials;
    for (let i = 0; i < 50 && a.stats().cachedDenials < start + 3; i++) {
      assert.equal((await a.take(scope, policy)).allowed, false);
      await sleep(5);
    }
    assert.ok(a.stats().cachedDenials >= start + 3, 'the denial is answered from the cache');
  }

  it('after B resets and 800 ms pass, A’s next take is decided by Redis and admitted', async () => {
    const a = new RateLimiter({ timeoutMs: TEST_TIMEOUT_MS, client: await redis.client() });
    const b = new RateLimiter({ timeoutMs: TEST_TIMEOUT_MS, client: await redis.client() });
    const scope: Scope = { tenant: randomTenant(), route };
    await cacheDenial(a, scope);
    assert.equal(await b.reset(scope, policy), true);
    await sleep(800);
    const cached = a.stats().cachedDenials;
    const d = await a.take(scope, policy);
    assert.deepEqual(pick(d), { allowed: true, remaining: 0, limit: 1 });
    assert.equal(a.stats().cachedDenials, cached, 'decided by Redis, not the cache');
  });

  it('A taking every 20 ms: no cached denial for a take started 750 ms or more after B’s reset', async (t) => {
    const a = new RateLimiter({ timeoutMs: TEST_TIMEOUT_MS, client: await redis.client() });
    const b = new RateLimiter({ timeoutMs: TEST_TIMEOUT_MS, client: await redis.client() });
    const scope: Scope = { tenant: randomTenant(), route };
    await cacheDenial(a, scope);
    const before = a.stats();
    assert.equal(await b.reset(scope, policy), true);
    const resetAt = performance.now();
    let admittedAfter = Number.POSITIVE_INFINITY;
    let takes = 0;
    // The bound is structural (EPOCH_VALID_MS): a take that starts 750 ms or more after the
    // reset resolved is never answered from the cache, however slow this machine is.
    let cachedLate = 0;
    while (performance.now() - resetAt < 1500) {
      takes++;
      const startedAt = performance.now() - resetAt;
      const cached = a.stats().cachedDenials;
      const d = await a.take(scope, policy);
      if (startedAt >= 750 && a.stats().cachedDenials > cached) cachedLate++;
      if (d.allowed) {
        admittedAfter = performance.now() - resetAt;
        break;
      }
      await sleep(20);
    }
    const after = a.stats();
    t.diagnostic(
      `reset → first admitted take on the other limiter: ${admittedAfter.toFixed(1)} ms ` +
        `(${takes} takes, ${after.cachedDenials - before.cachedDenials} cached denials, ` +
        `${after.cacheInvalidations - before.cacheInvalidations} cache invalidations)`,
    );
    assert.equal(cachedLate, 0, 'a cached denial 750 ms or more after the reset');
    assert.ok(Number.isFinite(admittedAfter), 'admitted again');
    assert.ok(after.cacheInvalidations > before.cacheInvalidations, 'the epoch change was seen');
  });

  it('the limiter that resets drops its own cached denial at once', async () => {
    const a = new RateLimiter({ timeoutMs: TEST_TIMEOUT_MS, client: await redis.client() });
    const scope: Scope = { tenant: randomTenant(), route };
    await cacheDenial(a, scope);
    assert.equal(await a.reset(scope, policy), true);
    const cached = a.stats().cachedDenials;
    const d = await a.take(scope, policy);
    assert.deepEqual(pick(d), { allowed: true, remaining: 0, limit: 1 });
    assert.equal(a.stats().cachedDenials, cached);
  });

  it('on MemoryStore too: the resetting limiter at once, another within 800 ms', async () => {
    const store = new MemoryStore();
    const a = new RateLimiter({ store });
    const b = new RateLimiter({ store });
    const scope: Scope = { tenant: randomTenant(), route };
    await cacheDenial(a, scope);
    await cacheDenial(b, { ...scope, route: 'other' });
    assert.equal(await a.reset(scope, policy), true);
    assert.equal((await a.take(scope, policy)).allowed, true, 'the resetter at once');
    assert.equal(await a.reset({ ...scope, route: 'other' }, policy), true);
    await sleep(800);
    const cached = b.stats().cachedDenials;
    assert.equal((await b.take({ ...scope, route: 'other' }, policy)).allowed, true);
    assert.equal(b.stats().cachedDenials, cached);
  });
});

describe('peek through the local denial cache', () => {
  it('a held denial answers the peek in process as the store would: refused, nothing left', async () => {
    const store = new RecordingStore();
    const limiter = new RateLimiter({ store });
    const uncached = new RateLimiter({ store: store.inner, denialCache: false });
    const policy = fixedWindow({ limit: 2, windowMs: 60_000, name: 'peek-cached' });
    const scope: Scope = { tenant: randomTenant(), route };
    assert.deepEqual(pick(await limiter.take(scope, policy)), {
      allowed: true,
      remaining: 1,
      limit: 2,
    });
    // The window is full: every take is refused until it ends, which the cache holds.
    assert.deepEqual(pick(await limiter.take(scope, policy)), {
      allowed: true,
      remaining: 0,
      limit: 2,
    });
    for (let i = 0; i < 50 && limiter.stats().cachedDenials === 0; i++) {
      assert.equal((await limiter.take(scope, policy)).allowed, false);
      await sleep(5);
    }
    assert.ok(limiter.stats().cachedDenials > 0, 'the denial is answered from the cache');
    const decisions = () => store.calls.filter((c) => c.script !== 'reset-epoch').length;
    for (const cost of [1, 2, 3]) {
      const sent = decisions();
      const peeked = await limiter.peek(scope, policy, { cost });
      assert.equal(decisions(), sent, `cost ${cost}: answered without a store call`);
      const fromStore = await uncached.peek(scope, policy, { cost });
      assert.deepEqual(pick(peeked), pick(fromStore), `cost ${cost}`);
      assert.deepEqual(pick(peeked), { allowed: false, remaining: 0, limit: 2 });
      if (cost <= 2) {
        assert.ok(peeked.retryAfterMs > 0 && peeked.retryAfterMs <= 60_001, `cost ${cost}`);
      } else assert.equal(peeked.retryAfterMs, Number.POSITIVE_INFINITY);
    }
  });
});

describe('takeAll validation: InvalidInputError naming the field, nothing sent', () => {
  const policy = fixedWindow({ limit: 5, windowMs: 60_000 });
  const tenant = 'acme';
  const item = (extra: Partial<TakeAllItem> = {}, user = 'u'): TakeAllItem => ({
    scope: { tenant, route, user },
    policy,
    ...extra,
  });
  const cases: [string, unknown, string][] = [
    ['no items', [], 'items'],
    ['17 items', Array.from({ length: 17 }, (_, i) => item({}, `u${i}`)), 'items'],
    ['not an array', { 0: item(), length: 1 }, 'items'],
    [
      'items of two tenants',
      [item(), { scope: { tenant: 'other', route }, policy }],
      'items[1].scope.tenant',
    ],
    ['the same scope and policy twice', [item(), item({}, 'v'), item()], 'items[2]'],
    ['a cost of 0', [item(), item({}, 'v'), item({ cost: 0 }, 'w')], 'items[2].cost'],
    ['a cost of 1.5', [item(), item({ cost: 1.5 }, 'v')], 'items[1].cost'],
    ['a cost of NaN', [item({ cost: Number.NaN })], 'items[0].cost'],
    [
      'a look-alike policy',
      [item(), item({ policy: { ...policy } as Policy }, 'v')],
      'items[1].policy',
    ],
    ['no policy', [item(), { scope: { tenant, route } }], 'items[1].policy'],
    ['an empty route', [item(), { scope: { tenant, route: '' }, policy }], 'items[1].scope.route'],
    ['an empty tenant', [{ scope: { tenant: '', route }, policy }], 'items[0].scope.tenant'],
    [
      'a user of the wrong type',
      [item(), { scope: { tenant, user: 7 }, policy }],
      'items[1].scope.user',
    ],
    ['a null item', [item(), null], 'items[1]'],
    ['no scope', [item(), { policy }], 'items[1].scope'],
  ];

  it('on a recording store', async () => {
    const store = new RecordingStore();
    const limiter = new RateLimiter({ store });
    for (const [label, items, field] of cases) {
      await assert.rejects(
        limiter.takeAll(items as TakeAllItem[]),
        (error: unknown) => {
          assert.ok(error instanceof InvalidInputError, `${label}: ${String(error)}`);
          assert.equal(error.field, field, label);
          return true;
        },
        label,
      );
    }
    assert.deepEqual(store.calls, [], 'nothing was sent');
    assert.equal(limiter.stats().invalid, cases.length);
    // A valid call is sent (the recording works).
    const ok = await limiter.takeAll([item(), item({}, 'v')]);
    assert.equal(ok.allowed, true);
    // One decision call (and the limiter's first reset-epoch read, for its denial cache).
    assert.deepEqual(
      (store.calls as RecordingStore['calls']).map((call) => call.script),
      ['reset-epoch', 'batch'],
    );
  });

  it('on Redis (INFO commandstats)', async () => {
    const limiter = new RateLimiter({ timeoutMs: TEST_TIMEOUT_MS, client: await redis.client() });
    const admin = await redis.admin();
    const sent = async () =>
      (await commandCalls(admin, 'evalsha')) + (await commandCalls(admin, 'eval'));
    const before = await sent();
    for (const [label, items, field] of cases) {
      await assert.rejects(limiter.takeAll(items as TakeAllItem[]), { field }, label);
    }
    assert.equal(await sent(), before, 'nothing was sent');
  });
});

for (const [storeName, makeStore] of Object.entries(STORES)) {
  describe(`takeAll all or nothing on ${storeName}`, () => {
    it('tenant-wide 5/min + per-user 2/min: a refused takeAll consumes nothing', async () => {
      const store = await makeStore();
      // No denial cache: every refusal here is decided by the store, with full decisions.
      const limiter = await store.limiter({ denialCache: false });
      const tenantWide = fixedWindow({ limit: 5, windowMs: 60_000, name: 'tenant-wide' });
      const perUser = fixedWindow({ limit: 2, windowMs: 60_000, name: 'per-user' });
      const tenant = randomTenant();
      const items = (user: string): TakeAllItem[] => [
        { scope: { tenant }, policy: tenantWide },
        { scope: { tenant, user }, policy: perUser },
      ];

      for (let n = 1; n <= 2; n++) {
        const r = await limiter.takeAll(items('u1'));
        assert.equal(r.allowed, true, `u1 takeAll ${n}`);
        assert.equal(r.cached, false);
        assert.equal(r.retryAfterMs, 0);
        assert.deepEqual(r.decisions.map(pick), [
          { allowed: true, remaining: 5 - n, limit: 5 },
          { allowed: true, remaining: 2 - n, limit: 2 },
        ]);
      }

      const refused = await limiter.takeAll(items('u1'));
      assert.equal(refused.allowed, false);
      assert.equal(refused.cached, false);
      const [wide, user] = refused.decisions as [Decision, Decision];
      assert.deepEqual(pick(wide), { allowed: false, remaining: 3, limit: 5 }, 'would have fitted');
      assert.equal(wide.retryAfterMs, 0);
      assert.ok(wide.resetMs > 0 && wide.resetMs <= 60_000, `resetMs ${wide.resetMs}`);
      assert.deepEqual(pick(user), { allowed: false, remaining: 0, limit: 2 }, 'blocking');
      assert.ok(user.retryAfterMs > 0 && user.retryAfterMs <= 60_001, `${user.retryAfterMs}`);
      assert.equal(refused.retryAfterMs, Math.max(wide.retryAfterMs, user.retryAfterMs));
      // Nothing consumed: 3 tenant-wide units left.
      const peeked = await limiter.peek({ tenant }, tenantWide);
      assert.deepEqual(pick(peeked), { allowed: true, remaining: 3, limit: 5 });

      for (let n = 1; n <= 2; n++) {
        const r = await limiter.takeAll(items('u2'));
        assert.equal(r.allowed, true, `u2 takeAll ${n}`);
        assert.deepEqual(r.decisions.map(pick), [
          { allowed: true, remaining: 3 - n, limit: 5 },
          { allowed: true, remaining: 2 - n, limit: 2 },
        ]);
      }
      // Tenant-wide: 1 left.
      assert.deepEqual(pick(await limiter.peek({ tenant }, tenantWide)), {
        allowed: true,
        remaining: 1,
        limit: 5,
      });
      assert.equal((await limiter.takeAll(items('u3'))).allowed, true);

      // Now the tenant-wide limit blocks, and u4's per-user item would have fitted.
      const blocked = await limiter.takeAll(items('u4'));
      assert.equal(blocked.allowed, false);
      const [wide4, user4] = blocked.decisions as [Decision, Decision];
      assert.deepEqual(pick(wide4), { allowed: false, remaining: 0, limit: 5 });
      assert.ok(wide4.retryAfterMs > 0 && wide4.retryAfterMs <= 60_001);
      assert.deepEqual(pick(user4), { allowed: false, remaining: 2, limit: 2 });
      assert.equal(user4.retryAfterMs, 0);
      assert.equal(blocked.retryAfterMs, wide4.retryAfterMs);
      // u4 took nothing: its whole per-user quota is left.
      assert.deepEqual(pick(await limiter.peek({ tenant, user: 'u4' }, perUser)), {
        allowed: true,
        remaining: 2,
        limit: 2,
      });
      if (store.snapshot) {
        const gone = await store.snapshot(limiter.keyOf({ tenant, user: 'u4' }, perUser));
        assert.equal(gone, null, 'the refused takeAll wrote no key for u4');
      }
    });

    it('with the denial cache on, a refusal still consumes nothing', async () => {
      const store = await makeStore();
      const limiter = await store.limiter();
      const tenantWide = fixedWindow({ limit: 5, windowMs: 60_000, name: 'tenant-wide' });
      const perUser = fixedWindow({ limit: 1, windowMs: 60_000, name: 'per-user' });
      const tenant = randomTenant();
      const items: TakeAllItem[] = [
        { scope: { tenant }, policy: tenantWide },
        { scope: { tenant, user: 'u1' }, policy: perUser },
      ];
      assert.equal((await limiter.takeAll(items)).allowed, true);
      for (let i = 0; i < 10; i++) {
        const r = await limiter.takeAll(items);
        assert.equal(r.allowed, false);
        assert.ok((r.decisions[1] as Decision).retryAfterMs > 0);
        assert.equal((r.decisions[0] as Decision).retryAfterMs, 0);
        assert.equal(r.retryAfterMs, (r.decisions[1] as Decision).retryAfterMs);
        await sleep(5);
      }
      // One takeAll admitted: 4 of 5 tenant-wide units left.
      assert.equal((await limiter.peek({ tenant }, tenantWide)).remaining, 4);
    });
  });
}
