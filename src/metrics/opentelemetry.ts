/**
 * `sluice/opentelemetry`: a {@link Metrics} sink on the OpenTelemetry metrics API
 * (`@opentelemetry/api`, an optional peer dependency). The core never loads it; only this
 * entry point does. Bring your own SDK (`@opentelemetry/sdk-metrics` and an exporter).
 *
 * ```ts
 * import { openTelemetryMetrics } from 'sluice/opentelemetry';
 * const metrics = openTelemetryMetrics({ meterProvider }); // or { meter }, or the global one
 * const limiter = new RateLimiter({ client, metrics });
 * ```
 */
import {
  type Attributes,
  type BatchObservableResult,
  metrics as globalMetrics,
  type Histogram,
  type Meter,
  type MeterProvider,
} from '@opentelemetry/api';
import { InvalidInputError } from '../errors.js';
import { readProperty, rejectUnknownKeys } from '../validate.js';
import {
  DECISION_OUTCOMES,
  latencyBuckets,
  REDIS_EVENTS,
  REQUEST_OUTCOMES,
  sinkLimits,
  Tally,
  WAIT_OUTCOMES,
  wentToRedis,
} from './tally.js';
import type {
  DecisionEvent,
  LimiterSource,
  Metrics,
  RedisEvent,
  RequestEvent,
  WaitEvent,
} from './types.js';

export {
  DECISION_OUTCOMES,
  OVERFLOW_LABEL,
  REDIS_EVENTS,
  REQUEST_OUTCOMES,
  WAIT_OUTCOMES,
} from './tally.js';

/**
 * Options of {@link openTelemetryMetrics}: at most one of `meter` and `meterProvider`; with
 * neither, the global `MeterProvider` (`metrics.getMeter('sluice')` of `@opentelemetry/api`).
 * An unknown option is refused.
 */
export interface OpenTelemetryMetricsOptions {
  /** The meter to create the instruments on. */
  readonly meter?: Meter;
  /** A provider to get the meter `"sluice"` from. */
  readonly meterProvider?: MeterProvider;
  /**
   * The largest explicit bucket boundary advised for `sluice.decision.duration`, in seconds
   * (a number in [0.001, 3600], default 1): 0.0001, 0.00025, 0.0005, 0.001 … (1, 2.5 and 5 ×
   * 10^k) up to it, as in `sluice/prometheus`. An SDK view may override the advice.
   */
  readonly maxSeconds?: number;
  /**
   * Most distinct policy names, and routes, given an attribute value of their own (default
   * 500 each); later ones are counted as `"_other"`, with one process warning.
   */
  readonly maxLabelValues?: number;
}

/** The instrument names of {@link openTelemetryMetrics}, and what a Prometheus exporter calls them. */
export const OPEN_TELEMETRY_INSTRUMENTS = Object.freeze({
  /** Observable counter, `{decision}`, attributes `outcome`, `policy` → `sluice_decisions_total`. */
  decisions: 'sluice.decisions',
  /** Observable counter, `{decision}`, attribute `policy` → `sluice_cached_denials_total`. */
  cachedDenials: 'sluice.cached_denials',
  /** Histogram, `s`, attribute `policy` → `sluice_decision_duration_seconds`. */
  decisionDuration: 'sluice.decision.duration',
  /** Observable gauge, `{call}`, no attributes → `sluice_in_flight`. */
  inFlight: 'sluice.in_flight',
  /** Observable counter, `{request}`, attributes `outcome`, `route`, `shadow` (boolean) → `sluice_http_requests_total`. */
  httpRequests: 'sluice.http.requests',
  /** Observable counter, `{event}`, attribute `event` → `sluice_redis_events_total`. */
  redisEvents: 'sluice.redis.events',
  /** Observable counter, `{wait}`, attributes `outcome`, `policy` → `sluice_waits_total`. */
  waits: 'sluice.waits',
});

const OPTIONS = ['meter', 'meterProvider', 'maxSeconds', 'maxLabelValues'] as const;

interface Entry {
  readonly sink: OpenTelemetrySink;
  readonly maxSeconds: number;
  readonly maxLabelValues: number;
}
/** The sink made per meter, so that a second call does not register every instrument twice. */
const made = new WeakMap<Meter, Entry>();

/**
 * Makes (or reuses) an OpenTelemetry sink: the instruments of
 * {@link OPEN_TELEMETRY_INSTRUMENTS}, on one meter, with the same meaning and attributes as
 * `sluice/prometheus`'s metrics (never a tenant or user). Counts are kept in process and
 * reported cumulatively by observable counters in one batch callback at each collection;
 * `sluice.decision.duration` is a synchronous histogram (one `record` per decision that went
 * to Redis; its cost is in bench/metrics/RESULTS.md). `shadow` is a boolean attribute.
 *
 * A second call for the same meter returns the same sink when `maxSeconds` and
 * `maxLabelValues` agree, else throws: instruments registered twice would report every count
 * twice.
 *
 * @throws {InvalidInputError} for an unknown or bad option, both `meter` and
 *   `meterProvider`, or options that disagree with an earlier sink on the same meter.
 */
export function openTelemetryMetrics(options: OpenTelemetryMetricsOptions = {}): Metrics {
  if (typeof options !== 'object' || options === null) {
    throw new InvalidInputError('options', 'an object', options);
  }
  rejectUnknownKeys(options, OPTIONS, 'options');
  const read = (key: (typeof OPTIONS)[number]) => readProperty(options, key, 'options');
  const givenMeter = read('meter');
  const provider = read('meterProvider');
  if (givenMeter !== undefined && provider !== undefined) {
    throw new InvalidInputError('options', 'either meter or meterProvider, not both', options);
  }
  if (givenMeter !== undefined && !isMeter(givenMeter)) {
    throw new InvalidInputError('options.meter', 'an OpenTelemetry Meter', givenMeter);
  }
  if (
    provider !== undefined &&
    (typeof provider !== 'object' ||
      provider === null ||
      typeof (provider as MeterProvider).getMeter !== 'function')
  ) {
    throw new InvalidInputError(
      'options.meterProvider',
      'an OpenTelemetry MeterProvider',
      provider,
    );
  }
  const { maxSeconds, maxLabelValues } = sinkLimits(read);
  const meter =
    (givenMeter as Meter | undefined) ??
    (provider as MeterProvider | undefined)?.getMeter('sluice') ??
    globalMetrics.getMeter('sluice');
  const previous = made.get(meter);
  if (previous !== undefined) {
    if (previous.maxSeconds !== maxSeconds) {
      throw new InvalidInputError(
        'options.maxSeconds',
        `${previous.maxSeconds}, as for the sluice sink already made on this meter`,
        maxSeconds,
      );
    }
    if (previous.maxLabelValues !== maxLabelValues) {
      throw new InvalidInputError(
        'options.maxLabelValues',
        `${previous.maxLabelValues}, as for the sluice sink already made on this meter`,
        maxLabelValues,
      );
    }
    return previous.sink;
  }
  const sink = new OpenTelemetrySink(meter, latencyBuckets(maxSeconds), maxLabelValues);
  made.set(meter, { sink, maxSeconds, maxLabelValues });
  return sink;
}

function isMeter(value: unknown): value is Meter {
  if (typeof value !== 'object' || value === null) return false;
  const meter = value as Meter;
  return (
    typeof meter.createHistogram === 'function' &&
    typeof meter.createObservableCounter === 'function' &&
    typeof meter.createObservableGauge === 'function' &&
    typeof meter.addBatchObservableCallback === 'function'
  );
}

class OpenTelemetrySink implements Metrics {
  readonly #tally: Tally;
  readonly #duration: Histogram;
  /** The histogram's attributes per policy name, made once (the SDK hashes them per call). */
  readonly #attributes = new Map<string, Attributes>();

  constructor(meter: Meter, bounds: readonly number[], maxLabelValues: number) {
    const tally = new Tally({ maxLabelValues, who: 'sluice/opentelemetry' });
    this.#tally = tally;
    const names = OPEN_TELEMETRY_INSTRUMENTS;
    this.#duration = meter.createHistogram(names.decisionDuration, {
      description:
        'Latency of decisions that went to Redis (not cached, invalid or overload), from the call to its settlement.',
      unit: 's',
      advice: { explicitBucketBoundaries: [...bounds] },
    });
    const decisions = meter.createObservableCounter(names.decisions, {
      description:
        'Decisions per policy by outcome (allowed, limited, not_charged, invalid, timeout, unavailable, overload, store_error, config_error); limited counts the policies that refused (cached denials too), not_charged the other policies of a refused takeAll.',
      unit: '{decision}',
    });
    const cached = meter.createObservableCounter(names.cachedDenials, {
      description:
        'Denials answered by the local denial cache, without Redis (also counted in decisions as limited).',
      unit: '{decision}',
    });
    const inFlight = meter.createObservableGauge(names.inFlight, {
      description: 'Rate-limiter calls in flight now, summed over the limiters given this sink.',
      unit: '{call}',
    });
    const requests = meter.createObservableCounter(names.httpRequests, {
      description:
        'HTTP requests at a sluice guard by outcome (allowed, limited, fail_closed, fail_open, fail_open_limited, unidentified, skipped), route template and shadow mode.',
      unit: '{request}',
    });
    const events = meter.createObservableCounter(names.redisEvents, {
      description:
        'Redis connection events of connections made by connectRedis: connection_error, reconnect, stall_recycle.',
      unit: '{event}',
    });
    const waits = meter.createObservableCounter(names.waits, {
      description:
        'Waits (wait, schedule) per policy by outcome: granted, timed_out, aborted, overflow.',
      unit: '{wait}',
    });
    meter.addBatchObservableCallback(
      (result: BatchObservableResult) => {
        for (const p of tally.policies.values()) {
          for (let i = 0; i < DECISION_OUTCOMES.length; i++) {
            result.observe(decisions, p.outcomes[i] as number, {
              outcome: DECISION_OUTCOMES[i] as string,
              policy: p.policy,
            });
          }
          if (p.cachedDenials > 0) result.observe(cached, p.cachedDenials, { policy: p.policy });
          if (p.waits.some((n) => n > 0)) {
            for (let i = 0; i < WAIT_OUTCOMES.length; i++) {
              result.observe(waits, p.waits[i] as number, {
                outcome: WAIT_OUTCOMES[i] as string,
                policy: p.policy,
              });
            }
          }
        }
        result.observe(inFlight, tally.inFlight());
        for (const r of tally.routes.values()) {
          for (const [shadow, counts] of [
            [false, r.enforced],
            [true, r.shadow],
          ] as const) {
            if (!counts.some((n) => n > 0)) continue;
            for (let i = 0; i < REQUEST_OUTCOMES.length; i++) {
              result.observe(requests, counts[i] as number, {
                outcome: REQUEST_OUTCOMES[i] as string,
                route: r.route,
                shadow,
              });
            }
          }
        }
        for (let i = 0; i < REDIS_EVENTS.length; i++) {
          result.observe(events, tally.redisEvents[i] as number, {
            event: REDIS_EVENTS[i] as string,
          });
        }
      },
      [decisions, cached, inFlight, requests, events, waits],
    );
  }

  decision(event: DecisionEvent): void {
    const tally = this.#tally;
    tally.decision(event);
    if (!wentToRedis(event)) return;
    // The tally's name: past maxLabelValues, the overflow one.
    const policy = tally.policy(event.policy).policy;
    let attributes = this.#attributes.get(policy);
    if (attributes === undefined) {
      attributes = Object.freeze({ policy });
      this.#attributes.set(policy, attributes);
    }
    this.#duration.record(event.latencyMs / 1000, attributes);
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
}
