/**
 * Model-based tests: for every policy, random operation sequences (fast-check) run against
 * the Redis script and its in-memory twin under one controlled clock must give identical
 * decisions, field by field.
 *
 * Redis runs the clocked variant of each script (see `helpers/clocked.ts`; the batch script
 * of peek, takeAll and reset included), so time — TTLs too — is the test's. A sequence works
 * on the keys of one tenant: three scopes (tenant-wide, per route, per user) under two
 * policies of the case's algorithm, with takes, peeks, takeAll of 2–3 of those keys, resets,
 * clock moves (forward, and back as a server clock may step) and foreign state: the same
 * arbitrary value written into a key of both stores (on Redis by hand, in memory with
 * `MemoryStore.seed`), with a virtual TTL or none.
 *
 * After every operation, no key on Redis may outlive one horizon of its policy: a key the
 * operation wrote (a take, an admitted takeAll) has a virtual TTL of at most the horizon from
 * now; any other key at most the horizon from the latest time the clock reached. Only
 * foreign state that no take has touched yet (a peek or a refused takeAll writes nothing) is
 * exempt.
 *
 * The script bugs this model found (foreign state, see the end of this file) are pinned on
 * the production scripts, on Redis time, as plain regression tests.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import type { Decision, Policy, ReserveAllResult, Scope, Settlement, TakeAllResult } from 'sluice';
import {
  fixedWindow,
  gcra,
  MemoryStore,
  RateLimiter,
  slidingWindowCounter,
  slidingWindowLog,
  tokenBucket,
} from 'sluice';
import { digest, tenantTag } from '../../src/key.js';
import { ClockedRedisStore } from '../helpers/clocked.js';
import { type Client, randomTenant, TEST_TIMEOUT_MS, useRedis } from '../helpers/redis.js';

const redis = useRedis();
const RUNS = Number(process.env.SLUICE_MODEL_RUNS ?? 1000);
/** Sequences per case: each runs more operations than it once did, so fewer of them. */
const CASE_RUNS = Math.max(1, Math.round(RUNS / 2));
const START_US = 1_700_000_000_000_000;

/** A key of the sequence: scope 0 tenant-wide, 1 per route, 2 per user; policy 0 or 1. */
interface Target {
  readonly scope: number;
  readonly policy: number;
}
interface Item extends Target {
  readonly cost: number;
}

/** Foreign state for a key, in terms of the case's algorithm (see `Case.foreign`). */
type Spec = unknown;

/** A take's idempotency key (few of them, so that they repeat), or null for none. */
type Id = string | null;

type Op =
  | ({ kind: 'take'; id?: Id } & Item)
  | ({ kind: 'peek' } & Item)
  | { kind: 'takeAll'; items: Item[]; id?: Id }
  | ({ kind: 'reset' } & Target)
  | { kind: 'retry' }
  | ({ kind: 'reserve'; id: string } & Item)
  | { kind: 'reserveAll'; items: Item[]; id: string }
  | ({ kind: 'settle'; id: string; actual: number } & Target)
  | ({ kind: 'refund'; id: string; takeId: string } & Item)
  | ({ kind: 'charge'; id: Id } & Item)
  | { kind: 'advance'; us: number }
  | ({ kind: 'seed'; state: Spec; ttl: number | null } & Target);

/** A value as both stores hold it: Redis gets strings (and score/member pairs). */
type Stored =
  | { kind: 'string'; value: string }
  | { kind: 'hash'; value: Record<string, string> }
  | { kind: 'zset'; value: [score: number, member: string][] };

/** What a seed writes into a key, given the key's policy arguments and the clock. */
type Materialize = (spec: never, args: readonly number[], nowUs: number) => Stored;

interface Case {
  readonly name: string;
  /** Policy options (printed as the counterexample when a run fails). */
  readonly options: fc.Arbitrary<Record<string, number>>;
  readonly build: (options: never) => Policy;
  readonly maxAdvanceUs: number;
  /** Foreign state of this algorithm's kind of key (data only, so that it prints). */
  readonly foreign: fc.Arbitrary<Spec>;
  readonly materialize: Materialize;
}

// --- Foreign values -----------------------------------------------------------------------

/**
 * A number field: `at` thousandths of a scale (a count's range, a horizon of time), so in
 * range, out of range or negative; `half` adds 0.5 (not an integer); or a literal `text`
 * (junk, or a notation only some parsers take); `null` when the field is absent.
 */
type Field = { at: number; half: boolean } | { text: string } | null;

const JUNK = [
  '',
  'abc',
  '1.5',
  '-1',
  '-0',
  '2.0',
  ' 3',
  '1e2',
  '1e400',
  'inf',
  '-inf',
  'nan',
  '9007199254740993',
  '+2',
  '01',
  '0x10',
  '0x1p3',
  'infinity',
];

const field = (min: number, max: number): fc.Arbitrary<Field> =>
  fc.oneof(
    { weight: 6, arbitrary: fc.record({ at: fc.integer({ min, max }), half: fc.boolean() }) },
    { weight: 2, arbitrary: fc.record({ text: fc.constantFrom(...JUNK) }) },
    { weight: 1, arbitrary: fc.constant(null) },
  );

/** `field` as text: `base + at / 1000 × scale` (rounded, +0.5 when `half`). */
function text(f: Exclude<Field, null>, base: number, scale: number): string {
  if ('text' in f) return f.text;
  return String(base + Math.round((f.at * scale) / 1000) + (f.half ? 0.5 : 0));
}

/** A hash of the given fields (absent ones left out). */
function hash(fields: Record<string, string | undefined>): Stored {
  const value: Record<string, string> = {};
  for (const [name, v] of Object.entries(fields)) if (v !== undefined) value[name] = v;
  // A hash with none of the script's fields.
  if (Object.keys(value).length === 0) value.x = '1';
  return { kind: 'hash', value };
}

const opt = (f: Field, base: number, scale: number) =>
  f === null ? undefined : text(f, base, scale);

/** A key of another kind than the algorithm's: every script must fail with WRONGTYPE. */
const WRONG = { wrongType: true } as const;
const withWrongType = (spec: fc.Arbitrary<Spec>) =>
  fc.oneof({ weight: 12, arbitrary: spec }, { weight: 1, arbitrary: fc.constant(WRONG) });
const wrong = (kind: Stored['kind']): Stored =>
  kind === 'hash' ? { kind: 'string', value: 'x' } : { kind: 'hash', value: { x: '1' } };

const ms = (nowUs: number) => Math.floor(nowUs / 1000);

/** The largest running total of a sliding-window-log member (2^53 − 1). */
const MAX_TOTAL = Number.MAX_SAFE_INTEGER;

/** A score: thousandths of a window from now, or ±inf. */
const score: fc.Arbitrary<Exclude<Field, null>> = fc.oneof(
  {
    weight: 12,
    arbitrary: fc.record({ at: fc.integer({ min: -2000, max: 2000 }), half: fc.boolean() }),
  },
  { weight: 1, arbitrary: fc.record({ text: fc.constantFrom('inf', '-inf') }) },
);

/** A score in the last window and a bit (the log's own entries, mostly). */
const recent: fc.Arbitrary<Exclude<Field, null>> = fc.record({
  at: fc.integer({ min: -1200, max: 0 }),
  half: fc.constant(false),
});

/**
 * A sliding-window-log member that is not a take of the log at hand: a weighted-log member
 * (`<total>:<cost>`, in range or not), the per-unit log's `<ms>:<n>`, or junk.
 */
type LogMember = { total: string; cost: string } | { unit: number } | { text: string };
const logMember: fc.Arbitrary<LogMember> = fc.oneof(
  {
    weight: 4,
    arbitrary: fc.record({
      // 16 digits: small, or about 2^53 (the largest a member may carry is 2^53 − 1).
      total: fc.oneof(
        fc.nat(40).map((n) => String(n).padStart(16, '0')),
        fc.constantFrom(
          '9007199254740990',
          '9007199254740991',
          '9007199254740992',
          '9007199254740993',
          '9999999999999999',
        ),
      ),
      cost: fc.oneof(
        fc.integer({ min: 1, max: 9 }).map(String),
        fc.constantFrom('0', '01', '-1', '1.5', '', '99'),
      ),
    }),
  },
  { weight: 2, arbitrary: fc.record({ unit: fc.nat(9) }) },
  {
    weight: 1,
    arbitrary: fc.record({
      text: fc.constantFrom(
        'm',
        '',
        '3',
        ':3',
        '000000000000003:3',
        '00000000000000003:3',
        '0000000000000003:3 ',
        '0000000000000003:3\n',
        ' 0000000000000003:3',
        '000000000000000x:3',
      ),
    }),
  },
);

interface LogSpec {
  readonly base: number;
  readonly takes: readonly { at: Exclude<Field, null>; cost: number }[];
  readonly others: readonly { at: Exclude<Field, null>; member: LogMember }[];
}

// --- Cases --------------------------------------------------------------------------------

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
    // s: scaled tokens (in/out of [0, capacity × interval]); t: the last write, from three
    // horizons ago to three ahead (a step back of the clock, or far ahead).
    foreign: withWrongType(fc.record({ s: field(-300, 1300), t: field(-3000, 3000) })),
    materialize: ((spec: { s: Field; t: Field } | typeof WRONG, args, nowUs) => {
      if ('wrongType' in spec) return wrong('hash');
      const [capacity, rate, interval] = args as [number, number, number];
      const full = capacity * interval;
      const horizon = Math.ceil(full / rate);
      return hash({ s: opt(spec.s, 0, full), t: opt(spec.t, ms(nowUs), horizon) });
    }) as Materialize,
  },
  {
    name: 'sliding window log',
    options: fc.record({
      limit: fc.integer({ min: 1, max: 8 }),
      windowMs: fc.integer({ min: 1, max: 3000 }),
    }),
    build: slidingWindowLog,
    maxAdvanceUs: 2_000_000,
    // A log this policy could have written (takes of cost 1–9, mostly in the last window;
    // their running total from `base`), and beside it (or alone) other members: of the weighted log with totals and
    // costs in and out of range, of the per-unit log before it (`<ms>:<n>`), or junk. Scores
    // from two windows ago to two ahead, some not whole ms; rarely ±inf.
    foreign: withWrongType(
      fc.record({
        base: fc.oneof(
          { weight: 4, arbitrary: fc.nat(20) },
          { weight: 1, arbitrary: fc.integer({ min: MAX_TOTAL - 12, max: MAX_TOTAL }) },
        ),
        takes: fc.array(
          fc.record({
            at: fc.oneof({ weight: 3, arbitrary: recent }, { weight: 1, arbitrary: score }),
            cost: fc.oneof(fc.integer({ min: 1, max: 2 }), fc.integer({ min: 1, max: 9 })),
          }),
          { maxLength: 8 },
        ),
        others: fc.array(fc.record({ at: score, member: logMember }), { maxLength: 3 }),
      }),
    ),
    materialize: ((spec: LogSpec | typeof WRONG, args, nowUs) => {
      if ('wrongType' in spec) return wrong('zset');
      const window = args[1] as number;
      const scoreOf = (f: Exclude<Field, null>) => {
        const t = text(f, ms(nowUs), window);
        return t === 'inf' ? Infinity : t === '-inf' ? -Infinity : Number(t);
      };
      const entries: [number, string][] = [];
      let total = spec.base;
      const takes = spec.takes.map((t) => ({ score: scoreOf(t.at), cost: t.cost }));
      takes.sort((a, b) => (a.score < b.score ? -1 : a.score > b.score ? 1 : 0));
      for (const take of takes) {
        total += take.cost;
        entries.push([take.score, `${String(total).padStart(16, '0')}:${take.cost}`]);
      }
      spec.others.forEach((other, i) => {
        const score = scoreOf(other.at);
        const m = other.member;
        const member =
          'text' in m
            ? m.text
            : 'unit' in m
              ? `${Number.isFinite(score) ? Math.floor(score) : ms(nowUs)}:${m.unit + i}`
              : `${m.total}:${m.cost}`;
        entries.push([score, member]);
      });
      // One member once (the last write wins, as in one ZADD), in Redis's order.
      const byMember = new Map(entries.map(([score, member]) => [member, score]));
      const value = [...byMember].map(([member, score]): [number, string] => [score, member]);
      value.sort(([s1, m1], [s2, m2]) =>
        s1 < s2 ? -1 : s1 > s2 ? 1 : m1 < m2 ? -1 : m1 > m2 ? 1 : 0,
      );
      if (value.length === 0) value.push([ms(nowUs), 'm']);
      return { kind: 'zset', value };
    }) as Materialize,
  },
  {
    name: 'sliding window counter',
    options: fc.record({
      limit: fc.integer({ min: 1, max: 8 }),
      windowMs: fc.integer({ min: 1, max: 3000 }),
    }),
    build: slidingWindowCounter,
    maxAdvanceUs: 2_000_000,
    // w: the window of a time from three horizons ago to three ahead; c, p: counts in/out of
    // [0, limit].
    foreign: withWrongType(
      fc.record({ w: field(-3000, 3000), c: field(-300, 1300), p: field(-300, 1300) }),
    ),
    materialize: ((spec: { w: Field; c: Field; p: Field } | typeof WRONG, args, nowUs) => {
      if ('wrongType' in spec) return wrong('hash');
      const [limit, window] = args as [number, number];
      const w =
        spec.w === null || 'text' in spec.w
          ? opt(spec.w, 0, 0)
          : String(
              Math.floor((ms(nowUs) + Math.round((spec.w.at * 2 * window) / 1000)) / window) +
                (spec.w.half ? 0.5 : 0),
            );
      return hash({ w, c: opt(spec.c, 0, limit), p: opt(spec.p, 0, limit) });
    }) as Materialize,
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
    // The TAT (µs), from three tolerances ago to three ahead.
    foreign: withWrongType(field(-3000, 3000).filter((f) => f !== null)),
    materialize: ((spec: Exclude<Field, null> | typeof WRONG, args, nowUs) => {
      if ('wrongType' in spec) return wrong('string');
      const [interval, burst] = args as [number, number];
      return { kind: 'string', value: text(spec, nowUs, burst * interval) };
    }) as Materialize,
  },
  {
    name: 'fixed window',
    options: fc.record({
      limit: fc.integer({ min: 1, max: 8 }),
      windowMs: fc.integer({ min: 1, max: 3000 }),
    }),
    build: fixedWindow,
    maxAdvanceUs: 2_000_000,
    // The count, in/out of [0, limit], also in forms only `tonumber` takes (' 3', '2.0').
    foreign: withWrongType(field(-300, 1300).filter((f) => f !== null)),
    materialize: ((spec: Exclude<Field, null> | typeof WRONG, args) => {
      if ('wrongType' in spec) return wrong('string');
      return { kind: 'string', value: text(spec, 0, args[0] as number) };
    }) as Materialize,
  },
];

// --- Operations ---------------------------------------------------------------------------

const target = { scope: fc.nat(2), policy: fc.nat(1) };
/** Blocks on the first policy, now and then (a fixed block, or an escalating one). */
const blockOptions = fc.oneof(
  { weight: 2, arbitrary: fc.constant({}) },
  {
    weight: 1,
    arbitrary: fc
      .record({
        blockMs: fc.integer({ min: 1, max: 2000 }),
        escalate: fc.option(
          fc.record({
            factor: fc.integer({ min: 2, max: 4 }),
            times: fc.integer({ min: 1, max: 8 }),
            withinMs: fc.integer({ min: 1, max: 2000 }),
          }),
          { nil: undefined },
        ),
      })
      .map(({ blockMs, escalate }) =>
        escalate === undefined
          ? { blockMs }
          : {
              blockMs,
              escalate: {
                factor: escalate.factor,
                maxMs: blockMs * escalate.times,
                withinMs: escalate.withinMs,
              },
            },
      ),
  },
);
const takeId = fc.option(fc.constantFrom('a', 'b', 'c'), { freq: 2 });
const pricedId = fc.constantFrom('a', 'b', 'c');
const cost = (maxCost: number) =>
  fc.oneof(fc.integer({ min: 1, max: 3 }), fc.integer({ min: 1, max: maxCost }));

/** 1–3 (at least `minLength`) items of distinct scopes and policies, as takeAll takes them. */
const distinctItems = (maxCost: number, minLength: number) =>
  fc.uniqueArray(fc.record({ ...target, cost: cost(maxCost) }), {
    minLength,
    maxLength: 3,
    selector: (item) => item.scope * 2 + item.policy,
  });

/** A seed: foreign state and its virtual TTL in thousandths of the horizon (null: none). */
const seedOp = (c: Case) =>
  fc.record({
    kind: fc.constant('seed' as const),
    ...target,
    state: c.foreign,
    ttl: fc.option(fc.integer({ min: 0, max: 3000 }), { freq: 3 }),
  });

const ops = (c: Case, maxCost: number): fc.Arbitrary<Op[]> =>
  fc.array(
    fc.oneof(
      {
        weight: 6,
        arbitrary: fc.record({
          kind: fc.constant('take' as const),
          ...target,
          cost: cost(maxCost),
          id: takeId,
        }),
      },
      {
        weight: 2,
        arbitrary: fc.record({
          kind: fc.constant('peek' as const),
          ...target,
          cost: cost(maxCost),
        }),
      },
      {
        weight: 2,
        arbitrary: fc.record({
          kind: fc.constant('takeAll' as const),
          items: distinctItems(maxCost, 2),
          id: takeId,
        }),
      },
      { weight: 1, arbitrary: fc.record({ kind: fc.constant('reset' as const), ...target }) },
      // The last take or takeAll with an id, sent again (a retry after a lost reply).
      { weight: 2, arbitrary: fc.record({ kind: fc.constant('retry' as const) }) },
      // Priced at the end: reserve, settle (a cancel is a settle of 0), refund, charge.
      {
        weight: 3,
        arbitrary: fc.record({
          kind: fc.constant('reserve' as const),
          ...target,
          cost: cost(maxCost),
          id: pricedId,
        }),
      },
      {
        weight: 2,
        arbitrary: fc.record({
          kind: fc.constant('reserveAll' as const),
          items: distinctItems(maxCost, 1),
          id: pricedId,
        }),
      },
      {
        weight: 3,
        arbitrary: fc.record({
          kind: fc.constant('settle' as const),
          ...target,
          id: pricedId,
          actual: fc.oneof(fc.constant(0), fc.integer({ min: 0, max: maxCost + 3 })),
        }),
      },
      {
        weight: 1,
        arbitrary: fc.record({
          kind: fc.constant('refund' as const),
          ...target,
          cost: cost(maxCost),
          id: pricedId,
          // The take (a take or takeAll with an id) or reservation it gives back from.
          takeId: pricedId,
        }),
      },
      {
        weight: 1,
        arbitrary: fc.record({
          kind: fc.constant('charge' as const),
          ...target,
          cost: fc.integer({ min: 1, max: 2 * maxCost }),
          id: takeId,
        }),
      },
      {
        weight: 4,
        arbitrary: fc.record({
          kind: fc.constant('advance' as const),
          us: fc.integer({ min: 0, max: c.maxAdvanceUs }),
        }),
      },
      {
        // The server clock steps back now and then (NTP, a failover to a server behind).
        weight: 1,
        arbitrary: fc.record({
          kind: fc.constant('advance' as const),
          us: fc.integer({ min: -Math.floor(c.maxAdvanceUs / 4), max: -1 }),
        }),
      },
      { weight: 1, arbitrary: seedOp(c) },
    ),
    { minLength: 1, maxLength: 25 },
  );

// --- Comparison ---------------------------------------------------------------------------

const shape = (d: Decision) => [
  d.allowed,
  d.remaining,
  d.limit,
  d.resetMs,
  d.retryAfterMs,
  d.replayed,
  d.blocked,
];

type Outcome = { ok: unknown } | { error: string };

/** A call's outcome in comparable form: the decision fields, or the error's class and code. */
async function outcome(call: () => Promise<unknown>): Promise<Outcome> {
  try {
    const value = await call();
    if (typeof value === 'boolean') return { ok: value };
    if (typeof value === 'object' && value !== null && 'applied' in value) return { ok: value };
    if (typeof value === 'object' && value !== null && 'reservations' in value) {
      const result = value as ReserveAllResult;
      return {
        ok: {
          allowed: result.allowed,
          decisions: result.reservations.map(shape),
          retryAfterMs: result.retryAfterMs,
          replayed: result.replayed,
        },
      };
    }
    if (typeof value === 'object' && value !== null && 'decisions' in value) {
      const result = value as TakeAllResult;
      return {
        ok: {
          allowed: result.allowed,
          decisions: result.decisions.map(shape),
          retryAfterMs: result.retryAfterMs,
          cached: result.cached,
          replayed: result.replayed,
        },
      };
    }
    return { ok: shape(value as Decision) };
  } catch (error) {
    const e = error as Error;
    return { error: `${e.name}: ${/WRONGTYPE/.test(e.message) ? 'WRONGTYPE' : e.message}` };
  }
}

/** Writes `stored` into `key` on Redis, with a virtual expiry at `vexp` (ms) or none. */
const SEED_LUA = `
redis.call('DEL', KEYS[1], KEYS[1] .. ':vexp')
local kind = ARGV[1]
if kind == 'string' then redis.call('SET', KEYS[1], ARGV[3])
elseif kind == 'hash' then redis.call('HSET', KEYS[1], unpack(ARGV, 3))
else redis.call('ZADD', KEYS[1], unpack(ARGV, 3)) end
if ARGV[2] ~= '' then redis.call('SET', KEYS[1] .. ':vexp', ARGV[2]) end
return 1`;

async function seedRedis(client: Client, key: string, stored: Stored, vexp: number | undefined) {
  const values =
    stored.kind === 'string'
      ? [stored.value]
      : stored.kind === 'hash'
        ? Object.entries(stored.value).flat()
        : stored.value.flatMap(([score, member]) => [
            Number.isFinite(score) ? String(score) : score > 0 ? 'inf' : '-inf',
            member,
          ]);
  await client.client.sendCommand([
    'EVAL',
    SEED_LUA,
    '1',
    key,
    stored.kind,
    vexp === undefined ? '' : String(vexp),
    ...values,
  ]);
}

/** For each key: whether it exists, and its virtual expiry (ms) or null. */
const TTL_LUA = `
local out = {}
for i, k in ipairs(KEYS) do
  out[2 * i - 1] = redis.call('EXISTS', k)
  out[2 * i] = redis.call('GET', k .. ':vexp') or ''
end
return out`;

async function virtualTtls(client: Client, keys: readonly string[]) {
  const reply = (await client.client.sendCommand([
    'EVAL',
    TTL_LUA,
    String(keys.length),
    ...keys,
  ])) as (number | string)[];
  return keys.map((_, i) => ({
    exists: reply[2 * i] === 1,
    vexp: reply[2 * i + 1] === '' ? null : Number(reply[2 * i + 1]),
  }));
}

// --- The property -------------------------------------------------------------------------

describe('model: Redis script ≡ in-memory twin under a controlled clock', () => {
  for (const c of cases) {
    it(`${c.name}: ${CASE_RUNS} random sequences (takes, peeks, takeAll, with and without ids, reserve, settle, refund, charge, resets, foreign state) give identical decisions`, async () => {
      const client = await redis.client();
      const admin = await redis.admin();
      await fc.assert(
        fc.asyncProperty(
          c.options,
          c.options,
          blockOptions,
          fc.array(seedOp(c), { maxLength: 3 }),
          ops(c, 10),
          async (options0, options1, block, seeds, sequence) => {
            const policies = [
              c.build({ ...options0, ...block } as never),
              c.build({ ...options1, version: 'b' } as never),
            ] as const;
            const redisStore = new ClockedRedisStore(client);
            let nowUs = START_US + Math.floor(Math.random() * 1e9);
            let highUs = nowUs;
            const memory = new MemoryStore({ clock: () => nowUs / 1000 });
            // A deadline no loaded machine misses: the calls are compared, not timed.
            const limiterOptions = {
              maxBatchSize: 1,
              denialCache: false,
              timeoutMs: 10_000,
            } as const;
            const onRedis = new RateLimiter({ store: redisStore, ...limiterOptions });
            const inMemory = new RateLimiter({ store: memory, ...limiterOptions });
            const tenant = randomTenant();
            const scopes: Scope[] = [
              { tenant },
              { tenant, route: 'r' },
              { tenant, route: 'r', user: 'u' },
            ];
            const at = (t: Target) => ({
              scope: scopes[t.scope] as Scope,
              policy: policies[t.policy] as Policy,
            });
            const keyOf = (t: Target) =>
              onRedis.keyOf(scopes[t.scope] as Scope, policies[t.policy] as Policy);
            const targets: Target[] = [0, 1, 2].flatMap((scope) =>
              [0, 1].map((policy) => ({ scope, policy })),
            );
            const keys = targets.map(keyOf);
            assert.deepEqual(
              keys,
              targets.map((t) => inMemory.keyOf(at(t).scope, at(t).policy)),
            );
            /** The records of the ids taken (see `limiter/retry-safe.ts`). */
            const records = new Set<string>();
            // One record per id and tenant, whatever was asked (see `recordItem`).
            const recordKey = (id: string, _keys: readonly string[]) =>
              `rate:${tenantTag(tenant)}:id:${digest([id])}`;
            const longest = Math.max(...policies.map((p) => p.horizonMs));
            // The first policy's blocks, beside its keys (see block.lua).
            for (const scope of [0, 1, 2]) records.add(`${keyOf({ scope, policy: 0 })}:b`);
            /** Keys holding foreign state with no TTL or one beyond the horizon, untouched since. */
            const exempt = new Set<string>();

            let lastWithId: Exclude<Op, { kind: 'retry' }> | undefined;
            for (const next of [...seeds, ...sequence] as Op[]) {
              if (next.kind === 'retry' && lastWithId === undefined) continue;
              const op =
                next.kind === 'retry' ? (lastWithId as Exclude<Op, { kind: 'retry' }>) : next;
              if ((op.kind === 'take' || op.kind === 'takeAll') && op.id) lastWithId = op;
              const context = () => JSON.stringify({ op, nowUs });
              if (op.kind === 'advance') {
                nowUs += op.us;
                highUs = Math.max(highUs, nowUs);
                continue;
              }
              redisStore.nowUs = nowUs;
              /** Keys this operation wrote, whose TTL must be within a horizon from now. */
              let wrote: Target[] = [];
              if (op.kind === 'seed') {
                const policy = policies[op.policy] as Policy;
                const stored = c.materialize(op.state as never, policy.args(1).map(Number), nowUs);
                const ttlMs =
                  op.ttl === null ? undefined : Math.round((op.ttl * policy.horizonMs) / 1000);
                const key = keyOf(op);
                await seedRedis(
                  admin,
                  key,
                  stored,
                  ttlMs === undefined ? undefined : ms(nowUs) + ttlMs,
                );
                memory.seed(key, stored.kind, stored.value, ttlMs);
                if (
                  ttlMs === undefined ||
                  ttlMs > policy.horizonMs ||
                  'wrongType' in (op.state as object)
                )
                  exempt.add(key);
                else exempt.delete(key);
              } else {
                let a: Outcome;
                let b: Outcome;
                if (op.kind === 'takeAll') {
                  const items = op.items.map((item) => ({ ...at(item), cost: item.cost }));
                  const options = op.id ? { id: op.id } : undefined;
                  if (op.id) records.add(recordKey(op.id, op.items.map(keyOf)));
                  a = await outcome(() => onRedis.takeAll(items, options));
                  b = await outcome(() => inMemory.takeAll(items, options));
                  const ok = 'ok' in a ? (a.ok as { allowed: boolean; replayed?: boolean }) : null;
                  if (ok?.allowed && ok.replayed !== true) wrote = op.items;
                } else if (op.kind === 'reserveAll') {
                  const items = op.items.map((item) => ({ ...at(item), cost: item.cost }));
                  const tag = tenantTag(tenant);
                  for (const item of op.items) {
                    records.add(`rate:${tag}:rsv:${digest(['rsv', op.id, keyOf(item)])}`);
                  }
                  a = await outcome(() => onRedis.reserveAll(items, { id: op.id }));
                  b = await outcome(() => inMemory.reserveAll(items, { id: op.id }));
                  const ok = 'ok' in a ? (a.ok as { allowed: boolean; replayed: boolean }) : null;
                  if (ok?.allowed && !ok.replayed) wrote = op.items;
                } else if (
                  op.kind === 'reserve' ||
                  op.kind === 'settle' ||
                  op.kind === 'refund' ||
                  op.kind === 'charge'
                ) {
                  const t = at(op);
                  const call = (l: RateLimiter): Promise<unknown> =>
                    op.kind === 'reserve'
                      ? l.reserve(t.scope, t.policy, { cost: op.cost, id: op.id })
                      : op.kind === 'settle'
                        ? l.settle(t.scope, t.policy, op.id, op.actual)
                        : op.kind === 'refund'
                          ? l.refund(t.scope, t.policy, op.cost, { id: op.id, takeId: op.takeId })
                          : l.charge(t.scope, t.policy, op.cost, op.id ? { id: op.id } : undefined);
                  a = await outcome(() => call(onRedis));
                  b = await outcome(() => call(inMemory));
                  const key = keyOf(op);
                  const tag = tenantTag(tenant);
                  if (op.kind === 'reserve' || op.kind === 'settle') {
                    records.add(`rate:${tag}:rsv:${digest(['rsv', op.id, key])}`);
                  } else if (op.id) {
                    records.add(`rate:${tag}:id:${digest([op.kind, op.id, key])}`);
                  }
                  if ('ok' in a) {
                    // A reserve's outcome is a decision's shape (replayed last); the others' a
                    // settlement. A replay writes nothing, nor a call that moved nothing.
                    const moved =
                      op.kind === 'reserve'
                        ? (a.ok as unknown[])[5] !== true && (a.ok as unknown[])[6] !== true
                        : (a.ok as Settlement).applied !== 0 && !(a.ok as Settlement).replayed;
                    if (moved) wrote = [op];
                  }
                } else if (op.kind === 'reset') {
                  const t = at(op);
                  a = await outcome(() => onRedis.reset(t.scope, t.policy));
                  b = await outcome(() => inMemory.reset(t.scope, t.policy));
                  if ('ok' in a) exempt.delete(keyOf(op));
                } else {
                  const t = at(op);
                  const limiter = (l: RateLimiter) =>
                    op.kind === 'take'
                      ? l.take(
                          t.scope,
                          t.policy,
                          op.id ? { cost: op.cost, id: op.id } : { cost: op.cost },
                        )
                      : l.peek(t.scope, t.policy, { cost: op.cost });
                  a = await outcome(() => limiter(onRedis));
                  b = await outcome(() => limiter(inMemory));
                  // A replay writes nothing (as a peek).
                  // A blocked take runs no algorithm: nothing written either.
                  const replayed =
                    'ok' in a &&
                    ((a.ok as unknown[])[5] === true || (a.ok as unknown[])[6] === true);
                  if (op.kind === 'take' && 'ok' in a && !replayed) wrote = [op];
                  if (op.kind === 'take' && op.id) records.add(recordKey(op.id, [keyOf(op)]));
                }
                assert.deepEqual(a, b, context());
                for (const t of wrote) exempt.delete(keyOf(t));
                // A refusal decided now (not replayed) leaves no record: it consumed nothing.
                if ('ok' in a && 'id' in op && typeof op.id === 'string') {
                  const ok = a.ok as { allowed?: boolean; replayed?: boolean } | unknown[];
                  const refused = Array.isArray(ok)
                    ? ok[0] === false && ok[5] !== true
                    : ok.allowed === false && ok.replayed !== true;
                  const tag = tenantTag(tenant);
                  const written =
                    op.kind === 'take' || op.kind === 'takeAll'
                      ? [recordKey(op.id, [])]
                      : op.kind === 'reserve'
                        ? [`rate:${tag}:rsv:${digest(['rsv', op.id, keyOf(op)])}`]
                        : op.kind === 'reserveAll'
                          ? op.items.map(
                              (i) => `rate:${tag}:rsv:${digest(['rsv', op.id, keyOf(i)])}`,
                            )
                          : [];
                  if (refused) {
                    for (const key of written) {
                      const left = await admin.client.exists(key);
                      assert.equal(left, 0, `a refusal recorded: ${context()}`);
                    }
                  }
                }
              }

              // An id's record lives no longer than the longest horizon of its policies.
              for (const [i, record] of (await virtualTtls(admin, [...records])).entries()) {
                if (!record.exists) continue;
                const detail = () => `record ${[...records][i]}: ${context()}`;
                assert.ok(record.vexp !== null, `a record without a TTL: ${detail()}`);
                if (record.vexp < ms(nowUs)) continue;
                assert.ok(
                  record.vexp - ms(highUs) <= longest,
                  `TTL beyond ${longest} ms: ${detail()}`,
                );
              }

              // No state outlives one horizon (a peek writes nothing).
              if (op.kind === 'peek') continue;
              const ttls = await virtualTtls(admin, keys);
              targets.forEach((t, i) => {
                const key = keys[i] as string;
                const { exists, vexp } = ttls[i] as { exists: boolean; vexp: number | null };
                if (!exists || exempt.has(key)) return;
                const horizonMs = (policies[t.policy] as Policy).horizonMs;
                const detail = () => `${context()} key ${JSON.stringify(t)} vexp ${vexp}`;
                assert.ok(vexp !== null, `no TTL: ${detail()}`);
                if (vexp < ms(nowUs)) return; // expired on the test clock: gone at its next read
                const written = wrote.some((w) => w.scope === t.scope && w.policy === t.policy);
                assert.ok(
                  vexp - (written ? ms(nowUs) : ms(highUs)) <= horizonMs,
                  `TTL beyond the horizon ${horizonMs} ms: ${detail()} now ${ms(nowUs)}`,
                );
              });
            }
          },
        ),
        { numRuns: CASE_RUNS, includeErrorInReport: true },
      );
    });
  }
});

/**
 * The sliding window log's priced operations (settle/sliding-window-log.lua) on one scope
 * and one policy, where most settles find their reservation: a reservation's member in the
 * middle of the log (later members rewritten), at its end, one that left the window, cancels,
 * excess charged, refunds of takes with an id and of reservations, charges, resets, clock
 * steps. After every
 * operation both stores are peeked twice (cost 1, and the limit: the wait, which a binary
 * search over the totals finds), so a total left wrong by a rewrite shows at once.
 */
describe('model: the sliding window log priced, Redis ≡ twin', () => {
  type LogOp =
    | { kind: 'take' | 'reserve' | 'charge'; cost: number; id: string }
    | { kind: 'refund'; cost: number; id: string; takeId: string }
    | { kind: 'settle'; id: string; actual: number }
    | { kind: 'reset' }
    | { kind: 'advance'; us: number };
  const id = fc.constantFrom('a', 'b', 'c', 'd', 'e');
  const logOps = (windowMs: number): fc.Arbitrary<LogOp[]> =>
    fc.array(
      fc.oneof(
        {
          weight: 3,
          arbitrary: fc.record({
            kind: fc.constant('take' as const),
            cost: fc.integer({ min: 1, max: 3 }),
            id,
          }),
        },
        {
          weight: 4,
          arbitrary: fc.record({
            kind: fc.constant('reserve' as const),
            cost: fc.integer({ min: 1, max: 4 }),
            id,
          }),
        },
        {
          weight: 4,
          arbitrary: fc.record({
            kind: fc.constant('settle' as const),
            id,
            actual: fc.integer({ min: 0, max: 6 }),
          }),
        },
        {
          weight: 1,
          arbitrary: fc.record({
            kind: fc.constant('refund' as const),
            cost: fc.integer({ min: 1, max: 6 }),
            id,
            // A reservation's id, or a take's (`t<id>`).
            takeId: fc.oneof(
              id,
              id.map((i) => `t${i}`),
            ),
          }),
        },
        {
          weight: 1,
          arbitrary: fc.record({
            kind: fc.constant('charge' as const),
            cost: fc.integer({ min: 1, max: 6 }),
            id,
          }),
        },
        { weight: 1, arbitrary: fc.record({ kind: fc.constant('reset' as const) }) },
        {
          weight: 3,
          arbitrary: fc.record({
            kind: fc.constant('advance' as const),
            us: fc.oneof(
              fc.constant(0),
              fc.integer({ min: 0, max: (windowMs * 1000) / 2 }),
              fc.integer({ min: -windowMs * 250, max: -1 }),
            ),
          }),
        },
      ),
      { minLength: 1, maxLength: 40 },
    );

  it(`${CASE_RUNS} random sequences give identical answers and states`, async () => {
    const client = await redis.client();
    await fc.assert(
      fc.asyncProperty(
        fc
          .tuple(fc.integer({ min: 1, max: 12 }), fc.integer({ min: 1, max: 2000 }))
          .chain(([limit, windowMs]) =>
            fc.tuple(fc.constant(limit), fc.constant(windowMs), logOps(windowMs)),
          ),
        fc.context(),
        async ([limit, windowMs, sequence], ctx) => {
          const policy = slidingWindowLog({ limit, windowMs });
          const redisStore = new ClockedRedisStore(client);
          let nowUs = START_US + Math.floor(Math.random() * 1e9);
          const memory = new MemoryStore({ clock: () => nowUs / 1000 });
          const options = { maxBatchSize: 1, denialCache: false, timeoutMs: 10_000 } as const;
          const onRedis = new RateLimiter({ store: redisStore, ...options });
          const inMemory = new RateLimiter({ store: memory, ...options });
          const scope = { tenant: randomTenant(), route: 'r' };
          for (const op of sequence) {
            if (op.kind === 'advance') {
              nowUs += op.us;
              continue;
            }
            redisStore.nowUs = nowUs;
            const call = (l: RateLimiter): Promise<unknown> => {
              switch (op.kind) {
                case 'take':
                  return l.take(scope, policy, { cost: op.cost, id: `t${op.id}` });
                case 'reserve':
                  return l.reserve(scope, policy, { cost: op.cost, id: op.id });
                case 'settle':
                  return l.settle(scope, policy, op.id, op.actual);
                case 'refund':
                  return l.refund(scope, policy, op.cost, {
                    id: `${op.id}${nowUs}`,
                    takeId: op.takeId,
                  });
                case 'charge':
                  return l.charge(scope, policy, op.cost);
                default:
                  return l.reset(scope, policy);
              }
            };
            const a = await outcome(() => call(onRedis));
            const b = await outcome(() => call(inMemory));
            ctx.log(`${JSON.stringify(op)} at ${nowUs}: ${JSON.stringify(a)}`);
            assert.deepEqual(a, b, JSON.stringify({ op, nowUs }));
            for (const cost of [1, limit]) {
              const peek = (l: RateLimiter) => outcome(() => l.peek(scope, policy, { cost }));
              assert.deepEqual(
                await peek(onRedis),
                await peek(inMemory),
                `peek ${cost} after ${JSON.stringify(op)}`,
              );
            }
          }
        },
      ),
      { numRuns: CASE_RUNS, includeErrorInReport: true },
    );
  });
});

/**
 * Foreign state the model found mishandled, pinned on the production scripts (Redis time):
 * each row failed before the scripts were fixed.
 */
describe('foreign state the model found (production scripts)', () => {
  const limiter = async () =>
    new RateLimiter({
      timeoutMs: TEST_TIMEOUT_MS,
      client: await redis.client(),
      maxBatchSize: 1,
      denialCache: false,
    });
  const scope = () => ({ tenant: randomTenant(), route: 'r' });
  const bounded = (pttl: number, horizonMs: number) =>
    pttl === -2 || (pttl >= 0 && pttl <= horizonMs);

  it('sliding window log: a newest score that is not a whole ms is decided, not an error (was: PEXPIRE of a fraction)', async () => {
    const admin = await redis.admin();
    const onRedis = await limiter();
    const policy = slidingWindowLog({ limit: 1, windowMs: 1000 });
    const s = scope();
    const [sec, usec] = (await admin.client.sendCommand(['TIME'])) as [string, string];
    const ms = Number(sec) * 1000 + Math.floor(Number(usec) / 1000);
    const key = onRedis.keyOf(s, policy);
    // In the window, no TTL: a denial's TTL repair would be about 799.5 ms.
    await admin.client.zAdd(key, { score: ms - 200.5, value: 'm' });
    await onRedis.take(s, policy); // a decision, whichever
    const pttl = await admin.client.pTTL(key);
    assert.ok(bounded(pttl, 1000), `PTTL ${pttl}`);
  });

  it('fixed window: foreign state does not outlive a take whose cost never fits (was: no TTL)', async () => {
    const admin = await redis.admin();
    const onRedis = await limiter();
    const policy = fixedWindow({ limit: 2, windowMs: 1000 });
    const s = scope();
    const key = onRedis.keyOf(s, policy);
    await admin.client.set(key, 'abc');
    assert.equal((await onRedis.take(s, policy, { cost: 3 })).allowed, false);
    const pttl = await admin.client.pTTL(key);
    assert.ok(bounded(pttl, 1000), `PTTL ${pttl}`);
  });

  it('fixed window: a count in a form INCRBY refuses is foreign state (was: every admitted take failed)', async () => {
    const admin = await redis.admin();
    const onRedis = await limiter();
    const policy = fixedWindow({ limit: 5, windowMs: 1000 });
    for (const value of [' 1', '1.0', '+1', '01', '-0', '1e0', '0x1']) {
      const s = scope();
      await admin.client.set(onRedis.keyOf(s, policy), value);
      const decision = await onRedis.take(s, policy);
      assert.deepEqual([decision.allowed, decision.remaining], [true, 4], value);
    }
  });

  it('token bucket, sliding window counter: a hash with none of their fields does not outlive a take whose cost never fits (was: no TTL)', async () => {
    const admin = await redis.admin();
    const onRedis = await limiter();
    for (const policy of [
      tokenBucket({ capacity: 2, refillIntervalMs: 1000 }),
      slidingWindowCounter({ limit: 2, windowMs: 1000 }),
    ]) {
      const s = scope();
      const key = onRedis.keyOf(s, policy);
      await admin.client.hSet(key, 'x', '1');
      assert.equal((await onRedis.take(s, policy, { cost: 3 })).allowed, false);
      const pttl = await admin.client.pTTL(key);
      assert.ok(bounded(pttl, policy.horizonMs), `${policy.algorithm} PTTL ${pttl}`);
    }
  });
});
