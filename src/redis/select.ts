/**
 * Which store a `client` needs, recognised once, when the limiter is made: a programming
 * mismatch (a client of a kind sluice does not drive) is an `InvalidInputError` at
 * construction, never an outage at the first take. Recognition is by shape: nothing here
 * loads a Redis client library.
 *
 * | client | recognised by | store |
 * | --- | --- | --- |
 * | a connection of `connectRedis()` (`sluice/node-redis`) | its `store` | its own |
 * | node-redis `createClient()` (or anything with `sendCommand(args)`) | `sendCommand` | `NodeRedisStore`, with a script connection beside the client (`beside-client.ts`) |
 * | node-redis `createCluster()` | `sendCommand` + `getSlotMaster` | `NodeRedisClusterStore` |
 * | node-redis `createSentinel()` | `sendCommand` + `acquire` + `use` | `NodeRedisSentinelStore` |
 * | ioredis `new Redis()` | `call` + `evalsha` + `isCluster: false` | `IoRedisStore`, with a script connection beside the client |
 * | ioredis `new Redis.Cluster()` | `call` + `evalsha` + `isCluster: true` | `IoRedisClusterStore` |
 * | iovalkey `new Redis()` / `new Cluster()` | as ioredis (a fork of it) | as ioredis |
 * | Valkey GLIDE `GlideClient` | `customCommand` + `invokeScript` | `GlideStore` |
 * | Valkey GLIDE `GlideClusterClient` | the same + `invokeScriptWithRoute` | `GlideClusterStore` |
 *
 * An ioredis client must be created with `enableOfflineQueue: false` (for a Cluster, at the
 * top level of its options), `maxRetriesPerRequest: 0` and `autoResendUnfulfilledCommands:
 * false` (for a Cluster, in `redisOptions`), else it is an `InvalidInputError` too: while
 * Redis is unreachable its commands would queue instead of failing at once, and after a
 * reconnect it would send again a script that may have run. A GLIDE cluster client must be
 * created with `recoveryRequestsQueueSize: 0` (`GLIDE_CLUSTER_OPTIONS`), for the same reason.
 */
import { InvalidInputError } from '../errors.js';
import type { ScriptStore } from '../stores/store.js';
import { ScriptConnectionBeside } from './beside-client.js';
import { IOREDIS_READER } from './ioredis/beside-options.js';
import {
  checkIoRedisClient,
  type IoRedisClusterLike,
  IoRedisClusterStore,
  type IoRedisLike,
  IoRedisStore,
} from './ioredis/stores.js';
import { NODE_REDIS_READER } from './node-redis/beside-options.js';
import {
  type NodeRedisClientLike,
  type NodeRedisClusterLike,
  NodeRedisClusterStore,
  type NodeRedisSentinelLike,
  NodeRedisSentinelStore,
  NodeRedisStore,
} from './node-redis/stores.js';
import {
  checkGlideClient,
  type GlideClientLike,
  type GlideClusterClientLike,
  GlideClusterStore,
  GlideStore,
  isGlideClient,
  isGlideClusterClient,
} from './valkey-glide/stores.js';

/** What a `RateLimiter`'s `client` may be (see the table above). */
export type AcceptedClient =
  | { readonly store: ScriptStore }
  | NodeRedisClientLike
  | NodeRedisClusterLike
  | NodeRedisSentinelLike
  | IoRedisLike
  | IoRedisClusterLike
  | GlideClientLike
  | GlideClusterClientLike;

/** What `RateLimiter`'s `client` option accepts, in words (for errors and docs). */
export const ACCEPTED_CLIENTS =
  'a connection of connectRedis() (sluice/node-redis), a node-redis v6 client (createClient), cluster (createCluster) or sentinel (createSentinel), an ioredis (or iovalkey) Redis or Cluster, or a Valkey GLIDE GlideClient or GlideClusterClient';

/** The kinds of client sluice drives. */
export type ClientKind =
  | 'sluice'
  | 'node-redis'
  | 'node-redis-cluster'
  | 'node-redis-sentinel'
  | 'ioredis'
  | 'ioredis-cluster'
  | 'valkey-glide'
  | 'valkey-glide-cluster';

/** `object[key]`, or undefined when it cannot be read. */
function readOption(object: unknown, key: string): unknown {
  if ((typeof object !== 'object' && typeof object !== 'function') || object === null) {
    return undefined;
  }
  try {
    return (object as Record<string, unknown>)[key];
  } catch {
    return undefined;
  }
}

const isFunction = (object: unknown, name: string): boolean =>
  typeof readOption(object, name) === 'function';

/** The kind of `client`, or undefined when sluice does not drive it. */
export function clientKind(client: unknown): ClientKind | undefined {
  if ((typeof client !== 'object' && typeof client !== 'function') || client === null) {
    return undefined;
  }
  if (isFunction(readOption(client, 'store'), 'evalScript')) return 'sluice';
  if (isGlideClient(client)) {
    return isGlideClusterClient(client) ? 'valkey-glide-cluster' : 'valkey-glide';
  }
  // Before `sendCommand`: an ioredis client has one too (of another shape).
  if (
    isFunction(client, 'call') &&
    isFunction(client, 'evalsha') &&
    typeof readOption(client, 'isCluster') === 'boolean'
  ) {
    return readOption(client, 'isCluster') === true ? 'ioredis-cluster' : 'ioredis';
  }
  if (!isFunction(client, 'sendCommand')) return undefined;
  if (isFunction(client, 'acquire') && isFunction(client, 'use')) return 'node-redis-sentinel';
  if (isFunction(client, 'getSlotMaster')) return 'node-redis-cluster';
  return 'node-redis';
}

/**
 * The store for `client`. `scriptConnection` (the limiter's option of that name): for a
 * node-redis `createClient()` or an ioredis `Redis`, whether its scripts go over a
 * connection of sluice's own beside it (default true); undefined for any other client.
 *
 * @throws {InvalidInputError} (`options.client`) for anything else, naming what is accepted,
 *   and for a client whose offline queue is on (or, for ioredis, whose retries could send a
 *   call twice; for a GLIDE cluster client, whose recovery queue is on), saying what to set;
 *   (`options.scriptConnection`) when it is given with another kind of client.
 */
export function storeFor(client: unknown, scriptConnection?: boolean): ScriptStore {
  const kind = clientKind(client);
  if (scriptConnection !== undefined && kind !== 'node-redis' && kind !== 'ioredis') {
    throw new InvalidInputError(
      'options.scriptConnection',
      'absent unless options.client is a node-redis createClient() or an ioredis (iovalkey) Redis (a connectRedis() connection has fastPath)',
      scriptConnection,
    );
  }
  switch (kind) {
    case 'sluice':
      return readOption(client, 'store') as ScriptStore;
    case 'ioredis-cluster':
      checkIoRedisClient(client, 'options.client');
      return new IoRedisClusterStore(client as IoRedisClusterLike);
    case 'ioredis':
      checkIoRedisClient(client, 'options.client');
      return new IoRedisStore(
        client as IoRedisLike,
        scriptConnection === false
          ? undefined
          : ScriptConnectionBeside.of(client as object, IOREDIS_READER),
      );
    case 'valkey-glide-cluster':
      checkGlideClient(client, 'options.client');
      return new GlideClusterStore(client as GlideClusterClientLike);
    case 'valkey-glide':
      return new GlideStore(client as GlideClientLike);
    case 'node-redis-cluster':
      checkNoOfflineQueue(readOption(readOption(client, '_options'), 'defaults'), 'cluster');
      return new NodeRedisClusterStore(client as NodeRedisClusterLike);
    case 'node-redis-sentinel':
      return new NodeRedisSentinelStore(client as NodeRedisSentinelLike);
    case 'node-redis':
      checkNoOfflineQueue(readOption(client, 'options'), 'client');
      return new NodeRedisStore(
        client as NodeRedisClientLike,
        scriptConnection === false
          ? undefined
          : ScriptConnectionBeside.of(client as object, NODE_REDIS_READER),
      );
    default:
      throw new InvalidInputError('options.client', ACCEPTED_CLIENTS, client);
  }
}

/**
 * A node-redis client whose options are known must have its offline queue off: while Redis
 * is unreachable its commands would wait and run later — after their callers got a
 * `TimeoutError` — instead of failing at once. Options that cannot be read (a hand-made
 * client with only `sendCommand`) are not judged.
 */
function checkNoOfflineQueue(options: unknown, kind: 'client' | 'cluster'): void {
  if (options === undefined || options === null) return;
  if (readOption(options, 'disableOfflineQueue') === true) return;
  throw new InvalidInputError(
    'options.client',
    kind === 'cluster'
      ? 'a node-redis cluster created with defaults: { disableOfflineQueue: true }, so that commands fail at once while Redis is unreachable instead of queueing'
      : 'a node-redis client created with disableOfflineQueue: true (or a connection of connectRedis()), so that commands fail at once while Redis is unreachable instead of queueing',
    options,
  );
}
