/**
 * Regressions from an adversarial review: every hostile input or misbehaving collaborator
 * ends in a typed error or a valid decision — never a crash, a raw error, a synchronous
 * throw from `take`, or a value read twice. These units use fake stores: no Redis.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { fixedWindow, InvalidInputError, RateLimiter, UnavailableError } from 'sluice';
import { nodeRateLimit } from 'sluice/node';
import type { ScriptStore } from 'sluice/store';
import { scopeKey } from '../../src/key.js';

const policy = fixedWindow({ limit: 10, windowMs: 1000 });
const scope = { tenant: 'acme', route: 'POST/orders' };
const ok = () => Promise.resolve([1, 9, 1000, 0]);

describe('misbehaving stores never escape the caller’s promise', () => {
  const stores: [string, ScriptStore['evalScript']][] = [
    [
      'throws synchronously',
      () => {
        throw new Error('sync boom');
      },
    ],
    ['returns a plain value', () => [1, 9, 1000, 0] as never],
    ['returns undefined (a callback-style client)', () => undefined as never],
    ['rejects with undefined', () => Promise.reject(undefined)],
    ['rejects with a string', () => Promise.reject('nope')],
  ];
  for (const [label, evalScript] of stores) {
    for (const batch of [1, 3]) {
      it(`a store that ${label} → UnavailableError (batch of ${batch})`, async () => {
        const limiter = new RateLimiter({ store: { evalScript }, denialCache: false });
        const results = await Promise.allSettled(
          Array.from({ length: batch }, (_, i) =>
            limiter.take({ tenant: `t${i}`, route: 'r' }, policy),
          ),
        );
        for (const result of results) {
          assert.equal(result.status, 'rejected');
          assert.ok(result.reason instanceof UnavailableError, String(result.reason));
        }
        assert.equal(limiter.stats().inFlight, 0);
      });
    }
  }
});

describe('hostile scope objects', () => {
  it('tenant and route are read once: a getter that changes its value cannot slip past validation', async () => {
    const keys: string[] = [];
    const limiter = new RateLimiter({
      store: {
        evalScript: (script, k) => {
          if (script.name === 'reset-epoch') return Promise.resolve('');
          keys.push(...k);
          return ok();
        },
      },
    });
    let reads = 0;
    const flip = {
      get tenant() {
        reads++;
        return reads === 1 ? 'ok' : undefined;
      },
      route: 'r',
    };
    const decision = await limiter.take(flip as never, policy);
    assert.equal(decision.allowed, true);
    assert.equal(reads, 1);
    assert.deepEqual(keys, [scopeKey('rate', policy.id, 'ok', 'r', undefined)]);
  });

  it('a getter or Proxy trap that throws → InvalidInputError naming the field', async () => {
    const limiter = new RateLimiter({ store: { evalScript: ok } });
    const throwing = {
      get tenant(): string {
        throw new Error('getter');
      },
      route: 'r',
    };
    await assert.rejects(limiter.take(throwing, policy), {
      code: 'SLUICE_INVALID_INPUT',
      field: 'scope.tenant',
    });
    const trap = new Proxy(
      {},
      {
        get() {
          throw new Error('trap');
        },
      },
    );
    await assert.rejects(limiter.take(trap as never, policy), { field: 'scope.tenant' });
    await assert.rejects(limiter.take(scope, policy, trap as never), { field: 'options.cost' });
    const { proxy, revoke } = Proxy.revocable({}, {});
    revoke();
    await assert.rejects(limiter.take(proxy as never, policy), InvalidInputError);
    assert.throws(() => fixedWindow(trap as never), { field: 'policy.limit' });
    assert.throws(() => new RateLimiter(trap as never), InvalidInputError);
  });

  it('take works unbound and never throws synchronously', async () => {
    const limiter = new RateLimiter({ store: { evalScript: ok } });
    const take = limiter.take;
    assert.equal((await take(scope, policy)).allowed, true);
    const pending = take(null as never, policy); // must not throw here
    await assert.rejects(pending, InvalidInputError);
  });
});

describe('bounds on options', () => {
  const store: ScriptStore = { evalScript: ok };
  it('timeoutMs above the longest timer, maxBatchSize above 1024 and windowMs above 10 years are refused', () => {
    assert.throws(() => new RateLimiter({ store, timeoutMs: 2 ** 31 }), {
      field: 'options.timeoutMs',
    });
    assert.throws(() => new RateLimiter({ store, maxBatchSize: 1025 }), {
      field: 'options.maxBatchSize',
    });
    assert.throws(() => new RateLimiter({ store, denialCache: { maxEntries: 0 } }), {
      field: 'options.denialCache.maxEntries',
    });
    assert.throws(() => fixedWindow({ limit: 1, windowMs: 2 ** 52 }), { field: 'policy.windowMs' });
  });

  it('the HTTP guard checks policy, cost and the fail-open window when it is made', () => {
    const limiter = new RateLimiter({ store });
    const base = { limiter, policy, route: 'POST/orders', identify: () => 'acme' };
    assert.throws(() => nodeRateLimit({ ...base, policy: undefined as never }), {
      field: 'policy',
    });
    assert.throws(() => nodeRateLimit({ ...base, cost: 0 }), { field: 'cost' });
    for (const failOpenWindowMs of [0, -1, Number.NaN, Infinity, '1000']) {
      assert.throws(
        () =>
          nodeRateLimit({
            ...base,
            failureMode: 'fail-open',
            failOpenLimit: 3,
            failOpenWindowMs: failOpenWindowMs as number,
          }),
        { field: 'failOpenWindowMs' },
        String(failOpenWindowMs),
      );
    }
  });
});

describe('what users see', () => {
  it('the listener withRateLimit returns carries the outcome counts', async () => {
    const { withRateLimit } = await import('../../src/http/node.js');
    const limiter = new RateLimiter({ store: { evalScript: ok } });
    const listener = withRateLimit(
      { limiter, policy, route: 'POST/orders', identify: () => 'acme' },
      () => {},
    );
    assert.deepEqual(listener.counts, {
      allowed: 0,
      limited: 0,
      'fail-closed': 0,
      'fail-open': 0,
      'fail-open-limited': 0,
      unidentified: 0,
      skipped: 0,
      duplicate: 0,
    });
  });

  it('a policy in JSON shows its parameters, not its Lua source', () => {
    const json = JSON.parse(JSON.stringify(policy));
    assert.deepEqual(json, {
      name: 'fixed-window-10-per-1000ms',
      algorithm: 'fixed-window',
      limit: 10,
      version: '1',
      windowMs: 1000,
    });
  });
});
