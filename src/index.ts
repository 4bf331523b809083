/**
 * sluice — distributed rate limiting on Redis, atomic by construction.
 *
 * The root entry: the limiter, the policies, the shapes of a decision, the errors, the
 * in-memory store and the observation types. It loads no Redis client and no framework:
 * integrations have their own entries — `sluice/node-redis` (`connectRedis`),
 * `sluice/ioredis`, `sluice/express`, `sluice/fastify`, `sluice/fetch`, `sluice/node`,
 * `sluice/http`, `sluice/config`, `sluice/prometheus`, `sluice/opentelemetry`.
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
export { type FixedWindowOptions, fixedWindow } from './algorithms/fixed-window.js';
export { type GcraOptions, gcra } from './algorithms/gcra.js';
export type { PolicyIdentityOptions } from './algorithms/policy.js';
export { slidingWindowCounter } from './algorithms/sliding-window-counter.js';
export { type SlidingWindowOptions, slidingWindowLog } from './algorithms/sliding-window-log.js';
export { type TokenBucketOptions, tokenBucket } from './algorithms/token-bucket.js';
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
export type { RateLimiterOptions } from './limiter/options.js';
export { RateLimiter } from './limiter/rate-limiter.js';
export type { LimiterStats } from './limiter/stats.js';
export type {
  DecisionEvent,
  DecisionOutcome,
  LimiterSource,
  Metrics,
  RedisEvent,
  RequestEvent,
} from './metrics/types.js';
export type { StartupWarning } from './redis/server-checks.js';
export { MemoryStore, type MemoryStoreOptions } from './stores/memory.js';
export type { ScriptStore } from './stores/store.js';
export type {
  Decision,
  Policy,
  Scope,
  TakeAllItem,
  TakeAllOptions,
  TakeAllResult,
  TakeOptions,
} from './types.js';
