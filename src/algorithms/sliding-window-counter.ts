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

import type { Policy } from '../types.js';
import { floorDiv } from './int-math.js';
import {
  buildPolicy,
  MAX_LIMIT,
  MAX_WINDOW_MS,
  policyIdentity,
  policyInteger,
  requireObject,
  requireProduct,
} from './policy.js';
import { loadScript } from './script.js';
import type { SlidingWindowOptions } from './sliding-window-log.js';
import { intIn, luaNumber, numbers, type Twin } from './twin.js';

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
 * @throws {InvalidInputError} for a bad `policy.limit`, `policy.windowMs`, `policy.name` or
 *   `policy.version`, or limit × windowMs above 2^53 − 1.
 */
export function slidingWindowCounter(options: SlidingWindowOptions): SlidingWindowCounterPolicy {
  requireObject(options, '{ limit, windowMs }', ['limit', 'windowMs']);
  const limit = policyInteger(options, 'limit', MAX_LIMIT);
  const windowMs = policyInteger(options, 'windowMs', MAX_WINDOW_MS);
  requireProduct('policy.limit', limit, windowMs, 'limit × windowMs');
  const { name, version, block } = policyIdentity(options);
  return buildPolicy(
    {
      name,
      summary: `${limit}-per-${windowMs}ms`,
      horizonMs: 2 * windowMs,
      algorithm: 'sliding-window-counter',
      keyTag: 'swc',
      limit,
      version,
      block,
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
  readonly w: unknown;
  readonly c: unknown;
  readonly p: unknown;
}

/** The in-memory twin of `sliding-window-counter.lua` (see `twin.ts`). */
export const slidingWindowCounterTwin: Twin = (state, key, args, { dry, probe }) => {
  const [limit, window, given] = numbers(args, 3);
  const cost = probe ? limit + 1 : given;
  const now = state.nowMs;
  const horizon = 2 * window;
  let index = floorDiv(now, window);
  let elapsed = now - index * window;
  let lag = 0;
  const hash = state.get<Counter>(key, 'hash');
  let stored = luaNumber(hash?.w);
  const c = luaNumber(hash?.c);
  const p = luaNumber(hash?.p);
  let current = 0;
  let previous = 0;
  if (
    intIn(stored, 0, Number.MAX_SAFE_INTEGER) &&
    stored * window <= now + horizon &&
    intIn(c, 0, limit) &&
    intIn(p, 0, limit)
  ) {
    if (stored > index) {
      lag = stored * window - now;
      index = stored;
      elapsed = 0;
    }
    if (stored === index) {
      current = c;
      previous = p;
    } else if (stored === index - 1) previous = c;
  } else {
    const fields =
      hash !== undefined && (hash.w !== undefined || hash.c !== undefined || hash.p !== undefined);
    if (fields && !dry) state.delete(key);
    stored = undefined;
  }
  const room = limit * window - previous * (window - elapsed) - current * window;
  const remaining = Math.max(floorDiv(room, window), 0);
  let reset = 2 * window - elapsed;
  if (current === 0) reset = window - elapsed;
  if (current === 0 && previous === 0) reset = 0;
  let ttl = -2;
  const checkTtl = () => {
    if (stored === undefined) return;
    ttl = state.pttl(key);
    if (ttl < 0 || ttl > horizon) {
      ttl = Math.max(Math.min((index + 2) * window - now, horizon), 1);
      if (!dry) state.pexpire(key, ttl);
    }
  };
  const real = (ms: number, slack: number) => {
    if (lag <= 0) return ms;
    const late = ms + lag;
    return Math.min(late, ttl + slack);
  };
  if (cost > limit) {
    if (stored === undefined && !dry) state.delete(key);
    checkTtl();
    return [0, remaining, reset === 0 ? 0 : real(reset, 0), -1];
  }
  if (room < cost * window) {
    checkTtl();
    let retry: number | undefined;
    const spare = limit - current - cost;
    if (spare >= 0 && previous > 0) retry = window - elapsed - floorDiv(spare * window, previous);
    if (retry === undefined || retry >= window - elapsed) {
      const e2 = current > 0 ? Math.max(window - floorDiv((limit - cost) * window, current), 0) : 0;
      retry = window - elapsed + e2;
    }
    return [0, remaining, real(reset, 0), real(Math.max(retry, 1), 1)];
  }
  ttl = Math.min((index + 2) * window - now, horizon);
  if (dry) return [1, remaining, reset === 0 ? 0 : real(reset, 0), 0];
  state.set(key, 'hash', { w: index, c: current + cost, p: previous }, ttl);
  return [1, floorDiv(room - cost * window, window), real(2 * window - elapsed, 0), 0];
};
