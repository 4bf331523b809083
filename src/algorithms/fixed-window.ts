/**
 * The fixed-window policy: at most `limit` units per window of `windowMs`, the window
 * anchored at the first take of a scope.
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

import type { Policy, PrefetchSpec } from '../types.js';
import {
  buildPolicy,
  MAX_LIMIT,
  MAX_WINDOW_MS,
  type PolicyIdentityOptions,
  policyIdentity,
  policyInteger,
  requireObject,
} from './policy.js';
import { readPrefetch } from './prefetch-option.js';
import { loadScript } from './script.js';
import { numbers, type Twin } from './twin.js';

/** The fixed-window script (one key). */
export const fixedWindowScript = loadScript('fixed-window', import.meta.url, 1);
const script = fixedWindowScript;

/** Options of {@link fixedWindow}. */
export interface FixedWindowOptions extends PolicyIdentityOptions {
  /** Units admitted per window: a positive safe integer. */
  readonly limit: number;
  /** Window length in milliseconds: an integer from 1 to 315,360,000,000 (10 years). */
  readonly windowMs: number;
  /**
   * Prefetched quota for hot scopes (see `docs/prefetch.md`): a replica takes up to
   * `maxUnits` (an integer from 1 to 65,536) of a scope's remaining units in one script call,
   * consumed in Redis at once, and admits takes of cost 1 from them locally until they run
   * out or the window nears its end; unused units go back into the same window at
   * `limiter.close()` and before the window ends. Not part of the policy's identity.
   * Default: none.
   */
  readonly prefetch?: { readonly maxUnits: number };
}

/** A fixed-window policy, made by {@link fixedWindow}. */
export interface FixedWindowPolicy extends Policy {
  readonly algorithm: 'fixed-window';
  readonly windowMs: number;
  readonly prefetch: PrefetchSpec | undefined;
}

/**
 * Builds a fixed-window policy.
 *
 * @throws {InvalidInputError} when `limit` or `windowMs` is not a positive safe integer, or
 *   `name` or `version` is malformed (field `policy.limit`, `policy.windowMs`,
 *   `policy.name`, `policy.version`), or `prefetch` is not `{ maxUnits }` with an integer
 *   from 1 to 65,536 (field `policy.prefetch`, `policy.prefetch.maxUnits`).
 */
export function fixedWindow(options: FixedWindowOptions): FixedWindowPolicy {
  requireObject(options, '{ limit, windowMs }', ['limit', 'windowMs', 'prefetch']);
  const limit = policyInteger(options, 'limit', MAX_LIMIT);
  const windowMs = policyInteger(options, 'windowMs', MAX_WINDOW_MS);
  const prefetch = readPrefetch(options);
  const { name, version, block } = policyIdentity(options);
  return buildPolicy(
    {
      name,
      summary: `${limit}-per-${windowMs}ms`,
      horizonMs: windowMs,
      algorithm: 'fixed-window',
      keyTag: 'fw',
      limit,
      version,
      block,
      maxCost: limit,
      script,
      quotaWindowMs: windowMs,
      params: [limit, windowMs],
      fullUntilReset: true,
    },
    { algorithm: 'fixed-window' as const, windowMs, prefetch },
  );
}

/** The in-memory twin of `fixed-window.lua` (see `twin.ts`). */
export const fixedWindowTwin: Twin = (state, key, args, { dry, probe }) => {
  const [limit, window, given] = numbers(args, 3);
  const cost = probe ? limit + 1 : given;
  const current = state.get<unknown>(key, 'string');
  let used: number | undefined;
  if (current !== undefined) {
    // Only the canonical digits INCRBY accepts, at most the limit.
    const text = String(current);
    if (text.length <= 16 && /^(0|[1-9][0-9]*)$/.test(text)) used = Number(text);
    if (used !== undefined && used > limit) used = undefined;
    if (used === undefined && !dry) state.delete(key);
  }
  if (used === undefined) {
    if (cost > limit) return [0, limit, 0, -1];
    if (dry) return [1, limit, 0, 0];
    state.set(key, 'string', cost, window);
    return [1, limit - cost, window, 0];
  }
  let ttl = state.pttl(key);
  if (ttl < 0 || ttl > window) {
    ttl = window;
    if (!dry) state.pexpire(key, window);
  }
  if (used + cost > limit) return [0, limit - used, ttl, cost > limit ? -1 : ttl + 1];
  if (dry) return [1, limit - used, ttl, 0];
  state.update(key, used + cost);
  return [1, limit - used - cost, ttl, 0];
};
