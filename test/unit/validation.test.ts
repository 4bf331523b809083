/**
 * Bad input → a typed error that names the field, and the store is never called.
 * The store here is a spy: this unit never touches Redis (the integration suite checks the
 * same against a real server with INFO commandstats).
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import {
  fixedWindow,
  gcra,
  InvalidInputError,
  RateLimiter,
  slidingWindowCounter,
  slidingWindowLog,
  tokenBucket,
} from 'sluice';
import type { ScriptStore } from 'sluice/store';

function spyStore() {
  let calls = 0;
  const store: ScriptStore = {
    evalScript: () => {
      calls++;
      return Promise.resolve([1, 0, 1000, 0]);
    },
  };
  return { store, calls: () => calls };
}

const BAD_NUMBERS: unknown[] = [
  0,
  -1,
  1.5,
  Number.NaN,
  Infinity,
  -Infinity,
  '10',
  null,
  2 ** 53,
  {},
  true,
];
const BAD_STRINGS: unknown[] = ['', 42, null, undefined, {}, ['a'], 'x'.repeat(65_537)];

describe('invalid input is rejected before Redis', () => {
  for (const value of BAD_NUMBERS) {
    it(`policy.limit = ${String(value)} → InvalidInputError(policy.limit)`, () => {
      assert.throws(
        () => fixedWindow({ limit: value as number, windowMs: 1000 }),
        (error: unknown) => error instanceof InvalidInputError && error.field === 'policy.limit',
      );
    });
    it(`policy.windowMs = ${String(value)} → InvalidInputError(policy.windowMs)`, () => {
      assert.throws(
        () => fixedWindow({ limit: 10, windowMs: value as number }),
        (error: unknown) => error instanceof InvalidInputError && error.field === 'policy.windowMs',
      );
    });
  }

  for (const version of ['', 'a b', '{x}', 'x'.repeat(65), -1, 1.5, null]) {
    it(`policy.version = ${JSON.stringify(version)} → InvalidInputError(policy.version)`, () => {
      assert.throws(
        () => fixedWindow({ limit: 1, windowMs: 1, version: version as string }),
        (error: unknown) => error instanceof InvalidInputError && error.field === 'policy.version',
      );
    });
  }

  it('a missing options object → InvalidInputError(policy)', () => {
    assert.throws(() => fixedWindow(undefined as never), InvalidInputError);
  });

  const policy = fixedWindow({ limit: 10, windowMs: 1000 });
  for (const field of ['tenant', 'route', 'user'] as const) {
    // A scope without a route or user is valid: a tenant-wide (or route-wide) limit.
    for (const value of BAD_STRINGS.filter((v) => field === 'tenant' || v !== undefined)) {
      it(`scope.${field} = ${typeof value === 'string' ? `string(${value.length})` : String(value)} → InvalidInputError, no store call`, async () => {
        const spy = spyStore();
        const limiter = new RateLimiter({ store: spy.store });
        const scope = { tenant: 'acme', route: 'POST/orders', [field]: value };
        await assert.rejects(
          limiter.take(scope as never, policy),
          (error: unknown) =>
            error instanceof InvalidInputError && error.field === `scope.${field}`,
        );
        assert.equal(spy.calls(), 0);
        assert.equal(limiter.stats().invalid, 1);
      });
    }
  }

  for (const scope of [null, undefined, 'acme', 42]) {
    it(`scope = ${String(scope)} → InvalidInputError(scope)`, async () => {
      const spy = spyStore();
      const limiter = new RateLimiter({ store: spy.store });
      await assert.rejects(limiter.take(scope as never, policy), {
        code: 'SLUICE_INVALID_INPUT',
        field: 'scope',
      });
      assert.equal(spy.calls(), 0);
    });
  }

  for (const cost of BAD_NUMBERS) {
    it(`options.cost = ${String(cost)} → InvalidInputError(options.cost), no store call`, async () => {
      const spy = spyStore();
      const limiter = new RateLimiter({ store: spy.store });
      await assert.rejects(
        limiter.take({ tenant: 'a', route: 'r' }, policy, { cost: cost as number }),
        {
          code: 'SLUICE_INVALID_INPUT',
          field: 'options.cost',
        },
      );
      assert.equal(spy.calls(), 0);
    });
  }

  it('a look-alike policy object is rejected (limits come from a builder, S3)', async () => {
    const spy = spyStore();
    const limiter = new RateLimiter({ store: spy.store });
    const forged = { ...policy, limit: 1_000_000 };
    await assert.rejects(limiter.take({ tenant: 'a', route: 'r' }, forged), { field: 'policy' });
    assert.equal(spy.calls(), 0);
  });

  it('a policy is frozen: its limit cannot be changed after validation', () => {
    assert.throws(() => {
      (policy as { limit: number }).limit = 1_000_000;
    }, TypeError);
  });

  it('limiter options are validated and name the field', () => {
    const { store } = spyStore();
    assert.throws(() => new RateLimiter({} as never), { field: 'options.client' });
    assert.throws(() => new RateLimiter({ store, client: {} as never }), {
      field: 'options.client',
    });
    assert.throws(() => new RateLimiter({ client: {} as never }), { field: 'options.client' });
    assert.throws(() => new RateLimiter({ store, timeoutMs: 0 }), { field: 'options.timeoutMs' });
    assert.throws(() => new RateLimiter({ store, maxInFlight: 1.5 }), {
      field: 'options.maxInFlight',
    });
    assert.throws(() => new RateLimiter({ store, namespace: 'a{b}' }), {
      field: 'options.namespace',
    });
  });

  it('the error carries a stable code and a message naming field and expectation', () => {
    try {
      fixedWindow({ limit: 0, windowMs: 1000 });
      assert.fail('no error');
    } catch (error) {
      assert.ok(error instanceof InvalidInputError);
      assert.equal(error.code, 'SLUICE_INVALID_INPUT');
      assert.equal(
        error.message,
        'policy.limit must be an integer from 1 to 999999999999999; received number 0',
      );
    }
  });
});

describe('every policy builder rejects bad fields by name', () => {
  const builders: [string, (value: unknown) => unknown][] = [
    ['policy.capacity', (v) => tokenBucket({ capacity: v as number, refillIntervalMs: 1000 })],
    [
      'policy.refillTokens',
      (v) => tokenBucket({ capacity: 1, refillTokens: v as number, refillIntervalMs: 1000 }),
    ],
    ['policy.refillIntervalMs', (v) => tokenBucket({ capacity: 1, refillIntervalMs: v as number })],
    ['policy.limit', (v) => slidingWindowLog({ limit: v as number, windowMs: 1000 })],
    ['policy.windowMs', (v) => slidingWindowLog({ limit: 1, windowMs: v as number })],
    ['policy.limit', (v) => slidingWindowCounter({ limit: v as number, windowMs: 1000 })],
    ['policy.windowMs', (v) => slidingWindowCounter({ limit: 1, windowMs: v as number })],
    ['policy.limit', (v) => gcra({ limit: v as number, periodMs: 1000 })],
    ['policy.periodMs', (v) => gcra({ limit: 1, periodMs: v as number })],
    ['policy.burst', (v) => gcra({ limit: 1, periodMs: 1000, burst: v as number })],
  ];
  for (const [field, build] of builders) {
    for (const value of [0, -1, 1.5, Number.NaN, Infinity, '10', null]) {
      it(`${field} = ${String(value)} → InvalidInputError(${field})`, () => {
        assert.throws(
          () => build(value),
          (error: unknown) => error instanceof InvalidInputError && error.field === field,
        );
      });
    }
  }

  it('limits that would break exact integer arithmetic are refused', () => {
    assert.throws(() => slidingWindowLog({ limit: 10_001, windowMs: 1000 }), {
      field: 'policy.limit',
    });
    assert.throws(() => slidingWindowCounter({ limit: 2 ** 40, windowMs: 2 ** 20 }), {
      field: 'policy.limit',
    });
    assert.throws(() => tokenBucket({ capacity: 2 ** 40, refillIntervalMs: 2 ** 20 }), {
      field: 'policy.capacity',
    });
  });
});

describe('every error points at its section of the errors reference', () => {
  it('error.docs is docs/errors.md#<code in lowercase>, and that section exists', async () => {
    const { readFileSync } = await import('node:fs');
    const reference = readFileSync(new URL('../../docs/errors.md', import.meta.url), 'utf8');
    const sluice = await import('sluice');
    const errors = [
      new sluice.InvalidInputError('f', 'x', 1),
      new sluice.TimeoutError(150),
      new sluice.UnavailableError('down'),
      new sluice.OverloadError(1),
      new sluice.StoreError('ERR x'),
      new sluice.RedisConfigError('tls', 'x'),
    ];
    for (const error of errors) {
      const anchor = error.code.toLowerCase();
      assert.ok(error.docs.endsWith(`/docs/errors.md#${anchor}`), error.docs);
      assert.ok(reference.includes(`\n## ${error.code}\n`), `a section ## ${error.code}`);
    }
  });
});
