/**
 * A `ThrottlerStorage` of `@nestjs/throttler` (6.x) on sluice's limiter, for apps that keep
 * `ThrottlerGuard` and `@Throttle()`: each `increment` is one `take` — one atomic script call
 * on Redis server time — of a fixed window of `ttl` ms admitting `limit` hits, so every
 * process sharing the Redis shares each key's count exactly.
 *
 * Typed structurally: this module imports nothing from `@nestjs/throttler` (the storage is
 * assignable to its `ThrottlerStorage` interface); it loads `@nestjs/common` for the `503`.
 */
import { HttpException } from '@nestjs/common';
import { type FixedWindowPolicy, fixedWindow } from '../algorithms/fixed-window.js';
import { InvalidInputError, isSluiceError } from '../errors.js';
import type { RateLimiter } from '../limiter/rate-limiter.js';
import { unavailableResponse } from './core.js';

/**
 * What `ThrottlerStorage.increment` resolves, as `@nestjs/throttler` 6.x declares it:
 * `totalHits` a count, the two times in whole **seconds** (the guard writes them into
 * `X-RateLimit-Reset` and `Retry-After` as they are).
 */
export interface ThrottlerStorageRecord {
  totalHits: number;
  timeToExpire: number;
  isBlocked: boolean;
  timeToBlockExpire: number;
}

/** Policies made for `(limit, ttl)` pairs; cleared past this many (a plan per tenant, say). */
const MAX_POLICIES = 1024;

/** A positive safe integer argument of `increment`. */
function positive(field: string, value: unknown): number {
  if (typeof value !== 'number' || !Number.isSafeInteger(value) || value < 1) {
    throw new InvalidInputError(field, 'a positive safe integer', value);
  }
  return value;
}

/**
 * `@nestjs/throttler`'s storage, counting in Redis through a sluice `RateLimiter`:
 *
 * ```ts
 * ThrottlerModule.forRoot({ throttlers: [{ ttl: 60_000, limit: 10 }], storage: new SluiceThrottlerStorage(limiter) })
 * ```
 *
 * - The throttler's `key` (its hash of controller, handler, throttler name and tracker) is
 *   the scope's tenant and the throttler's name its route: the Redis key is sluice's
 *   (`rate:{<SHA-256>}`), never the throttler's text.
 * - A window of `ttl` ms starts at a key's first hit; up to `limit` hits are admitted in it.
 *   A refused hit is not counted (`totalHits` then reports `limit + 1`, the hit that did not
 *   fit, as the in-memory storage does), and `timeToBlockExpire` is the seconds until the
 *   window ends, rounded up, at least 1 — the guard's `Retry-After`.
 * - **`blockDuration` is not applied**: a key over its limit is refused until its window
 *   ends, however long `blockDuration` is (and also when it is shorter than `ttl`). The
 *   in-memory storage instead blocks for `blockDuration` from the first refused hit and
 *   counts hits in a sliding window.
 * - A limiter failure (timeout, Redis unreachable, overload) rejects with an
 *   `HttpException` `503` whose response is sluice's RFC 9457 body (fail closed; the
 *   throttler's guard sets no `Retry-After` on it). Bad input and a refused Redis
 *   configuration reject with sluice's error (Nest answers `500`).
 */
export class SluiceThrottlerStorage {
  private readonly policies = new Map<string, FixedWindowPolicy>();

  constructor(private readonly limiter: RateLimiter) {
    if (typeof limiter?.take !== 'function') {
      throw new InvalidInputError('limiter', 'a RateLimiter', limiter);
    }
  }

  /**
   * Counts one hit of `key` for the throttler `throttlerName`: `ttl` ms windows of `limit`
   * hits. `blockDuration` (ms) is checked and not applied (see the class).
   *
   * @throws {InvalidInputError} (`key`, `throttlerName`, `ttl`, `limit`, `blockDuration`)
   *   before Redis is called: `ttl` from 1 to 315,360,000,000, `limit` a positive safe
   *   integer, `blockDuration` a non-negative number.
   * @throws {HttpException} `503` when the limiter fails.
   */
  async increment(
    key: string,
    ttl: number,
    limit: number,
    blockDuration: number,
    throttlerName: string,
  ): Promise<ThrottlerStorageRecord> {
    for (const [field, value] of [
      ['key', key],
      ['throttlerName', throttlerName],
    ] as const) {
      if (typeof value !== 'string' || value.length === 0) {
        throw new InvalidInputError(field, 'a non-empty string', value);
      }
    }
    const policy = this.policyOf(positive('ttl', ttl), positive('limit', limit));
    if (typeof blockDuration !== 'number' || !(blockDuration >= 0)) {
      throw new InvalidInputError('blockDuration', 'a non-negative number of ms', blockDuration);
    }
    let decision: Awaited<ReturnType<RateLimiter['take']>>;
    try {
      decision = await this.limiter.take({ tenant: key, route: throttlerName }, policy);
    } catch (error) {
      if (isSluiceError(error, 'SLUICE_INVALID_INPUT')) {
        // Name the throttler's arguments (the key is the scope's tenant, the throttler's name
        // its route), not the scope's fields.
        const field =
          error.field === 'scope.tenant'
            ? 'key'
            : error.field === 'scope.route'
              ? 'throttlerName'
              : error.field;
        if (field === error.field) throw error;
        throw new InvalidInputError(field, error.expected, field === 'key' ? key : throttlerName);
      }
      if (isSluiceError(error, 'SLUICE_REDIS_CONFIG')) throw error;
      throw new HttpException(JSON.parse(unavailableResponse().body), 503, { cause: error });
    }
    const seconds = (ms: number) => Math.max(1, Math.ceil(ms / 1000));
    const timeToExpire = seconds(decision.resetMs);
    if (decision.allowed) {
      return {
        totalHits: decision.limit - decision.remaining,
        timeToExpire,
        isBlocked: false,
        timeToBlockExpire: 0,
      };
    }
    return {
      totalHits: decision.limit + 1,
      timeToExpire,
      isBlocked: true,
      timeToBlockExpire: seconds(decision.retryAfterMs),
    };
  }

  /** The fixed window of `limit` per `ttl` ms, made once per pair. */
  private policyOf(ttl: number, limit: number): FixedWindowPolicy {
    const id = `${limit}/${ttl}`;
    let policy = this.policies.get(id);
    if (policy === undefined) {
      try {
        policy = fixedWindow({ limit, windowMs: ttl });
      } catch (error) {
        // Name the throttler's arguments, not the builder's fields.
        if (isSluiceError(error, 'SLUICE_INVALID_INPUT')) {
          const field = error.field === 'policy.windowMs' ? 'ttl' : 'limit';
          throw new InvalidInputError(field, error.expected, field === 'ttl' ? ttl : limit);
        }
        throw error;
      }
      if (this.policies.size >= MAX_POLICIES) this.policies.clear();
      this.policies.set(id, policy);
    }
    return policy;
  }
}
