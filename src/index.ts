/**
 * sluice — distributed rate limiting on Redis, atomic by construction.
 *
 * @example
 * ```ts
 * import { RateLimiter, createRedisClient, fixedWindow } from 'sluice';
 * const client = await createRedisClient({ url: 'redis://127.0.0.1:6379' });
 * const limiter = new RateLimiter({ client, namespace: 'rate', timeoutMs: 150, maxInFlight: 1000 });
 * const orders = fixedWindow({ limit: 10, windowMs: 1000 });
 * const d = await limiter.take({ tenant: 'acme', route: 'POST/orders' }, orders);
 * if (!d.allowed) console.log(`retry in ${d.retryAfterMs} ms`);
 * ```
 */
export {
  type FixedWindowOptions,
  type FixedWindowPolicy,
  fixedWindow,
} from './algorithms/fixed-window.js';
export { type GcraOptions, type GcraPolicy, gcra } from './algorithms/gcra.js';
export type { Policy, PolicyIdentityOptions } from './algorithms/policy.js';
export {
  type SlidingWindowCounterPolicy,
  slidingWindowCounter,
} from './algorithms/sliding-window-counter.js';
export {
  MAX_LOG_LIMIT,
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
  checkPolicies,
  describePolicy,
  fieldPath,
  loadPolicies,
  loadPolicyConfig,
  type PlanLimits,
  type PolicyConfig,
  PolicyFileError,
  planOf,
  policiesFrom,
  policyConfigFrom,
  type RouteLimits,
  type RouteSettings,
  routeLimits,
  type TenantSettings,
} from './config/index.js';
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
export * from './http/index.js';
export {
  type LimiterStats,
  MAX_SCOPE_PART_LENGTH,
  MAX_TAKE_ALL_ITEMS,
  RateLimiter,
  type RateLimiterOptions,
} from './limiter.js';
export type {
  DecisionEvent,
  DecisionOutcome,
  LimiterSource,
  Metrics,
  RedisEvent,
  RequestEvent,
} from './metrics/types.js';
export {
  type IoRedisClusterLike,
  IoRedisClusterStore,
  type IoRedisLike,
  IoRedisStore,
} from './stores/ioredis.js';
export { MemoryStore, type MemoryStoreOptions } from './stores/memory.js';
export {
  type CreateRedisClientOptions,
  createRedisClient,
  type NodeRedisClientLike,
  NodeRedisStore,
  type RedisTlsOptions,
} from './stores/node-redis.js';
export {
  type NodeRedisClusterLike,
  NodeRedisClusterStore,
  type NodeRedisSentinelLike,
  NodeRedisSentinelStore,
} from './stores/node-redis-cluster.js';
export { ACCEPTED_CLIENTS, type ClientKind, clientKind } from './stores/select.js';
export {
  MIN_REDIS_VERSION,
  type ServerFacts,
  type StartupWarning,
  type StartupWarningCode,
} from './stores/server-checks.js';
export type { ScriptStore } from './stores/store.js';
export type {
  Decision,
  Scope,
  TakeAllItem,
  TakeAllOptions,
  TakeAllResult,
  TakeOptions,
} from './types.js';
