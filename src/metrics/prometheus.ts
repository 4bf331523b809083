/**
 * `sluice/prometheus`: a {@link Metrics} sink on prom-client (an optional peer dependency:
 * `npm install prom-client`). The core never loads it; only this entry point does.
 *
 * ```ts
 * import { prometheusMetrics } from 'sluice/prometheus';
 * const metrics = prometheusMetrics(); // prom-client's default registry
 * const redis = await connectRedis({ url, metrics });
 * const limiter = new RateLimiter({ client: redis, metrics });
 * // and `metrics` on each guard / adapter; serve `await metrics.registry.metrics()` on /metrics
 * ```
 */
import { register as defaultRegistry, type Registry } from 'prom-client';
import { InvalidInputError } from '../errors.js';
import { readProperty, rejectUnknownKeys } from '../validate.js';
import { metricFamilies, type PrometheusMetricNames } from './prometheus-families.js';
import { latencyBuckets, sinkLimits, Tally } from './tally.js';
import type {
  DecisionEvent,
  LimiterSource,
  Metrics,
  RedisEvent,
  RequestEvent,
  WaitEvent,
} from './types.js';

export type { PrometheusMetricNames } from './prometheus-families.js';
export {
  DECISION_OUTCOMES,
  OVERFLOW_LABEL,
  REDIS_EVENTS,
  REQUEST_OUTCOMES,
  WAIT_OUTCOMES,
} from './tally.js';

/** Options of {@link prometheusMetrics}. Every field is optional; an unknown one is refused. */
export interface PrometheusMetricsOptions {
  /** The prom-client `Registry` to register the metrics in. Default: prom-client's `register`. */
  readonly registry?: Registry;
  /**
   * Prefix of every metric name (default `"sluice_"`): `<prefix>decisions_total` and so on.
   * The full names must be valid Prometheus names (`[a-zA-Z_:][a-zA-Z0-9_:]*`).
   */
  readonly prefix?: string;
  /**
   * The largest finite bucket of `<prefix>decision_duration_seconds`, in seconds: a number
   * in [0.001, 3600], default 1. Buckets are 0.1 ms, 0.25 ms, 0.5 ms, 1 ms, 2.5 ms … (1, 2.5
   * and 5 × 10^k) up to it, and it ends the list when it is not in that series (0.15 →
   * … 0.05, 0.1, 0.15). They are fixed when the histogram is made; set it at or above your
   * limiters' `timeoutMs` (a limiter whose deadline is above it triggers one process warning
   * when it attaches: slower decisions land only in `le="+Inf"`). The default covers every
   * `timeoutMs` up to 1000 (default 150).
   */
  readonly maxSeconds?: number;
  /**
   * Most distinct policy names, and most distinct routes, given a label of their own
   * (default 500, each): later ones are counted under `"_other"`, with one process warning.
   * A guard against unbounded label values; policy names and routes should be a fixed set.
   */
  readonly maxLabelValues?: number;
}

/**
 * A {@link Metrics} sink that fills a prom-client registry. Pass it as `metrics` to
 * `RateLimiter`, `createGuard` / the HTTP adapters and `connectRedis`; one sink may
 * serve any number of each.
 */
export interface PrometheusMetrics extends Metrics {
  /** The registry it fills: serve `await registry.metrics()` (type `registry.contentType`). */
  readonly registry: Registry;
  /** The full metric names it registered. */
  readonly names: PrometheusMetricNames;
}

const OPTIONS = ['registry', 'prefix', 'maxSeconds', 'maxLabelValues'] as const;
const METRIC_NAME = /^[a-zA-Z_:][a-zA-Z0-9_:]*$/;

interface Entry {
  readonly sink: PrometheusSink;
  readonly maxSeconds: number;
  readonly maxLabelValues: number;
}
/** The sinks made per registry and prefix, so that a second call can reuse the first. */
const made = new WeakMap<Registry, Map<string, Entry>>();

/**
 * Makes (or reuses) a Prometheus sink. Metrics, all without a tenant or user label:
 *
 * | name | type | labels | what |
 * | --- | --- | --- | --- |
 * | `sluice_decisions_total` | counter | `outcome`, `policy` | each policy decided by `take` / `takeAll`; `outcome` ∈ allowed, limited, not_charged, invalid, timeout, unavailable, overload, store_error, config_error (`limited`: this policy refused; `not_charged`: another policy of the same refused `takeAll` did); `policy` is the policy's name (`""` when the input named no policy) |
 * | `sluice_cached_denials_total` | counter | `policy` | denials the local denial cache answered (also in `decisions_total` as `limited`) |
 * | `sluice_decision_duration_seconds` | histogram | `policy` | latency of decisions that went to Redis (allowed, limited, not_charged, timeout, unavailable, store_error, config_error; not cached, invalid or overload), seconds |
 * | `sluice_in_flight` | gauge | — | calls in flight now, summed over the attached limiters, read at scrape time |
 * | `sluice_http_requests_total` | counter | `outcome`, `route`, `shadow` | each request at a guard; `outcome` ∈ allowed, limited, fail_closed, fail_open, fail_open_limited, unidentified, skipped; `shadow` is `"true"` on shadow routes |
 * | `sluice_redis_events_total` | counter | `event` | connection_error, reconnect, stall_recycle (each present from the start, at 0) |
 * | `sluice_waits_total` | counter | `outcome`, `policy` | each `wait` / `schedule` when it ends; `outcome` ∈ granted, timed_out, aborted, overflow |
 *
 * Counting is a map lookup and an increment on the hot path; prom-client's own metrics are
 * brought up to date when the registry is read (a scrape). Series appear once their policy
 * or route is first seen, every outcome of it at once (0 until counted).
 *
 * **A second call** with the same registry and prefix returns the same sink (its metrics are
 * already registered), when `maxSeconds` and `maxLabelValues` agree; they disagreeing throws
 * an `InvalidInputError` (`field` `options.maxSeconds` or `options.maxLabelValues`). Two
 * sets of sluice metrics in one registry need two prefixes. A name that the registry holds
 * for a metric sluice did not make throws an `InvalidInputError` (`field` `options.prefix`)
 * naming it. After `registry.clear()` (or removing one of its metrics) a call makes fresh
 * metrics. `registry.resetMetrics()` starts every count, bucket and sum from 0.
 *
 * @throws {InvalidInputError} for an unknown or bad option, or a name conflict (above).
 */
export function prometheusMetrics(options: PrometheusMetricsOptions = {}): PrometheusMetrics {
  if (typeof options !== 'object' || options === null) {
    throw new InvalidInputError('options', 'an object', options);
  }
  rejectUnknownKeys(options, OPTIONS, 'options');
  const read = (key: (typeof OPTIONS)[number]) => readProperty(options, key, 'options');
  const registry = (read('registry') ?? defaultRegistry) as Registry;
  if (
    typeof registry !== 'object' ||
    registry === null ||
    typeof registry.registerMetric !== 'function' ||
    typeof registry.getSingleMetric !== 'function'
  ) {
    throw new InvalidInputError('options.registry', 'a prom-client Registry', registry);
  }
  const prefix = read('prefix') ?? 'sluice_';
  if (typeof prefix !== 'string' || !METRIC_NAME.test(`${prefix}x`) || prefix.length > 64) {
    throw new InvalidInputError(
      'options.prefix',
      'a Prometheus name prefix of up to 64 characters ([a-zA-Z_:][a-zA-Z0-9_:]*, may be empty)',
      prefix,
    );
  }
  const { maxSeconds, maxLabelValues } = sinkLimits(read);

  const names = metricNames(prefix);
  let byPrefix = made.get(registry);
  if (byPrefix === undefined) {
    byPrefix = new Map();
    made.set(registry, byPrefix);
  }
  const previous = byPrefix.get(prefix);
  if (previous !== undefined) {
    if (previous.sink.isRegisteredIn(registry)) {
      if (previous.maxSeconds !== maxSeconds) {
        throw new InvalidInputError(
          'options.maxSeconds',
          `${previous.maxSeconds}, as for the sluice metrics already in this registry under prefix "${prefix}" (or another prefix)`,
          maxSeconds,
        );
      }
      if (previous.maxLabelValues !== maxLabelValues) {
        throw new InvalidInputError(
          'options.maxLabelValues',
          `${previous.maxLabelValues}, as for the sluice metrics already in this registry under prefix "${prefix}" (or another prefix)`,
          maxLabelValues,
        );
      }
      return previous.sink;
    }
    previous.sink.unregisterFrom(registry); // partly removed: start afresh
    byPrefix.delete(prefix);
  }
  for (const name of Object.values(names)) {
    if (registry.getSingleMetric(name) !== undefined) {
      throw new InvalidInputError(
        'options.prefix',
        `a prefix whose names are free in the registry ("${name}" is already registered, not by sluice/prometheus: pass another prefix or registry)`,
        prefix,
      );
    }
  }
  const sink = new PrometheusSink(registry, names, latencyBuckets(maxSeconds), maxLabelValues);
  byPrefix.set(prefix, { sink, maxSeconds, maxLabelValues });
  return sink;
}

function metricNames(prefix: string): PrometheusMetricNames {
  return {
    decisions: `${prefix}decisions_total`,
    cachedDenials: `${prefix}cached_denials_total`,
    decisionDuration: `${prefix}decision_duration_seconds`,
    inFlight: `${prefix}in_flight`,
    httpRequests: `${prefix}http_requests_total`,
    redisEvents: `${prefix}redis_events_total`,
    waits: `${prefix}waits_total`,
  };
}

class PrometheusSink implements PrometheusMetrics {
  readonly registry: Registry;
  readonly names: PrometheusMetricNames;
  readonly #tally: Tally;
  /** Each metric by its name, as registered. */
  readonly #metrics: readonly (readonly [string, object])[];

  constructor(
    registry: Registry,
    names: PrometheusMetricNames,
    bounds: readonly number[],
    maxLabelValues: number,
  ) {
    this.registry = registry;
    this.names = names;
    this.#tally = new Tally({ bounds, maxLabelValues, who: 'sluice/prometheus' });
    this.#metrics = metricFamilies(registry, names, this.#tally);
  }

  decision(event: DecisionEvent): void {
    this.#tally.decision(event);
  }

  request(event: RequestEvent): void {
    this.#tally.request(event);
  }

  redisEvent(event: RedisEvent): void {
    this.#tally.redisEvent(event);
  }

  wait(event: WaitEvent): void {
    this.#tally.wait(event);
  }

  attach(source: LimiterSource): void {
    this.#tally.attach(source);
  }

  /** Whether every metric of this sink is still the one registered under its name. */
  isRegisteredIn(registry: Registry): boolean {
    return this.#metrics.every(
      ([name, metric]) => (registry.getSingleMetric(name) as object | undefined) === metric,
    );
  }

  /** Removes those of its metrics that are still registered. */
  unregisterFrom(registry: Registry): void {
    for (const [name, metric] of this.#metrics) {
      if ((registry.getSingleMetric(name) as object | undefined) === metric) {
        registry.removeSingleMetric(name);
      }
    }
  }
}
