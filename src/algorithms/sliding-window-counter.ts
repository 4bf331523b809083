/**
 * The sliding-window-counter policy: the previous and current fixed windows, the previous
 * weighted by its overlap with the sliding window (the approximation popularised by
 * Cloudflare). Two integers per scope instead of a log.
 *
 * Error against the exact log: it assumes the previous window's units were spread evenly.
 * When they were bunched at its end it admits more — up to `2 × limit` in one sliding window
 * in the worst case — and when bunched at its start, less. The conformance tests measure it.
 * Redis cost per decision: TIME + HMGET, plus HSET + PEXPIRE when admitted.
 */
import { readProperty } from '../validate.js';
import { floorDiv } from './int-math.js';
import {
  buildPolicy,
  MAX_LIMIT,
  MAX_WINDOW_MS,
  type Policy,
  policyInteger,
  policyVersion,
  requireObject,
  requireProduct,
} from './policy.js';
import { loadScript } from './script.js';
import type { SlidingWindowOptions } from './sliding-window-log.js';
import { numbers, type Twin } from './twin.js';

/** The sliding-window-counter script (one key). */
export const slidingWindowCounterScript = loadScript('sliding-window-counter', import.meta.url, 1);

/** A sliding-window-counter policy, made by {@link slidingWindowCounter}. */
export interface SlidingWindowCounterPolicy extends Policy {
  readonly algorithm: 'sliding-window-counter';
  readonly windowMs: number;
}

/**
 * Builds a sliding-window-counter policy.
 *
 * Decision fields: `remaining` = units admissible now by the weighted estimate; `resetMs` =
 * ms until both windows are empty; `retryAfterMs` = ms until `cost` fits absent other
 * traffic (`Infinity` when cost > limit).
 *
 * @throws {InvalidInputError} for a bad `policy.limit`, `policy.windowMs` or
 *   `policy.version`, or limit × windowMs above 2^53 − 1.
 */
export function slidingWindowCounter(options: SlidingWindowOptions): SlidingWindowCounterPolicy {
  requireObject(options, '{ limit, windowMs }');
  const limit = policyInteger(options, 'limit', MAX_LIMIT);
  const windowMs = policyInteger(options, 'windowMs', MAX_WINDOW_MS);
  requireProduct('policy.limit', limit, windowMs, 'limit × windowMs');
  const version = policyVersion(readProperty(options, 'version', 'policy'));
  return buildPolicy(
    {
      algorithm: 'sliding-window-counter',
      keyTag: 'swc',
      limit,
      version,
      maxCost: limit,
      script: slidingWindowCounterScript,
      quotaWindowMs: windowMs,
      params: [limit, windowMs],
    },
    { algorithm: 'sliding-window-counter' as const, windowMs },
  );
}

/** The in-memory twin of `sliding-window-counter.lua` (see `twin.ts`). */
interface Counter {
  readonly w: number;
  readonly c: number;
  readonly p: number;
}
export const slidingWindowCounterTwin: Twin = (state, key, args) => {
  const [limit, window, cost] = numbers(args, 3);
  const now = state.nowMs;
  let index = floorDiv(now, window);
  let elapsed = now - index * window;
  const stored = state.get<Counter>(key, 'hash');
  let current = 0;
  let previous = 0;
  if (stored !== undefined) {
    if (stored.w > index) {
      index = stored.w;
      elapsed = 0;
    }
    if (stored.w === index) {
      current = stored.c;
      previous = stored.p;
    } else if (stored.w === index - 1) previous = stored.c;
  }
  const room = limit * window - previous * (window - elapsed) - current * window;
  const remaining = Math.max(floorDiv(room, window), 0);
  let reset = 2 * window - elapsed;
  if (current === 0) reset = window - elapsed;
  if (current === 0 && previous === 0) reset = 0;
  if (cost > limit) return [0, remaining, reset, -1];
  if (room < cost * window) {
    let retry: number | undefined;
    const spare = limit - current - cost;
    if (spare >= 0 && previous > 0) retry = window - elapsed - floorDiv(spare * window, previous);
    if (retry === undefined || retry >= window - elapsed) {
      const e2 = current > 0 ? Math.max(window - floorDiv((limit - cost) * window, current), 0) : 0;
      retry = window - elapsed + e2;
    }
    return [0, remaining, reset, Math.max(retry, 1)];
  }
  state.set(key, 'hash', { w: index, c: current + cost, p: previous }, (index + 2) * window - now);
  return [1, floorDiv(room - cost * window, window), 2 * window - elapsed, 0];
};
