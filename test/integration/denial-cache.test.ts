/**
 * The local denial cache never outlives the real denial, however late the reply arrives: a
 * hold is anchored at the time the request was sent (before the store decided), not at the
 * time its reply arrived. Replies are delayed by a store wrapper — on a MemoryStore whose
 * clock advances while the reply is "on the wire", and on a real Redis with a real wait.
 */
import assert from 'node:assert/strict';
import { performance } from 'node:perf_hooks';
import { describe, it } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { fixedWindow, MemoryStore, RateLimiter } from 'sluice';
import type { ScriptStore } from 'sluice/store';
import type { LuaScript } from '../../src/algorithms/script.js';
import { resetEpochScript } from '../../src/limiter/reset-epoch.js';
import { NodeRedisStore } from '../../src/redis/node-redis/stores.js';
import { randomTenant, TEST_TIMEOUT_MS, useRedis } from '../helpers/redis.js';

const redis = useRedis();
const route = 'GET/items';
/** A long window on another scope: its cached denial keeps the reset epoch confirmed. */
const primer = fixedWindow({ limit: 1, windowMs: 600_000, name: 'primer' });

/**
 * Delays the replies of decision scripts by `delayMs` (reset epoch reads pass at once) and
 * counts the decisions the store made. `wait` spends the delay: on an injected clock it
 * advances the clock, on Redis it sleeps.
 */
class DelayedStore implements ScriptStore {
  delayMs = 0;
  decisions = 0;
  readonly clock?: () => number;

  constructor(
    readonly inner: ScriptStore,
    private readonly wait: (ms: number) => Promise<void>,
  ) {
    if (inner.clock !== undefined) this.clock = inner.clock;
  }

  async evalScript(
    script: LuaScript,
    keys: readonly string[],
    args: readonly string[],
  ): Promise<unknown> {
    if (script === resetEpochScript) return this.inner.evalScript(script, keys, args);
    this.decisions++;
    const delayMs = this.delayMs;
    const reply = await this.inner.evalScript(script, keys, args);
    if (delayMs > 0) await this.wait(delayMs);
    return reply;
  }
}

/** Lets pending store replies (the reset epoch read) arrive. */
const tick = () => new Promise((resolve) => setImmediate(resolve));

/**
 * Puts the limiter's cache in service: denials on the primer scope are cached once a reset
 * epoch read has confirmed the epoch — the first read empties the cache, and on Redis it may
 * return after the take it went with (NOSCRIPT), so take until a denial is answered locally.
 */
async function prime(limiter: RateLimiter): Promise<void> {
  const scope = { tenant: randomTenant(), route };
  assert.equal((await limiter.take(scope, primer)).allowed, true);
  for (let i = 0; i < 5 && limiter.stats().cachedDenials === 0; i++) {
    assert.equal((await limiter.take(scope, primer)).allowed, false);
    await tick();
  }
  assert.ok(limiter.stats().cachedDenials > 0, 'the cache is answering');
}

describe('a delayed reply never makes a cached denial outlive the real one', () => {
  it('MemoryStore, reply delayed 300 ms: at the window end (+5 ms from the send) the store decides and admits', async () => {
    const T = 1_000_000;
    const time = { now: T };
    const store = new DelayedStore(new MemoryStore({ clock: () => time.now }), async (ms) => {
      time.now += ms; // the reply is on the wire while the clock runs
    });
    const limiter = new RateLimiter({ store });
    // Another replica, on the same store, spends the quota.
    const other = new RateLimiter({ store: new DelayedStore(store.inner, async () => {}) });
    await prime(limiter);
    const policy = fixedWindow({ limit: 1, windowMs: 1000 });
    const scope = { tenant: randomTenant(), route };
    assert.equal((await other.take(scope, policy)).allowed, true); // window [T, T + 1000]

    time.now = T + 100;
    store.delayMs = 300;
    const denied = await limiter.take(scope, policy); // sent at T + 100, arrives at T + 400
    store.delayMs = 0;
    assert.equal(time.now, T + 400, 'the reply arrived 300 ms after the send');
    assert.deepEqual(
      [denied.allowed, denied.remaining, denied.resetMs, denied.retryAfterMs],
      [false, 0, 900, 901],
    );

    // Until the real window ends, the cache answers (and the epoch stays confirmed).
    for (const at of [T + 400, T + 999]) {
      time.now = at;
      const before = limiter.stats().cachedDenials;
      assert.equal((await limiter.take(scope, policy)).allowed, false);
      assert.equal(limiter.stats().cachedDenials, before + 1, `cached at T + ${at - T}`);
      await tick();
    }

    // The window ends at send + resetMs = T + 1000. A hold anchored at the reply's arrival
    // would last until T + 1300.
    time.now = T + 1005;
    const decisions = store.decisions;
    const cached = limiter.stats().cachedDenials;
    const after = await limiter.take(scope, policy);
    assert.equal(store.decisions, decisions + 1, 'decided by the store, not the cache');
    assert.equal(limiter.stats().cachedDenials, cached);
    assert.deepEqual([after.allowed, after.remaining], [true, 0]);
  });

  it('Redis, reply delayed 400 ms: once the key expired the store decides and admits', async () => {
    const admin = await redis.admin();
    const store = new DelayedStore(new NodeRedisStore((await redis.client()).client), (ms) =>
      sleep(ms),
    );
    const limiter = new RateLimiter({ store, timeoutMs: 5000 });
    // Another replica, on its own connection, spends the quota.
    const other = new RateLimiter({
      timeoutMs: TEST_TIMEOUT_MS,
      client: await redis.client(),
      denialCache: false,
    });
    const policy = fixedWindow({ limit: 1, windowMs: 800 });
    const scope = { tenant: randomTenant(), route };
    const key = limiter.keyOf(scope, policy);
    await prime(limiter);
    assert.equal((await other.take(scope, policy)).allowed, true);

    store.delayMs = 400;
    const sentAt = performance.now();
    const denied = await limiter.take(scope, policy);
    const arrivedAt = performance.now();
    store.delayMs = 0;
    assert.equal(denied.allowed, false);
    assert.ok(denied.resetMs > 0 && denied.resetMs <= 800, `resetMs ${denied.resetMs}`);
    // Cached, and this take sends the epoch read that keeps the cache in service below.
    const before = limiter.stats().cachedDenials;
    assert.equal((await limiter.take(scope, policy)).allowed, false);
    assert.equal(limiter.stats().cachedDenials, before + 1, 'the delayed denial was cached');
    await tick();
    // Shortly before the window ends: still cached (and the epoch read is sent again).
    await sleep(sentAt + denied.resetMs - 200 - performance.now());
    assert.equal((await limiter.take(scope, policy)).allowed, false);
    assert.equal(limiter.stats().cachedDenials, before + 2, 'cached until the window ends');
    await tick();

    // Wait for Redis to drop the window (it ends resetMs after the script ran).
    const bound = performance.now() + 5000;
    while ((await admin.client.exists(key)) === 1) {
      if (performance.now() > bound) assert.fail('the window key did not expire on Redis');
      await sleep(2);
    }
    const takenAt = performance.now();
    // A hold anchored at the arrival would still deny here: the check is meaningful.
    assert.ok(
      takenAt < arrivedAt + denied.resetMs - 50,
      `taken ${(takenAt - sentAt).toFixed(0)} ms after the send, the reply arrived after ${(arrivedAt - sentAt).toFixed(0)} ms, resetMs ${denied.resetMs}`,
    );
    const decisions = store.decisions;
    const cached = limiter.stats().cachedDenials;
    const after = await limiter.take(scope, policy);
    assert.equal(store.decisions, decisions + 1, 'decided by Redis, not the cache');
    assert.equal(limiter.stats().cachedDenials, cached);
    assert.deepEqual([after.allowed, after.remaining], [true, 0]);
  });
});
