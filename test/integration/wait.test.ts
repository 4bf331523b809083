/**
 * `wait` and `schedule` on a real Redis (through the script connection, the fast path):
 * waiters of one scope in one process are admitted in arrival order, with about one Redis
 * call per admission (no polling); each is answered by its `maxWaitMs` under load, never
 * later; a signal aborts a wait at once; beyond `maxWaiters` a wait is refused at once; a
 * release in the process wakes the next waiter of its scope; `schedule` holds a lease while
 * its function runs (renewed past half the lease) and releases it after.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import {
  AggregationTemporality,
  InMemoryMetricExporter,
  MeterProvider,
  PeriodicExportingMetricReader,
} from '@opentelemetry/sdk-metrics';
import { Registry } from 'prom-client';
import {
  concurrency,
  fixedWindow,
  InvalidInputError,
  MemoryStore,
  RateLimiter,
  tokenBucket,
} from 'sluice';
import type { Metrics } from 'sluice/metrics';
import { openTelemetryMetrics } from 'sluice/opentelemetry';
import { prometheusMetrics } from 'sluice/prometheus';
import { watchLoop } from '../helpers/lag.js';
import { commandCalls, randomTenant, useRedis } from '../helpers/redis.js';

const redis = useRedis();

async function limiterOf(options: { maxWaiters?: number } = {}) {
  return new RateLimiter({ client: await redis.client(), timeoutMs: 2000, ...options });
}

describe('wait', () => {
  it('admits the waiters of one process in arrival order, one Redis call or two per admission', async () => {
    const limiter = await limiterOf();
    const admin = await redis.admin();
    const policy = tokenBucket({ capacity: 1, refillTokens: 1, refillIntervalMs: 40 });
    const scope = { tenant: randomTenant() };
    const calls = async () =>
      (await commandCalls(admin, 'evalsha')) + (await commandCalls(admin, 'eval'));
    const before = await calls();
    const order: number[] = [];
    const started = performance.now();
    await Promise.all(
      Array.from({ length: 10 }, (_, i) =>
        limiter.wait(scope, policy, { maxWaitMs: 5000 }).then((d) => {
          assert.ok(d.allowed);
          order.push(i);
        }),
      ),
    );
    const tookMs = performance.now() - started;
    assert.deepEqual(order, [0, 1, 2, 3, 4, 5, 6, 7, 8, 9]);
    // 9 refills of 40 ms: about 360 ms, not much more.
    assert.ok(tookMs >= 340 && tookMs < 2000, `took ${Math.round(tookMs)} ms`);
    const sent = (await calls()) - before;
    assert.ok(sent <= 25, `${sent} script calls for 10 admissions`);
    const stats = limiter.stats();
    assert.equal(stats.waitGranted, 10);
    assert.equal(stats.waiting, 0);
  });

  it('answers every waiter by its maxWaitMs under load, never later', async () => {
    const limiter = await limiterOf();
    const policy = concurrency({ limit: 1, leaseMs: 60_000 });
    const scope = { tenant: randomTenant() };
    const held = await limiter.acquire(scope, policy);
    assert.ok(held.allowed);
    const lag = watchLoop();
    const late = await Promise.all(
      Array.from({ length: 200 }, async (_, i) => {
        const maxWaitMs = 50 + (i % 5) * 50;
        const started = performance.now();
        const lease = await limiter.wait(scope, policy, { maxWaitMs });
        assert.equal(lease.allowed, false);
        return performance.now() - started - maxWaitMs;
      }),
    );
    const worst = Math.max(...late);
    const lagMs = lag.stop();
    // A small bound, however many wait, and the event loop's lateness on a loaded machine.
    assert.ok(
      worst < 100 + lagMs,
      `answered up to ${Math.round(worst)} ms past maxWaitMs (loop late ≤ ${lagMs} ms)`,
    );
    assert.ok(Math.min(...late) > -2, 'refused before maxWaitMs');
    assert.equal(limiter.stats().waitTimedOut, 200);
    // A rate policy whose exact wait lands past maxWaitMs: refused at once.
    const window = fixedWindow({ limit: 1, windowMs: 10_000 });
    await limiter.take(scope, window);
    const refusing = watchLoop();
    const started = performance.now();
    const refused = await limiter.wait(scope, window, { maxWaitMs: 1000 });
    assert.equal(refused.allowed, false);
    assert.ok(performance.now() - started < 100 + refusing.stop());
    assert.ok(refused.retryAfterMs > 9000);
  });

  it('rejects with AbortError at once when its signal fires', async () => {
    const limiter = await limiterOf();
    const policy = concurrency({ limit: 1, leaseMs: 60_000 });
    const scope = { tenant: randomTenant() };
    await limiter.acquire(scope, policy);
    const controller = new AbortController();
    const waiting = limiter.wait(scope, policy, { maxWaitMs: 10_000, signal: controller.signal });
    await sleep(30);
    const lag = watchLoop();
    const abortedAt = performance.now();
    controller.abort();
    await assert.rejects(waiting, { name: 'AbortError' });
    assert.ok(performance.now() - abortedAt < 50 + lag.stop());
    await assert.rejects(
      limiter.wait(scope, policy, { maxWaitMs: 10, signal: AbortSignal.abort() }),
      { name: 'AbortError' },
    );
    const stats = limiter.stats();
    assert.equal(stats.waitAborted, 2);
    assert.equal(stats.waiting, 0);
  });

  it('refuses at once beyond maxWaiters, counted', async () => {
    const limiter = await limiterOf({ maxWaiters: 3 });
    const policy = concurrency({ limit: 1, leaseMs: 60_000 });
    const scope = { tenant: randomTenant() };
    const held = await limiter.acquire(scope, policy);
    const waits = Array.from({ length: 5 }, () =>
      limiter.wait(scope, policy, { maxWaitMs: 300 }).then((l) => l.allowed),
    );
    const lag = watchLoop();
    const started = performance.now();
    const overflow = await Promise.race([waits[3], waits[4]]);
    assert.equal(overflow, false);
    assert.ok(performance.now() - started < 50 + lag.stop());
    assert.equal(limiter.stats().waitOverflow, 2);
    await held.release(); // wakes the first waiter at once
    assert.deepEqual(await Promise.all(waits), [true, false, false, false, false]);
  });

  it('a release in this process wakes the next waiter of its scope at once', async () => {
    const limiter = await limiterOf();
    const policy = concurrency({ limit: 1, leaseMs: 60_000 });
    const scope = { tenant: randomTenant() };
    const held = await limiter.acquire(scope, policy);
    const waiting = limiter.wait(scope, policy, { maxWaitMs: 5000 });
    await sleep(300); // the waiter backs off
    const lag = watchLoop();
    const releasedAt = performance.now();
    await held.release();
    const lease = await waiting;
    assert.ok(lease.allowed);
    // Without the wake it would ask again after its backoff (hundreds of ms by now).
    assert.ok(performance.now() - releasedAt < 100 + lag.stop());
    assert.equal(await lease.release(), true);
  });

  it('maxWaitMs 0 on a concurrency policy: one attempt, refused at once (Redis and memory)', async () => {
    const policy = concurrency({ limit: 1, leaseMs: 60_000 });
    for (const limiter of [await limiterOf(), new RateLimiter({ store: new MemoryStore() })]) {
      const scope = { tenant: randomTenant() };
      const held = await limiter.acquire(scope, policy);
      const lag = watchLoop();
      const started = performance.now();
      const refused = await limiter.wait(scope, policy, { maxWaitMs: 0 });
      assert.equal(refused.allowed, false);
      assert.ok(performance.now() - started < 500 + lag.stop(), 'not held until the lease expires');
      let ran = false;
      const scheduled = await limiter.schedule(scope, policy, () => (ran = true), { maxWaitMs: 0 });
      assert.equal(scheduled.admitted || ran, false);
      // A waiter past its deadline never takes the slot from one still in time behind it.
      const first = limiter.wait(scope, policy, { maxWaitMs: 20 });
      const second = limiter.wait(scope, policy, { maxWaitMs: 5000 });
      await sleep(300);
      await held.release();
      assert.equal((await first).allowed, false);
      const lease = await second;
      assert.ok(lease.allowed);
      assert.equal(await lease.release(), true);
    }
  });

  it('checks its input: InvalidInputError, nothing sent', async () => {
    const limiter = await limiterOf();
    const policy = concurrency({ limit: 1, leaseMs: 1000 });
    const rate = fixedWindow({ limit: 1, windowMs: 1000 });
    const scope = { tenant: randomTenant() };
    for (const options of [
      undefined,
      {},
      { maxWaitMs: -1 },
      { maxWaitMs: 1.5 },
      { maxWaitMs: 10, signal: {} },
      { maxWaitMs: 10, extra: 1 },
    ]) {
      await assert.rejects(limiter.wait(scope, policy, options as never), InvalidInputError);
    }
    await assert.rejects(limiter.wait(scope, policy, { maxWaitMs: 1, cost: 2 }), /options\.cost/);
    await assert.rejects(limiter.wait(scope, rate, { maxWaitMs: 1, id: 'x' }), /options\.id/);
  });
});

/** A metrics sink and a reading of its wait counts: `outcome policy value` lines, sorted. */
const SINKS: Record<string, () => { metrics: Metrics; read: () => Promise<string[]> }> = {
  prometheus: () => {
    const registry = new Registry();
    return {
      metrics: prometheusMetrics({ registry }),
      read: async () =>
        (await registry.getSingleMetricAsString('sluice_waits_total'))
          .split('\n')
          .filter((line) => line.startsWith('sluice_waits_total{'))
          .map((line) => {
            const m = /outcome="(\w+)",policy="(\w+)"\} (\d+)/.exec(line);
            return `${m?.[1]} ${m?.[2]} ${m?.[3]}`;
          })
          .sort(),
    };
  },
  opentelemetry: () => {
    const reader = new PeriodicExportingMetricReader({
      exporter: new InMemoryMetricExporter(AggregationTemporality.CUMULATIVE),
      exportIntervalMillis: 3_600_000,
    });
    const meterProvider = new MeterProvider({ readers: [reader] });
    return {
      metrics: openTelemetryMetrics({ meterProvider }),
      read: async () => {
        const { resourceMetrics } = await reader.collect();
        const lines: string[] = [];
        for (const scope of resourceMetrics.scopeMetrics) {
          for (const metric of scope.metrics) {
            if (metric.descriptor.name !== 'sluice.waits') continue;
            for (const point of metric.dataPoints) {
              const { outcome, policy } = point.attributes;
              lines.push(`${outcome} ${policy} ${point.value}`);
            }
          }
        }
        await meterProvider.shutdown();
        return lines.sort();
      },
    };
  },
};

describe('wait outcomes in the metrics', () => {
  for (const [name, sink] of Object.entries(SINKS)) {
    it(`${name}: counts granted, timed_out, aborted and overflow per policy`, async () => {
      const { metrics, read } = sink();
      const limiter = new RateLimiter({
        client: await redis.client(),
        timeoutMs: 2000,
        maxWaiters: 2,
        metrics,
      });
      const policy = concurrency({ limit: 1, leaseMs: 60_000, name: 'jobs' });
      const scope = { tenant: randomTenant() };
      const granted = await limiter.wait(scope, policy, { maxWaitMs: 100 });
      const timedOut = limiter.wait(scope, policy, { maxWaitMs: 30 });
      const controller = new AbortController();
      const aborted = limiter.wait(scope, policy, { maxWaitMs: 1000, signal: controller.signal });
      const overflow = await limiter.wait(scope, policy, { maxWaitMs: 1000 });
      controller.abort();
      await assert.rejects(aborted, { name: 'AbortError' });
      assert.equal((await timedOut).allowed, false);
      assert.equal(overflow.allowed, false);
      await granted.release();
      assert.deepEqual(await read(), [
        'aborted jobs 1',
        'granted jobs 1',
        'overflow jobs 1',
        'timed_out jobs 1',
      ]);
    });
  }
});

describe('schedule', () => {
  it('runs fn holding a lease, renewed past half the lease, released when fn settles', async () => {
    const limiter = await limiterOf();
    const policy = concurrency({ limit: 1, leaseMs: 200 });
    const scope = { tenant: randomTenant() };
    const result = await limiter.schedule(
      scope,
      policy,
      async (lease) => {
        assert.ok(lease.allowed);
        await sleep(500); // longer than the lease: renewed meanwhile
        return (await limiter.acquire(scope, policy)).allowed;
      },
      { maxWaitMs: 100 },
    );
    assert.deepEqual(result.admitted && result.value, false, 'the slot was still held');
    assert.equal((await limiter.acquire(scope, policy)).allowed, true, 'released after fn');
    const failing = limiter.schedule(
      { tenant: randomTenant() },
      policy,
      () => {
        throw new Error('boom');
      },
      { maxWaitMs: 100 },
    );
    await assert.rejects(failing, /boom/);
    const refused = await limiter.schedule(scope, policy, () => 1, { maxWaitMs: 50 });
    assert.equal(refused.admitted, false);
  });

  it("signals fn when its lease is lost; fn's own release is no lost lease", async () => {
    const limiter = await limiterOf();
    const policy = concurrency({ limit: 1, leaseMs: 200 });
    const scope = { tenant: randomTenant() };
    const result = await limiter.schedule(
      scope,
      policy,
      async (lease, signal) => {
        assert.equal(signal.aborted, false);
        // As if it expired under a paused holder: another process's release of its id.
        await limiter.release(scope, policy, lease.id);
        const started = performance.now();
        await new Promise((resolve) => signal.addEventListener('abort', resolve));
        return performance.now() - started;
      },
      { maxWaitMs: 100 },
    );
    assert.ok(result.admitted && result.value < 400, 'told at the next renewal');
    const lostBefore = limiter.stats().leasesLost;
    const own = await limiter.schedule(scope, policy, (lease) => lease.release(), {
      maxWaitMs: 100,
    });
    assert.equal(own.admitted && (await own.value), true);
    assert.equal(limiter.stats().leasesLost, lostBefore, 'no second release counted lost');
  });
});
