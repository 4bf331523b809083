/**
 * Model-based tests: for every policy, random operation sequences (fast-check) run against
 * the Redis script and its in-memory twin under one controlled clock must give identical
 * decisions, field by field.
 *
 * The fixed window keeps its time in Redis key TTLs (PTTL, SET … PX), which no test clock
 * controls, so its sequences move time only by whole windows (the key is deleted on Redis,
 * the memory clock jumps a window) and compare `resetMs` within the real time the test took.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import { fixedWindow } from '../../src/algorithms/fixed-window.js';
import { gcra } from '../../src/algorithms/gcra.js';
import type { Policy } from '../../src/algorithms/policy.js';
import { slidingWindowCounter } from '../../src/algorithms/sliding-window-counter.js';
import { slidingWindowLog } from '../../src/algorithms/sliding-window-log.js';
import { tokenBucket } from '../../src/algorithms/token-bucket.js';
import { RateLimiter } from '../../src/limiter.js';
import { MemoryStore } from '../../src/stores/memory.js';
import type { Decision } from '../../src/types.js';
import { ClockedRedisStore } from '../helpers/clocked.js';
import { keyFor, randomTenant, useRedis } from '../helpers/redis.js';

const redis = useRedis();
const RUNS = Number(process.env.SLUICE_MODEL_RUNS ?? 1000);
const route = 'r';
const START_US = 1_700_000_000_000_000;

type Op = { kind: 'take'; scope: number; cost: number } | { kind: 'advance'; us: number };

const ops = (maxCost: number, maxAdvanceUs: number) =>
  fc.array(
    fc.oneof(
      {
        weight: 3,
        arbitrary: fc.record({
          kind: fc.constant('take' as const),
          scope: fc.nat(2),
          cost: fc.integer({ min: 1, max: maxCost }),
        }),
      },
      {
        weight: 2,
        arbitrary: fc.record({
          kind: fc.constant('advance' as const),
          us: fc.integer({ min: 0, max: maxAdvanceUs }),
        }),
      },
      {
        // The server clock steps back now and then (NTP, a failover to a server behind).
        weight: 1,
        arbitrary: fc.record({
          kind: fc.constant('advance' as const),
          us: fc.integer({ min: -Math.floor(maxAdvanceUs / 4), max: -1 }),
        }),
      },
    ),
    { minLength: 1, maxLength: 25 },
  );

const shape = (d: Decision) => [d.allowed, d.remaining, d.limit, d.resetMs, d.retryAfterMs];

interface Case {
  readonly name: string;
  /** Policy options (printed as the counterexample when a run fails). */
  readonly options: fc.Arbitrary<Record<string, number>>;
  readonly build: (options: never) => Policy;
  readonly maxAdvanceUs: number;
}

const cases: Case[] = [
  {
    name: 'token bucket',
    options: fc.record({
      capacity: fc.integer({ min: 1, max: 8 }),
      refillTokens: fc.integer({ min: 1, max: 5 }),
      refillIntervalMs: fc.integer({ min: 1, max: 3000 }),
    }),
    build: tokenBucket,
    maxAdvanceUs: 4_000_000,
  },
  {
    name: 'sliding window log',
    options: fc.record({
      limit: fc.integer({ min: 1, max: 8 }),
      windowMs: fc.integer({ min: 1, max: 3000 }),
    }),
    build: slidingWindowLog,
    maxAdvanceUs: 2_000_000,
  },
  {
    name: 'sliding window counter',
    options: fc.record({
      limit: fc.integer({ min: 1, max: 8 }),
      windowMs: fc.integer({ min: 1, max: 3000 }),
    }),
    build: slidingWindowCounter,
    maxAdvanceUs: 2_000_000,
  },
  {
    name: 'GCRA',
    options: fc.record({
      limit: fc.integer({ min: 1, max: 8 }),
      periodMs: fc.integer({ min: 1, max: 3000 }),
      burst: fc.integer({ min: 1, max: 8 }),
    }),
    build: gcra,
    maxAdvanceUs: 2_000_000,
  },
];

describe('model: Redis script ≡ in-memory twin under a controlled clock', () => {
  for (const c of cases) {
    it(`${c.name}: ${RUNS} random sequences give identical decisions`, async () => {
      const client = await redis.client();
      await fc.assert(
        fc.asyncProperty(c.options, ops(10, c.maxAdvanceUs), async (options, sequence) => {
          const policy = c.build(options as never);
          const redisStore = new ClockedRedisStore(client);
          let nowUs = START_US + Math.floor(Math.random() * 1e9);
          const memory = new MemoryStore({ clock: () => nowUs / 1000 });
          const onRedis = new RateLimiter({
            store: redisStore,
            maxBatchSize: 1,
            denialCache: false,
          });
          const inMemory = new RateLimiter({ store: memory, maxBatchSize: 1, denialCache: false });
          const tenants = [randomTenant(), randomTenant(), randomTenant()];
          for (const op of sequence as Op[]) {
            if (op.kind === 'advance') {
              nowUs += op.us;
              continue;
            }
            redisStore.nowUs = nowUs;
            const scope = { tenant: tenants[op.scope] as string, route };
            const a = await onRedis.take(scope, policy, { cost: op.cost });
            const b = await inMemory.take(scope, policy, { cost: op.cost });
            assert.deepEqual(shape(a), shape(b), JSON.stringify({ op, nowUs }));
          }
        }),
        { numRuns: RUNS },
      );
    });
  }

  it(`fixed window: ${RUNS} random sequences give identical decisions (time moves by whole windows)`, async () => {
    const client = await redis.client();
    const admin = await redis.admin();
    await fc.assert(
      fc.asyncProperty(
        fc.integer({ min: 1, max: 8 }),
        fc.array(
          fc.oneof(
            {
              weight: 4,
              arbitrary: fc.record({
                kind: fc.constant('take' as const),
                scope: fc.nat(2),
                cost: fc.integer({ min: 1, max: 10 }),
              }),
            },
            {
              weight: 1,
              arbitrary: fc.record({ kind: fc.constant('expire' as const), scope: fc.constant(0) }),
            },
          ),
          { minLength: 1, maxLength: 25 },
        ),
        async (limit, sequence) => {
          const policy = fixedWindow({ limit, windowMs: 60_000 });
          let nowMs = 1_700_000_000_000;
          const memory = new MemoryStore({ clock: () => nowMs });
          const onRedis = new RateLimiter({ client, maxBatchSize: 1, denialCache: false });
          const inMemory = new RateLimiter({ store: memory, maxBatchSize: 1, denialCache: false });
          const tenants = [randomTenant(), randomTenant(), randomTenant()];
          const started = Date.now();
          for (const op of sequence) {
            const tenant = tenants[op.scope] as string;
            if (op.kind === 'expire') {
              // Every window ends: on Redis the keys go (as their TTLs would make them);
              // in memory the clock moves past the window.
              await admin.del(tenants.map((t) => keyFor(policy, t, route)));
              nowMs += 60_001;
              continue;
            }
            const a = await onRedis.take({ tenant, route }, policy, { cost: op.cost });
            const b = await inMemory.take({ tenant, route }, policy, { cost: op.cost });
            const slack = Date.now() - started + 1;
            assert.deepEqual([a.allowed, a.remaining, a.limit], [b.allowed, b.remaining, b.limit]);
            assert.ok(
              Math.abs(a.resetMs - b.resetMs) <= slack,
              `resetMs ${a.resetMs} vs ${b.resetMs}`,
            );
            assert.equal(Number.isFinite(a.retryAfterMs), Number.isFinite(b.retryAfterMs));
            if (Number.isFinite(a.retryAfterMs))
              assert.ok(Math.abs(a.retryAfterMs - b.retryAfterMs) <= slack);
          }
        },
      ),
      { numRuns: RUNS },
    );
  });
});
