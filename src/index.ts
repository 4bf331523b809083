/**
 * sluice — distributed rate limiting on Redis, atomic by construction.
 *
 * The root entry: the limiter, the policies, the shapes of a decision, the errors, the
 * in-memory store. It loads no Redis client and no framework: integrations have their own
 * entries — `sluice/node-redis` (`connectRedis`), `sluice/ioredis`, `sluice/express`,
 * `sluice/fastify`, `sluice/fetch`, `sluice/node`, `sluice/http`, `sluice/config`,
 * `sluice/prometheus`, `sluice/opentelemetry` — and the types for implementing a metrics
 * sink or a store of your own are in `sluice/metrics` and `sluice/store`.
 *
 * @example
 * ```ts
 * import { RateLimiter, fixedWindow } from 'sluice';
 * import { connectRedis } from 'sluice/node-redis';
 *
 * const redis = await connectRedis({ url: 'redis://127.0.0.1:6379' });
 * const limiter = new RateLimiter({ client: redis, timeoutMs: 150, maxInFlight: 1000 });
 * const orders = fixedWindow({ limit: 10, windowMs: 1000 });
 * const d = await limiter.take({ tenant: 'acme', route: 'POST/orders' }, orders);
 * if (!d.allowed) console.log(`retry in ${d.retryAfterMs} ms`);
 * ```
 *
 * @packageDocumentation
 */
export {
  type ConcurrencyOptions,
  type ConcurrencyPolicy,
  concurrency,
  MIN_LEASE_MS,
} from './algorithms/concurrency.js';
export {
  type FixedWindowOptions,
  type FixedWindowPolicy,
  fixedWindow,
} from './algorithms/fixed-window.js';
export { type GcraOptions, type GcraPolicy, gcra } from './algorithms/gcra.js';
export type { PolicyIdentityOptions } from './algorithms/policy.js';
export {
  type SlidingWindowCounterPolicy,
  slidingWindowCounter,
} from './algorithms/sliding-window-counter.js';
export {
  MAX_PRICED_LOG_LIMIT,
  type SlidingWindowLogPolicy,
  type SlidingWindowOptions,
  slidingWindowLog,
} from './algorithms/sliding-window-log.js';
export {
  type TokenBucketOptions,
  type TokenBucketPolicy,
  tokenBucket,
} from './algorithms/token-bucket.js';
export {
  InvalidInputError,
  isSluiceError,
  OverloadError,
  RedisConfigError,
  type RedisConfigReason,
  SluiceError,
  type SluiceErrorCode,
  StoreError,
  TimeoutError,
  UnavailableError,
} from './errors.js';
export type { AcquireOptions } from './limiter/leases.js';
export type { RateLimiterOptions } from './limiter/options.js';
export {
  type PricedOptions,
  type RefundOptions,
  Reservation,
  type ReserveOptions,
  type Settlement,
} from './limiter/priced.js';
export { RateLimiter } from './limiter/rate-limiter.js';
export type { ReserveAllResult } from './limiter/reserve-all.js';
export type { LimiterStats } from './limiter/stats.js';
export type { Scheduled, WaitOptions } from './limiter/wait.js';
export type { AcceptedClient } from './redis/select.js';
export type { StartupWarning, StartupWarningCode } from './redis/server-checks.js';
export { MemoryStore, type MemoryStoreOptions } from './stores/memory.js';
export type {
  BlockSpec,
  Decision,
  Lease,
  Policy,
  PrefetchSpec,
  Scope,
  TakeAllItem,
  TakeAllOptions,
  TakeAllResult,
  TakeOptions,
} from './types.js';
