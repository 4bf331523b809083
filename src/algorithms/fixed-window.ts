/**
 * The fixed-window policy: at most `limit` units per window of `windowMs`, the window
 * anchored at the first take of a scope (S4).
 *
 * Boundary burst, by design: a burst at the end of one window and another at the start of
 * the next are both admitted, so up to `2 × limit` units can pass in any span of `windowMs`
 * (never more than `limit` inside one anchored window). Use a sliding window or token bucket
 * where that matters.
 *
 * Redis cost: one key (a string counter with a TTL of at most `windowMs`), one script call
 * per decision; GET + PTTL when denied, GET + INCRBY + PTTL (+ PEXPIRE on the first take)
 * when admitted.
 */
import { readProperty } from '../validate.js';
import {
  buildPolicy,
  MAX_LIMIT,
  MAX_WINDOW_MS,
  type Policy,
  policyInteger,
  policyVersion,
  requireObject,
} from './policy.js';
import { loadScript } from './script.js';
import { numbers, type Twin } from './twin.js';

/** The fixed-window script (one key). */
export const fixedWindowScript = loadScript('fixed-window', import.meta.url, 1);
const script = fixedWindowScript;

/** Options of {@link fixedWindow}. */
export interface FixedWindowOptions {
  /** Units admitted per window: a positive safe integer. */
  readonly limit: number;
  /** Window length in milliseconds: an integer from 1 to 315,360,000,000 (10 years). */
  readonly windowMs: number;
  /**
   * Policy version, part of the Redis key (S21): change it when the policy's meaning
   * changes so that replicas on the old and new policy never share a counter. A string of
   * letters, digits, `.`, `_` or `-` (at most 64), or a non-negative safe integer. Default `1`.
   */
  readonly version?: string | number;
}

/** A fixed-window policy, made by {@link fixedWindow}. */
export interface FixedWindowPolicy extends Policy {
  readonly algorithm: 'fixed-window';
  readonly windowMs: number;
}

/**
 * Builds a fixed-window policy.
 *
 * @throws {InvalidInputError} when `limit` or `windowMs` is not a positive safe integer, or
 *   `version` is malformed (field `policy.limit`, `policy.windowMs`, `policy.version`).
 */
export function fixedWindow(options: FixedWindowOptions): FixedWindowPolicy {
  requireObject(options, '{ limit, windowMs }');
  const limit = policyInteger(options, 'limit', MAX_LIMIT);
  const windowMs = policyInteger(options, 'windowMs', MAX_WINDOW_MS);
  const version = policyVersion(readProperty(options, 'version', 'policy'));
  return buildPolicy(
    {
      algorithm: 'fixed-window',
      keyTag: 'fw',
      limit,
      version,
      maxCost: limit,
      script,
      quotaWindowMs: windowMs,
      params: [limit, windowMs],
      fullUntilReset: true,
    },
    { algorithm: 'fixed-window' as const, windowMs },
  );
}

/** The in-memory twin of `fixed-window.lua` (see `twin.ts`). */
export const fixedWindowTwin: Twin = (state, key, args) => {
  const [limit, window, cost] = numbers(args, 3);
  const used = state.get<number>(key, 'string');
  if (used === undefined) {
    if (cost > limit) return [0, limit, 0, -1];
    state.set(key, 'string', cost, window);
    return [1, limit - cost, window, 0];
  }
  if (used + cost > limit) {
    let ttl = state.pttl(key);
    if (ttl < 0) {
      state.pexpire(key, window);
      ttl = window;
    }
    return [0, Math.max(limit - used, 0), ttl, cost > limit ? -1 : ttl + 1];
  }
  state.update(key, used + cost);
  let ttl = state.pttl(key);
  if (ttl < 0) {
    state.pexpire(key, window);
    ttl = window;
  }
  return [1, limit - used - cost, ttl, 0];
};
