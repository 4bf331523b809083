/**
 * Decision events and the metrics sink interface, on MemoryStore and on stub stores that
 * fail in each way (units that never touch Redis; the Prometheus and OpenTelemetry sinks
 * are tested against a real Redis in test/integration): every outcome reported once per
 * decided policy, with latency, requestId and — only when asked — the tenant; peeks and
 * resets report nothing; a throwing observer changes no decision.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { fixedWindow, InvalidInputError, MemoryStore, RateLimiter, StoreError } from 'sluice';
import type { DecisionEvent, LimiterSource, Metrics, RequestEvent } from 'sluice/metrics';
import type { ScriptStore } from 'sluice/store';

class Recording implements Metrics {
  readonly decisions: DecisionEvent[] = [];
  readonly requests: RequestEvent[] = [];
  readonly sources: LimiterSource[] = [];
  decision(event: DecisionEvent): void {
    this.decisions.push(event);
  }
  request(event: RequestEvent): void {
    this.requests.push(event);
  }
  redisEvent(): void {}
  attach(source: LimiterSource): void {
    this.sources.push(source);
  }
}

const orders = fixedWindow({ name: 'orders', limit: 1, windowMs: 60_000 });
const hourly = fixedWindow({ name: 'hourly', limit: 5, windowMs: 3_600_000 });
const scope = { tenant: 'acme', route: 'POST/orders' };

/** A store whose every script call settles as `answer` says. */
const stubStore = (answer: () => Promise<unknown>): ScriptStore => ({
  evalScript: () => answer(),
});

describe('decision events', () => {
  it('take: allowed, limited from Redis, then limited from the cache; latency, route, requestId; no tenant by default', async () => {
    const metrics = new Recording();
    const events: DecisionEvent[] = [];
    const limiter = new RateLimiter({
      store: new MemoryStore(),
      metrics,
      onDecision: (event) => events.push(event),
    });
    await limiter.take(scope, orders, { requestId: 'req-1' });
    await limiter.take(scope, orders);
    await limiter.take(scope, orders);
    assert.deepEqual(
      events.map((e) => [e.outcome, e.policy, e.route, e.cached, e.operation, e.requestId]),
      [
        ['allowed', 'orders', 'POST/orders', false, 'take', 'req-1'],
        ['limited', 'orders', 'POST/orders', true, 'take', undefined],
        ['limited', 'orders', 'POST/orders', true, 'take', undefined],
      ],
    );
    assert.ok((events[0]?.latencyMs ?? -1) >= 0);
    assert.equal(events[1]?.latencyMs, 0, 'answered by the cache: no round trip');
    assert.equal(events[0]?.decision?.remaining, 0);
    assert.ok(events.every((e) => e.tenant === undefined));
    assert.deepEqual(metrics.decisions, events, 'the sink gets the same events');
  });

  it('eventTenant: true puts the tenant in onDecision events', async () => {
    const events: DecisionEvent[] = [];
    const limiter = new RateLimiter({
      store: new MemoryStore(),
      onDecision: (event) => events.push(event),
      eventTenant: true,
    });
    await limiter.take(scope, orders);
    assert.equal(events[0]?.tenant, 'acme');
  });

  it('takeAll: one event per item; a refusal is limited on the item that refused, not_charged on the others; peeks and resets report nothing', async () => {
    const events: DecisionEvent[] = [];
    const limiter = new RateLimiter({
      store: new MemoryStore(),
      denialCache: false,
      onDecision: (event) => events.push(event),
    });
    const items = [
      { scope, policy: orders },
      { scope: { tenant: 'acme' }, policy: hourly },
    ];
    await limiter.takeAll(items, { requestId: 'r2' });
    const refused = await limiter.takeAll(items);
    await limiter.peek(scope, orders);
    await limiter.reset(scope, orders);
    assert.deepEqual(
      events.map((e) => [e.outcome, e.policy, e.route, e.operation, e.requestId]),
      [
        ['allowed', 'orders', 'POST/orders', 'takeAll', 'r2'],
        ['allowed', 'hourly', undefined, 'takeAll', 'r2'],
        ['limited', 'orders', 'POST/orders', 'takeAll', undefined],
        ['not_charged', 'hourly', undefined, 'takeAll', undefined],
      ],
    );
    // The events carry each item's own decision: the one that refused has a wait.
    assert.deepEqual(
      events.slice(2).map((e) => e.decision),
      refused.decisions,
    );
    assert.ok((events[2]?.decision?.retryAfterMs ?? 0) > 0);
    assert.equal(events[3]?.decision?.retryAfterMs, 0);
    // stats() counts calls: each takeAll once.
    const stats = limiter.stats();
    assert.deepEqual([stats.allowed, stats.limited, stats.peeks, stats.resets], [1, 1, 1, 1]);
  });

  it('takeAll refused by the denial cache: limited on the held item only, cached on every item', async () => {
    const metrics = new Recording();
    const limiter = new RateLimiter({ store: new MemoryStore(), metrics });
    const items = [
      { scope: { tenant: 'acme' }, policy: hourly },
      { scope, policy: orders },
    ];
    assert.equal((await limiter.takeAll(items)).allowed, true); // orders: 0 left, now held
    const refused = await limiter.takeAll(items);
    assert.equal(refused.cached, true);
    assert.deepEqual(
      metrics.decisions.slice(2).map((e) => [e.outcome, e.policy, e.cached, e.latencyMs]),
      [
        ['not_charged', 'hourly', true, 0],
        ['limited', 'orders', true, 0],
      ],
    );
    const stats = limiter.stats();
    assert.deepEqual([stats.allowed, stats.limited, stats.cachedDenials], [1, 1, 1]);
  });

  it('invalid and overload: reported once, with no round trip', async () => {
    const events: DecisionEvent[] = [];
    const never = stubStore(() => new Promise(() => {}));
    const limiter = new RateLimiter({
      store: never,
      maxInFlight: 1,
      // Short: the call left in flight holds the process open until its deadline.
      timeoutMs: 100,
      onDecision: (event) => events.push(event),
    });
    await assert.rejects(
      limiter.take({ tenant: '' }, orders, { requestId: 'r-bad' }),
      InvalidInputError,
    );
    await assert.rejects(
      limiter.take(scope, orders, { requestId: 'x'.repeat(257) }),
      InvalidInputError,
    );
    await assert.rejects(limiter.takeAll([]), InvalidInputError);
    void limiter.take(scope, orders).catch(() => {});
    await assert.rejects(limiter.take(scope, hourly), { code: 'SLUICE_OVERLOAD' });
    assert.equal(events[0]?.requestId, 'r-bad', 'a valid requestId rides on an invalid event');
    assert.deepEqual(
      events.map((e) => [e.outcome, e.policy, e.operation, e.latencyMs]),
      [
        ['invalid', 'orders', 'take', 0],
        ['invalid', 'orders', 'take', 0],
        ['invalid', '', 'takeAll', 0],
        ['overload', 'hourly', 'take', 0],
      ],
    );
  });

  it('timeout, unavailable and store_error: one event each, with the error', async () => {
    const cases = [
      { store: stubStore(() => new Promise(() => {})), outcome: 'timeout' },
      { store: stubStore(() => Promise.reject(new Error('ECONNRESET'))), outcome: 'unavailable' },
      {
        store: stubStore(() => Promise.reject(new StoreError('WRONGTYPE'))),
        outcome: 'store_error',
      },
    ];
    for (const { store, outcome } of cases) {
      const events: DecisionEvent[] = [];
      const limiter = new RateLimiter({
        store,
        timeoutMs: 20,
        denialCache: false,
        onDecision: (event) => events.push(event),
      });
      await assert.rejects(limiter.take(scope, orders));
      assert.deepEqual(
        events.map((e) => [e.outcome, e.policy, e.error instanceof Error]),
        [[outcome, 'orders', true]],
        outcome,
      );
    }
  });

  it('attach gives the sink the deadline and the calls in flight', async () => {
    const metrics = new Recording();
    let release: (value: unknown) => void = () => {};
    const limiter = new RateLimiter({
      store: stubStore(() => new Promise((resolve) => (release = resolve))),
      metrics,
      timeoutMs: 5_000,
    });
    assert.equal(metrics.sources.length, 1);
    assert.equal(metrics.sources[0]?.timeoutMs, 5_000);
    assert.equal(metrics.sources[0]?.inFlight(), 0);
    const pending = limiter.take(scope, orders).catch(() => {});
    await new Promise((resolve) => setImmediate(resolve));
    assert.equal(metrics.sources[0]?.inFlight(), 1);
    release([1, 0, 1, 60_000, 0]);
    await pending;
  });

  it('an observer that throws is reported as a warning and changes no decision', async () => {
    const warnings: string[] = [];
    const onWarning = (warning: Error) => warnings.push(warning.message);
    process.on('warning', onWarning);
    try {
      const limiter = new RateLimiter({
        store: new MemoryStore(),
        onDecision: () => {
          throw new Error('broken logger');
        },
      });
      assert.equal((await limiter.take(scope, orders)).allowed, true);
      assert.equal((await limiter.take(scope, orders)).allowed, false);
      await new Promise((resolve) => setImmediate(resolve));
      assert.ok(warnings.some((m) => m.includes('broken logger')));
    } finally {
      process.off('warning', onWarning);
    }
  });

  it('an observer cannot change a decision: events carry a frozen copy', async () => {
    const limiter = new RateLimiter({
      store: new MemoryStore(),
      denialCache: false,
      onDecision: (event) => {
        try {
          (event.decision as { allowed: boolean }).allowed = true;
        } catch {
          // frozen: strict mode throws
        }
      },
    });
    assert.equal((await limiter.take(scope, orders)).allowed, true);
    const second = await limiter.take(scope, orders);
    assert.equal(second.allowed, false, 'the caller sees what Redis decided');
  });

  it('an async observer that rejects neither crashes the process nor floods it with warnings', async () => {
    const warnings: string[] = [];
    const onWarning = (warning: Error) => warnings.push(warning.message);
    process.on('warning', onWarning);
    try {
      const limiter = new RateLimiter({
        store: new MemoryStore(),
        onDecision: async () => {
          throw new Error('log sink down');
        },
      });
      for (let i = 0; i < 50; i++) await limiter.take({ tenant: `t${i}` }, orders);
      await new Promise((resolve) => setTimeout(resolve, 20));
      const mine = warnings.filter((m) => m.includes('log sink down'));
      // One warning per observer per 10 s (none here if an earlier test of this file just
      // warned about onDecision), never one per decision.
      assert.ok(mine.length <= 1, `${mine.length} warnings for 50 failures`);
    } finally {
      process.off('warning', onWarning);
    }
  });

  it('bad observer options are refused by name', () => {
    const store = new MemoryStore();
    assert.throws(() => new RateLimiter({ store, metrics: {} as never }), {
      field: 'options.metrics',
    });
    assert.throws(() => new RateLimiter({ store, onDecision: 'log' as never }), {
      field: 'options.onDecision',
    });
    assert.throws(() => new RateLimiter({ store, eventTenant: 'yes' as never }), {
      field: 'options.eventTenant',
    });
  });
});
