/**
 * Which node-redis clients have a script connection of their own (`connection.ts`): those
 * made by `createRedisClient` (unless `fastPath: false`). `storeFor` looks the client up and
 * sends the limiter's scripts (EVALSHA/EVAL) over that connection, everything else over the
 * client. A client object not made there (`createClient()`, a `duplicate()`, a proxy such
 * as `withTypeMapping()`) has none and is driven through node-redis alone.
 */
import type { RespConnection } from './connection.js';

const fastPaths = new WeakMap<object, RespConnection>();

/** Records `connection` as the script connection of `client`. */
export function attachFastPath(client: object, connection: RespConnection): void {
  fastPaths.set(client, connection);
}

/** The script connection of `client`, or undefined. */
export function fastPathOf(client: unknown): RespConnection | undefined {
  if ((typeof client !== 'object' && typeof client !== 'function') || client === null) {
    return undefined;
  }
  return fastPaths.get(client);
}
