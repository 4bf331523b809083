/**
 * `sluice/node-redis`: connect to Redis with node-redis (the `redis` package, an optional
 * peer dependency that this entry loads) set up for rate limiting — `connectRedis()`.
 *
 * A node-redis client, cluster or sentinel you created yourself needs nothing from here:
 * give it to `new RateLimiter({ client })` from the root entry.
 *
 * @packageDocumentation
 */
export { connectRedis } from './connect.js';
export { type NodeRedisClient, RedisConnection } from './connection.js';
export type { ConnectRedisOptions, RedisCredentials, RedisTlsOptions } from './options.js';
export type {
  NodeRedisClientLike,
  NodeRedisClusterLike,
  NodeRedisSentinelLike,
} from './stores.js';
