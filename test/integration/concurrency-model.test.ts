/**
 * Model-based test of the concurrency policy: random sequences of acquisitions, releases,
 * renewals, peeks and takeAll (with a token bucket), clock moves (forward, and back as a
 * server clock may step) and foreign sorted sets (scores around now, ±inf, more members than
 * the limit, with or without a TTL) run against `concurrency.lua` on Redis — its clocked
 * variant (`helpers/clocked.ts`), alone and in the batch script — and its in-memory twin
 * under one controlled clock must give identical answers, field by field. After every
 * operation that writes, no key outlives one lease on the test clock.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import type { Decision, TakeAllResult } from 'sluice';
import { concurrency, MemoryStore, RateLimiter, tokenBucket } from 'sluice';
import { ClockedRedisStore } from '../helpers/clocked.js';
import { randomTenant, useRedis } from '../helpers/redis.js';

const redis = useRedis();
const RUNS = Math.max(1, Math.round(Number(process.env.SLUICE_MODEL_RUNS ?? 1000) / 2));
const IDS = ['a', 'b', 'c', 'd', 'e', 'f'];

type Op =
  | { kind: 'acquire' | 'release' | 'renew'; scope: number; id: number }
  | { kind: 'peek'; scope: number; cost: number }
  | { kind: 'takeAll'; scope: number }
  | { kind: 'advance'; ms: number }
  | {
      kind: 'seed';
      scope: number;
      members: { at: number | 'inf' | '-inf'; id: number }[];
      ttl: number | null;
    };

const scope = fc.nat(1);
const op = (leaseMs: number): fc.Arbitrary<Op> =>
  fc.oneof(
    {
      weight: 6,
      arbitrary: fc.record({ kind: fc.constant('acquire' as const), scope, id: fc.nat(5) }),
    },
    {
      weight: 4,
      arbitrary: fc.record({ kind: fc.constant('release' as const), scope, id: fc.nat(5) }),
    },
    {
      weight: 3,
      arbitrary: fc.record({ kind: fc.constant('renew' as const), scope, id: fc.nat(5) }),
    },
    {
      weight: 2,
      arbitrary: fc.record({
        kind: fc.constant('peek' as const),
        scope,
        cost: fc.integer({ min: 1, max: 2 }),
      }),
    },
    { weight: 2, arbitrary: fc.record({ kind: fc.constant('takeAll' as const), scope }) },
    {
      weight: 4,
      arbitrary: fc.record({
        kind: fc.constant('advance' as const),
        ms: fc.integer({ min: 0, max: leaseMs }),
      }),
    },
    {
      weight: 1,
      arbitrary: fc.record({
        kind: fc.constant('advance' as const),
        ms: fc.integer({ min: -leaseMs, max: -1 }),
      }),
    },
    {
      weight: 1,
      arbitrary: fc.record({
        kind: fc.constant('seed' as const),
        scope,
        members: fc.array(
          fc.record({
            at: fc.oneof(
              { weight: 8, arbitrary: fc.integer({ min: -2 * leaseMs, max: 3 * leaseMs }) },
              { weight: 1, arbitrary: fc.constantFrom('inf' as const, '-inf' as const) },
            ),
            id: fc.nat(8),
          }),
          { minLength: 1, maxLength: 16 },
        ),
        ttl: fc.option(fc.integer({ min: 1, max: 3 * leaseMs }), { freq: 3 }),
      }),
    },
  );

const shape = (d: Decision) => [d.allowed, d.remaining, d.limit, d.resetMs, d.retryAfterMs];

async function outcome(call: () => Promise<unknown>): Promise<unknown> {
  try {
    const value = await call();
    if (typeof value === 'boolean') return value;
    if (typeof value === 'object' && value !== null && 'decisions' in value) {
      const r = value as TakeAllResult;
      return [r.allowed, r.decisions.map(shape), r.leases?.length ?? 0];
    }
    return shape(value as Decision);
  } catch (error) {
    return `${(error as Error).name}: ${(error as Error).message}`;
  }
}

describe('model: concurrency.lua ≡ its in-memory twin under a controlled clock', () => {
  it(`${RUNS} random sequences (acquire, release, renew, peek, takeAll, clock steps, foreign sets)`, async () => {
    const client = await redis.client();
    const admin = (await redis.admin()).client;
    await fc.assert(
      fc.asyncProperty(
        fc
          .record({
            limit: fc.integer({ min: 1, max: 4 }),
            leaseMs: fc.integer({ min: 100, max: 2000 }),
          })
          .chain((options) =>
            fc.tuple(
              fc.constant(options),
              fc.array(op(options.leaseMs), { minLength: 1, maxLength: 25 }),
            ),
          ),
        fc.integer({ min: 1, max: 3 }),
        async ([options, sequence], batch) => {
          const policy = concurrency(options);
          const rate = tokenBucket({ capacity: 3, refillTokens: 1, refillIntervalMs: 500 });
          const redisStore = new ClockedRedisStore(client);
          let nowMs = 1_700_000_000_000 + Math.floor(Math.random() * 1e6);
          let highMs = nowMs;
          const memory = new MemoryStore({ clock: () => nowMs });
          const settings = { maxBatchSize: batch, denialCache: false, timeoutMs: 10_000 } as const;
          const onRedis = new RateLimiter({ store: redisStore, ...settings });
          const inMemory = new RateLimiter({ store: memory, ...settings });
          const tenant = randomTenant();
          const scopes = [{ tenant }, { tenant, route: 'r' }];
          const keys = scopes.map((s) => onRedis.keyOf(s, policy));
          const exempt = new Set<string>();
          for (const o of sequence) {
            const context = () => JSON.stringify({ o, nowMs, options });
            if (o.kind === 'advance') {
              nowMs += o.ms;
              highMs = Math.max(highMs, nowMs);
              continue;
            }
            redisStore.nowUs = nowMs * 1000;
            const s = scopes[o.scope] as (typeof scopes)[number];
            const key = keys[o.scope] as string;
            if (o.kind === 'seed') {
              const values = o.members.flatMap((m) => [
                typeof m.at === 'number' ? String(nowMs + m.at) : m.at,
                IDS[m.id] ?? `x${m.id}`,
              ]);
              const vexp = o.ttl === null ? '' : String(nowMs + o.ttl);
              await admin.sendCommand([
                'EVAL',
                "redis.call('DEL', KEYS[1], KEYS[1] .. ':vexp') redis.call('ZADD', KEYS[1], unpack(ARGV, 2)) if ARGV[1] ~= '' then redis.call('SET', KEYS[1] .. ':vexp', ARGV[1]) end return 1",
                '1',
                key,
                vexp,
                ...values,
              ]);
              const byMember = new Map<string, number>();
              for (let i = 0; i < values.length; i += 2) {
                const v = values[i] as string;
                byMember.set(
                  values[i + 1] as string,
                  v === 'inf' ? Infinity : v === '-inf' ? -Infinity : Number(v),
                );
              }
              const zset = [...byMember].map(([m, sc]): [number, string] => [sc, m]);
              zset.sort(([a, m], [b, n]) => (a < b ? -1 : a > b ? 1 : m < n ? -1 : m > n ? 1 : 0));
              memory.seed(key, 'zset', zset, o.ttl ?? undefined);
              if (o.ttl === null || o.ttl > options.leaseMs) exempt.add(key);
              else exempt.delete(key);
              continue;
            }
            const run = (l: RateLimiter): Promise<unknown> => {
              const id = IDS[(o as { id: number }).id] as string;
              if (o.kind === 'acquire') return l.acquire(s, policy, { id });
              if (o.kind === 'release') return l.release(s, policy, id);
              if (o.kind === 'renew') return l.renew(s, policy, id);
              if (o.kind === 'peek') return l.peek(s, policy, { cost: o.cost });
              return l.takeAll([
                { scope: s, policy },
                { scope: { tenant, route: 'rate' }, policy: rate },
              ]);
            };
            // Twice at once: both go in one batch when maxBatchSize allows.
            const a = await Promise.all([outcome(() => run(onRedis)), outcome(() => run(onRedis))]);
            const b = await Promise.all([
              outcome(() => run(inMemory)),
              outcome(() => run(inMemory)),
            ]);
            assert.deepEqual(a, b, context());
            if (o.kind === 'peek') continue;
            exempt.delete(key);
            const [exists, vexp] = (await admin.sendCommand([
              'EVAL',
              "return { redis.call('EXISTS', KEYS[1]), redis.call('GET', KEYS[1] .. ':vexp') or '' }",
              '1',
              key,
            ])) as [number, string];
            if (exists === 0 || exempt.has(key)) continue;
            assert.ok(vexp !== '', `no TTL: ${context()}`);
            if (Number(vexp) < nowMs) continue;
            assert.ok(
              Number(vexp) - highMs <= options.leaseMs,
              `TTL beyond a lease: ${context()} vexp ${vexp}`,
            );
          }
        },
      ),
      { numRuns: RUNS, includeErrorInReport: true },
    );
  });
});
