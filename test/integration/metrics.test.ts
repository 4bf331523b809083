/**
 * The Prometheus and OpenTelemetry sinks against a real Redis: one scripted sequence of
 * decisions and faults — allowed, limited (from Redis and from the denial cache), invalid,
 * store_error, timeout, overload, unavailable, the guard's outcomes (allowed, limited,
 * unidentified, skipped, fail-closed, fail-open, fail-open-limited, shadow) and a Redis
 * reconnect — then each sink's output is read back and every count must be exactly what the
 * sequence did, and the tenant (put in every decision event with `eventTenant: true`) must
 * appear nowhere. The core must not load either metrics library.
 */
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { existsSync } from 'node:fs';
import { after, describe, it } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { promisify } from 'node:util';
import {
  AggregationTemporality,
  type DataPoint,
  type Histogram,
  InMemoryMetricExporter,
  MeterProvider,
  PeriodicExportingMetricReader,
} from '@opentelemetry/sdk-metrics';
import { Counter, Registry } from 'prom-client';
import { fixedWindow, RateLimiter } from 'sluice';
import { createGuard } from 'sluice/http';
import type { DecisionEvent, Metrics } from 'sluice/metrics';
import { connectRedis } from 'sluice/node-redis';
import { OPEN_TELEMETRY_INSTRUMENTS, openTelemetryMetrics } from 'sluice/opentelemetry';
import { prometheusMetrics } from 'sluice/prometheus';
import { keyFor, TEST_TIMEOUT_MS, useRedis } from '../helpers/redis.js';

const redis = useRedis();
const clients: { destroy(): void; isOpen: boolean }[] = [];
after(() => {
  for (const client of clients) if (client.isOpen) client.destroy();
});

/** A tenant that must never show in any metric. */
const secretTenant = () => `tenant-SECRET-${Math.random().toString(36).slice(2)}`;

/** One series: its labels (all strings) and value. */
interface Series {
  readonly labels: Readonly<Record<string, string>>;
  readonly value: number;
}
/** Metric name (Prometheus form) → its series. */
type Exposition = Map<string, Series[]>;

/** What the sequence saw of the in-flight gauge while two calls were held. */
interface Sequence {
  readonly tenant: string;
  readonly inFlightWhileHeld: number;
  readonly events: DecisionEvent[];
}

interface Req {
  readonly tenant?: string;
  readonly skip?: boolean;
}

/**
 * The scripted sequence. `read` reads the sink's output (used once mid-way, for the
 * in-flight gauge while two calls are held by `CLIENT PAUSE`).
 */
async function runSequence(metrics: Metrics, read: () => Promise<Exposition>): Promise<Sequence> {
  const tenant = secretTenant();
  const admin = await redis.admin();
  const events: DecisionEvent[] = [];
  const redisEvents: string[] = [];
  const client = await connectRedis({
    url: redis.server.url,
    reconnect: true,
    // The sink, and a note of each event so that the test knows when the reconnect came.
    metrics: {
      redisEvent: (event) => {
        redisEvents.push(event);
        metrics.redisEvent(event);
      },
    },
    onError: () => {},
  });
  clients.push(client);
  // eventTenant: the events carry the tenant; the sinks must drop it. A deadline a loaded
  // machine meets; `hasty`, with the same sinks, makes the one timeout below.
  const limiter = new RateLimiter({
    client,
    metrics,
    timeoutMs: 2000,
    eventTenant: true,
    onDecision: (event) => events.push(event),
  });
  const hasty = new RateLimiter({
    client,
    metrics,
    timeoutMs: 100,
    eventTenant: true,
    onDecision: (event) => events.push(event),
  });
  const scope = { tenant, route: 'POST/orders', user: `user-of-${tenant}` };
  const orders = fixedWindow({ name: 'orders', limit: 2, windowMs: 60_000 });
  const bulk = fixedWindow({ name: 'bulk', limit: 10, windowMs: 60_000 });
  const broken = fixedWindow({ name: 'broken', limit: 10, windowMs: 60_000 });
  const api = fixedWindow({ name: 'api', limit: 1, windowMs: 60_000 });

  // orders: allowed, limited by Redis (a cost of 2 with 1 left: never cached), allowed
  // (0 left: the window is full, so the denial cache holds it), limited by the cache.
  const outcomes = [];
  for (const cost of [1, 2, 1, 1]) {
    outcomes.push((await limiter.take(scope, orders, { cost })).allowed);
  }
  assert.deepEqual(outcomes, [true, false, true, false]);
  assert.deepEqual(
    events.map((e) => e.cached),
    [false, false, false, true],
    'the 4th denial came from the cache',
  );
  // invalid: nothing sent.
  await assert.rejects(limiter.take({ tenant: '' }, orders), { code: 'SLUICE_INVALID_INPUT' });
  // store_error: a key of the wrong type.
  await admin.client.hSet(keyFor(broken, tenant, 'POST/orders'), 'x', '1');
  await assert.rejects(limiter.take({ tenant, route: 'POST/orders' }, broken), {
    code: 'SLUICE_STORE_ERROR',
  });
  // timeout and overload while scripts are held by CLIENT PAUSE WRITE (PING, GET still run).
  const second = new RateLimiter({ client, metrics, maxInFlight: 1, timeoutMs: 1000 });
  await admin.client.sendCommand(['CLIENT', 'PAUSE', '400', 'WRITE']);
  const timedOut = hasty.take(scope, bulk);
  const held = second.take(scope, bulk);
  await assert.rejects(second.take(scope, bulk), { code: 'SLUICE_OVERLOAD' });
  await assert.rejects(timedOut, { code: 'SLUICE_TIMEOUT' });
  // Both calls are still in flight: the timed-out one until Redis answers it.
  const gauge = (await read()).get('sluice_in_flight') ?? [];
  const inFlightWhileHeld = gauge[0]?.value ?? -1;
  assert.equal((await held).allowed, true);
  // unavailable: a destroyed client.
  const closed = await connectRedis({ url: redis.server.url, onError: () => {} });
  closed.destroy();
  const down = new RateLimiter({
    timeoutMs: TEST_TIMEOUT_MS,
    client: closed,
    metrics,
    eventTenant: true,
  });
  await assert.rejects(down.take(scope, orders), { code: 'SLUICE_UNAVAILABLE' });

  // Guards: enforcing, failing closed and open, and shadow.
  const identify = (req: Req) => req.tenant;
  const enforcing = createGuard<Req>({
    limiter,
    policy: api,
    route: 'POST/pay',
    identify,
    skip: (req) => req.skip === true,
    metrics,
  });
  assert.equal((await enforcing({ tenant })).pass, true); // allowed
  assert.equal((await enforcing({ tenant })).pass, false); // limited (cached: 0 left)
  assert.equal((await enforcing({})).pass, false); // unidentified
  assert.equal((await enforcing({ skip: true })).pass, true); // skipped
  const closedRoute = createGuard<Req>({
    limiter: down,
    policy: api,
    route: 'POST/pay-closed',
    identify,
    metrics,
  });
  assert.equal((await closedRoute({ tenant })).pass, false); // fail-closed
  const openRoute = createGuard<Req>({
    limiter: down,
    policy: api,
    route: 'POST/pay-open',
    identify,
    failureMode: 'fail-open',
    failOpenLimit: 1,
    metrics,
  });
  assert.equal((await openRoute({ tenant })).pass, true); // fail-open
  assert.equal((await openRoute({ tenant })).pass, false); // fail-open-limited
  const shadowRoute = createGuard<Req>({
    limiter,
    policy: api,
    route: 'POST/pay',
    identify,
    shadow: true,
    metrics,
  });
  assert.equal((await shadowRoute({ tenant })).pass, true); // limited (cached), shadow: passes

  // A Redis reconnect: the client's connection killed by the server.
  const id = String(await client.client.sendCommand(['CLIENT', 'ID']));
  await admin.client.sendCommand(['CLIENT', 'KILL', 'ID', id]);
  const deadline = Date.now() + 5000;
  while (!(redisEvents.includes('reconnect') && client.isReady) && Date.now() < deadline) {
    await sleep(5);
  }
  assert.equal(client.isReady, true, 'reconnected');
  await sleep(50); // any further event would come now
  assert.deepEqual(redisEvents.sort(), ['connection_error', 'reconnect']);
  assert.ok(events.every((e) => e.tenant === tenant || e.outcome === 'invalid'));
  return { tenant, inFlightWhileHeld, events };
}

/** Every non-zero series the sequence must have produced, and nothing else. */
const EXPECTED: Record<string, [Record<string, string>, number][]> = {
  sluice_decisions_total: [
    [{ outcome: 'allowed', policy: 'orders' }, 2],
    [{ outcome: 'limited', policy: 'orders' }, 2],
    [{ outcome: 'invalid', policy: 'orders' }, 1],
    [{ outcome: 'unavailable', policy: 'orders' }, 1],
    [{ outcome: 'store_error', policy: 'broken' }, 1],
    [{ outcome: 'timeout', policy: 'bulk' }, 1],
    [{ outcome: 'overload', policy: 'bulk' }, 1],
    [{ outcome: 'allowed', policy: 'bulk' }, 1],
    [{ outcome: 'allowed', policy: 'api' }, 1],
    [{ outcome: 'limited', policy: 'api' }, 2],
    [{ outcome: 'unavailable', policy: 'api' }, 3],
  ],
  sluice_cached_denials_total: [
    [{ policy: 'orders' }, 1],
    [{ policy: 'api' }, 2],
  ],
  // Decisions that went to Redis: not cached, invalid or overload.
  sluice_decision_duration_seconds_count: [
    [{ policy: 'orders' }, 4],
    [{ policy: 'broken' }, 1],
    [{ policy: 'bulk' }, 2],
    [{ policy: 'api' }, 4],
  ],
  sluice_http_requests_total: [
    [{ outcome: 'allowed', route: 'POST/pay', shadow: 'false' }, 1],
    [{ outcome: 'limited', route: 'POST/pay', shadow: 'false' }, 1],
    [{ outcome: 'unidentified', route: 'POST/pay', shadow: 'false' }, 1],
    [{ outcome: 'skipped', route: 'POST/pay', shadow: 'false' }, 1],
    [{ outcome: 'fail_closed', route: 'POST/pay-closed', shadow: 'false' }, 1],
    [{ outcome: 'fail_open', route: 'POST/pay-open', shadow: 'false' }, 1],
    [{ outcome: 'fail_open_limited', route: 'POST/pay-open', shadow: 'false' }, 1],
    [{ outcome: 'limited', route: 'POST/pay', shadow: 'true' }, 1],
  ],
  sluice_redis_events_total: [
    [{ event: 'connection_error' }, 1],
    [{ event: 'reconnect' }, 1],
  ],
};

const key = (labels: Readonly<Record<string, string>>) =>
  JSON.stringify(Object.entries(labels).sort(([a], [b]) => a.localeCompare(b)));

/** The exposition's non-zero series of `name`, as `[labels, value]`, in a fixed order. */
function nonZero(exposition: Exposition, name: string): [string, number][] {
  return (exposition.get(name) ?? [])
    .filter((s) => s.value !== 0)
    .map((s): [string, number] => [key(s.labels), s.value])
    .sort(([a], [b]) => a.localeCompare(b));
}

/** The non-zero series of `name` are exactly `series`. */
function assertSeries(
  exposition: Exposition,
  name: string,
  series: [Record<string, string>, number][],
): void {
  const expected = series
    .map(([labels, value]): [string, number] => [key(labels), value])
    .sort(([a], [b]) => a.localeCompare(b));
  assert.deepEqual(nonZero(exposition, name), expected, name);
}

/** Every count exactly as expected; the latency histogram in sensible buckets. */
function checkCounts(exposition: Exposition, sequence: Sequence): void {
  for (const [name, series] of Object.entries(EXPECTED)) assertSeries(exposition, name, series);
  assert.equal(
    sequence.inFlightWhileHeld,
    2,
    'in flight while held: the timed-out and the held call',
  );
  assert.deepEqual(
    (exposition.get('sluice_in_flight') ?? []).map((s) => s.value),
    [0],
    'nothing in flight at the end',
  );
  assert.deepEqual(nonZero(exposition, 'sluice_redis_events_total').length, 2);
  // The bulk policy: a timeout at the 100 ms deadline and a call held ~400 ms by the pause.
  const bulk = (exposition.get('sluice_decision_duration_seconds_bucket') ?? []).filter(
    (s) => s.labels.policy === 'bulk',
  );
  const at = (le: string) => bulk.find((s) => s.labels.le === le)?.value;
  assert.equal(at('0.05'), 0, 'no bulk decision under 50 ms');
  assert.equal(at('0.25'), 1, 'the timeout, at its 100 ms deadline');
  assert.equal(at('1'), 2);
  assert.equal(at('+Inf'), 2);
  const sum = exposition.get('sluice_decision_duration_seconds_sum') ?? [];
  const bulkSum = sum.find((s) => s.labels.policy === 'bulk')?.value ?? 0;
  assert.ok(bulkSum > 0.35 && bulkSum < 1.5, `bulk latency sum ${bulkSum} s`);
  // No tenant or user label, in name or value.
  for (const [name, series] of exposition) {
    for (const s of series) {
      for (const [label, value] of Object.entries(s.labels)) {
        assert.ok(!/tenant|user/i.test(label), `${name} has a label ${label}`);
        assert.ok(!value.includes(sequence.tenant), `${name}{${label}} carries the tenant`);
      }
    }
  }
}

/** A prom-client registry read back as {@link Exposition}. */
async function readPrometheus(registry: Registry): Promise<Exposition> {
  const exposition: Exposition = new Map();
  for (const metric of await registry.getMetricsAsJSON()) {
    for (const value of metric.values as {
      labels: Record<string, string | number>;
      value: number;
      metricName?: string;
    }[]) {
      const name = value.metricName ?? metric.name;
      const labels = Object.fromEntries(
        Object.entries(value.labels).map(([k, v]) => [k, String(v)]),
      );
      exposition.set(name, [...(exposition.get(name) ?? []), { labels, value: value.value }]);
    }
  }
  return exposition;
}

/** OpenTelemetry instrument name → the Prometheus name its exporter gives it. */
const PROMETHEUS_NAME: Record<string, string> = {
  [OPEN_TELEMETRY_INSTRUMENTS.decisions]: 'sluice_decisions_total',
  [OPEN_TELEMETRY_INSTRUMENTS.cachedDenials]: 'sluice_cached_denials_total',
  [OPEN_TELEMETRY_INSTRUMENTS.decisionDuration]: 'sluice_decision_duration_seconds',
  [OPEN_TELEMETRY_INSTRUMENTS.inFlight]: 'sluice_in_flight',
  [OPEN_TELEMETRY_INSTRUMENTS.httpRequests]: 'sluice_http_requests_total',
  [OPEN_TELEMETRY_INSTRUMENTS.redisEvents]: 'sluice_redis_events_total',
};

/** An OpenTelemetry reader's collection, in the Prometheus form (histograms as buckets). */
async function readOpenTelemetry(reader: PeriodicExportingMetricReader): Promise<Exposition> {
  const { resourceMetrics, errors } = await reader.collect();
  assert.deepEqual(errors, []);
  const exposition: Exposition = new Map();
  const add = (name: string, labels: Record<string, string>, value: number) =>
    exposition.set(name, [...(exposition.get(name) ?? []), { labels, value }]);
  for (const scope of resourceMetrics.scopeMetrics) {
    for (const metric of scope.metrics) {
      const name = PROMETHEUS_NAME[metric.descriptor.name];
      assert.ok(name, `unexpected instrument ${metric.descriptor.name}`);
      for (const point of metric.dataPoints as DataPoint<number | Histogram>[]) {
        const labels = Object.fromEntries(
          Object.entries(point.attributes).map(([k, v]) => [k, String(v)]),
        );
        if (typeof point.value === 'number') {
          add(name, labels, point.value);
          continue;
        }
        const { buckets, sum, count } = point.value;
        let cumulative = 0;
        buckets.boundaries.forEach((bound, i) => {
          cumulative += buckets.counts[i] ?? 0;
          add(`${name}_bucket`, { ...labels, le: String(bound) }, cumulative);
        });
        add(`${name}_bucket`, { ...labels, le: '+Inf' }, count);
        add(`${name}_sum`, labels, sum ?? 0);
        add(`${name}_count`, labels, count);
      }
    }
  }
  return exposition;
}

describe('metrics sinks on a real Redis', () => {
  it('prometheusMetrics: every outcome, request and Redis event counted exactly once; no tenant anywhere', async () => {
    const registry = new Registry();
    const metrics = prometheusMetrics({ registry });
    const sequence = await runSequence(metrics, () => readPrometheus(registry));
    const exposition = await readPrometheus(registry);
    checkCounts(exposition, sequence);
    // The text exposition: same story, and the tenant nowhere in it.
    const text = await registry.metrics();
    assert.ok(!text.includes(sequence.tenant), 'the tenant appears in the exposition');
    assert.ok(!text.includes('SECRET'), 'the tenant appears in the exposition');
    assert.match(text, /^sluice_decisions_total\{outcome="limited",policy="orders"\} 2$/m);
    assert.match(text, /^sluice_decision_duration_seconds_bucket\{le="\+Inf",policy="api"\} 4$/m);
    assert.match(
      text,
      /^sluice_http_requests_total\{outcome="limited",route="POST\/pay",shadow="true"\} 1$/m,
    );
    // A scrape changes nothing: counts are synced, not added twice.
    checkCounts(await readPrometheus(registry), sequence);
    // resetMetrics starts every count from 0; later counts show alone.
    registry.resetMetrics();
    metrics.redisEvent('stall_recycle');
    const afterReset = await readPrometheus(registry);
    assert.deepEqual(nonZero(afterReset, 'sluice_redis_events_total'), [
      [key({ event: 'stall_recycle' }), 1],
    ]);
    assert.deepEqual(nonZero(afterReset, 'sluice_decisions_total'), []);
    assert.deepEqual(nonZero(afterReset, 'sluice_decision_duration_seconds_count'), []);
  });

  it('openTelemetryMetrics: the same counts through an SDK MeterProvider; no tenant anywhere', async () => {
    const reader = new PeriodicExportingMetricReader({
      exporter: new InMemoryMetricExporter(AggregationTemporality.CUMULATIVE),
      exportIntervalMillis: 3_600_000,
    });
    const meterProvider = new MeterProvider({ readers: [reader] });
    try {
      const metrics = openTelemetryMetrics({ meterProvider });
      assert.equal(openTelemetryMetrics({ meterProvider }), metrics, 'one sink per meter');
      const sequence = await runSequence(metrics, () => readOpenTelemetry(reader));
      const exposition = await readOpenTelemetry(reader);
      checkCounts(exposition, sequence);
      const shadow = (exposition.get('sluice_http_requests_total') ?? []).find(
        (s) => s.labels.shadow === 'true' && s.value > 0,
      );
      assert.equal(shadow?.labels.outcome, 'limited');
    } finally {
      await meterProvider.shutdown();
    }
  });
});

/** One sink that hands every call to each of `sinks` (a limiter takes one). */
const fanOut = (...sinks: Metrics[]): Metrics => ({
  decision: (event) => {
    for (const sink of sinks) sink.decision(event);
  },
  request: (event) => {
    for (const sink of sinks) sink.request(event);
  },
  redisEvent: (event) => {
    for (const sink of sinks) sink.redisEvent(event);
  },
  attach: (source) => {
    for (const sink of sinks) sink.attach(source);
  },
});

describe('a refused takeAll names the policy that refused', () => {
  it('limited on the refusing policy, not_charged on the other: from Redis, from the denial cache and through a guard with a list of policies', async () => {
    const registry = new Registry();
    const reader = new PeriodicExportingMetricReader({
      exporter: new InMemoryMetricExporter(AggregationTemporality.CUMULATIVE),
      exportIntervalMillis: 3_600_000,
    });
    const meterProvider = new MeterProvider({ readers: [reader] });
    try {
      const metrics = fanOut(
        prometheusMetrics({ registry }),
        openTelemetryMetrics({ meterProvider }),
      );
      const client = await redis.client();
      const events: DecisionEvent[] = [];
      const limiter = new RateLimiter({
        timeoutMs: TEST_TIMEOUT_MS,
        client,
        metrics,
        onDecision: (event) => events.push(event),
      });
      const tenant = secretTenant();
      const pro = fixedWindow({ name: 'orders-pro', limit: 100, windowMs: 60_000 });
      const perUser = fixedWindow({ name: 'orders-per-user', limit: 2, windowMs: 60_000 });
      const items = (cost: number) => [
        { scope: { tenant, route: 'POST/orders' }, policy: pro, cost },
        { scope: { tenant, route: 'POST/orders', user: 'bob' }, policy: perUser, cost },
      ];
      const seen = () => events.splice(0).map((e) => [e.outcome, e.policy, e.cached]);
      // Admitted: both charged.
      assert.equal((await limiter.takeAll(items(1))).allowed, true);
      assert.deepEqual(seen(), [
        ['allowed', 'orders-pro', false],
        ['allowed', 'orders-per-user', false],
      ]);
      // Refused by Redis (a cost of 2 with 1 left: never cached), twice in one turn (coalesced
      // into one script call): only the per-user limit refused.
      const byRedis = await Promise.all([limiter.takeAll(items(2)), limiter.takeAll(items(2))]);
      assert.deepEqual(
        byRedis.map((r) => [r.allowed, r.cached]),
        [
          [false, false],
          [false, false],
        ],
      );
      assert.deepEqual(seen(), [
        ['not_charged', 'orders-pro', false],
        ['limited', 'orders-per-user', false],
        ['not_charged', 'orders-pro', false],
        ['limited', 'orders-per-user', false],
      ]);
      // Admitted again (0 left for bob: the denial cache holds it), then refused by the cache.
      assert.equal((await limiter.takeAll(items(1))).allowed, true);
      seen();
      const byCache = await limiter.takeAll(items(1));
      assert.deepEqual([byCache.allowed, byCache.cached], [false, true]);
      assert.deepEqual(seen(), [
        ['not_charged', 'orders-pro', true],
        ['limited', 'orders-per-user', true],
      ]);

      // A guard with a list of policies (stacked per-user limit): the 429 and the metrics
      // name the same policy.
      const apiPro = fixedWindow({ name: 'api-pro', limit: 100, windowMs: 60_000 });
      const apiPerUser = fixedWindow({ name: 'api-per-user', limit: 1, windowMs: 60_000 });
      const guard = createGuard<Req & { user?: string }>({
        limiter,
        policy: [apiPro, { policy: apiPerUser, per: 'route-user' }],
        route: 'POST/api',
        identify: (req) => req.tenant,
        user: (req) => req.user,
        metrics,
      });
      assert.equal((await guard({ tenant, user: 'ann' })).pass, true);
      const refused = await guard({ tenant, user: 'ann' });
      assert.equal(refused.pass, false);
      const response = refused.pass ? undefined : refused.response;
      assert.equal(response?.status, 429);
      assert.deepEqual(JSON.parse(response?.body ?? '{}')['violated-policies'], ['api-per-user']);
      assert.deepEqual(seen().slice(2), [
        ['not_charged', 'api-pro', true],
        ['limited', 'api-per-user', true],
      ]);

      const decisions: [Record<string, string>, number][] = [
        [{ outcome: 'allowed', policy: 'orders-pro' }, 2],
        [{ outcome: 'allowed', policy: 'orders-per-user' }, 2],
        [{ outcome: 'not_charged', policy: 'orders-pro' }, 3],
        [{ outcome: 'limited', policy: 'orders-per-user' }, 3],
        [{ outcome: 'allowed', policy: 'api-pro' }, 1],
        [{ outcome: 'allowed', policy: 'api-per-user' }, 1],
        [{ outcome: 'not_charged', policy: 'api-pro' }, 1],
        [{ outcome: 'limited', policy: 'api-per-user' }, 1],
      ];
      // Cached denials: only the policies that refused.
      const cachedDenials: [Record<string, string>, number][] = [
        [{ policy: 'orders-per-user' }, 1],
        [{ policy: 'api-per-user' }, 1],
      ];
      for (const exposition of [await readPrometheus(registry), await readOpenTelemetry(reader)]) {
        assertSeries(exposition, 'sluice_decisions_total', decisions);
        assertSeries(exposition, 'sluice_cached_denials_total', cachedDenials);
        // The HTTP outcome is per request: the refused request is limited.
        assertSeries(exposition, 'sluice_http_requests_total', [
          [{ outcome: 'allowed', route: 'POST/api', shadow: 'false' }, 1],
          [{ outcome: 'limited', route: 'POST/api', shadow: 'false' }, 1],
        ]);
      }
      const text = await registry.metrics();
      assert.match(text, /^sluice_decisions_total\{outcome="limited",policy="api-per-user"\} 1$/m);
      assert.match(text, /^sluice_decisions_total\{outcome="limited",policy="api-pro"\} 0$/m);
      assert.match(text, /^sluice_decisions_total\{outcome="not_charged",policy="api-pro"\} 1$/m);
      assert.match(text, /^sluice_decisions_total\{outcome="limited",policy="orders-pro"\} 0$/m);
      // stats() counts calls: 2 + 1 admitted, 3 + 1 refused, 1 + 1 of them by the cache.
      const stats = limiter.stats();
      assert.deepEqual([stats.allowed, stats.limited, stats.cachedDenials], [3, 4, 2]);
    } finally {
      await meterProvider.shutdown();
    }
  });
});

describe('metrics sinks: options and registries', () => {
  it('a second prometheusMetrics on one registry and prefix is the same sink; other options or a foreign metric are clear errors', () => {
    const registry = new Registry();
    const first = prometheusMetrics({ registry });
    assert.equal(prometheusMetrics({ registry }), first);
    assert.throws(() => prometheusMetrics({ registry, maxSeconds: 5 }), {
      code: 'SLUICE_INVALID_INPUT',
      field: 'options.maxSeconds',
    });
    const other = prometheusMetrics({ registry, prefix: 'edge_' });
    assert.notEqual(other, first);
    assert.equal(other.names.decisions, 'edge_decisions_total');
    // A registry cleared of them gets fresh metrics.
    registry.clear();
    const fresh = prometheusMetrics({ registry });
    assert.notEqual(fresh, first);
    assert.ok(registry.getSingleMetric('sluice_decisions_total'));
    // A name held by something else: refused, naming it, and nothing half-registered.
    const foreign = new Registry();
    new Counter({ name: 'sluice_in_flight', help: 'not ours', registers: [foreign] });
    assert.throws(() => prometheusMetrics({ registry: foreign }), {
      code: 'SLUICE_INVALID_INPUT',
      field: 'options.prefix',
      message: /"sluice_in_flight" is already registered/,
    });
    assert.equal(foreign.getSingleMetric('sluice_decisions_total'), undefined);
    assert.equal(
      prometheusMetrics({ registry: foreign, prefix: 'rl_' }).names.inFlight,
      'rl_in_flight',
    );
  });

  it('maxLabelValues: policy names and routes past it count as "_other", with one warning', async () => {
    const registry = new Registry();
    const metrics = prometheusMetrics({ registry, maxLabelValues: 2 });
    const warnings: string[] = [];
    const onWarning = (warning: Error) => warnings.push(warning.message);
    process.on('warning', onWarning);
    try {
      for (const policy of ['a', 'b', 'c', 'd', 'a']) {
        metrics.decision({
          outcome: 'allowed',
          policy,
          latencyMs: 1,
          cached: false,
          operation: 'take',
        });
      }
      for (const route of ['r1', 'r2', 'r3']) {
        metrics.request({ outcome: 'fail-open', route, shadow: false });
      }
      await sleep(0); // warnings are emitted on the next tick
    } finally {
      process.off('warning', onWarning);
    }
    const exposition = await readPrometheus(registry);
    assertSeries(exposition, 'sluice_decisions_total', [
      [{ outcome: 'allowed', policy: 'a' }, 2],
      [{ outcome: 'allowed', policy: 'b' }, 1],
      [{ outcome: 'allowed', policy: '_other' }, 2],
    ]);
    assertSeries(exposition, 'sluice_http_requests_total', [
      [{ outcome: 'fail_open', route: 'r1', shadow: 'false' }, 1],
      [{ outcome: 'fail_open', route: 'r2', shadow: 'false' }, 1],
      [{ outcome: 'fail_open', route: '_other', shadow: 'false' }, 1],
    ]);
    assert.equal(
      warnings.filter((w) => w.includes('maxLabelValues')).length,
      2,
      warnings.join('\n'),
    );
  });

  it('bad options are InvalidInputError naming the field', () => {
    const cases: [unknown, string][] = [
      [{ prefix: 'bad prefix' }, 'options.prefix'],
      [{ maxSeconds: 0 }, 'options.maxSeconds'],
      [{ maxSeconds: Number.NaN }, 'options.maxSeconds'],
      [{ maxLabelValues: 0 }, 'options.maxLabelValues'],
      [{ registry: {} }, 'options.registry'],
      [{ regsitry: new Registry() }, 'options.regsitry'],
    ];
    for (const [options, field] of cases) {
      assert.throws(() => prometheusMetrics(options as never), {
        code: 'SLUICE_INVALID_INPUT',
        field,
      });
    }
    assert.throws(() => openTelemetryMetrics({ meter: {} as never }), { field: 'options.meter' });
    assert.throws(() => openTelemetryMetrics({ meter: {} as never, meterProvider: {} as never }), {
      field: 'options',
    });
  });
});

describe('the core loads no metrics library', () => {
  it('src/ and dist/ entry points import neither prom-client nor @opentelemetry/api; sluice/prometheus and sluice/opentelemetry do', async () => {
    const root = new URL('../../', import.meta.url);
    // A resolve hook that fails any import of prom-client or @opentelemetry/*.
    const hooks = `data:text/javascript,${encodeURIComponent(
      "export async function resolve(specifier, context, next) { if (specifier === 'prom-client' || specifier.startsWith('@opentelemetry/')) throw new Error('LOADED ' + specifier); return next(specifier, context); }",
    )}`;
    const core = ['src/index.ts', 'src/http/index.ts', 'dist/index.js', 'dist/http/index.js'];
    const sinks = [
      'src/metrics/prometheus.ts',
      'src/metrics/opentelemetry.ts',
      'dist/metrics/prometheus.js',
      'dist/metrics/opentelemetry.js',
    ];
    const files = [...core, ...sinks].filter((f) => existsSync(new URL(f, root)));
    // One process, the core's entry points first: any of them loading a library fails.
    const script = `import { register } from 'node:module';
register(${JSON.stringify(hooks)});
const results = {};
for (const file of ${JSON.stringify(files.map((f) => new URL(f, root).href))}) {
  results[file] = await import(file).then(() => 'ok', (error) => error.message);
}
console.log(JSON.stringify(results));`;
    const { stdout } = await promisify(execFile)(
      process.execPath,
      ['--import', 'tsx', '--input-type=module', '-e', script],
      { cwd: root, timeout: 30_000 },
    );
    const results = JSON.parse(stdout) as Record<string, string>;
    for (const file of files) {
      const result = results[new URL(file, root).href];
      if (core.includes(file)) assert.equal(result, 'ok', file);
      else assert.match(result ?? '', /^LOADED (prom-client|@opentelemetry\/api)$/, file);
    }
    assert.ok(files.includes('src/index.ts'));
  });
});
