/**
 * The counting core shared by `sluice/prometheus` and `sluice/opentelemetry`: plain numbers
 * in maps keyed by policy name and route, bumped on the hot path (a map lookup and an
 * increment, tens of ns), read by the metrics library only when it collects (a scrape).
 * Loads no metrics library.
 */
import { InvalidInputError } from '../errors.js';
import type {
  DecisionEvent,
  DecisionOutcome,
  LimiterSource,
  RedisEvent,
  RequestEvent,
  WaitEvent,
  WaitOutcome,
} from './types.js';

/** Every `outcome` label value of `sluice_decisions_total`, in a fixed order. */
export const DECISION_OUTCOMES: readonly DecisionOutcome[] = Object.freeze([
  'allowed',
  'limited',
  'not_charged',
  'invalid',
  'timeout',
  'unavailable',
  'overload',
  'store_error',
  'config_error',
]);

/**
 * Every `outcome` label value of `sluice_http_requests_total`: the guard's `HttpOutcome`s
 * with hyphens as underscores, in a fixed order.
 */
export const REQUEST_OUTCOMES = Object.freeze([
  'allowed',
  'limited',
  'fail_closed',
  'fail_open',
  'fail_open_limited',
  'unidentified',
  'skipped',
  'duplicate',
] as const);

/** A label value of `sluice_http_requests_total{outcome}`. */
export type RequestOutcomeLabel = (typeof REQUEST_OUTCOMES)[number];

/** Every `outcome` label value of `sluice_waits_total`, in a fixed order. */
export const WAIT_OUTCOMES: readonly WaitOutcome[] = Object.freeze([
  'granted',
  'timed_out',
  'aborted',
  'overflow',
]);
const WAIT_INDEX: Readonly<Record<string, number>> = {
  granted: 0,
  timed_out: 1,
  aborted: 2,
  overflow: 3,
};

/** Every `event` label value of `sluice_redis_events_total`, in a fixed order. */
export const REDIS_EVENTS: readonly RedisEvent[] = Object.freeze([
  'connection_error',
  'reconnect',
  'stall_recycle',
]);

/**
 * The label value that stands for every policy name (or route) past `maxLabelValues`: the
 * counts stay right, only their split by name is lost. Not a valid policy name.
 */
export const OVERFLOW_LABEL = '_other';

/** Default of `maxLabelValues`: distinct policy names, and distinct routes, each. */
export const DEFAULT_MAX_LABEL_VALUES = 500;

/** The index of an outcome in {@link DECISION_OUTCOMES}, -1 for one this version does not know. */
function decisionIndex(outcome: string): number {
  switch (outcome) {
    case 'allowed':
      return 0;
    case 'limited':
      return 1;
    case 'not_charged':
      return 2;
    case 'invalid':
      return 3;
    case 'timeout':
      return 4;
    case 'unavailable':
      return 5;
    case 'overload':
      return 6;
    case 'store_error':
      return 7;
    case 'config_error':
      return 8;
    default:
      return -1;
  }
}
/** The index of `limited` in {@link DECISION_OUTCOMES}. */
const LIMITED = 1;
// Fixed-shape lookup objects for the rarer events.
const REQUEST_INDEX: Readonly<Record<string, number>> = {
  allowed: 0,
  limited: 1,
  'fail-closed': 2,
  'fail-open': 3,
  'fail-open-limited': 4,
  unidentified: 5,
  skipped: 6,
};
const REDIS_INDEX: Readonly<Record<string, number>> = {
  connection_error: 0,
  reconnect: 1,
  stall_recycle: 2,
};

/** Counts of one policy name. */
export class PolicyTally {
  /** Decisions by outcome, in the order of {@link DECISION_OUTCOMES}. */
  readonly outcomes = new Float64Array(DECISION_OUTCOMES.length);
  /** Waits by outcome, in the order of {@link WAIT_OUTCOMES}. */
  readonly waits = new Float64Array(WAIT_OUTCOMES.length);
  /**
   * Denials answered by the local denial cache (also in `outcomes`, as `limited`; the
   * `not_charged` items of a cached refusal are not counted here).
   */
  cachedDenials = 0;
  /**
   * Decisions that went to Redis, by latency: `buckets[i]` counts those in
   * `(bounds[i-1], bounds[i]]`, the last one those above every bound (not cumulative).
   * Present only when the tally was given bounds.
   */
  readonly buckets: Float64Array | undefined;
  /** Sum of the observed latencies, in seconds. */
  sum = 0;
  /** Number of observed latencies. */
  count = 0;

  /**
   * @param policy The `policy` label value: the policy's name, or {@link OVERFLOW_LABEL}.
   * @param bounds The latency buckets' upper bounds in seconds, or none.
   */
  constructor(
    readonly policy: string,
    bounds: readonly number[] | undefined,
  ) {
    this.buckets = bounds === undefined ? undefined : new Float64Array(bounds.length + 1);
  }
}

/** Counts of one route: HTTP outcomes, apart for shadow routes. */
export class RouteTally {
  /** By outcome, in the order of {@link REQUEST_OUTCOMES}, on enforcing routes. */
  readonly enforced = new Float64Array(REQUEST_OUTCOMES.length);
  /** The same on shadow (record-only) routes. */
  readonly shadow = new Float64Array(REQUEST_OUTCOMES.length);
  /** @param route The `route` label value: the route template, or {@link OVERFLOW_LABEL}. */
  constructor(readonly route: string) {}
}

/** Options of {@link Tally}. */
export interface TallyOptions {
  /**
   * Upper bounds of the latency buckets, in seconds, strictly increasing; unset: no
   * latency is kept (a sink that records latencies itself).
   */
  readonly bounds?: readonly number[];
  /** Most distinct policy names, and routes, each; later ones count as {@link OVERFLOW_LABEL}. */
  readonly maxLabelValues: number;
  /** Prefix of the warning given once when a limit is passed (e.g. `"sluice/prometheus"`). */
  readonly who: string;
}

/**
 * What a sink counted since it was made. Never carries a tenant: events are read for their
 * outcome, policy name, route, shadow flag and latency only.
 */
export class Tally {
  /** Per policy name. */
  readonly policies = new Map<string, PolicyTally>();
  /** Per route template. */
  readonly routes = new Map<string, RouteTally>();
  /** Redis connection events, in the order of {@link REDIS_EVENTS}. */
  readonly redisEvents = new Float64Array(REDIS_EVENTS.length);
  /** Attached limiters. */
  readonly sources = new Set<LimiterSource>();
  /** The latency buckets' upper bounds, in seconds (see {@link TallyOptions.bounds}). */
  readonly bounds: readonly number[] | undefined;
  readonly #maxLabelValues: number;
  readonly #who: string;
  /** The last decision's policy name, and its tally. */
  #lastName: string | undefined;
  #lastTally: PolicyTally | undefined;
  #warnedPolicies = false;
  #warnedRoutes = false;
  #warnedDeadline = false;

  constructor(options: TallyOptions) {
    this.bounds = options.bounds;
    this.#maxLabelValues = options.maxLabelValues;
    this.#who = options.who;
  }

  /** Counts one decision (and keeps its latency when it went to Redis). */
  decision(event: DecisionEvent): void {
    const index = decisionIndex(event.outcome);
    if (index < 0) return; // an outcome this version does not know
    // Most calls decide the same policy as the last one: skip the map.
    const name = event.policy;
    let tally = this.#lastTally;
    if (tally === undefined || this.#lastName !== name) {
      tally = this.policy(name);
      this.#lastName = name;
      this.#lastTally = tally;
    }
    tally.outcomes[index] = (tally.outcomes[index] as number) + 1;
    if (event.cached) {
      // A cached refusal's other items are `not_charged`: only the policy that refused
      // counts a cached denial.
      if (index === LIMITED) tally.cachedDenials++;
      return;
    }
    const buckets = tally.buckets;
    if (buckets === undefined || !wentToRedis(event)) return;
    const seconds = event.latencyMs / 1000;
    const bounds = this.bounds as readonly number[];
    let i = 0;
    while (i < bounds.length && seconds > (bounds[i] as number)) i++;
    buckets[i] = (buckets[i] as number) + 1;
    tally.sum += seconds;
    tally.count++;
  }

  /** Counts one wait's outcome. */
  wait(event: WaitEvent): void {
    const index = WAIT_INDEX[event.outcome];
    if (index === undefined) return;
    const tally = this.policy(event.policy);
    tally.waits[index] = (tally.waits[index] as number) + 1;
  }

  /** Counts one HTTP request's outcome. */
  request(event: RequestEvent): void {
    const index = REQUEST_INDEX[event.outcome];
    if (index === undefined) return;
    let tally = this.routes.get(event.route);
    if (tally === undefined) tally = this.#newRoute(event.route);
    const counts = event.shadow ? tally.shadow : tally.enforced;
    counts[index] = (counts[index] as number) + 1;
  }

  /** Counts one Redis connection event. */
  redisEvent(event: RedisEvent): void {
    const index = REDIS_INDEX[event];
    if (index === undefined) return;
    this.redisEvents[index] = (this.redisEvents[index] as number) + 1;
  }

  /** Remembers a limiter for the in-flight gauge; warns once when its deadline passes the buckets. */
  attach(source: LimiterSource): void {
    this.sources.add(source);
    const bounds = this.bounds;
    const largest = bounds?.[bounds.length - 1];
    if (
      largest !== undefined &&
      !this.#warnedDeadline &&
      typeof source.timeoutMs === 'number' &&
      source.timeoutMs / 1000 > largest
    ) {
      this.#warnedDeadline = true;
      process.emitWarning(
        `${this.#who}: a limiter's deadline (${source.timeoutMs} ms) is above the largest ` +
          `latency bucket (${largest} s): slower decisions count only in le="+Inf". ` +
          'Raise maxSeconds to cover it.',
        { code: 'SLUICE_METRICS_BUCKETS' },
      );
    }
  }

  /**
   * Calls in flight now, summed over the attached limiters; a limiter that is gone
   * (`inFlight()` answers `undefined`, or throws) is dropped.
   */
  inFlight(): number {
    let sum = 0;
    for (const source of this.sources) {
      let n: number | undefined;
      try {
        n = source.inFlight();
      } catch {
        n = undefined;
      }
      if (typeof n === 'number' && Number.isFinite(n)) sum += n;
      else this.sources.delete(source);
    }
    return sum;
  }

  /** The tally of a policy name (made on first sight, or the overflow one past the limit). */
  policy(name: string): PolicyTally {
    let tally = this.policies.get(name);
    if (tally !== undefined) return tally;
    if (this.policies.size >= this.#maxLabelValues) {
      if (!this.#warnedPolicies) {
        this.#warnedPolicies = true;
        this.#warnLimit('policy names');
      }
      tally = this.policies.get(OVERFLOW_LABEL);
      if (tally !== undefined) return tally;
      name = OVERFLOW_LABEL;
    }
    tally = new PolicyTally(name, this.bounds);
    this.policies.set(name, tally);
    return tally;
  }

  #newRoute(route: string): RouteTally {
    if (this.routes.size >= this.#maxLabelValues) {
      if (!this.#warnedRoutes) {
        this.#warnedRoutes = true;
        this.#warnLimit('routes');
      }
      const other = this.routes.get(OVERFLOW_LABEL);
      if (other !== undefined) return other;
      route = OVERFLOW_LABEL;
    }
    const tally = new RouteTally(route);
    this.routes.set(route, tally);
    return tally;
  }

  #warnLimit(what: string): void {
    process.emitWarning(
      `${this.#who}: more than ${this.#maxLabelValues} ${what}; the rest are counted under ` +
        `"${OVERFLOW_LABEL}". Policy names and routes must be a fixed set (never per tenant); ` +
        'raise maxLabelValues if yours is larger.',
      { code: 'SLUICE_METRICS_CARDINALITY' },
    );
  }
}

/**
 * Whether a decision's latency is a Redis round trip: not answered by the denial cache,
 * not refused before sending (`invalid`, `overload`). Timeouts count (at the deadline).
 */
export function wentToRedis(event: DecisionEvent): boolean {
  return !event.cached && event.outcome !== 'invalid' && event.outcome !== 'overload';
}

/**
 * The default latency buckets, in seconds: 1, 2.5 and 5 × 10^k from 0.1 ms up to
 * `maxSeconds`, which ends the list when it is not in the series.
 */
export function latencyBuckets(maxSeconds: number): number[] {
  const bounds: number[] = [];
  for (let exponent = -4; bounds.length < 64; exponent++) {
    for (const mantissa of [1, 2.5, 5]) {
      const bound = Number((mantissa * 10 ** exponent).toPrecision(3));
      if (bound > maxSeconds * (1 + 1e-12)) {
        if (bounds[bounds.length - 1] !== maxSeconds) bounds.push(maxSeconds);
        return bounds;
      }
      bounds.push(bound);
    }
  }
  return bounds;
}

/** Checks a `maxSeconds` option: a finite number in [0.001, 3600]. */
export function isMaxSeconds(value: unknown): value is number {
  return typeof value === 'number' && Number.isFinite(value) && value >= 0.001 && value <= 3600;
}

/**
 * The options both sinks share, read with `read` and checked: `maxSeconds` (default 1) and
 * `maxLabelValues` (default {@link DEFAULT_MAX_LABEL_VALUES}).
 *
 * @throws {InvalidInputError} naming `options.maxSeconds` or `options.maxLabelValues`
 */
export function sinkLimits(read: (name: 'maxSeconds' | 'maxLabelValues') => unknown): {
  maxSeconds: number;
  maxLabelValues: number;
} {
  const maxSeconds = read('maxSeconds') ?? 1;
  if (!isMaxSeconds(maxSeconds)) {
    throw new InvalidInputError(
      'options.maxSeconds',
      'a number of seconds in [0.001, 3600]',
      maxSeconds,
    );
  }
  const maxLabelValues = read('maxLabelValues') ?? DEFAULT_MAX_LABEL_VALUES;
  if (
    typeof maxLabelValues !== 'number' ||
    !Number.isSafeInteger(maxLabelValues) ||
    maxLabelValues < 1
  ) {
    throw new InvalidInputError(
      'options.maxLabelValues',
      'a positive safe integer',
      maxLabelValues,
    );
  }
  return { maxSeconds, maxLabelValues };
}
