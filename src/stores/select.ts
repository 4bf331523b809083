/**
 * Which store a `client` needs, recognised once, when the limiter is made: a programming
 * mismatch (a client of a kind sluice does not drive) is an `InvalidInputError` at
 * construction, never an outage at the first take.
 *
 * | client | recognised by | store |
 * | --- | --- | --- |
 * | node-redis `createClient()` (or anything with `sendCommand(args)`) | `sendCommand` | `NodeRedisStore` |
 * | node-redis `createCluster()` | `sendCommand` + `getSlotMaster` | `NodeRedisClusterStore` |
 * | node-redis `createSentinel()` | `sendCommand` + `acquire` + `use` | `NodeRedisSentinelStore` |
 * | ioredis `new Redis()` | `call` + `evalsha` + `isCluster: false` | `IoRedisStore` |
 * | ioredis `new Redis.Cluster()` | `call` + `evalsha` + `isCluster: true` | `IoRedisClusterStore` |
 *
 * An ioredis client must be created with `enableOfflineQueue: false` (for a Cluster, at the
 * top level of its options) and `autoResendUnfulfilledCommands: false` (for a Cluster, in
 * `redisOptions`), else it is an `InvalidInputError` too: while Redis is unreachable its
 * commands would queue instead of failing at once (S12), and after a reconnect it would send
 * again a script that may have run.
 */
import { InvalidInputError } from '../errors.js';
import {
  checkIoRedisClient,
  type IoRedisClusterLike,
  IoRedisClusterStore,
  type IoRedisLike,
  IoRedisStore,
} from './ioredis.js';
import { type NodeRedisClientLike, NodeRedisStore } from './node-redis.js';
import {
  type NodeRedisClusterLike,
  NodeRedisClusterStore,
  type NodeRedisSentinelLike,
  NodeRedisSentinelStore,
} from './node-redis-cluster.js';
import type { ScriptStore } from './store.js';

/** What `RateLimiter`'s `client` option accepts, in words (for errors and docs). */
export const ACCEPTED_CLIENTS =
  'a node-redis v6 client (createClient), cluster (createCluster) or sentinel (createSentinel), or an ioredis Redis or Cluster';

/** The kinds of client sluice drives. */
export type ClientKind =
  | 'node-redis'
  | 'node-redis-cluster'
  | 'node-redis-sentinel'
  | 'ioredis'
  | 'ioredis-cluster';

const isFunction = (client: Record<string, unknown>, name: string): boolean => {
  try {
    return typeof client[name] === 'function';
  } catch {
    return false;
  }
};

const isBoolean = (client: Record<string, unknown>, name: string): boolean => {
  try {
    return typeof client[name] === 'boolean';
  } catch {
    return false;
  }
};

/** The kind of `client`, or undefined when sluice does not drive it. */
export function clientKind(client: unknown): ClientKind | undefined {
  if ((typeof client !== 'object' && typeof client !== 'function') || client === null) {
    return undefined;
  }
  const c = client as Record<string, unknown>;
  // Before `sendCommand`: an ioredis client has one too (of another shape).
  if (isFunction(c, 'call') && isFunction(c, 'evalsha') && isBoolean(c, 'isCluster')) {
    return c.isCluster === true ? 'ioredis-cluster' : 'ioredis';
  }
  if (!isFunction(c, 'sendCommand')) return undefined;
  if (isFunction(c, 'acquire') && isFunction(c, 'use')) return 'node-redis-sentinel';
  if (isFunction(c, 'getSlotMaster')) return 'node-redis-cluster';
  return 'node-redis';
}

/**
 * The store for `client`.
 *
 * @throws {InvalidInputError} (`options.client`) for anything else, naming what is accepted,
 *   and for an ioredis client whose offline queue is on, saying what to set.
 */
export function storeFor(client: unknown): ScriptStore {
  switch (clientKind(client)) {
    case 'ioredis-cluster':
      checkIoRedisClient(client, 'options.client');
      return new IoRedisClusterStore(client as IoRedisClusterLike);
    case 'ioredis':
      checkIoRedisClient(client, 'options.client');
      return new IoRedisStore(client as IoRedisLike);
    case 'node-redis-cluster':
      return new NodeRedisClusterStore(client as NodeRedisClusterLike);
    case 'node-redis-sentinel':
      return new NodeRedisSentinelStore(client as NodeRedisSentinelLike);
    case 'node-redis':
      return new NodeRedisStore(client as NodeRedisClientLike);
    default:
      throw new InvalidInputError('options.client', ACCEPTED_CLIENTS, client);
  }
}
