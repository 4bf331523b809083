/**
 * The conformance suite: one table of scenarios, run for every policy on every store —
 * Redis through every client sluice recognises (a `connectRedis` connection, a node-redis
 * client of one's own, ioredis, iovalkey, Valkey GLIDE) and MemoryStore — on real time. A
 * new algorithm joins by adding one row to POLICIES, a new client one row to STORES. The
 * clients after the first three run every scenario but the two that wait on the clock
 * (C07, steady rate) for every policy, and those two for the fixed window only: the waits
 * test the algorithms, which the first rows cover, not the client.
 */
import assert from 'node:assert/strict';
import { after, describe, it } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { GlideClient, Logger } from '@valkey/valkey-glide';
import { Redis } from 'ioredis';
import { Redis as Valkey } from 'iovalkey';
import { createClient } from 'redis';
import type { Decision, Policy } from 'sluice';
import {
  fixedWindow,
  gcra,
  MemoryStore,
  RateLimiter,
  type RateLimiterOptions,
  slidingWindowCounter,
  slidingWindowLog,
  tokenBucket,
} from 'sluice';
import { IOREDIS_OPTIONS } from 'sluice/ioredis';
import { GLIDE_OPTIONS } from 'sluice/valkey-glide';
import { resetEpochKey } from '../../src/key.js';
import { EPOCH_TTL_MS } from '../../src/limiter/reset-epoch.js';
import { randomTenant, useRedis } from '../helpers/redis.js';

/**
 * The ioredis clients of the `ioredis` row, disconnected after the file — before the server
 * stops (this hook is registered first): ioredis waits 2 s for a socket already closed.
 */
const ioredisClients: Redis[] = [];
const closers: (() => unknown)[] = [];
after(() => {
  for (const client of ioredisClients) client.disconnect();
  for (const close of closers) close();
});
// GLIDE's core logs every error reply at WARN on stdout.
Logger.setLoggerConfig('off');

const redis = useRedis();
const route = 'POST/orders';

/** Every policy as "limit units per window of windowMs, all at once at most". */
const POLICIES: Record<string, (limit: number, windowMs: number) => Policy> = {
  'fixed window': (limit, windowMs) => fixedWindow({ limit, windowMs, version: 'conf' }),
  'sliding window log': (limit, windowMs) => slidingWindowLog({ limit, windowMs, version: 'conf' }),
  'sliding window counter': (limit, windowMs) =>
    slidingWindowCounter({ limit, windowMs, version: 'conf' }),
  'token bucket': (limit, windowMs) =>
    tokenBucket({
      capacity: limit,
      refillTokens: limit,
      refillIntervalMs: windowMs,
      version: 'conf',
    }),
  GCRA: (limit, windowMs) => gcra({ limit, periodMs: windowMs, burst: limit, version: 'conf' }),
};

/** A connected ioredis client as sluice requires it (no offline queue), as `options.client`. */
async function ioredisClient(fork = false): Promise<RateLimiterOptions['client']> {
  // iovalkey takes ioredis's options (it is a fork of it).
  const Client = (fork ? Valkey : Redis) as typeof Redis;
  const client = new Client({
    host: '127.0.0.1',
    port: redis.server.port,
    ...IOREDIS_OPTIONS,
    lazyConnect: true,
  });
  client.on('error', () => {}); // the tests assert on the typed outcomes instead
  ioredisClients.push(client);
  await client.connect();
  // Recognised at construction (stores/select.ts); the option's type names node-redis's.
  return client as unknown as RateLimiterOptions['client'];
}

/** A node-redis client of one's own, created as docs/redis.md says. */
async function nodeRedisClient(): Promise<RateLimiterOptions['client']> {
  const client = createClient({ url: redis.server.url, disableOfflineQueue: true });
  client.on('error', () => {});
  await client.connect();
  closers.push(() => client.destroy());
  return client as unknown as RateLimiterOptions['client'];
}

/** A GLIDE client, created as docs/redis.md says. */
async function glideClient(): Promise<RateLimiterOptions['client']> {
  const client = await GlideClient.createClient({
    addresses: [{ host: '127.0.0.1', port: redis.server.port }],
    ...GLIDE_OPTIONS,
  });
  closers.push(() => client.close());
  return client as unknown as RateLimiterOptions['client'];
}

/**
 * The suite proves what is decided, not how fast: a deadline a loaded machine (the suite runs
 * four files at a time) does not reach on a fresh connection's first script load.
 */
const CONF_TIMEOUT_MS = 2_000;

/** Three limiters on one client kind (three connections), each made by `connect`. */
const threeOn = (connect: () => Promise<RateLimiterOptions['client']>) => () =>
  Promise.all(
    [0, 1, 2].map(
      async () =>
        new RateLimiter({ client: await connect(), namespace: 'conf', timeoutMs: CONF_TIMEOUT_MS }),
    ),
  );

/** The stores after the first three run the clock-bound scenarios on one policy only. */
const FULL = new Set(['redis', 'ioredis', 'memory']);
const CLOCKED_POLICY = 'fixed window';

/** Three limiters sharing one store: three Redis connections, or one MemoryStore. */
const STORES: Record<string, () => Promise<RateLimiter[]>> = {
  redis: () =>
    Promise.all(
      [0, 1, 2].map(
        async () =>
          new RateLimiter({
            client: await redis.client(),
            namespace: 'conf',
            timeoutMs: CONF_TIMEOUT_MS,
          }),
      ),
    ),
  ioredis: () =>
    Promise.all(
      [0, 1, 2].map(
        async () =>
          new RateLimiter({
            client: await ioredisClient(),
            namespace: 'conf',
            timeoutMs: CONF_TIMEOUT_MS,
          }),
      ),
    ),
  memory: async () => {
    const store = new MemoryStore();
    return [0, 1, 2].map(
      () => new RateLimiter({ store, namespace: 'conf', timeoutMs: CONF_TIMEOUT_MS }),
    );
  },
  'node-redis createClient': threeOn(nodeRedisClient),
  iovalkey: threeOn(() => ioredisClient(true)),
  'valkey-glide GlideClient': threeOn(glideClient),
};

for (const [storeName, makeLimiters] of Object.entries(STORES)) {
  for (const [policyName, policyOf] of Object.entries(POLICIES)) {
    /** A scenario that waits on the clock: on every store for one policy, else on the first three. */
    const clocked = FULL.has(storeName) || policyName === CLOCKED_POLICY ? it : undefined;
    describe(`conformance: ${policyName} on ${storeName}`, () => {
      it('30 concurrent takes over 3 limiters, capacity 10 → exactly 10, remaining 9…0 once each', async () => {
        const limiters = await makeLimiters();
        const policy = policyOf(10, 60_000);
        const tenant = randomTenant();
        const decisions = await Promise.all(
          Array.from({ length: 30 }, (_, i) =>
            (limiters[i % 3] as RateLimiter).take({ tenant, route }, policy),
          ),
        );
        const admitted = decisions.filter((d) => d.allowed);
        assert.equal(admitted.length, 10);
        assert.deepEqual(
          admitted.map((d) => d.remaining).sort((a, b) => a - b),
          [0, 1, 2, 3, 4, 5, 6, 7, 8, 9],
        );
        for (const d of decisions) assert.ok(d.remaining >= 0 && d.remaining <= d.limit);
      });

      it('case C05: a rejected weighted take consumes nothing', async () => {
        const [limiter] = (await makeLimiters()) as [RateLimiter];
        const policy = policyOf(10, 600_000);
        const scope = { tenant: randomTenant(), route };
        const a = await limiter.take(scope, policy, { cost: 8 });
        assert.deepEqual([a.allowed, a.remaining], [true, 2]);
        const b = await limiter.take(scope, policy, { cost: 5 });
        assert.deepEqual([b.allowed, b.remaining], [false, 2]);
        assert.ok(b.retryAfterMs > 0 && Number.isFinite(b.retryAfterMs));
        const c = await limiter.take(scope, policy, { cost: 2 });
        assert.deepEqual([c.allowed, c.remaining], [true, 0]);
      });

      it('case C06: a cost above the limit never fits, says so, and changes nothing', async () => {
        const [limiter] = (await makeLimiters()) as [RateLimiter];
        const policy = policyOf(10, 60_000);
        const scope = { tenant: randomTenant(), route };
        const huge = await limiter.take(scope, policy, { cost: 11 });
        assert.deepEqual([huge.allowed, huge.remaining, huge.retryAfterMs], [false, 10, Infinity]);
        const big = await limiter.take(scope, policy, { cost: 1_000_000 });
        assert.deepEqual([big.allowed, big.retryAfterMs], [false, Infinity]);
        const all = await limiter.take(scope, policy, { cost: 10 });
        assert.deepEqual([all.allowed, all.remaining], [true, 0]);
      });

      clocked?.(
        'case C07: exhaust, then waiting out retryAfterMs (+5 ms) admits again',
        async () => {
          const [limiter] = (await makeLimiters()) as [RateLimiter];
          const policy = policyOf(1, 700);
          const scope = { tenant: randomTenant(), route };
          assert.equal((await limiter.take(scope, policy)).allowed, true);
          const denied = await limiter.take(scope, policy);
          assert.equal(denied.allowed, false);
          assert.ok(
            denied.retryAfterMs > 0 && denied.retryAfterMs <= 1401,
            `retryAfterMs ${denied.retryAfterMs}`,
          );
          await sleep(denied.retryAfterMs + 5);
          assert.equal((await limiter.take(scope, policy)).allowed, true);
        },
      );

      it('peek tells the units left now and what the following take decides, and consumes nothing', async () => {
        const [limiter] = (await makeLimiters()) as [RateLimiter];
        const policy = policyOf(10, 600_000);
        const scope = { tenant: randomTenant(), route };
        const started = Date.now();
        /**
         * `later` (a peek or a take of `cost`, 0 for a peek) agrees with the peek before it: the
         * same admission, the units the peek saw less what `later` took; times may differ by the
         * time between them. The peek's resetMs is the state's before `later`: what `later`
         * reports unless it took something (then a peek after it reports what it did).
         */
        const same = (peeked: Decision, later: Decision, cost: number, what: string) => {
          const slack = Date.now() - started + 1;
          const taken = peeked.allowed ? cost : 0;
          assert.deepEqual(
            [later.allowed, later.remaining, later.limit],
            [peeked.allowed, peeked.remaining - taken, peeked.limit],
            what,
          );
          if (taken === 0) {
            assert.ok(Math.abs(later.resetMs - peeked.resetMs) <= slack, `${what}: resetMs`);
          }
          if (Number.isFinite(peeked.retryAfterMs)) {
            assert.ok(
              Math.abs(later.retryAfterMs - peeked.retryAfterMs) <= slack,
              `${what}: retryAfterMs ${peeked.retryAfterMs} then ${later.retryAfterMs}`,
            );
          } else assert.equal(later.retryAfterMs, Infinity, `${what}: retryAfterMs`);
        };
        // A fresh scope: the whole quota is left; a peek admits, and admits again (nothing
        // was consumed).
        const fresh = await limiter.peek(scope, policy, { cost: 3 });
        assert.deepEqual([fresh.allowed, fresh.remaining, fresh.resetMs], [true, 10, 0]);
        same(fresh, await limiter.peek(scope, policy, { cost: 3 }), 0, 'peek twice');
        same(fresh, await limiter.take(scope, policy, { cost: 3 }), 3, 'take 3 after its peek');
        // Partly used (7 left): admitted, then denied (cost above what is left), then never fits.
        for (const [cost, allowed, left] of [
          [4, true, 7],
          [5, false, 3],
          [11, false, 3],
        ] as const) {
          const peeked = await limiter.peek(scope, policy, { cost });
          assert.deepEqual([peeked.allowed, peeked.remaining], [allowed, left], `peek ${cost}`);
          same(peeked, await limiter.peek(scope, policy, { cost }), 0, `peek ${cost} twice`);
          const taken = await limiter.take(scope, policy, { cost });
          same(peeked, taken, cost, `take ${cost} after it`);
          const after = await limiter.peek(scope, policy);
          assert.equal(after.remaining, taken.remaining, `peek after take ${cost}: remaining`);
          assert.ok(
            Math.abs(after.resetMs - taken.resetMs) <= Date.now() - started + 1,
            `peek after take ${cost}: resetMs ${taken.resetMs} then ${after.resetMs}`,
          );
        }
        // Used up: the peek denies as the take does.
        assert.equal((await limiter.take(scope, policy, { cost: 3 })).remaining, 0);
        const last = await limiter.peek(scope, policy);
        assert.deepEqual([last.allowed, last.remaining], [false, 0]);
        assert.ok(last.retryAfterMs > 0 && Number.isFinite(last.retryAfterMs));
        same(last, await limiter.take(scope, policy), 1, 'take 1 when used up');
      });

      it('takeAll of a tenant-wide and a per-route limit is all or nothing: 30 concurrent over 3 limiters, 10 each → exactly 10', async () => {
        const limiters = await makeLimiters();
        const policy = policyOf(10, 60_000);
        const tenant = randomTenant();
        const routes = ['GET/a', 'GET/b'];
        const results = await Promise.all(
          Array.from({ length: 30 }, (_, i) =>
            (limiters[i % 3] as RateLimiter).takeAll([
              { scope: { tenant }, policy },
              { scope: { tenant, route: routes[i % 2] as string }, policy },
            ]),
          ),
        );
        const admitted = results.filter((r) => r.allowed);
        assert.equal(admitted.length, 10);
        for (const r of results) {
          assert.equal(r.cached, false);
          if (r.allowed) {
            assert.ok(r.decisions.every((d) => d.allowed));
            assert.equal(r.retryAfterMs, 0);
          } else {
            assert.ok(r.decisions.every((d) => !d.allowed));
            const [wide, perRoute] = r.decisions as [Decision, Decision];
            assert.equal(wide.remaining, 0);
            assert.ok(wide.retryAfterMs > 0 && r.retryAfterMs === wide.retryAfterMs);
            assert.equal(perRoute.retryAfterMs, 0, 'the per-route item would have fitted');
          }
        }
        const [limiter] = limiters as [RateLimiter];
        assert.equal((await limiter.peek({ tenant }, policy)).remaining, 0);
        // The refused calls took nothing from their routes: 10 taken from 2 × 10.
        const left = await Promise.all(
          routes.map(async (r) => (await limiter.peek({ tenant, route: r }, policy)).remaining),
        );
        const [a = 0, b = 0] = left;
        assert.equal(a + b, 10, `per-route remaining ${left}`);
      });

      it('takeAll: a per-route limit that binds first leaves the tenant-wide limit untouched', async () => {
        const limiters = await makeLimiters();
        const wide = policyOf(20, 60_000);
        const perRoute = policyOf(10, 60_000);
        const tenant = randomTenant();
        const results = await Promise.all(
          Array.from({ length: 30 }, (_, i) =>
            (limiters[i % 3] as RateLimiter).takeAll([
              { scope: { tenant }, policy: wide },
              { scope: { tenant, route }, policy: perRoute },
            ]),
          ),
        );
        assert.equal(results.filter((r) => r.allowed).length, 10);
        const [limiter] = limiters as [RateLimiter];
        assert.equal((await limiter.peek({ tenant }, wide)).remaining, 10);
        assert.equal((await limiter.peek({ tenant, route }, perRoute)).remaining, 0);
      });

      it('reset: true, then false (nothing left), and the next take starts afresh', async () => {
        const [limiter] = (await makeLimiters()) as [RateLimiter];
        const policy = policyOf(10, 600_000);
        const scope = { tenant: randomTenant(), route };
        assert.equal(await limiter.reset(scope, policy), false, 'nothing to reset yet');
        assert.equal((await limiter.take(scope, policy, { cost: 10 })).allowed, true);
        assert.equal((await limiter.take(scope, policy)).allowed, false);
        assert.equal(await limiter.reset(scope, policy), true);
        assert.equal(await limiter.reset(scope, policy), false);
        const fresh = await limiter.take(scope, policy);
        assert.deepEqual([fresh.allowed, fresh.remaining, fresh.retryAfterMs], [true, 9, 0]);
      });

      clocked?.(
        'steady rate: takes at half the rate (spaced 2 × windowMs / limit) are all admitted',
        async () => {
          const [limiter] = (await makeLimiters()) as [RateLimiter];
          const policy = policyOf(4, 400);
          const scope = { tenant: randomTenant(), route };
          const results: boolean[] = [];
          for (let i = 0; i < 8; i++) {
            results.push((await limiter.take(scope, policy)).allowed);
            await sleep(200);
          }
          assert.deepEqual(results, Array(8).fill(true));
        },
      );
    });
  }
}

describe('conformance: the boundary burst side by side (case C11)', () => {
  it('fixed window admits 2 × limit across its edge; the sliding log never more than limit in a window', async () => {
    const limiter = new RateLimiter({
      client: await redis.client(),
      namespace: 'conf',
      timeoutMs: CONF_TIMEOUT_MS,
    });
    const afterEdge: Record<string, number> = {};
    for (const name of ['fixed window', 'sliding window log'] as const) {
      const policy = (POLICIES[name] as (l: number, w: number) => Policy)(10, 2000);
      const scope = { tenant: randomTenant(), route };
      const burst = (n: number) =>
        Promise.all(Array.from({ length: n }, () => limiter.take(scope, policy)));
      const first = await limiter.take(scope, policy); // t = 0
      await sleep(1600);
      const late = await burst(9); // t ≈ 1.6 s
      assert.equal(late.filter((d) => d.allowed).length, 9, name);
      await sleep(first.resetMs - 1600 + 50);
      afterEdge[name] = (await burst(10)).filter((d) => d.allowed).length; // t ≈ 2.05 s
    }
    // Fixed window: a new window, 10 more — 19 within ~0.45 s (the documented 2 × limit).
    assert.equal(afterEdge['fixed window'], 10);
    // Sliding log: only the take at t = 0 has left the window, so exactly one more fits.
    assert.equal(afterEdge['sliding window log'], 1);
  });
});

describe('case C04: the application server’s clock never decides', () => {
  it('token bucket 4, refill 2/s: replica B with a clock 10 s behind (then ahead) is denied like A would be', async () => {
    const a = new RateLimiter({
      client: await redis.client(),
      namespace: 'conf',
      timeoutMs: CONF_TIMEOUT_MS,
    });
    const b = new RateLimiter({
      client: await redis.client(),
      namespace: 'conf',
      timeoutMs: CONF_TIMEOUT_MS,
    });
    const policy = tokenBucket({
      capacity: 4,
      refillTokens: 2,
      refillIntervalMs: 1000,
      version: 'c04',
    });
    const scope = { tenant: randomTenant(), route };
    const realNow = Date.now;
    try {
      const first = [];
      for (let i = 0; i < 4; i++) first.push((await a.take(scope, policy)).remaining);
      assert.deepEqual(first, [3, 2, 1, 0]);
      for (const skewMs of [-10_000, 10_000]) {
        Date.now = () => realNow() + skewMs;
        const skewed = await b.take(scope, policy);
        Date.now = realNow;
        assert.equal(skewed.allowed, false, `skew ${skewMs} ms`);
        assert.ok(
          skewed.retryAfterMs > 0 && skewed.retryAfterMs <= 500,
          `retryAfterMs ${skewed.retryAfterMs}`,
        );
      }
      const started = realNow();
      const more = await Promise.all([1, 2, 3, 4].map(() => a.take(scope, policy)));
      const elapsedS = (realNow() - started + 60) / 1000;
      assert.ok(more.filter((d) => d.allowed).length <= Math.floor(2 * elapsedS) + 1);
    } finally {
      Date.now = realNow;
    }
  });
});

describe('conformance: every key has a bounded TTL after the run', () => {
  it('PTTL of every key the suite wrote on Redis is positive and at most its window (× 2 for the counter)', async () => {
    const admin = await redis.admin();
    const keys = await admin.client.keys('conf:*');
    assert.ok(keys.length > 0);
    for (const key of keys) {
      const pttl = await admin.client.pTTL(key);
      // -2: the key expired since KEYS listed it (a short window's), which is what a TTL is for.
      if (pttl === -2) continue;
      // The namespace's reset epoch (written by the reset rows) lives a day, by design.
      const most = key === resetEpochKey('conf') ? EPOCH_TTL_MS : 1_200_000;
      assert.ok(pttl > 0 && pttl <= most, `${key} PTTL ${pttl}`);
    }
  });
});
