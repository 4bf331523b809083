/**
 * What sluice reports for observation: one event per decided policy, one per HTTP request,
 * one per Redis connection event, and the calls in flight. The core only calls a
 * {@link Metrics} it was given (`metrics` option of `RateLimiter`, the HTTP adapters and
 * `connectRedis`) and an `onDecision` callback; it loads no metrics library.
 * `sluice/prometheus` and `sluice/opentelemetry` implement `Metrics`. With neither given,
 * nothing is measured (no clock read, no event built).
 */
import type { Decision } from '../types.js';

/**
 * How one policy's decision ended: `allowed`, `limited` (this policy refused; also from the
 * local denial cache), `not_charged` (an item of a refused `takeAll` that would have admitted;
 * nothing was charged because another policy of the same takeAll refused), `invalid` (bad
 * input, nothing sent), `timeout` (the deadline passed; quota may have been spent),
 * `unavailable` (Redis unreachable or not serving), `overload` (`maxInFlight` reached,
 * nothing sent), `store_error` (Redis answered with an error reply), `config_error` (Redis
 * refused the configuration: a password, a permission).
 */
export type DecisionOutcome =
  | 'allowed'
  | 'limited'
  | 'not_charged'
  | 'invalid'
  | 'timeout'
  | 'unavailable'
  | 'overload'
  | 'store_error'
  | 'config_error';

/**
 * One policy's decision in a `take` or `takeAll`: a `takeAll` of 3 gives 3 events. An
 * admitted `takeAll` gives every item `allowed`; a failed one gives every item the failure.
 * A refused `takeAll` charges nothing on any item: the items that refused (a wait, see
 * `decision.retryAfterMs`: the same rule as the HTTP layer's `violated-policies`) are
 * `limited`, the others `not_charged` — also when the local denial cache answered, where the
 * items the cache did not hold were not evaluated. `peek` and `reset` are not decisions and
 * give none. Carries the tenant only when the limiter was told to (`eventTenant: true`);
 * never the user.
 */
export interface DecisionEvent {
  readonly outcome: DecisionOutcome;
  /** The policy's name (see `Policy.name`); `""` when the input named no valid policy. */
  readonly policy: string;
  /** The scope's route, when it has one and the input was valid. */
  readonly route?: string;
  /**
   * From the call to its settlement, in ms (fractional): the Redis round trip and the wait
   * for the batch; 0 for answers given without Redis (`cached`, `invalid`, `overload`).
   */
  readonly latencyMs: number;
  /**
   * True when the local denial cache answered the call, with no Redis call: every item of
   * it, `limited` or `not_charged`.
   */
  readonly cached: boolean;
  /** `take` or `takeAll`. */
  readonly operation: 'take' | 'takeAll';
  /** The `requestId` the caller passed in the call's options, for correlating logs. */
  readonly requestId?: string;
  /** The tenant, only with the limiter's `eventTenant: true`. */
  readonly tenant?: string;
  /** This policy's decision, for `allowed`, `limited` and `not_charged`. */
  readonly decision?: Decision;
  /** The error the call rejected with, for the failure outcomes. */
  readonly error?: Error;
}

/**
 * How one `wait` (or `schedule`) ended: `granted` (admitted within its `maxWaitMs`),
 * `timed_out` (refused: not admitted by then, or certain not to be), `aborted` (its signal
 * fired), `overflow` (refused at once: `maxWaiters` already waiting). A wait that failed
 * (Redis unreachable) ends with its take's failure, in the decision events.
 */
export type WaitOutcome = 'granted' | 'timed_out' | 'aborted' | 'overflow';

/** One `wait`'s outcome. Carries the tenant only with the limiter's `eventTenant: true`. */
export interface WaitEvent {
  readonly outcome: WaitOutcome;
  /** The policy's name. */
  readonly policy: string;
  /** The scope's route, when it has one. */
  readonly route?: string;
  /** From the call to its outcome, in ms (fractional). */
  readonly waitedMs: number;
  /** The tenant, only with the limiter's `eventTenant: true`. */
  readonly tenant?: string;
}

/** One HTTP request's outcome at a guard (see `HttpOutcome`). */
export interface RequestEvent {
  readonly outcome: HttpOutcome;
  /** The route template that names the quota (`""` when a skipped request had none). */
  readonly route: string;
  /** True on a shadow (record-only) route. */
  readonly shadow: boolean;
}

/**
 * A Redis connection event of a connection made by `connectRedis`: `connection_error`
 * (the client reported an error), `reconnect` (it is reconnecting), `stall_recycle` (the
 * stall watchdog replaced a connection that stopped answering).
 */
export type RedisEvent = 'connection_error' | 'reconnect' | 'stall_recycle';

/** What a limiter tells a {@link Metrics} about itself, once. */
export interface LimiterSource {
  /** Its deadline, in ms (the longest a decision can take before `timeout`). */
  readonly timeoutMs: number;
  /** Calls in flight now, or `undefined` once the limiter is gone (garbage-collected). */
  inFlight(): number | undefined;
}

/**
 * A metrics sink. Every method must be cheap and must not throw (an error it throws is
 * reported as a process warning and changes no decision).
 */
export interface Metrics {
  /** Each policy decided by `take` / `takeAll`. */
  decision(event: DecisionEvent): void;
  /** Each HTTP request at a guard given this sink. */
  request(event: RequestEvent): void;
  /** Each connection event of a client given this sink. */
  redisEvent(event: RedisEvent): void;
  /** Called once by each `RateLimiter` given this sink. */
  attach(source: LimiterSource): void;
  /** Each `wait` or `schedule` of a limiter given this sink, when it ends (optional). */
  wait?(event: WaitEvent): void;
}

/** What happened to one request at the limiter; every outcome is counted. */
export type HttpOutcome =
  /** Admitted by the shared limits. */
  | 'allowed'
  /** Denied by a shared limit: 429. */
  | 'limited'
  /** Limiter failed, route is fail-closed: 503. */
  | 'fail-closed'
  /** Limiter failed, route is fail-open, admitted by the local fallback limit. */
  | 'fail-open'
  /** Limiter failed, route is fail-open, and the local fallback limit was reached: 503. */
  | 'fail-open-limited'
  /** `identify` (or `user`, where a limit needs one) found no verified identity: 401. */
  | 'unidentified'
  /** `skip(req)` said so: passed without a decision, nothing spent. */
  | 'skipped'
  /**
   * A repeat of a `retryId` whose first admission already went to a handler: 409, the
   * handler does not run again.
   */
  | 'duplicate';
