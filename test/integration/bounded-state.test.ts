/**
 * Bounded state on a real Redis (key scheme v2, S21, S6): every policy keeps its own key, so
 * stacked or changed policies never inherit each other's TTL or counts; every key lives at
 * most the policy's horizon; state this policy could not have written (from the future, not
 * integers, out of range) starts the scope afresh; a server clock step back within one
 * horizon never re-admits, and no reply asks a caller to wait longer than the horizon.
 *
 * Foreign state is written by hand at `limiter.keyOf(...)` with a plain client. "Now" is the
 * Redis server's clock (TIME), the one the scripts decide with.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import type { Decision, Policy, Scope } from 'sluice';
import {
  fixedWindow,
  gcra,
  RateLimiter,
  slidingWindowCounter,
  slidingWindowLog,
  tokenBucket,
} from 'sluice';
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
const HOUR = 3_600_000;

async function newLimiter(): Promise<RateLimiter> {
  return new RateLimiter({ timeoutMs: TEST_TIMEOUT_MS, client: await redis.client() });
}

function newScope(): Scope {
  return { tenant: randomTenant(), route };
}

/** The Redis server's clock in ms (what the scripts call now). */
async function serverNowMs(admin: Client): Promise<number> {
  const [seconds, micros] = (await admin.client.sendCommand(['TIME'])) as [string, string];
  return Number(seconds) * 1000 + Math.floor(Number(micros) / 1000);
}

/** Runs a raw command on the admin client (hand-written state). */
async function raw(admin: Client, ...args: (string | number)[]): Promise<unknown> {
  return admin.client.sendCommand(args.map(String));
}

/** How a hand-written key's TTL is left: none at all, or far longer than any horizon. */
type TtlShape = 'no TTL' | '1e12 ms TTL' | 'horizon TTL';

async function shapeTtl(admin: Client, key: string, shape: TtlShape, horizonMs: number) {
  if (shape === '1e12 ms TTL') await raw(admin, 'PEXPIRE', key, 1e12);
  else if (shape === 'horizon TTL') await raw(admin, 'PEXPIRE', key, horizonMs);
  else assert.equal(await admin.client.pTTL(key), -1, 'the hand-written key has no TTL');
}

/** Every wait in a reply is within one horizon (+1 ms: a fixed window's retry is reset + 1). */
function assertBoundedReply(d: Decision, policy: Policy, label: string): void {
  const bound = policy.horizonMs + 1;
  assert.ok(d.resetMs >= 0 && d.resetMs <= bound, `${label}: resetMs ${d.resetMs} > ${bound}`);
  assert.ok(
    d.retryAfterMs >= 0 && d.retryAfterMs <= bound,
    `${label}: retryAfterMs ${d.retryAfterMs} > ${bound}`,
  );
}

/** The key is gone, or lives at most one horizon. */
async function assertBoundedKey(admin: Client, key: string, policy: Policy, label: string) {
  const pttl = await admin.client.pTTL(key);
  assert.ok(
    pttl === -2 || (pttl > 0 && pttl <= policy.horizonMs),
    `${label}: PTTL ${pttl} not in (0, ${policy.horizonMs}]`,
  );
}

describe('stacked policies on one scope keep separate keys', () => {
  it('3 per 1 s and 5 per hour by takeAll over ~2.5 s: the hourly admits exactly 5 and keeps its hour-long TTL', async () => {
    const limiter = await newLimiter();
    const admin = await redis.admin();
    const variants = [
      {
        label: 'derived names',
        perSecond: fixedWindow({ limit: 3, windowMs: 1000 }),
        hourly: fixedWindow({ limit: 5, windowMs: HOUR }),
      },
      {
        label: 'named',
        perSecond: fixedWindow({ limit: 3, windowMs: 1000, name: 'burst' }),
        hourly: fixedWindow({ limit: 5, windowMs: HOUR, name: 'hourly' }),
      },
    ];
    // Both variants side by side (own tenants), so the file pays the 2.2 s of waiting once.
    await Promise.all(
      variants.map(async ({ label, perSecond, hourly }) => {
        const scope = newScope();
        const rounds: boolean[][] = [];
        for (let round = 0; round < 3; round++) {
          if (round > 0) await sleep(1100);
          const admitted: boolean[] = [];
          for (let i = 0; i < 3; i++) {
            const result = await limiter.takeAll([
              { scope, policy: perSecond },
              { scope, policy: hourly },
            ]);
            admitted.push(result.allowed);
            assert.equal(result.decisions.length, 2);
            if (result.allowed) {
              assert.equal(result.decisions[0]?.allowed, true);
              assert.equal(result.decisions[1]?.allowed, true);
            }
          }
          rounds.push(admitted);
        }
        // Round 1: the per-second limit allows 3, the hourly 3 of 5. Round 2: a fresh second,
        // but only 2 hourly left. Round 3: the hourly is used up.
        assert.deepEqual(
          rounds,
          [
            [true, true, true],
            [true, true, false],
            [false, false, false],
          ],
          label,
        );
        assert.equal(rounds.flat().filter(Boolean).length, 5, `${label}: hourly admitted 5`);
        const hourlyKey = limiter.keyOf(scope, hourly);
        const secondKey = limiter.keyOf(scope, perSecond);
        assert.notEqual(hourlyKey, secondKey);
        assert.equal(await admin.client.get(hourlyKey), '5', label);
        const pttl = await admin.client.pTTL(hourlyKey);
        assert.ok(
          pttl > 3_000_000 && pttl <= HOUR,
          `${label}: hourly PTTL ${pttl} inherited a short TTL`,
        );
        const secondTtl = await admin.client.pTTL(secondKey);
        assert.ok(
          secondTtl === -2 || (secondTtl > 0 && secondTtl <= 1000),
          `${label}: ${secondTtl}`,
        );
        const peek = await limiter.peek(scope, hourly);
        assert.deepEqual([peek.allowed, peek.remaining], [false, 0], label);
      }),
    );
  });

  it('plain takes on each policy: two keys, each with its own count and its own TTL', async () => {
    const limiter = await newLimiter();
    const admin = await redis.admin();
    const scope = newScope();
    const perSecond = fixedWindow({ limit: 3, windowMs: 1000 });
    const hourly = fixedWindow({ limit: 5, windowMs: HOUR });
    // Same parameters, different names: also two identities.
    const renamed = fixedWindow({ limit: 5, windowMs: HOUR, name: 'hourly-renamed' });
    const keys = [perSecond, hourly, renamed].map((p) => limiter.keyOf(scope, p));
    assert.equal(new Set(keys).size, 3, `keys ${keys.join(', ')}`);
    for (let i = 0; i < 3; i++) {
      assert.equal((await limiter.take(scope, perSecond)).allowed, true);
      assert.equal((await limiter.take(scope, hourly)).allowed, true);
    }
    assert.equal((await limiter.take(scope, perSecond)).allowed, false);
    const fourth = await limiter.take(scope, hourly);
    assert.deepEqual([fourth.allowed, fourth.remaining], [true, 1]);
    const fresh = await limiter.take(scope, renamed);
    assert.deepEqual([fresh.allowed, fresh.remaining], [true, 4]);
    assert.equal(await admin.client.get(keys[0] as string), '3');
    assert.equal(await admin.client.get(keys[1] as string), '4');
    assert.equal(await admin.client.get(keys[2] as string), '1');
    const secondTtl = await admin.client.pTTL(keys[0] as string);
    assert.ok(secondTtl > 0 && secondTtl <= 1000, `per-second PTTL ${secondTtl}`);
    const hourTtl = await admin.client.pTTL(keys[1] as string);
    assert.ok(hourTtl > 3_000_000 && hourTtl <= HOUR, `hourly PTTL ${hourTtl}`);
  });
});

describe('a policy change while keys are alive starts afresh under the new policy', () => {
  it('2 per hour exhausted, then 100 per 60 s → admitted, resetMs ≤ 60 000', async () => {
    const limiter = await newLimiter();
    const admin = await redis.admin();
    const scope = newScope();
    const before = fixedWindow({ limit: 2, windowMs: HOUR });
    const after = fixedWindow({ limit: 100, windowMs: 60_000 });
    assert.equal((await limiter.take(scope, before)).allowed, true);
    assert.equal((await limiter.take(scope, before)).allowed, true);
    assert.equal((await limiter.take(scope, before)).allowed, false);
    const d = await limiter.take(scope, after);
    assert.deepEqual([d.allowed, d.remaining, d.limit], [true, 99, 100]);
    assert.ok(d.resetMs > 0 && d.resetMs <= 60_000, `resetMs ${d.resetMs}`);
    const pttl = await admin.client.pTTL(limiter.keyOf(scope, after));
    assert.ok(pttl > 0 && pttl <= 60_000, `PTTL ${pttl}`);
  });

  it('a daily block does not survive a switch to hourly', async () => {
    const limiter = await newLimiter();
    const scope = newScope();
    const daily = fixedWindow({ limit: 1, windowMs: 24 * HOUR });
    const hourly = fixedWindow({ limit: 1, windowMs: HOUR });
    assert.equal((await limiter.take(scope, daily)).allowed, true);
    const blocked = await limiter.take(scope, daily);
    assert.equal(blocked.allowed, false);
    assert.ok(blocked.retryAfterMs > 23 * HOUR, `retryAfterMs ${blocked.retryAfterMs}`);
    const d = await limiter.take(scope, hourly);
    assert.deepEqual([d.allowed, d.remaining], [true, 0]);
    assert.ok(d.resetMs <= HOUR, `resetMs ${d.resetMs}`);
  });

  it('sliding window counter 60 s → 1 h: the key lives at most 2 h (never ~1e14 ms)', async () => {
    const limiter = await newLimiter();
    const admin = await redis.admin();
    const scope = newScope();
    const minute = slidingWindowCounter({ limit: 10, windowMs: 60_000 });
    const hour = slidingWindowCounter({ limit: 10, windowMs: HOUR });
    for (let i = 0; i < 3; i++) assert.equal((await limiter.take(scope, minute)).allowed, true);
    const d = await limiter.take(scope, hour);
    assert.deepEqual([d.allowed, d.remaining], [true, 9]);
    assertBoundedReply(d, hour, '1 h counter');
    const pttl = await admin.client.pTTL(limiter.keyOf(scope, hour));
    assert.ok(pttl > 0 && pttl <= 2 * HOUR, `PTTL ${pttl}`);
    const minuteTtl = await admin.client.pTTL(limiter.keyOf(scope, minute));
    assert.ok(minuteTtl > 0 && minuteTtl <= 120_000, `60 s counter PTTL ${minuteTtl}`);
  });

  it('sliding window counter 1 s → 2 s: the new policy admits at once', async () => {
    const limiter = await newLimiter();
    const scope = newScope();
    const oneSecond = slidingWindowCounter({ limit: 2, windowMs: 1000 });
    const twoSeconds = slidingWindowCounter({ limit: 2, windowMs: 2000 });
    assert.equal((await limiter.take(scope, oneSecond)).allowed, true);
    assert.equal((await limiter.take(scope, oneSecond)).allowed, true);
    assert.equal((await limiter.take(scope, oneSecond)).allowed, false);
    const d = await limiter.take(scope, twoSeconds);
    assert.deepEqual([d.allowed, d.remaining], [true, 1]);
    assertBoundedReply(d, twoSeconds, '2 s counter');
  });
});

/** One policy per algorithm, each with a horizon of 10–20 s. */
const fw = fixedWindow({ limit: 5, windowMs: 10_000, version: 'bounded' });
const swl = slidingWindowLog({ limit: 5, windowMs: 10_000, version: 'bounded' });
const swc = slidingWindowCounter({ limit: 5, windowMs: 10_000, version: 'bounded' });
const tb = tokenBucket({
  capacity: 5,
  refillTokens: 5,
  refillIntervalMs: 10_000,
  version: 'bounded',
});
const gc = gcra({ limit: 5, periodMs: 10_000, version: 'bounded' });

describe('the policies used below', () => {
  it('have the documented horizons', () => {
    assert.equal(fw.horizonMs, 10_000);
    assert.equal(swl.horizonMs, 10_000);
    assert.equal(swc.horizonMs, 20_000);
    assert.equal(tb.horizonMs, 10_000);
    assert.equal(gc.horizonMs, 10_000);
  });
});

interface ForeignCase {
  readonly label: string;
  readonly policy: Policy;
  /** Writes the state at `key` ("now" = Redis server time in ms). */
  readonly write: (admin: Client, key: string, now: number) => Promise<unknown>;
}

/** State this policy could not have written: the scope must start afresh. */
const FOREIGN: ForeignCase[] = [
  {
    label: 'sliding window log: a member scored 1e15',
    policy: swl,
    write: (admin, key) => raw(admin, 'ZADD', key, 1e15, logMember(1, 1)),
  },
  {
    label: 'sliding window log: the limit filled at now + 10 windows',
    policy: swl,
    write: (admin, key, now) =>
      raw(admin, 'ZADD', key, ...logTakes(now + 10 * 10_000, [1, 1, 1, 1, 1])),
  },
  {
    label: 'sliding window log: the per-unit log before it (`<ms>:<n>`), the limit filled now',
    policy: swl,
    write: (admin, key, now) =>
      raw(admin, 'ZADD', key, ...[0, 1, 2, 3, 4].flatMap((i) => [now, `${now}:${i}`])),
  },
  {
    label: 'sliding window log: more units in the window than the limit',
    policy: swl,
    write: (admin, key, now) => raw(admin, 'ZADD', key, ...logTakes(now, [3, 3])),
  },
  {
    label: 'token bucket: empty, last written now + 1e12 ms',
    policy: tb,
    write: (admin, key, now) => raw(admin, 'HSET', key, 's', '0', 't', String(now + 1e12)),
  },
  {
    label: 'token bucket: tokens not an integer',
    policy: tb,
    write: (admin, key, now) => raw(admin, 'HSET', key, 's', '0.5', 't', String(now)),
  },
  {
    label: 'sliding window counter: a huge window index, counts 999',
    policy: swc,
    write: (admin, key) => raw(admin, 'HSET', key, 'w', '999999999999999', 'c', '999', 'p', '999'),
  },
  {
    label: 'sliding window counter: a window index 10 horizons ahead, counts at the limit',
    policy: swc,
    write: (admin, key, now) =>
      raw(admin, 'HSET', key, 'w', String(Math.floor(now / 10_000) + 20), 'c', '5', 'p', '5'),
  },
  {
    label: 'GCRA: a TAT of 1e18 µs',
    policy: gc,
    write: (admin, key) => raw(admin, 'SET', key, '1000000000000000000'),
  },
  {
    label: 'GCRA: a negative TAT',
    policy: gc,
    write: (admin, key) => raw(admin, 'SET', key, '-5'),
  },
  {
    label: "fixed window: count 'abc'",
    policy: fw,
    write: (admin, key) => raw(admin, 'SET', key, 'abc'),
  },
  {
    label: "fixed window: count '-50'",
    policy: fw,
    write: (admin, key) => raw(admin, 'SET', key, '-50'),
  },
  {
    label: "fixed window: count '99999'",
    policy: fw,
    write: (admin, key) => raw(admin, 'SET', key, '99999'),
  },
  {
    label: "fixed window: count '2.5'",
    policy: fw,
    write: (admin, key) => raw(admin, 'SET', key, '2.5'),
  },
];

describe('foreign state starts the scope afresh, within one horizon', () => {
  for (const { label, policy, write } of FOREIGN) {
    for (const shape of ['no TTL', '1e12 ms TTL'] as const) {
      it(`${label} (${shape}) → admitted with full remaining − cost; reply and key bounded`, async () => {
        const limiter = await newLimiter();
        const admin = await redis.admin();
        const scope = newScope();
        const key = limiter.keyOf(scope, policy);
        await write(admin, key, await serverNowMs(admin));
        await shapeTtl(admin, key, shape, policy.horizonMs);
        const d = await limiter.take(scope, policy, { cost: 2 });
        assert.deepEqual(
          [d.allowed, d.remaining, d.limit, d.retryAfterMs],
          [true, policy.limit - 2, policy.limit, 0],
          label,
        );
        assertBoundedReply(d, policy, label);
        await assertBoundedKey(admin, key, policy, label);
        assert.ok((await admin.client.pTTL(key)) > 0, `${label}: the fresh state is written`);
        // The scope goes on as a fresh one would.
        const next = await limiter.take(scope, policy);
        assert.deepEqual([next.allowed, next.remaining], [true, policy.limit - 3], label);
        assertBoundedReply(next, policy, label);
        await assertBoundedKey(admin, key, policy, label);
      });
    }
  }
});

/** State this policy could have written, used up, "now": every take is denied. */
const EXHAUSTED: ForeignCase[] = [
  {
    label: 'fixed window: count = limit',
    policy: fw,
    write: (admin, key) => raw(admin, 'SET', key, '5'),
  },
  {
    label: 'sliding window log: the limit filled now',
    policy: swl,
    write: (admin, key, now) => raw(admin, 'ZADD', key, ...logTakes(now, [2, 1, 2])),
  },
  {
    label: 'sliding window counter: the current window at the limit',
    policy: swc,
    write: (admin, key, now) =>
      raw(admin, 'HSET', key, 'w', String(Math.floor(now / 10_000)), 'c', '5', 'p', '0'),
  },
  {
    label: 'token bucket: empty, last written now',
    policy: tb,
    write: (admin, key, now) => raw(admin, 'HSET', key, 's', '0', 't', String(now)),
  },
  {
    label: 'GCRA: TAT = now + τ (the whole burst spent)',
    policy: gc,
    write: (admin, key, now) => raw(admin, 'SET', key, String(now * 1000 + 10_000_000)),
  },
];

describe('a key without a TTL (or with one beyond the horizon) is healed on the denial path', () => {
  for (const { label, policy, write } of EXHAUSTED) {
    for (const shape of ['no TTL', '1e12 ms TTL'] as const) {
      it(`${label} (${shape}) → denied; PTTL afterwards in (0, horizon]`, async () => {
        const limiter = await newLimiter();
        const admin = await redis.admin();
        const scope = newScope();
        const key = limiter.keyOf(scope, policy);
        await write(admin, key, await serverNowMs(admin));
        await shapeTtl(admin, key, shape, policy.horizonMs);
        const d = await limiter.take(scope, policy);
        assert.deepEqual([d.allowed, d.remaining], [false, 0], label);
        assert.ok(d.retryAfterMs > 0, `${label}: retryAfterMs ${d.retryAfterMs}`);
        assertBoundedReply(d, policy, label);
        const pttl = await admin.client.pTTL(key);
        assert.ok(pttl > 0 && pttl <= policy.horizonMs, `${label}: PTTL ${pttl}`);
      });
    }
  }
});

/**
 * A server clock that stepped back within one horizon, emulated by state written slightly
 * in the future: what was spent stays spent.
 */
const STEPPED_BACK: ForeignCase[] = [
  {
    label: 'token bucket: empty, last written now + horizon / 2',
    policy: tb,
    write: (admin, key, now) => raw(admin, 'HSET', key, 's', '0', 't', String(now + 5000)),
  },
  {
    label: 'token bucket: empty, last written now + horizon',
    policy: tb,
    write: (admin, key, now) => raw(admin, 'HSET', key, 's', '0', 't', String(now + 9900)),
  },
  {
    label: 'sliding window log: the limit filled at now + window / 2',
    policy: swl,
    write: (admin, key, now) => raw(admin, 'ZADD', key, ...logTakes(now + 5000, [1, 1, 1, 1, 1])),
  },
  {
    label: 'sliding window counter: the next window already at the limit',
    policy: swc,
    write: (admin, key, now) =>
      raw(admin, 'HSET', key, 'w', String(Math.floor(now / 10_000) + 1), 'c', '5', 'p', '5'),
  },
  {
    label: 'GCRA: TAT = now + 1.5 τ',
    policy: gc,
    write: (admin, key, now) => raw(admin, 'SET', key, String(now * 1000 + 15_000_000)),
  },
];

describe('a server clock step back within one horizon never re-admits', () => {
  for (const { label, policy, write } of STEPPED_BACK) {
    for (const shape of ['horizon TTL', 'no TTL'] as const) {
      it(`${label} (${shape}) → denied, waits ≤ horizon + 1, PTTL ≤ horizon`, async () => {
        const limiter = await newLimiter();
        const admin = await redis.admin();
        const scope = newScope();
        const key = limiter.keyOf(scope, policy);
        await write(admin, key, await serverNowMs(admin));
        await shapeTtl(admin, key, shape, policy.horizonMs);
        for (let i = 0; i < 3; i++) {
          const d = await limiter.take(scope, policy);
          assert.equal(d.allowed, false, `${label}: take ${i} re-admitted`);
          assert.equal(d.remaining, 0, label);
          assert.ok(d.retryAfterMs > 0, `${label}: retryAfterMs ${d.retryAfterMs}`);
          assertBoundedReply(d, policy, label);
          const pttl = await admin.client.pTTL(key);
          assert.ok(pttl > 0 && pttl <= policy.horizonMs, `${label}: PTTL ${pttl}`);
        }
        // A peek agrees and writes nothing.
        const peek = await limiter.peek(scope, policy);
        assert.equal(peek.allowed, false, label);
        assertBoundedReply(peek, policy, label);
      });
    }
  }
});

describe('a refused takeAll repairs what a denied take repairs (and consumes nothing)', () => {
  for (const [label, policy, seed] of [
    ['fixed window, full counter without a TTL', fw, ['SET', '5']],
    ['sliding window log, full log without a TTL', swl, null],
  ] as const) {
    it(`${label}: the key gets a TTL within the horizon from a refused takeAll alone`, async () => {
      // No denial cache: every takeAll is decided (and refused) by the script.
      const limiter = new RateLimiter({
        timeoutMs: TEST_TIMEOUT_MS,
        client: await redis.client(),
        denialCache: false,
      });
      const admin = await redis.admin();
      const scope = newScope();
      const key = limiter.keyOf(scope, policy);
      if (seed === null) {
        const now = await serverNowMs(admin);
        await raw(admin, 'ZADD', key, ...logTakes(now - 1000, [4, 1]));
      } else {
        await raw(admin, seed[0], key, seed[1]);
      }
      assert.equal(await admin.client.pTTL(key), -1, 'arranged without a TTL');
      // Another item refuses (a per-tenant limit already used up) — or this one does.
      const other = fixedWindow({ limit: 1, windowMs: 60_000, name: 'tenant-once' });
      await limiter.take({ tenant: scope.tenant }, other);
      const result = await limiter.takeAll([
        { scope: { tenant: scope.tenant }, policy: other },
        { scope, policy },
      ]);
      assert.equal(result.allowed, false);
      const pttl = await admin.client.pTTL(key);
      assert.ok(pttl > 0 && pttl <= policy.horizonMs, `PTTL ${pttl}`);
      const peeked = await limiter.peek(scope, policy);
      assert.equal(peeked.allowed, false, 'nothing was consumed, nothing was freed');
    });
  }
});

describe('an admitted takeAll takes each fixed window as a take would, reading its key once', () => {
  const states = [
    ['no key', null, 'no TTL'],
    ['a count with its window', '2', 'horizon TTL'],
    ['a count without a TTL', '2', 'no TTL'],
    ['a count with a 1e12 ms TTL', '2', '1e12 ms TTL'],
    ['foreign state without a TTL', 'abc', 'no TTL'],
  ] as const;
  for (const [label, value, shape] of states) {
    it(`${label}: the same decision and key as a lone take's, with no second read`, async () => {
      const limiter = await newLimiter();
      const admin = await redis.admin();
      const other = fixedWindow({ limit: 100, windowMs: 60_000, name: 'tenant-wide' });
      // Two scopes in the same state: one taken alone, one by a takeAll with another item.
      const [alone, stacked] = [newScope(), newScope()];
      for (const scope of [alone, stacked]) {
        const key = limiter.keyOf(scope, fw);
        if (value !== null) {
          await raw(admin, 'SET', key, value);
          await shapeTtl(admin, key, shape, fw.horizonMs);
        }
      }
      const single = await limiter.take(alone, fw, { cost: 2 });
      const [sets, pttls] = [await commandCalls(admin, 'set'), await commandCalls(admin, 'pttl')];
      const result = await limiter.takeAll([
        { scope: { tenant: stacked.tenant }, policy: other },
        { scope: stacked, policy: fw, cost: 2 },
      ]);
      const [setsAfter, pttlsAfter] = [
        await commandCalls(admin, 'set'),
        await commandCalls(admin, 'pttl'),
      ];
      assert.equal(result.allowed, true);
      const taken = result.decisions[1] as Decision;
      assert.deepEqual(
        [taken.allowed, taken.remaining, taken.retryAfterMs],
        [single.allowed, single.remaining, single.retryAfterMs],
      );
      assert.ok(Math.abs(taken.resetMs - single.resetMs) <= 1_000, 'the same window');
      const [keyAlone, keyStacked] = [limiter.keyOf(alone, fw), limiter.keyOf(stacked, fw)];
      assert.equal(await admin.client.get(keyStacked), await admin.client.get(keyAlone));
      const pttl = await admin.client.pTTL(keyStacked);
      assert.ok(pttl > 0 && pttl <= fw.horizonMs, `PTTL ${pttl}`);
      // Each existing key read once (the dry pass's PTTL), never SET … NX GET again: the
      // tenant-wide item's new key is the one SET (and the foreign state's replacement).
      const existing = value !== null && value !== 'abc';
      assert.equal(pttlsAfter - pttls, existing ? 1 : 0, 'PTTL calls');
      assert.equal(setsAfter - sets, existing ? 1 : 2, 'SET calls');
    });
  }
});

describe('priced operations and ids keep every key within its horizon', () => {
  for (const policy of [
    fixedWindow({ limit: 10, windowMs: 2000 }),
    tokenBucket({ capacity: 10, refillIntervalMs: 200 }),
    gcra({ limit: 10, periodMs: 2000 }),
    slidingWindowCounter({ limit: 10, windowMs: 1000 }),
    slidingWindowLog({ limit: 10, windowMs: 2000 }),
  ]) {
    it(`${policy.algorithm}: take with an id, reserve, settle past the limit, charge, refund, takeAll with an id`, async () => {
      const limiter = await newLimiter();
      const admin = await redis.admin();
      const scope = newScope();
      await limiter.take(scope, policy, { id: 'once', cost: 2 });
      const r = await limiter.reserve(scope, policy, { cost: 3 });
      const middle = await limiter.reserve(scope, policy, { cost: 2 });
      await limiter.take(scope, policy);
      await middle.cancel(); // the log: its member removed, the later ones rewritten
      await r.settle(30);
      await limiter.charge(scope, policy, 50, { id: 'penalty' });
      await limiter.refund(scope, policy, 4, { id: 'refund', takeId: 'once' });
      await limiter.refund(scope, policy, 1, { id: 'refund-r', takeId: r.id });
      await limiter.takeAll([{ scope, policy }], { id: 'all' });
      const keys = (await admin.client.keys(`rate:{*}*`)).filter((key) =>
        key.includes(limiter.keyOf(scope, policy).slice(5, 39)),
      );
      assert.ok(keys.length >= 5, `the scope's key and its records: ${keys.length}`);
      for (const key of keys) {
        const pttl = await admin.client.pTTL(key);
        assert.ok(pttl > 0 && pttl <= policy.horizonMs, `${key}: PTTL ${pttl}`);
      }
      // The debt is bounded: every wait within one horizon.
      assertBoundedReply(await limiter.take(scope, policy), policy, 'after the charges');
    });
  }
});
