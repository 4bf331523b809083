/**
 * A limiter's outcome counters: every call ends in exactly one of them (a cached denial is
 * also a `limited`), and `inFlight` counts what was sent and not answered yet. They count
 * calls, not policies: a `takeAll` counts once, as `allowed` or `limited` (or its failure),
 * however many items it has; its items' own outcomes (`limited` for those that refused,
 * `not_charged` for the others) are in the decision events and the metrics. An `acquire` is
 * a take (`allowed` or `limited`); a `release` or `renew` ends in `leasesReleased`,
 * `leasesRenewed` or `leasesLost` (or a failure); a `wait` counts each take it sends, and once
 * more when it ends, in `waitGranted`, `waitTimedOut`, `waitAborted` or `waitOverflow`.
 */

/** Counts of outcomes since the limiter was created, plus calls in flight now. */
export interface LimiterStats {
  /** Calls that admitted (a `takeAll`: every item admitted, counted once). */
  allowed: number;
  /** Calls that were refused (rate-limited; a refused `takeAll` counted once). */
  limited: number;
  /** Calls rejected for bad input (nothing sent). */
  invalid: number;
  /** Calls whose deadline passed. */
  timeout: number;
  /** Calls that failed because Redis was unreachable or not serving. */
  unavailable: number;
  /** Calls rejected because `maxInFlight` was reached (nothing sent). */
  overload: number;
  /** Calls that Redis answered with an error reply. */
  storeError: number;
  /**
   * Calls refused because Redis refused the configuration — a wrong or missing password, an
   * ACL user without permission — on a running connection too: a mistake to fix, not an
   * outage (`RedisConfigError`).
   */
  configError: number;
  /** Refused calls answered by the local denial cache (also counted in `limited`). */
  cachedDenials: number;
  /** `peek` calls answered (they admit and count nothing). */
  peeks: number;
  /** `reset` calls that completed. */
  resets: number;
  /** Times a changed reset epoch emptied the local denial cache. */
  cacheInvalidations: number;
  /** Calls sent and not yet answered by Redis (may exceed pending callers after timeouts). */
  inFlight: number;
  /** `release` calls that freed a live lease (also a lease's `release()`). */
  leasesReleased: number;
  /** `renew` calls that extended a live lease. */
  leasesRenewed: number;
  /**
   * `release` and `renew` calls that found no live lease of their id: released already,
   * or expired (its holder paused or too slow to renew).
   */
  leasesLost: number;
  /** `wait` (and `schedule`) calls admitted within their `maxWaitMs`. */
  waitGranted: number;
  /** `wait` calls refused: not admitted within their `maxWaitMs`. */
  waitTimedOut: number;
  /** `wait` calls rejected with an `AbortError` by their signal. */
  waitAborted: number;
  /** `wait` calls refused at once: `maxWaiters` already waiting. */
  waitOverflow: number;
  /** `wait` calls waiting now. */
  waiting: number;
}

/** All counters at zero. */
export function newStats(): LimiterStats {
  return {
    allowed: 0,
    limited: 0,
    invalid: 0,
    timeout: 0,
    unavailable: 0,
    overload: 0,
    storeError: 0,
    configError: 0,
    cachedDenials: 0,
    peeks: 0,
    resets: 0,
    cacheInvalidations: 0,
    inFlight: 0,
    leasesReleased: 0,
    leasesRenewed: 0,
    leasesLost: 0,
    waitGranted: 0,
    waitTimedOut: 0,
    waitAborted: 0,
    waitOverflow: 0,
    waiting: 0,
  };
}
