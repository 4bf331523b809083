/**
 * The token-bucket policy: a bucket of `capacity` tokens refilled continuously at
 * `refillTokens` per `refillIntervalMs`; a take of `cost` needs `cost` tokens.
 *
 * Burst: up to `capacity` at once, then the refill rate: in any span of `t` ms at most
 * `capacity + floor(refillTokens × t / refillIntervalMs)` units pass. Exact: tokens are an
 * integer in units of 1/refillIntervalMs of a token, so nothing rounds.
 *
 * Redis cost: one hash per scope (two fields), alive only until the bucket is full again;
 * per decision TIME + HMGET, plus HSET + PEXPIRE when admitted.
 */

import type { Policy } from '../types.js';
import { ceilDiv, floorDiv } from './int-math.js';
import {
  buildPolicy,
  MAX_LIMIT,
  MAX_WINDOW_MS,
  type PolicyIdentityOptions,
  policyIdentity,
  policyInteger,
  requireObject,
  requireProduct,
} from './policy.js';
import { loadScript } from './script.js';
import { intIn, luaNumber, numbers, type Twin } from './twin.js';

/** The token-bucket script (one key). */
export const tokenBucketScript = loadScript('token-bucket', import.meta.url, 1);

/** Options of {@link tokenBucket}. */
export interface TokenBucketOptions extends PolicyIdentityOptions {
  /** Most tokens the bucket holds, and the largest cost it can admit: a positive safe integer. */
  readonly capacity: number;
  /** Tokens added per `refillIntervalMs`: a positive safe integer. Default 1. */
  readonly refillTokens?: number;
  /** The refill interval in ms: an integer from 1 to 315,360,000,000. */
  readonly refillIntervalMs: number;
}

/** A token-bucket policy, made by {@link tokenBucket}. `limit` is the capacity. */
export interface TokenBucketPolicy extends Policy {
  readonly algorithm: 'token-bucket';
  readonly capacity: number;
  readonly refillTokens: number;
  readonly refillIntervalMs: number;
}

/**
 * Builds a token-bucket policy. `tokenBucket({ capacity: 10, refillTokens: 10,
 * refillIntervalMs: 1000 })` is 10 per second with bursts of 10.
 *
 * Decision fields: `remaining` = whole tokens left; `resetMs` = ms until the bucket is full;
 * `retryAfterMs` = ms until `cost` tokens are there (`Infinity` when cost > capacity).
 *
 * @throws {InvalidInputError} for a bad field (`policy.capacity`, `policy.refillTokens`,
 *   `policy.refillIntervalMs`, `policy.name`, `policy.version`), or capacity × refillIntervalMs above 2^53 − 1.
 */
export function tokenBucket(options: TokenBucketOptions): TokenBucketPolicy {
  requireObject(options, '{ capacity, refillIntervalMs }', [
    'capacity',
    'refillTokens',
    'refillIntervalMs',
  ]);
  const capacity = policyInteger(options, 'capacity', MAX_LIMIT);
  const refillTokens = policyInteger(options, 'refillTokens', Number.MAX_SAFE_INTEGER, 1);
  const refillIntervalMs = policyInteger(options, 'refillIntervalMs', MAX_WINDOW_MS);
  requireProduct('policy.capacity', capacity, refillIntervalMs, 'capacity × refillIntervalMs');
  const { name, version, block } = policyIdentity(options);
  const refillMs = ceilDiv(capacity * refillIntervalMs, refillTokens);
  return buildPolicy(
    {
      name,
      summary: `${capacity}-refill-${refillTokens}-per-${refillIntervalMs}ms`,
      horizonMs: refillMs,
      algorithm: 'token-bucket',
      keyTag: 'tb',
      limit: capacity,
      version,
      block,
      maxCost: capacity,
      script: tokenBucketScript,
      quotaWindowMs: refillMs,
      params: [capacity, refillTokens, refillIntervalMs],
    },
    { algorithm: 'token-bucket' as const, capacity, refillTokens, refillIntervalMs },
  );
}

/** The in-memory twin of `token-bucket.lua` (see `twin.ts`). */
interface Bucket {
  readonly s: unknown;
  readonly t: unknown;
}

/** The in-memory twin of `token-bucket.lua` (see `twin.ts`). */
export const tokenBucketTwin: Twin = (state, key, args, { dry, probe }) => {
  const [capacity, rate, interval, given] = numbers(args, 4);
  const cost = probe ? capacity + 1 : given;
  const now = state.nowMs;
  const full = capacity * interval;
  const horizon = ceilDiv(full, rate);
  const need = cost * interval;
  const bucket = state.get<Bucket>(key, 'hash');
  let s = luaNumber(bucket?.s);
  const t = luaNumber(bucket?.t);
  let scaled = full;
  let stamp = now;
  if (intIn(s, 0, full) && intIn(t, 0, now + horizon)) {
    if (t > now) {
      stamp = t;
      scaled = s;
    } else scaled = Math.min(s + (now - t) * rate, full);
  } else {
    if (bucket !== undefined && (bucket.s !== undefined || bucket.t !== undefined) && !dry) {
      state.delete(key);
    }
    s = undefined;
  }
  const lag = stamp - now;
  let reset = ceilDiv(full - scaled, rate) + lag;
  let ttl = -2;
  const real = (ms: number, slack: number) => (lag > 0 && ms > ttl + slack ? ttl + slack : ms);
  if (cost > capacity || scaled < need) {
    if (s === undefined && !dry) state.delete(key);
    if (s !== undefined) {
      ttl = state.pttl(key);
      if (ttl < 0 || ttl > horizon) {
        ttl = Math.min(Math.max(reset, 1), horizon);
        if (!dry) state.pexpire(key, ttl);
      }
    }
    const retry = cost > capacity ? -1 : real(ceilDiv(need - scaled, rate) + lag, 1);
    return [0, floorDiv(scaled, interval), real(reset, 0), retry];
  }
  if (dry) {
    ttl = Math.min(Math.max(reset, 1), horizon);
    return [1, floorDiv(scaled, interval), real(reset, 0), 0];
  }
  scaled -= need;
  reset = ceilDiv(full - scaled, rate) + lag;
  ttl = Math.min(Math.max(reset, 1), horizon);
  state.set(key, 'hash', { s: scaled, t: stamp }, ttl);
  return [1, floorDiv(scaled, interval), real(reset, 0), 0];
};
