/**
 * The store of a connection made by `connectRedis` with its script connection: the
 * limiter's scripts (`EVALSHA`, `EVAL`) go over the script connection, written at once;
 * anything else (`INFO`) over the node-redis client.
 */
import { isScriptCommand } from '../beside-client.js';
import { CommandStore } from '../command-store.js';
import type { RespConnection } from '../resp/connection.js';
import { type NodeRedisClientLike, SCRIPT_CONNECTION_ERRORS } from './stores.js';

export class ScriptConnectionStore extends CommandStore {
  constructor(client: NodeRedisClientLike, scripts: RespConnection) {
    super(
      (command) =>
        // A WAIT behind a script goes on the script's connection: it waits for its writes.
        isScriptCommand(command) ? scripts.call(command) : client.sendCommand(command),
      SCRIPT_CONNECTION_ERRORS,
      'sendCommand returned no promise',
    );
  }
}
