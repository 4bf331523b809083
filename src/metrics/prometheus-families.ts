/**
 * The metric families of the Prometheus sink, each a prom-client metric whose values come
 * from the sink's {@link Tally} when the registry is read (a scrape): counting on the hot
 * path is a map lookup and an increment, prom-client's objects are brought up to date here.
 */
import { Counter, Gauge, type Registry } from 'prom-client';
import {
  DECISION_OUTCOMES,
  type PolicyTally,
  REDIS_EVENTS,
  REQUEST_OUTCOMES,
  type Tally,
  WAIT_OUTCOMES,
} from './tally.js';

/** The full names of the metrics a Prometheus sink registers (default prefix shown). */
export interface PrometheusMetricNames {
  /** `sluice_decisions_total{outcome, policy}` — counter. */
  readonly decisions: string;
  /** `sluice_cached_denials_total{policy}` — counter. */
  readonly cachedDenials: string;
  /** `sluice_decision_duration_seconds{policy}` — histogram, seconds. */
  readonly decisionDuration: string;
  /** `sluice_in_flight` — gauge, no labels. */
  readonly inFlight: string;
  /** `sluice_http_requests_total{outcome, route, shadow}` — counter. */
  readonly httpRequests: string;
  /** `sluice_redis_events_total{event}` — counter. */
  readonly redisEvents: string;
  /** `sluice_waits_total{outcome, policy}` — counter. */
  readonly waits: string;
}

/** Brings a prom-client counter up to a total: adds what was counted since the last scrape. */
class CounterSync<L extends string> {
  readonly #reported = new Map<string, number>();
  constructor(readonly counter: Counter<L>) {}

  /** `key` identifies `labels`; a first sight adds 0, so the series exists. */
  sync(key: string, labels: Partial<Record<L, string>>, total: number): void {
    const before = this.#reported.get(key);
    if (before === total) return;
    this.counter.inc(labels, total - (before ?? 0));
    this.#reported.set(key, total);
  }
}

/** Every family of a sink, each by the name it is registered under. */
export function metricFamilies(
  registry: Registry,
  names: PrometheusMetricNames,
  tally: Tally,
): readonly (readonly [string, object])[] {
  const registers = [registry];
  const duration = new DurationHistogram(
    names.decisionDuration,
    'Latency of decisions that went to Redis (not cached, invalid or overload), from the call to its settlement, in seconds.',
    tally,
  );
  registry.registerMetric(duration as unknown as Counter);
  return [
    [names.decisions, decisionsCounter(names.decisions, tally, registers)],
    [names.cachedDenials, cachedDenialsCounter(names.cachedDenials, tally, registers)],
    [names.decisionDuration, duration],
    [names.inFlight, inFlightGauge(names.inFlight, tally, registers)],
    [names.httpRequests, requestsCounter(names.httpRequests, tally, registers)],
    [names.redisEvents, redisEventsCounter(names.redisEvents, tally, registers)],
    [names.waits, waitsCounter(names.waits, tally, registers)],
  ];
}

function waitsCounter(name: string, tally: Tally, registers: Registry[]) {
  let sync!: CounterSync<'outcome' | 'policy'>;
  const counter = new Counter({
    name,
    help: 'Waits (wait, schedule) per policy by outcome: granted, timed_out, aborted, overflow.',
    labelNames: ['outcome', 'policy'] as const,
    registers,
    collect() {
      for (const p of tally.policies.values()) {
        if (!p.waits.some((n) => n > 0)) continue;
        for (let i = 0; i < WAIT_OUTCOMES.length; i++) {
          const outcome = WAIT_OUTCOMES[i] as string;
          sync.sync(`${p.policy}\0${outcome}`, { outcome, policy: p.policy }, p.waits[i] as number);
        }
      }
    },
  });
  sync = new CounterSync(counter);
  return counter;
}

function decisionsCounter(name: string, tally: Tally, registers: Registry[]) {
  let sync!: CounterSync<'outcome' | 'policy'>;
  const counter = new Counter({
    name,
    help: 'Decisions per policy by outcome (allowed, limited, not_charged, invalid, timeout, unavailable, overload, store_error, config_error); limited counts the policies that refused (cached denials too), not_charged the other policies of a refused takeAll.',
    labelNames: ['outcome', 'policy'] as const,
    registers,
    collect() {
      for (const p of tally.policies.values()) {
        for (let i = 0; i < DECISION_OUTCOMES.length; i++) {
          const outcome = DECISION_OUTCOMES[i] as string;
          sync.sync(
            `${p.policy}\0${outcome}`,
            { outcome, policy: p.policy },
            p.outcomes[i] as number,
          );
        }
      }
    },
  });
  sync = new CounterSync(counter);
  return counter;
}

function cachedDenialsCounter(name: string, tally: Tally, registers: Registry[]) {
  let sync!: CounterSync<'policy'>;
  const counter = new Counter({
    name,
    help: 'Denials answered by the local denial cache, without Redis (also counted in decisions_total as limited).',
    labelNames: ['policy'] as const,
    registers,
    collect() {
      for (const p of tally.policies.values()) {
        if (p.cachedDenials > 0) sync.sync(p.policy, { policy: p.policy }, p.cachedDenials);
      }
    },
  });
  sync = new CounterSync(counter);
  return counter;
}

function inFlightGauge(name: string, tally: Tally, registers: Registry[]) {
  return new Gauge({
    name,
    help: 'Rate-limiter calls in flight now (sent to Redis and not yet answered), summed over the limiters given this sink.',
    registers,
    collect() {
      this.set(tally.inFlight());
    },
  });
}

function requestsCounter(name: string, tally: Tally, registers: Registry[]) {
  let sync!: CounterSync<'outcome' | 'route' | 'shadow'>;
  const counter = new Counter({
    name,
    help: 'HTTP requests at a sluice guard by outcome (allowed, limited, fail_closed, fail_open, fail_open_limited, unidentified, skipped), route template and shadow mode.',
    labelNames: ['outcome', 'route', 'shadow'] as const,
    registers,
    collect() {
      for (const r of tally.routes.values()) {
        for (const [shadow, counts] of [
          ['false', r.enforced],
          ['true', r.shadow],
        ] as const) {
          if (!counts.some((n) => n > 0)) continue;
          for (let i = 0; i < REQUEST_OUTCOMES.length; i++) {
            const outcome = REQUEST_OUTCOMES[i] as string;
            sync.sync(
              `${r.route}\0${shadow}\0${outcome}`,
              { outcome, route: r.route, shadow },
              counts[i] as number,
            );
          }
        }
      }
    },
  });
  sync = new CounterSync(counter);
  return counter;
}

function redisEventsCounter(name: string, tally: Tally, registers: Registry[]) {
  let sync!: CounterSync<'event'>;
  const counter = new Counter({
    name,
    help: 'Redis connection events of connections made by connectRedis: connection_error, reconnect, stall_recycle.',
    labelNames: ['event'] as const,
    registers,
    collect() {
      for (let i = 0; i < REDIS_EVENTS.length; i++) {
        const event = REDIS_EVENTS[i] as string;
        sync.sync(event, { event }, tally.redisEvents[i] as number);
      }
    },
  });
  sync = new CounterSync(counter);
  return counter;
}

interface HistogramValue {
  labels: Record<string, string | number>;
  value: number;
  metricName: string;
}

/**
 * `decision_duration_seconds` as a prom-client metric object (the `get()` contract that
 * `Registry` reads, as prom-client's own `Histogram` implements it), rendered from the
 * tally's buckets at scrape time, so that a decision pays no `Histogram.observe` (see
 * bench/metrics/RESULTS.md).
 */
class DurationHistogram {
  readonly type = 'histogram';
  readonly aggregator = 'sum';
  readonly labelNames = ['policy'];
  /** What `reset()` saw, per policy: buckets…, sum, count; subtracted from what is shown. */
  readonly #base = new Map<PolicyTally, Float64Array>();

  constructor(
    readonly name: string,
    readonly help: string,
    readonly tally: Tally,
  ) {}

  async get() {
    const bounds = this.tally.bounds as readonly number[];
    const values: HistogramValue[] = [];
    for (const p of this.tally.policies.values()) {
      const buckets = p.buckets as Float64Array;
      const base = this.#base.get(p);
      const count = p.count - (base?.[bounds.length + 2] ?? 0);
      if (count === 0) continue;
      let cumulative = 0;
      for (let i = 0; i < bounds.length; i++) {
        cumulative += (buckets[i] as number) - (base?.[i] ?? 0);
        values.push({
          labels: { le: bounds[i] as number, policy: p.policy },
          value: cumulative,
          metricName: `${this.name}_bucket`,
        });
      }
      values.push(
        {
          labels: { le: '+Inf', policy: p.policy },
          value: count,
          metricName: `${this.name}_bucket`,
        },
        {
          labels: { policy: p.policy },
          value: p.sum - (base?.[bounds.length + 1] ?? 0),
          metricName: `${this.name}_sum`,
        },
        { labels: { policy: p.policy }, value: count, metricName: `${this.name}_count` },
      );
    }
    return {
      name: this.name,
      help: this.help,
      type: this.type,
      values,
      aggregator: this.aggregator,
    };
  }

  /** `registry.resetMetrics()`: shows counts from now on. */
  reset(): void {
    const bounds = this.tally.bounds as readonly number[];
    for (const p of this.tally.policies.values()) {
      const base = new Float64Array(bounds.length + 3);
      base.set(p.buckets as Float64Array);
      base[bounds.length + 1] = p.sum;
      base[bounds.length + 2] = p.count;
      this.#base.set(p, base);
    }
  }
}
