/**
 * Property-based fuzzing of the public API (fast-check): arbitrary values thrown at `take`,
 * the policy builders and the HTTP guard give a valid decision or a typed error — never a
 * crash, an untyped error, a synchronous throw, or (for invalid input) a write to Redis.
 */
import assert from 'node:assert/strict';
import { createServer, type Server } from 'node:http';
import { after, describe, it } from 'node:test';
import fc from 'fast-check';
import type { Decision } from 'sluice';
import {
  fixedWindow,
  gcra,
  InvalidInputError,
  isSluiceError,
  RateLimiter,
  slidingWindowCounter,
  slidingWindowLog,
  tokenBucket,
} from 'sluice';
import { withRateLimit } from 'sluice/node';
import { type Client, commandCalls, TEST_TIMEOUT_MS, useRedis } from '../helpers/redis.js';

const redis = useRedis();
const servers: Server[] = [];
after(() => {
  for (const server of servers) server.close();
});

/** Script calls the server ran so far (EVALSHA and EVAL). */
async function scriptCalls(admin: Client): Promise<number> {
  return (await commandCalls(admin, 'evalsha')) + (await commandCalls(admin, 'eval'));
}

/**
 * `pending` resolves an answer that `valid` accepts, or rejects with a typed error; for
 * invalid input, with no script call since `before`.
 */
async function answeredOrTyped(
  pending: Promise<unknown>,
  admin: Client,
  before: number,
  valid: (answer: unknown) => boolean,
): Promise<void> {
  try {
    assert.ok(valid(await pending));
  } catch (error) {
    if (error instanceof assert.AssertionError) throw error;
    assert.ok(isSluiceError(error), String(error));
    if (error instanceof InvalidInputError) {
      assert.equal(await scriptCalls(admin), before, 'invalid input reached Redis');
    }
  }
}

/** Anything at all, with the shapes that have broken libraries before. */
const anything = fc.oneof(
  fc.anything(),
  fc.string({ maxLength: 70_000 }),
  fc.string({ unit: 'binary', maxLength: 64 }),
  fc.constantFrom(
    '',
    '__proto__',
    'constructor',
    '{}',
    '*',
    '\ud800',
    'ten{ant}x',
    -0,
    2 ** 53,
    Number.NaN,
    Infinity,
  ),
  fc.dictionary(
    fc.constantFrom('__proto__', 'tenant', 'route', 'cost', 'limit', 'windowMs'),
    fc.anything(),
  ),
);

const builders = [
  (o: unknown) => fixedWindow(o as never),
  (o: unknown) => slidingWindowLog(o as never),
  (o: unknown) => slidingWindowCounter(o as never),
  (o: unknown) => tokenBucket(o as never),
  (o: unknown) => gcra(o as never),
];

function validDecision(d: Decision): boolean {
  return (
    typeof d.allowed === 'boolean' &&
    Number.isInteger(d.remaining) &&
    d.remaining >= 0 &&
    d.remaining <= d.limit &&
    d.resetMs >= 0 &&
    (d.retryAfterMs === Number.POSITIVE_INFINITY ||
      (Number.isInteger(d.retryAfterMs) && d.retryAfterMs >= 0))
  );
}

describe('fuzzing the public API', () => {
  it('policy builders: a frozen policy or InvalidInputError, nothing else', () => {
    fc.assert(
      fc.property(fc.nat(builders.length - 1), anything, (i, options) => {
        try {
          const policy = (builders[i] as (o: unknown) => unknown)(options);
          assert.ok(Object.isFrozen(policy));
        } catch (error) {
          assert.ok(error instanceof InvalidInputError, String(error));
        }
      }),
      { numRuns: 2000 },
    );
  });

  it('blockMs and escalate: a frozen policy or InvalidInputError', () => {
    fc.assert(
      fc.property(
        fc.nat(builders.length - 1),
        fc.oneof(anything, fc.integer()),
        fc.oneof(
          anything,
          fc.record({ factor: anything, maxMs: anything, withinMs: anything }),
          fc.record({ factor: fc.integer(), maxMs: fc.integer(), withinMs: fc.integer() }),
        ),
        (i, blockMs, escalate) => {
          const base = [
            { limit: 5, windowMs: 1000 },
            { capacity: 5, refillIntervalMs: 1000 },
            { limit: 5, windowMs: 1000 },
            { limit: 5, windowMs: 1000 },
            { limit: 5, periodMs: 1000 },
          ][i];
          try {
            const policy = (builders[i] as (o: unknown) => unknown)({ ...base, blockMs, escalate });
            assert.ok(Object.isFrozen(policy));
          } catch (error) {
            assert.ok(error instanceof InvalidInputError, String(error));
          }
        },
      ),
      { numRuns: 1000 },
    );
  });

  it('reserve, settle, cancel, refund, charge: an answer or a typed error; invalid input sends nothing', async () => {
    const limiter = new RateLimiter({
      timeoutMs: TEST_TIMEOUT_MS,
      client: await redis.client(),
      namespace: 'fuzz-priced',
    });
    const admin = await redis.admin();
    const policies = [
      fixedWindow({ limit: 5, windowMs: 60_000 }),
      slidingWindowLog({ limit: 5, windowMs: 60_000 }),
      slidingWindowLog({ limit: 10_000, windowMs: 60_000 }), // above the priced bound
    ];
    const scope = { tenant: 'fuzz', route: 'r' };
    await fc.assert(
      fc.asyncProperty(
        fc.nat(4),
        fc.oneof(fc.constant(scope), anything),
        fc.oneof(fc.constantFrom(...policies), anything),
        fc.oneof(fc.integer({ min: -2, max: 8 }), anything),
        fc.oneof(
          fc.constant(undefined),
          anything,
          fc.record({ id: anything, cost: anything }),
          fc.record({ id: anything, takeId: anything }),
        ),
        async (op, s, p, n, options) => {
          const before = await scriptCalls(admin);
          let pending: Promise<unknown>;
          try {
            pending = [
              () => limiter.reserve(s as never, p as never, options as never),
              () =>
                limiter.settle(
                  s as never,
                  p as never,
                  (options as { id?: never })?.id as never,
                  n as never,
                ),
              () => limiter.cancel(s as never, p as never, n as never),
              () => limiter.refund(s as never, p as never, n as never, options as never),
              () => limiter.charge(s as never, p as never, n as never, options as never),
            ][op]?.() as Promise<unknown>;
          } catch (error) {
            assert.fail(`threw synchronously: ${String(error)}`);
          }
          await answeredOrTyped(pending, admin, before, (answer) => {
            const { allowed, applied } = answer as { allowed?: unknown; applied?: unknown };
            return typeof allowed === 'boolean' || Number.isInteger(applied);
          });
        },
      ),
      { numRuns: 300 },
    );
  });

  it('take: a valid decision or a typed error, never a synchronous throw; invalid input sends nothing', async () => {
    const limiter = new RateLimiter({
      timeoutMs: TEST_TIMEOUT_MS,
      client: await redis.client(),
      namespace: 'fuzz',
    });
    const admin = await redis.admin();
    const policies = [
      fixedWindow({ limit: 5, windowMs: 60_000 }),
      tokenBucket({ capacity: 5, refillIntervalMs: 1000 }),
      gcra({ limit: 5, periodMs: 1000 }),
    ];
    await fc.assert(
      fc.asyncProperty(
        fc.oneof(anything, fc.record({ tenant: anything, route: anything })),
        fc.oneof(
          fc.nat(policies.length - 1).map((i) => policies[i]),
          anything,
        ),
        fc.oneof(fc.constant(undefined), anything, fc.record({ cost: anything })),
        async (scope, policy, options) => {
          const before = await scriptCalls(admin);
          let pending: Promise<Decision>;
          try {
            pending = limiter.take(scope as never, policy as never, options as never);
          } catch (error) {
            assert.fail(`take threw synchronously: ${String(error)}`);
          }
          await answeredOrTyped(pending, admin, before, (d) => validDecision(d as Decision));
        },
      ),
      { numRuns: 500 },
    );
    assert.equal(
      limiter.stats().unavailable + limiter.stats().storeError + limiter.stats().timeout,
      0,
    );
  });

  it('HTTP guard: any identity, cost or header answers a clean status and never crashes the server', async () => {
    const limiter = new RateLimiter({
      timeoutMs: TEST_TIMEOUT_MS,
      client: await redis.client(),
      namespace: 'fuzz',
    });
    let identity: unknown;
    let cost: unknown;
    let handled = 0;
    const unhandled: unknown[] = [];
    const onUnhandled = (reason: unknown) => unhandled.push(reason);
    process.on('unhandledRejection', onUnhandled);
    const listener = withRateLimit(
      {
        limiter,
        policy: fixedWindow({ limit: 3, windowMs: 60_000 }),
        route: 'POST/orders',
        identify: () => identity as string,
        cost: () => cost as number,
      },
      (_req, res) => {
        handled++;
        res.end('ok');
      },
    );
    const server = createServer(listener);
    servers.push(server);
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const address = server.address();
    const url = `http://127.0.0.1:${typeof address === 'object' && address ? address.port : 0}/orders?x=1`;
    try {
      await fc.assert(
        fc.asyncProperty(
          anything,
          anything,
          fc.string({ maxLength: 200 }),
          async (id, c, header) => {
            identity = id;
            cost = c;
            const before = handled;
            const res = await fetch(url, {
              method: 'POST',
              headers: {
                'x-forwarded-for': header.replace(/[^\x20-\x7e]/g, ''),
                'x-tenant': 'spoof',
              },
            });
            await res.arrayBuffer();
            assert.ok([200, 401, 429, 500, 503].includes(res.status), `status ${res.status}`);
            if (res.status !== 200)
              assert.equal(handled, before, 'the handler ran for a refused request');
          },
        ),
        { numRuns: 300 },
      );
      assert.deepEqual(unhandled, []);
    } finally {
      process.off('unhandledRejection', onUnhandled);
    }
  });
});
