/**
 * The sliding-window-log policy: exact. At most `limit` units in any window of `windowMs`
 * ending now — no boundary burst.
 *
 * A weighted log: one sorted-set member per admitted take (whatever its cost), carrying its
 * cost and a running total of units, so every decision is O(log n) in the n members, whatever
 * the cost (a denial O(log² n)).
 *
 * Memory: a log holds at most `limit` members, one per take in the window (and a few that
 * left it, trimmed 8 per call), whatever their costs: a take of cost 10,000 is one member.
 * The cap, {@link MAX_LOG_LIMIT}, bounds a full log of cost-1 takes (a sorted set of that many
 * members).
 *
 * Redis cost per decision: TIME; ZRANGE of the newest entry; ZCOUNT, ZCARD and a
 * ZREMRANGEBYRANK of at most 8 stale members; ZRANGE of the first entry in the window. A denial
 * adds PTTL and, to find its retry time, at most ⌈log₂ k⌉ + 1 one-member ZRANGEs (k the units
 * that must leave: at most 15 at limit 10,000); an admission adds ZADD of one member and
 * PEXPIRE. The longest call at the cap is measured by bench/script-time.ts.
 */

import type { Policy } from '../types.js';
import {
  buildPolicy,
  MAX_WINDOW_MS,
  type PolicyIdentityOptions,
  policyIdentity,
  policyInteger,
  requireObject,
} from './policy.js';
import { loadScript } from './script.js';
import { numbers, type Twin } from './twin.js';

/** The sliding-window-log script (one key). */
export const slidingWindowLogScript = loadScript('sliding-window-log', import.meta.url, 1);

/** Largest `limit` of a sliding window log: up to `limit` members (cost-1 takes) per key in Redis. */
export const MAX_LOG_LIMIT = 10_000;

/**
 * Largest `limit` (in units per window) of a sliding window log that reserve, settle, cancel,
 * refund, charge and reserveAll accept: a settle or refund rewrites up to `limit` members (see
 * `settle/sliding-window-log.lua`), and at this limit its longest script call stays well under
 * 5 ms (bench/script-time.ts). Takes accept any log limit up to 10,000.
 *
 * Above it, those calls throw an `InvalidInputError` naming `policy.limit`
 * (`items[i].policy.limit` in reserveAll) before anything is sent; an HTTP guard with the
 * `settle` option throws it when the guard is made, and `sluice serve` refuses such a
 * `sliding-window-log` rule when its rules load (it charges refused requests).
 *
 * @example
 * ```ts
 * import { MAX_PRICED_LOG_LIMIT, slidingWindowLog } from 'sluice';
 * const wanted = 1000;
 * // Reserved and settled by a guard with `settle`: keep the log within the bound.
 * const logins = slidingWindowLog({ limit: Math.min(wanted, MAX_PRICED_LOG_LIMIT), windowMs: 60_000 });
 * ```
 */
export const MAX_PRICED_LOG_LIMIT = 500;

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
  const { name, version, block } = policyIdentity(options);
  return buildPolicy(
    {
      name,
      summary: `${limit}-per-${windowMs}ms`,
      horizonMs: windowMs,
      algorithm: 'sliding-window-log',
      // 'swlw', the weighted log: a key of the per-unit log before it (tag 'swl', a member
      // `<ms>:<n>` per unit) is never read as one; those keys expire within one window.
      keyTag: 'swlw',
      limit,
      version,
      block,
      maxCost: limit,
      script: slidingWindowLogScript,
      quotaWindowMs: windowMs,
      params: [limit, windowMs],
    },
    { algorithm: 'sliding-window-log' as const, windowMs },
  );
}

/** Stale members one call removes at most (`TRIM` in `sliding-window-log.lua`). */
export const TRIM = 8;
/** The largest running total a member may carry: 2^53 − 1. */
const MAX_TOTAL = Number.MAX_SAFE_INTEGER;
const MEMBER = /^(\d{16}):([1-9]\d*)$/;

/**
 * A sorted-set member as the in-memory twin holds it: `[score, member]`. A `'zset'` value is
 * an array of them in Redis's order (score, then member).
 */
export type LogEntry = [score: number, member: string];

/** `entry()` of the script: a member's total, cost and score, or undefined when not the log's. */
export function parseEntry(item: LogEntry | undefined): [number, number, number] | undefined {
  if (item === undefined) return undefined;
  const match = MEMBER.exec(item[1]);
  const score = item[0];
  if (match === null || score !== Math.floor(score)) return undefined;
  const total = Number(match[1]);
  const n = Number(match[2]);
  if (total > MAX_TOTAL || n > total) return undefined;
  return [total, n, score];
}

/** The member of a take of `cost` that brings the running total to `total`. */
export function memberOf(total: number, cost: number): string {
  return `${String(total).padStart(16, '0')}:${cost}`;
}

/** Members scored at most `edge` (ZCOUNT key -inf edge) in a log in Redis order. */
export function countUpTo(log: readonly LogEntry[], edge: number): number {
  let lo = 0;
  let hi = log.length;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    if ((log[mid] as LogEntry)[0] <= edge) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

/** ZADD of one member: in Redis order, replacing a member of the same name. */
export function zadd(log: LogEntry[], score: number, member: string): void {
  const same = log.findIndex((e) => e[1] === member);
  if (same >= 0) log.splice(same, 1);
  let at = log.length;
  while (at > 0) {
    const [s, m] = log[at - 1] as LogEntry;
    if (s < score || (s === score && m < member)) break;
    at--;
  }
  log.splice(at, 0, [score, member]);
}

/** The in-memory twin of `sliding-window-log.lua` (see `twin.ts`). */
export const slidingWindowLogTwin: Twin = (state, key, args, { dry, probe }) => {
  const [limit, window, given] = numbers(args, 3);
  const cost = probe ? limit + 1 : given;
  const clockNow = state.nowMs;
  let now = clockNow;
  let log = state.get<LogEntry[]>(key, 'zset');
  let count = 0;
  let top: number | undefined;
  let total = 0;
  let found: number | undefined;

  const read = (): boolean => {
    if (log === undefined || log.length === 0) return true;
    const newest = parseEntry(log[log.length - 1]);
    if (newest === undefined) return false;
    const [topTotal, , topScore] = newest;
    if (topScore > now + window || topScore < 0) return false;
    top = topScore;
    total = topTotal;
    if (top > now) now = top;
    let stale = countUpTo(log, now - window);
    let card = log.length;
    if (stale > 0 && !dry) {
      const removed = Math.min(stale, TRIM);
      log.splice(0, removed);
      if (log.length === 0) state.delete(key);
      stale -= removed;
      card -= removed;
    }
    if (stale === card) return true;
    const first = parseEntry(log[stale]);
    if (first === undefined || first[0] > total) return false;
    const [firstTotal, firstCost, firstScore] = first;
    const before = firstTotal - firstCost;
    count = total - before;
    if (count > limit) return false;
    if (cost > limit || count + cost <= limit) return true;
    const k = count + cost - limit;
    const need = before + k;
    if (firstTotal >= need) {
      found = firstScore;
      return true;
    }
    let lo = stale + 1;
    let hi = Math.min(stale + k - 1, card - 1);
    let at = hi === card - 1 ? top : undefined;
    while (lo < hi) {
      const mid = Math.floor((lo + hi) / 2);
      const e = parseEntry(log[mid]);
      if (e === undefined) return false;
      if (e[0] >= need) {
        hi = mid;
        at = e[2];
      } else lo = mid + 1;
    }
    if (at === undefined) {
      const e = parseEntry(log[hi]);
      if (e === undefined) return false;
      at = e[2];
    }
    found = at;
    return true;
  };

  if (!read()) {
    if (!dry) state.delete(key);
    log = undefined;
    now = clockNow;
    count = 0;
    top = undefined;
    total = 0;
    found = undefined;
  }
  const lag = now - clockNow;
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
    const wait = Math.ceil((found as number) + window - now + lag);
    return [0, Math.max(limit - count, 0), real(reset, 0), real(wait, 1)];
  }
  if (dry) {
    ttl = window;
    return [1, limit - count, real(reset, 0), 0];
  }
  const member = memberOf(total + cost, cost);
  if (state.pttl(key) === -2) state.set(key, 'zset', [[now, member]], window);
  else {
    zadd(log as LogEntry[], now, member);
    state.pexpire(key, window);
  }
  return [1, limit - count - cost, window, 0];
};
