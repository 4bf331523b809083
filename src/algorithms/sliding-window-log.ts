/**
 * The sliding-window-log policy: exact. At most `limit` units in any window of `windowMs`
 * ending now — no boundary burst.
 *
 * Memory: one sorted-set member per admitted unit still in the window (about 60 bytes
 * each), so `limit` is capped at {@link MAX_LOG_LIMIT}. Redis cost per decision: TIME,
 * ZREMRANGEBYSCORE, ZCARD, one ZRANGE (the newest entry; another for a denial's retry
 * time), and ZADD + PEXPIRE when admitted.
 */
import {
  buildPolicy,
  MAX_WINDOW_MS,
  type Policy,
  type PolicyIdentityOptions,
  policyIdentity,
  policyInteger,
  requireObject,
} from './policy.js';
import { loadScript } from './script.js';
import { numbers, type Twin } from './twin.js';

/** The sliding-window-log script (one key). */
export const slidingWindowLogScript = loadScript('sliding-window-log', import.meta.url, 1);

/** Largest `limit` of a sliding window log: each admitted unit is a member in Redis. */
export const MAX_LOG_LIMIT = 10_000;

/** Options of {@link slidingWindowLog} and `slidingWindowCounter`. */
export interface SlidingWindowOptions extends PolicyIdentityOptions {
  /** Units admitted in any window: a positive safe integer (at most 10,000 for the log). */
  readonly limit: number;
  /** Window length in ms: an integer from 1 to 315,360,000,000. */
  readonly windowMs: number;
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
 * @throws {InvalidInputError} for a bad `policy.limit` (above 10,000 too), `policy.windowMs`,
 *   `policy.name` or `policy.version`.
 */
export function slidingWindowLog(options: SlidingWindowOptions): SlidingWindowLogPolicy {
  requireObject(options, '{ limit, windowMs }', ['limit', 'windowMs']);
  const limit = policyInteger(options, 'limit', MAX_LOG_LIMIT);
  const windowMs = policyInteger(options, 'windowMs', MAX_WINDOW_MS);
  const { name, version } = policyIdentity(options);
  return buildPolicy(
    {
      name,
      summary: `${limit}-per-${windowMs}ms`,
      horizonMs: windowMs,
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
export const slidingWindowLogTwin: Twin = (state, key, args, { dry, probe }) => {
  const [limit, window, given] = numbers(args, 3);
  const cost = probe ? limit + 1 : given;
  const clockNow = state.nowMs;
  let now = clockNow;
  const stored = state.get<number[]>(key, 'zset');
  let top = stored?.[stored.length - 1];
  let log: number[] = [];
  if (top !== undefined && (top > now + window || top < 0 || !Number.isInteger(top))) {
    if (!dry) state.delete(key);
    top = undefined;
  } else if (top !== undefined && stored !== undefined) {
    if (top > now) now = top;
    log = stored.filter((s) => s > now - window);
    if (!dry && log.length !== stored.length) {
      if (log.length === 0) state.delete(key);
      else state.update(key, log);
    }
  }
  const lag = now - clockNow;
  const count = log.length;
  const reset = count > 0 ? (top as number) + window - now + lag : 0;
  let ttl = -2;
  const checkTtl = () => {
    if (top === undefined) return;
    ttl = state.pttl(key);
    if (ttl < 0 || ttl > window) {
      ttl = Math.max(Math.min(reset, window), 1);
      if (!dry) state.pexpire(key, ttl);
    }
  };
  const real = (ms: number, slack: number) => (lag > 0 && ms > ttl + slack ? ttl + slack : ms);
  if (cost > limit) {
    checkTtl();
    return [0, Math.max(limit - count, 0), real(reset, 0), -1];
  }
  if (count + cost > limit) {
    checkTtl();
    const entry = log[count + cost - limit - 1] as number;
    const wait = Math.ceil(entry + window - now + lag);
    return [0, Math.max(limit - count, 0), real(reset, 0), real(wait, 1)];
  }
  if (!dry) {
    const next = log.concat(Array.from({ length: cost }, () => now));
    if (state.pttl(key) === -2) state.set(key, 'zset', next, window);
    else {
      state.update(key, next);
      state.pexpire(key, window);
    }
  }
  return [1, limit - count - cost, window, 0];
};
