/**
 * The sliding-window-log policy: exact. At most `limit` units in any window of `windowMs`
 * ending now — no boundary burst.
 *
 * Memory: one sorted-set member per admitted unit still in the window (about 60 bytes
 * each), so `limit` is capped at {@link MAX_LOG_LIMIT}. Redis cost per decision: TIME,
 * ZREMRANGEBYSCORE, ZCARD, one ZRANGE (the newest entry; another for a denial's retry
 * time), and ZADD + PEXPIRE when admitted.
 */
import { readProperty } from '../validate.js';
import {
  buildPolicy,
  MAX_WINDOW_MS,
  type Policy,
  policyInteger,
  policyVersion,
  requireObject,
} from './policy.js';
import { loadScript } from './script.js';
import { numbers, type Twin } from './twin.js';

/** The sliding-window-log script (one key). */
export const slidingWindowLogScript = loadScript('sliding-window-log', import.meta.url, 1);

/** Largest `limit` of a sliding window log: each admitted unit is a member in Redis. */
export const MAX_LOG_LIMIT = 10_000;

/** Options of {@link slidingWindowLog} and `slidingWindowCounter`. */
export interface SlidingWindowOptions {
  /** Units admitted in any window: a positive safe integer (at most 10,000 for the log). */
  readonly limit: number;
  /** Window length in ms: an integer from 1 to 315,360,000,000. */
  readonly windowMs: number;
  /** Policy version, part of the key (see `FixedWindowOptions.version`). Default `1`. */
  readonly version?: string | number;
}

/** A sliding-window-log policy, made by {@link slidingWindowLog}. */
export interface SlidingWindowLogPolicy extends Policy {
  readonly algorithm: 'sliding-window-log';
  readonly windowMs: number;
}

/**
 * Builds a sliding-window-log policy.
 *
 * Decision fields: `remaining` = units admissible now; `resetMs` = ms until the window holds
 * nothing; `retryAfterMs` = ms until enough entries have left the window for `cost`
 * (`Infinity` when cost > limit).
 *
 * @throws {InvalidInputError} for a bad `policy.limit` (above 10,000 too), `policy.windowMs`
 *   or `policy.version`.
 */
export function slidingWindowLog(options: SlidingWindowOptions): SlidingWindowLogPolicy {
  requireObject(options, '{ limit, windowMs }');
  const limit = policyInteger(options, 'limit', MAX_LOG_LIMIT);
  const windowMs = policyInteger(options, 'windowMs', MAX_WINDOW_MS);
  const version = policyVersion(readProperty(options, 'version', 'policy'));
  return buildPolicy(
    {
      algorithm: 'sliding-window-log',
      keyTag: 'swl',
      limit,
      version,
      maxCost: limit,
      script: slidingWindowLogScript,
      quotaWindowMs: windowMs,
      params: [limit, windowMs],
    },
    { algorithm: 'sliding-window-log' as const, windowMs },
  );
}

/** The in-memory twin of `sliding-window-log.lua` (see `twin.ts`). */
export const slidingWindowLogTwin: Twin = (state, key, args) => {
  const [limit, window, cost] = numbers(args, 3);
  const stored = state.get<number[]>(key, 'zset');
  const newest = stored?.[stored.length - 1];
  const now = newest !== undefined && newest > state.nowMs ? newest : state.nowMs;
  const log = stored === undefined ? [] : stored.filter((s) => s > now - window);
  if (stored !== undefined && log.length !== stored.length) {
    if (log.length === 0) state.delete(key);
    else state.update(key, log);
  }
  const count = log.length;
  const reset = count > 0 ? (log[count - 1] as number) + window - now : 0;
  if (cost > limit) return [0, Math.max(limit - count, 0), reset, -1];
  if (count + cost > limit) {
    const k = count + cost - limit;
    return [0, Math.max(limit - count, 0), reset, (log[k - 1] as number) + window - now];
  }
  const next = log.concat(Array.from({ length: cost }, () => now));
  const ttl = window + now - state.nowMs;
  if (stored === undefined || log.length === 0) state.set(key, 'zset', next, ttl);
  else {
    state.update(key, next);
    state.pexpire(key, ttl);
  }
  return [1, limit - count - cost, window, 0];
};
