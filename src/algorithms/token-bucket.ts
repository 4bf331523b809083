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
import { readProperty } from '../validate.js';
import { ceilDiv, floorDiv } from './int-math.js';
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
import { numbers, type Twin } from './twin.js';

/** The token-bucket script (one key). */
export const tokenBucketScript = loadScript('token-bucket', import.meta.url, 1);

/** Options of {@link tokenBucket}. */
export interface TokenBucketOptions {
  /** Most tokens the bucket holds, and the largest cost it can admit: a positive safe integer. */
  readonly capacity: number;
  /** Tokens added per `refillIntervalMs`: a positive safe integer. Default 1. */
  readonly refillTokens?: number;
  /** The refill interval in ms: an integer from 1 to 315,360,000,000. */
  readonly refillIntervalMs: number;
  /** Policy version, part of the key (see `FixedWindowOptions.version`). Default `1`. */
  readonly version?: string | number;
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
 *   `policy.refillIntervalMs`, `policy.version`), or capacity × refillIntervalMs above 2^53 − 1.
 */
export function tokenBucket(options: TokenBucketOptions): TokenBucketPolicy {
  requireObject(options, '{ capacity, refillIntervalMs }');
  const capacity = policyInteger(options, 'capacity', MAX_LIMIT);
  const refillTokens = policyInteger(options, 'refillTokens', Number.MAX_SAFE_INTEGER, 1);
  const refillIntervalMs = policyInteger(options, 'refillIntervalMs', MAX_WINDOW_MS);
  requireProduct('policy.capacity', capacity, refillIntervalMs, 'capacity × refillIntervalMs');
  const version = policyVersion(readProperty(options, 'version', 'policy'));
  return buildPolicy(
    {
      algorithm: 'token-bucket',
      keyTag: 'tb',
      limit: capacity,
      version,
      maxCost: capacity,
      script: tokenBucketScript,
      quotaWindowMs: Math.ceil((capacity * refillIntervalMs) / refillTokens),
      params: [capacity, refillTokens, refillIntervalMs],
    },
    { algorithm: 'token-bucket' as const, capacity, refillTokens, refillIntervalMs },
  );
}

/** The in-memory twin of `token-bucket.lua` (see `twin.ts`). */
interface Bucket {
  readonly s: number;
  readonly t: number;
}
export const tokenBucketTwin: Twin = (state, key, args) => {
  const [capacity, rate, interval, cost] = numbers(args, 4);
  const now = state.nowMs;
  const full = capacity * interval;
  const need = cost * interval;
  const bucket = state.get<Bucket>(key, 'hash');
  let scaled = full;
  let stamp = now;
  if (bucket !== undefined) {
    const elapsed = Math.max(now - bucket.t, 0);
    if (now < bucket.t) stamp = bucket.t;
    scaled = Math.min(bucket.s + elapsed * rate, full);
  }
  const lag = stamp - now;
  if (cost > capacity)
    return [0, floorDiv(scaled, interval), ceilDiv(full - scaled, rate) + lag, -1];
  if (scaled < need) {
    return [
      0,
      floorDiv(scaled, interval),
      ceilDiv(full - scaled, rate) + lag,
      ceilDiv(need - scaled, rate) + lag,
    ];
  }
  scaled -= need;
  const reset = ceilDiv(full - scaled, rate) + lag;
  state.set(key, 'hash', { s: scaled, t: stamp }, Math.max(reset, 1));
  return [1, floorDiv(scaled, interval), reset, 0];
};
