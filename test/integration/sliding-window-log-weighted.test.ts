/**
 * The weighted sliding window log (one member per admitted take, with its cost and a running
 * total): exact against a brute-force per-unit log over random costs and times, its in-memory
 * twin equal to it member for member (hand-written logs with foreign members anywhere
 * included), the retry time of a denial exactly when enough units have left, one member for a
 * take of any cost, and every call bounded: no take, trim or denial at the largest accepted
 * parameters runs 5 ms on Redis (SLOWLOG, execution time only, on this file's own server).
 *
 * Time is the test's (the clocked variant of the production script, see `helpers/clocked.ts`)
 * except in the timing tests, which run the production script on Redis time.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import { RateLimiter, slidingWindowLog } from 'sluice';
import { MAX_WINDOW_MS } from '../../src/algorithms/policy.js';
import {
  type LogEntry,
  MAX_LOG_LIMIT,
  slidingWindowLogScript,
  slidingWindowLogTwin,
} from '../../src/algorithms/sliding-window-log.js';
import { TAKE, type TwinState } from '../../src/algorithms/twin.js';
import { NodeRedisStore } from '../../src/redis/node-redis/stores.js';
import { ClockedRedisStore } from '../helpers/clocked.js';
import { type Client, keyFor, randomTenant, TEST_TIMEOUT_MS, useRedis } from '../helpers/redis.js';
import { logMember } from '../helpers/sliding-log.js';

const redis = useRedis();
const RUNS = Number(process.env.SLUICE_MODEL_RUNS ?? 1000);
const START_MS = 1_700_000_000_000;

type Reply = [number, number, number, number];

/** What the log promises, unit by unit: every admitted unit's time, oldest first. */
class PerUnitLog {
  readonly #units: number[] = [];

  take(now: number, limit: number, window: number, cost: number): Reply {
    const units = this.#units.filter((t) => t > now - window);
    const count = units.length;
    const reset = count > 0 ? (units[count - 1] as number) + window - now : 0;
    if (cost > limit) return [0, Math.max(limit - count, 0), reset, -1];
    if (count + cost > limit) {
      // The take fits once the (count + cost − limit)-th oldest unit has left the window.
      const leaving = units[count + cost - limit - 1] as number;
      return [0, Math.max(limit - count, 0), reset, leaving + window - now];
    }
    for (let i = 0; i < cost; i++) this.#units.push(now);
    return [1, limit - count - cost, window, 0];
  }
}

/** The in-memory twin's state, with Redis's expiry, and its contents open to the test. */
class TwinMap implements TwinState {
  nowMs = START_MS;
  readonly #keys = new Map<string, { value: unknown; expireAt: number | undefined }>();

  get nowUs(): number {
    return this.nowMs * 1000;
  }

  #live(key: string) {
    const entry = this.#keys.get(key);
    if (entry?.expireAt !== undefined && this.nowMs > entry.expireAt) {
      this.#keys.delete(key);
      return undefined;
    }
    return entry;
  }

  get<T>(key: string): T | undefined {
    return this.#live(key)?.value as T | undefined;
  }
  set(key: string, _kind: string, value: unknown, ttlMs: number | undefined): void {
    this.#keys.set(key, { value, expireAt: ttlMs === undefined ? undefined : this.nowMs + ttlMs });
  }
  pttl(key: string): number {
    const entry = this.#live(key);
    if (entry === undefined) return -2;
    return entry.expireAt === undefined ? -1 : entry.expireAt - this.nowMs;
  }
  delete(key: string): void {
    this.#keys.delete(key);
  }
  update(key: string, value: unknown): void {
    const entry = this.#live(key);
    if (entry !== undefined) entry.value = value;
  }
  pexpire(key: string, ttlMs: number): void {
    const entry = this.#live(key);
    if (entry !== undefined) entry.expireAt = this.nowMs + ttlMs;
  }

  /** The log and its expiry (ms), as `redisLog` gives them. */
  log(key: string): { entries: LogEntry[]; expireAt: number | null } | null {
    const entry = this.#live(key);
    if (entry === undefined) return null;
    return { entries: [...(entry.value as LogEntry[])], expireAt: entry.expireAt ?? null };
  }
}

/** The log on Redis under the test clock: its members and virtual expiry, null when gone. */
async function redisLog(
  admin: Client,
  key: string,
  nowMs: number,
): Promise<{ entries: LogEntry[]; expireAt: number | null } | null> {
  const [vexp, flat] = (await Promise.all([
    admin.client.sendCommand(['GET', `${key}:vexp`]),
    admin.client.sendCommand(['ZRANGE', key, '0', '-1', 'WITHSCORES']),
  ])) as unknown as [string | null, (string | [string, string | number])[]];
  const expireAt = vexp === null ? null : Number(vexp);
  if (flat.length === 0 || (expireAt !== null && nowMs > expireAt)) return null;
  // RESP3 gives [member, score] pairs, RESP2 a flat list.
  const pairs = Array.isArray(flat[0])
    ? (flat as [string, string | number][])
    : Array.from({ length: flat.length / 2 }, (_, i) => [flat[2 * i], flat[2 * i + 1]]);
  const entries = pairs.map(([member, score]): LogEntry => [Number(score), String(member)]);
  return { entries, expireAt };
}

/** One decision on both: the clocked production script on Redis, and the twin. */
async function both(
  store: ClockedRedisStore,
  twin: TwinMap,
  key: string,
  args: readonly string[],
): Promise<[Reply, Reply]> {
  store.nowUs = twin.nowMs * 1000;
  const onRedis = (await store.evalScript(slidingWindowLogScript, [key], args)) as Reply;
  const inMemory = slidingWindowLogTwin(twin, key, args, TAKE);
  return [onRedis, inMemory];
}

describe('weighted sliding window log: exact, and the twin decides as the script', () => {
  it(`${Math.round(RUNS / 5)} random sequences of costs and times: script ≡ twin ≡ a per-unit log; at most limit members`, async () => {
    const admin = await redis.admin();
    const store = new ClockedRedisStore(await redis.client());
    await fc.assert(
      fc.asyncProperty(
        fc.integer({ min: 1, max: 40 }),
        fc.integer({ min: 1, max: 1000 }),
        fc.array(
          fc.record({
            // Thousandths of a window: often none (takes in one ms), now and then beyond it.
            step: fc.oneof(
              { weight: 3, arbitrary: fc.constant(0) },
              { weight: 6, arbitrary: fc.integer({ min: 0, max: 250 }) },
              { weight: 1, arbitrary: fc.integer({ min: 0, max: 2500 }) },
            ),
            // Thousandths of the limit, and now and then more than it.
            cost: fc.oneof(
              { weight: 3, arbitrary: fc.integer({ min: 1, max: 100 }) },
              { weight: 2, arbitrary: fc.integer({ min: 1, max: 1000 }) },
              { weight: 1, arbitrary: fc.integer({ min: 1000, max: 1100 }) },
            ),
          }),
          { minLength: 1, maxLength: 60, size: 'max' },
        ),
        async (limit, window, ops) => {
          const policy = slidingWindowLog({ limit, windowMs: window });
          const key = keyFor(policy, randomTenant());
          const twin = new TwinMap();
          twin.nowMs = START_MS + Math.floor(Math.random() * 1e9);
          const reference = new PerUnitLog();
          for (const op of ops) {
            twin.nowMs += Math.floor((op.step * window) / 1000);
            const cost = Math.max(1, Math.ceil((op.cost * limit) / 1000));
            const context = JSON.stringify({ limit, window, now: twin.nowMs, cost });
            const [onRedis, inMemory] = await both(store, twin, key, policy.args(cost));
            assert.deepEqual(onRedis, reference.take(twin.nowMs, limit, window, cost), context);
            assert.deepEqual(inMemory, onRedis, context);
            const stored = await redisLog(admin, key, twin.nowMs);
            assert.deepEqual(twin.log(key), stored, context);
            assert.ok((stored?.entries.length ?? 0) <= limit, `${context}: over limit members`);
          }
        },
      ),
      { numRuns: Math.round(RUNS / 5), includeErrorInReport: true },
    );
  });

  it(`${Math.round(RUNS / 2)} hand-written logs, foreign members anywhere, then takes: script ≡ twin (replies and members)`, async () => {
    const admin = await redis.admin();
    const store = new ClockedRedisStore(await redis.client());
    const foreign = fc.constantFrom(
      '1700000000000:3', // the per-unit log before it
      'm',
      '000000000000003:3',
      '0000000000000003:0',
      '0000000000000003:4',
      '9007199254740992:1',
      '0000000000000099:1',
    );
    await fc.assert(
      fc.asyncProperty(
        fc.integer({ min: 1, max: 30 }),
        fc.integer({ min: 10, max: 1000 }),
        // Takes tried: thousandths of a window before now (up to a window and a half), cost;
        // the log holds those a per-unit log admits, in time order.
        fc.array(
          fc.record({
            ago: fc.integer({ min: 0, max: 1500 }),
            cost: fc.integer({ min: 1, max: 4 }),
          }),
          { minLength: 1, maxLength: 40, size: 'max' },
        ),
        fc.option(fc.record({ ago: fc.integer({ min: 0, max: 1500 }), member: foreign }), {
          freq: 3,
        }),
        fc.array(fc.integer({ min: 1, max: 35 }), { minLength: 1, maxLength: 3 }),
        async (limit, window, takes, junk, costs) => {
          const policy = slidingWindowLog({ limit, windowMs: window });
          const key = keyFor(policy, randomTenant());
          const twin = new TwinMap();
          const now = twin.nowMs;
          const scaled = (ago: number) => now - Math.floor((ago * window) / 1000);
          const tried = takes
            .map((t) => ({ at: scaled(t.ago), cost: t.cost }))
            .sort((a, b) => a.at - b.at);
          const reference = new PerUnitLog();
          let total = 0;
          const entries: LogEntry[] = [];
          for (const t of tried) {
            if (reference.take(t.at, limit, window, t.cost)[0] !== 1) continue;
            total += t.cost;
            entries.push([t.at, logMember(total, t.cost)]);
          }
          if (junk !== null && !entries.some(([, m]) => m === junk.member)) {
            entries.push([scaled(junk.ago), junk.member]);
          }
          entries.sort(([s1, m1], [s2, m2]) =>
            s1 < s2 ? -1 : s1 > s2 ? 1 : m1 < m2 ? -1 : m1 > m2 ? 1 : 0,
          );
          if (entries.length > 0) {
            await admin.client.sendCommand([
              'ZADD',
              key,
              ...entries.flatMap(([score, member]) => [String(score), member]),
            ]);
            twin.set(key, 'zset', entries, undefined);
          }
          for (const cost of costs) {
            const context = JSON.stringify({ limit, window, entries, cost });
            const [onRedis, inMemory] = await both(store, twin, key, policy.args(cost));
            assert.deepEqual(inMemory, onRedis, context);
            assert.deepEqual(twin.log(key), await redisLog(admin, key, now), context);
          }
        },
      ),
      { numRuns: Math.round(RUNS / 2), includeErrorInReport: true },
    );
  });

  it('a denial waits exactly until enough units have left, take by take (mixed costs)', async () => {
    const store = new ClockedRedisStore(await redis.client());
    const policy = slidingWindowLog({ limit: 10, windowMs: 1000 });
    const key = keyFor(policy, randomTenant());
    const at = async (ms: number, cost: number) => {
      store.nowUs = (START_MS + ms) * 1000;
      return (await store.evalScript(policy.script, [key], policy.args(cost))) as Reply;
    };
    assert.deepEqual(await at(0, 3), [1, 7, 1000, 0]);
    assert.deepEqual(await at(100, 4), [1, 3, 1000, 0]);
    assert.deepEqual(await at(200, 2), [1, 1, 1000, 0]);
    // 9 in the window; 5 more need 4 to leave: the 3 of t=0 are not enough, the 4 of
    // t=100 are: at 1100. resetMs: the newest (t=200) leaves at 1200.
    assert.deepEqual(await at(300, 5), [0, 1, 900, 800]);
    // 1 more needs nothing to leave; 2 more need 1: the take of t=0, at 1000.
    assert.deepEqual(await at(300, 2), [0, 1, 900, 700]);
    assert.deepEqual(await at(999, 2), [0, 1, 201, 1]);
    assert.deepEqual(await at(1000, 5), [0, 4, 200, 100]);
    assert.deepEqual(await at(1099, 5), [0, 4, 101, 1]);
    assert.deepEqual(await at(1100, 5), [1, 3, 1000, 0]);
    // cost > limit never fits.
    assert.deepEqual(await at(1100, 11), [0, 3, 1000, -1]);
  });
});

describe('weighted sliding window log: one member per take, bounded calls (Redis time)', () => {
  const policy = slidingWindowLog({ limit: MAX_LOG_LIMIT, windowMs: MAX_WINDOW_MS });
  const RULE_US = 5000;
  const REPEATS = 5;

  /** How long Redis ran the script calls of `run` (the longest, µs, from SLOWLOG). */
  async function scriptMicros(run: () => Promise<unknown>): Promise<number> {
    const admin = await redis.admin();
    await admin.client.sendCommand(['CONFIG', 'SET', 'slowlog-log-slower-than', '0']);
    await admin.client.sendCommand(['CONFIG', 'SET', 'slowlog-max-len', '1024']);
    await admin.client.sendCommand(['SLOWLOG', 'RESET']);
    try {
      await run();
      const entries = (await admin.client.sendCommand(['SLOWLOG', 'GET', '1024'])) as unknown[][];
      const calls = entries.filter((e) => /^(EVALSHA|EVAL)$/i.test(String((e[3] as unknown[])[0])));
      assert.ok(calls.length > 0, 'no script call in SLOWLOG');
      return Math.max(...calls.map((e) => Number(e[2])));
    } finally {
      await admin.client.sendCommand(['CONFIG', 'SET', 'slowlog-log-slower-than', '10000']);
    }
  }

  /** The shortest of REPEATS measures: a moment another process had the core does not count. */
  async function shortest(
    t: { diagnostic(message: string): void },
    label: string,
    measure: (i: number) => Promise<number>,
  ): Promise<number> {
    const times: number[] = [];
    for (let i = 0; i < REPEATS; i++) times.push(await measure(i));
    t.diagnostic(`${label}: ${times.join(', ')} µs`);
    return Math.min(...times);
  }

  async function store(): Promise<NodeRedisStore> {
    const s = new NodeRedisStore((await redis.client()).client);
    // Loaded once, so that no measured call is an EVAL after NOSCRIPT.
    await s.evalScript(policy.script, [keyFor(policy, randomTenant())], policy.args(1));
    return s;
  }

  it('a take of cost 10,000 at limit 10,000 writes one member', async () => {
    const admin = await redis.admin();
    const limiter = new RateLimiter({
      timeoutMs: TEST_TIMEOUT_MS,
      client: await redis.client(),
      denialCache: false,
    });
    const scope = { tenant: randomTenant() };
    const d = await limiter.take(scope, policy, { cost: MAX_LOG_LIMIT });
    assert.deepEqual([d.allowed, d.remaining], [true, 0]);
    const key = limiter.keyOf(scope, policy);
    const members = (await admin.client.sendCommand(['ZRANGE', key, '0', '-1'])) as string[];
    assert.deepEqual(members, [logMember(MAX_LOG_LIMIT, MAX_LOG_LIMIT)]);
    assert.match(key, /:swlw\.[0-9a-f]{16}$/);
  });

  it(`a take of cost 10,000 at limit 10,000 runs under ${RULE_US} µs`, async (t) => {
    const s = await store();
    const best = await shortest(t, 'take of cost 10,000, fresh key', () =>
      scriptMicros(() =>
        s.evalScript(policy.script, [keyFor(policy, randomTenant())], policy.args(MAX_LOG_LIMIT)),
      ),
    );
    assert.ok(best < RULE_US, `${best} µs`);
  });

  it(`denials on a full log (10,000 takes of cost 1), the deepest retry search included, run under ${RULE_US} µs`, async (t) => {
    const admin = await redis.admin();
    const s = await store();
    const key = keyFor(policy, randomTenant());
    for (let done = 0; done < MAX_LOG_LIMIT; done += 1000) {
      await Promise.all(
        Array.from({ length: 1000 }, () => s.evalScript(policy.script, [key], policy.args(1))),
      );
    }
    assert.equal(await admin.client.zCard(key), MAX_LOG_LIMIT);
    for (const cost of [MAX_LOG_LIMIT, 1, 5000]) {
      const best = await shortest(t, `denial of cost ${cost} on a full log`, () =>
        scriptMicros(() => s.evalScript(policy.script, [key], policy.args(cost))),
      );
      assert.ok(best < RULE_US, `cost ${cost}: ${best} µs`);
    }
    assert.equal(await admin.client.zCard(key), MAX_LOG_LIMIT, 'a denial adds nothing');
  });

  it(`a take that finds 9,999 of 10,000 members stale removes at most 8 of them, under ${RULE_US} µs`, async (t) => {
    const admin = await redis.admin();
    const s = await store();
    const window = 3_600_000;
    const hourly = slidingWindowLog({ limit: MAX_LOG_LIMIT, windowMs: window });
    const best = await shortest(t, 'take on 9,999 stale members', async () => {
      const key = keyFor(hourly, randomTenant());
      const [seconds, micros] = (await admin.client.sendCommand(['TIME'])) as [string, string];
      const now = Number(seconds) * 1000 + Math.floor(Number(micros) / 1000);
      // 9,999 takes of cost 1 two windows ago, one now; the key lives a window more.
      const stale = Array.from({ length: MAX_LOG_LIMIT - 1 }, (_, i) => [
        String(now - 2 * window + i),
        logMember(i + 1, 1),
      ]).flat();
      await admin.client.sendCommand([
        'ZADD',
        key,
        ...stale,
        String(now),
        logMember(MAX_LOG_LIMIT, 1),
      ]);
      await admin.client.sendCommand(['PEXPIRE', key, String(window)]);
      const us = await scriptMicros(async () => {
        const reply = (await s.evalScript(hourly.script, [key], hourly.args(1))) as Reply;
        assert.deepEqual(reply.slice(0, 2), [1, MAX_LOG_LIMIT - 2]);
      });
      // 8 stale members removed, 1 added.
      assert.equal(await admin.client.zCard(key), MAX_LOG_LIMIT - 7);
      return us;
    });
    assert.ok(best < RULE_US, `${best} µs`);
  });
});
