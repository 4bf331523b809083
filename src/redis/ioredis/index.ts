/**
 * `sluice/ioredis`: what an ioredis client needs to be given to a limiter. An ioredis
 * `Redis` or `Cluster` goes to `new RateLimiter({ client })` from the root entry as it is,
 * provided it was created with the options below; this entry loads no ioredis code.
 *
 * ```ts
 * import Redis from 'ioredis';
 * import { IOREDIS_OPTIONS } from 'sluice/ioredis';
 * const client = new Redis({ host: '127.0.0.1', port: 6379, ...IOREDIS_OPTIONS });
 * ```
 *
 * @packageDocumentation
 */
export {
  IOREDIS_CLUSTER_OPTIONS,
  IOREDIS_OPTIONS,
  type IoRedisClusterLike,
  type IoRedisLike,
  type IoRedisOptionsLike,
} from './stores.js';
