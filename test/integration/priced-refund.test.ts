/**
 * A refund names the take it gives back from (`takeId`), on a real Redis under a test clock
 * (and on the in-memory twin): nothing given back leaks into a window, bucket state or
 * generation it was not taken from. The fixed window's case: 3 taken, the window rolls, 3
 * taken, a refund of the first 3, 3 more → 6 admitted in two windows of 3, not 9; the
 * analogue on every other algorithm. Refunds of one take are capped at its cost; a refund of
 * a take from before a reset, unknown, refused or without an id moves nothing.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import {
  fixedWindow,
  gcra,
  InvalidInputError,
  MemoryStore,
  type Policy,
  RateLimiter,
  slidingWindowCounter,
  slidingWindowLog,
  tokenBucket,
} from 'sluice';
import { ClockedRedisStore } from '../helpers/clocked.js';
import { randomTenant, TEST_TIMEOUT_MS, useRedis } from '../helpers/redis.js';

const redis = useRedis();
const route = 'POST/refund';
const START_US = 1_700_000_000_000_000;

/** A limiter on Redis (or the twin) under a clock the test moves. */
async function clocked(backend: 'redis' | 'memory') {
  let nowUs = START_US + Math.floor(Math.random() * 1e9);
  const options = { denialCache: false, timeoutMs: 10_000, maxBatchSize: 1 } as const;
  if (backend === 'memory') {
    const store = new MemoryStore({ clock: () => nowUs / 1000 });
    const advance = (ms: number) => {
      nowUs += ms * 1000;
    };
    return { limiter: new RateLimiter({ store, ...options }), advance };
  }
  const store = new ClockedRedisStore(await redis.client());
  store.nowUs = nowUs;
  return {
    limiter: new RateLimiter({ store, ...options }),
    advance: (ms: number) => {
      nowUs += ms * 1000;
      store.nowUs = nowUs;
    },
  };
}

/**
 * Each algorithm at 3 a period, and how long after a take its state has ended (the units it
 * took can no longer matter): the fixed window's next window, a full refill, the TAT drained,
 * the counter's window two back (its weight gone), the log's member out of the window.
 */
const cases: { policy: Policy; endsMs: number }[] = [
  { policy: fixedWindow({ limit: 3, windowMs: 1000 }), endsMs: 1000 },
  { policy: tokenBucket({ capacity: 3, refillTokens: 3, refillIntervalMs: 1000 }), endsMs: 1000 },
  { policy: gcra({ limit: 3, periodMs: 1000 }), endsMs: 1000 },
  { policy: slidingWindowCounter({ limit: 3, windowMs: 1000 }), endsMs: 2000 },
  { policy: slidingWindowLog({ limit: 3, windowMs: 1000 }), endsMs: 1000 },
];

/** A policy whose horizon outlives every case's state. */
const long = fixedWindow({ limit: 100, windowMs: 3_600_000, name: 'long' });

/** Admissions of `n` takes of 1. */
async function admitted(l: RateLimiter, scope: object, policy: Policy, n: number) {
  let count = 0;
  for (let i = 0; i < n; i++) if ((await l.take(scope as never, policy)).allowed) count++;
  return count;
}

for (const backend of ['redis', 'memory'] as const) {
  describe(`${backend}: a refund gives back only into the state its take came from`, () => {
    for (const { policy, endsMs } of cases) {
      it(`${policy.algorithm}: 3 taken, the state ends, 3 taken, a refund of the first 3, 3 more → 6 admitted, not 9`, async () => {
        const { limiter: l, advance } = await clocked(backend);
        const scope = { tenant: randomTenant(), route };
        // With an item of a long policy, so that the take's record outlives its state.
        const first = await l.takeAll(
          [
            { scope, policy, cost: 3 },
            { scope: { ...scope, route: 'other' }, policy: long },
          ],
          { id: 't1' },
        );
        assert.equal(first.allowed, true);
        advance(endsMs + 1);
        assert.equal((await l.take(scope, policy, { cost: 3, id: 't2' })).allowed, true);
        const refund = await l.refund(scope, policy, 3, { id: 'f1', takeId: 't1' });
        assert.deepEqual([refund.known, refund.applied, refund.remaining], [true, 0, 0]);
        assert.equal(await admitted(l, scope, policy, 3), 0, 'the refund gave the new state room');
        // A refund of the take of this state gives it back.
        const own = await l.refund(scope, policy, 3, { id: 'f2', takeId: 't2' });
        assert.deepEqual([own.known, own.applied], [true, -3]);
        assert.equal(await admitted(l, scope, policy, 4), 3);
      });

      it(`${policy.algorithm}: a refund after its take's record expired with the state moves nothing`, async () => {
        const { limiter: l, advance } = await clocked(backend);
        const scope = { tenant: randomTenant(), route };
        await l.take(scope, policy, { cost: 3, id: 't1' });
        advance(policy.horizonMs + 1);
        await l.take(scope, policy, { cost: 3 });
        const refund = await l.refund(scope, policy, 3, { id: 'f1', takeId: 't1' });
        assert.deepEqual([refund.known, refund.applied, refund.remaining], [false, 0, 0]);
        assert.equal(await admitted(l, scope, policy, 3), 0);
      });

      it(`${policy.algorithm}: a refund of a take from before a reset moves nothing in the fresh state`, async () => {
        const { limiter: l } = await clocked(backend);
        const scope = { tenant: randomTenant(), route };
        await l.take(scope, policy, { cost: 3, id: 't' });
        await l.reset(scope, policy);
        await l.take(scope, policy, { cost: 2 });
        const refund = await l.refund(scope, policy, 3, { id: 'f', takeId: 't' });
        assert.deepEqual([refund.known, refund.applied, refund.remaining], [true, 0, 1]);
        assert.equal((await l.peek(scope, policy)).remaining, 1);
      });

      it(`${policy.algorithm}: two refunds of one take give back at most its cost; a reservation's too`, async () => {
        const { limiter: l } = await clocked(backend);
        const scope = { tenant: randomTenant(), route };
        await l.take(scope, policy, { cost: 2, id: 't' });
        await l.take(scope, policy); // another take's unit, never given back by a refund of t
        const first = await l.refund(scope, policy, 2, { id: 'f1', takeId: 't' });
        const second = await l.refund(scope, policy, 2, { id: 'f2', takeId: 't' });
        assert.deepEqual([first.applied, second.applied, second.known], [-2, 0, true]);
        assert.equal((await l.peek(scope, policy)).remaining, 2);
        // A reservation: refunds lower what it holds; its settle then sets what was used.
        const fresh = { tenant: randomTenant(), route };
        const r = await l.reserve(fresh, policy, { cost: 3, id: 'r' });
        assert.equal((await l.refund(fresh, policy, 2, { id: 'g1', takeId: 'r' })).applied, -2);
        assert.equal((await l.refund(fresh, policy, 2, { id: 'g2', takeId: 'r' })).applied, -1);
        assert.equal((await l.refund(fresh, policy, 1, { id: 'g3', takeId: 'r' })).applied, 0);
        assert.equal((await r.settle(2)).applied, 2, 'the settle charges what was used');
        assert.equal((await l.peek(fresh, policy)).remaining, 1);
        // Settled: final, a refund of it moves nothing.
        assert.equal((await l.refund(fresh, policy, 1, { id: 'g4', takeId: 'r' })).applied, 0);
      });
    }

    it('fixed window: a refund retried 5 times is applied once; unknown, refused and id-less takes are known: false', async () => {
      const { limiter: l } = await clocked(backend);
      const policy = fixedWindow({ limit: 10, windowMs: 60_000 });
      const scope = { tenant: randomTenant(), route };
      await l.take(scope, policy, { cost: 7, id: 't' });
      const answers = [];
      for (let i = 0; i < 5; i++) {
        answers.push(await l.refund(scope, policy, 3, { id: 'f', takeId: 't' }));
      }
      assert.deepEqual(
        answers.map((a) => [a.applied, a.replayed]),
        [[-3, false], ...Array.from({ length: 4 }, () => [-3, true])],
      );
      assert.equal((await l.peek(scope, policy)).remaining, 6);
      await l.take(scope, policy, { cost: 1 }); // no id: nothing to name
      assert.equal((await l.take(scope, policy, { cost: 9, id: 'refused' })).allowed, false);
      for (const takeId of ['nope', 'refused']) {
        const r = await l.refund(scope, policy, 1, { id: `u-${takeId}`, takeId });
        assert.deepEqual([r.known, r.applied], [false, 0]);
      }
      // Another scope or policy than the take's: unknown.
      const other = await l.refund({ ...scope, user: 'u' }, policy, 1, { id: 'o', takeId: 't' });
      assert.equal(other.known, false);
      assert.equal((await l.peek(scope, policy)).remaining, 5);
      // Not recorded: the same refund id once its take exists applies.
      await l.take(scope, policy, { cost: 2, id: 'late' });
      assert.equal(
        (await l.refund(scope, policy, 2, { id: 'u-late', takeId: 'late' })).known,
        true,
      );
    });

    it('takeAll with an id: each item refundable on its own scope and policy, up to its cost', async () => {
      const { limiter: l } = await clocked(backend);
      const a = fixedWindow({ limit: 5, windowMs: 60_000, name: 'a' });
      const b = tokenBucket({ capacity: 5, refillTokens: 5, refillIntervalMs: 60_000 });
      const scope = { tenant: randomTenant(), route };
      const taken = await l.takeAll(
        [
          { scope, policy: a, cost: 2 },
          { scope, policy: b, cost: 3 },
        ],
        { id: 'all' },
      );
      assert.equal(taken.allowed, true);
      assert.equal((await l.refund(scope, b, 5, { id: 'fb', takeId: 'all' })).applied, -3);
      assert.equal((await l.peek(scope, a)).remaining, 3, 'the other item untouched');
      assert.equal((await l.refund(scope, a, 1, { id: 'fa', takeId: 'all' })).applied, -1);
      assert.equal((await l.refund(scope, a, 5, { id: 'fa2', takeId: 'all' })).applied, -1);
      assert.deepEqual(
        [(await l.peek(scope, a)).remaining, (await l.peek(scope, b)).remaining],
        [5, 5],
      );
      // The takeAll is still replayed: its record kept.
      assert.equal(
        (
          await l.takeAll(
            [
              { scope, policy: a, cost: 2 },
              { scope, policy: b, cost: 3 },
            ],
            { id: 'all' },
          )
        ).replayed,
        true,
      );
    });
  });
}

describe('refund: takeId is required', () => {
  it('an omitted or bad takeId is an InvalidInputError naming it, nothing sent', async () => {
    const client = await redis.client();
    const l = new RateLimiter({ timeoutMs: TEST_TIMEOUT_MS, client });
    const admin = await redis.admin();
    const policy = fixedWindow({ limit: 10, windowMs: 1000 });
    const scope = { tenant: randomTenant(), route };
    const field = (name: string) => (error: unknown) => {
      assert.ok(error instanceof InvalidInputError, String(error));
      assert.equal(error.field, name);
      return true;
    };
    const before = Number(
      /calls=(\d+)/.exec(
        String(await admin.client.sendCommand(['INFO', 'commandstats'])).match(
          /cmdstat_evalsha:[^\r\n]*/,
        )?.[0] ?? 'calls=0',
      )?.[1],
    );
    await assert.rejects(l.refund(scope, policy, 1, { id: 'f' } as never), field('options.takeId'));
    await assert.rejects(
      l.refund(scope, policy, 1, { id: 'f', takeId: '' }),
      field('options.takeId'),
    );
    await assert.rejects(
      l.refund(scope, policy, 1, { id: 'f', takeId: 'x'.repeat(129) }),
      field('options.takeId'),
    );
    await assert.rejects(l.refund(scope, policy, 1, { takeId: 't' } as never), field('options.id'));
    await assert.rejects(l.refund(scope, policy, 1, undefined as never), field('options'));
    await assert.rejects(
      l.refund(scope, policy, 1, { id: 'f', takeId: 't', extra: 1 } as never),
      field('options.extra'),
    );
    const after = Number(
      /calls=(\d+)/.exec(
        String(await admin.client.sendCommand(['INFO', 'commandstats'])).match(
          /cmdstat_evalsha:[^\r\n]*/,
        )?.[0] ?? 'calls=0',
      )?.[1],
    );
    assert.equal(after, before, 'nothing sent');
  });
});
