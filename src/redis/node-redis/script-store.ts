/**
 * The store of a connection made by `connectRedis` with its script connection: the
 * limiter's scripts (`EVALSHA`, `EVAL`) go over the script connection, written at once;
 * anything else (`INFO`) over the node-redis client.
 */
import { UnavailableError } from '../../errors.js';
import { type ClientErrors, CommandStore } from '../command-store.js';
import { errorFromReply } from '../reply-errors.js';
import type { RespConnection } from '../resp/connection.js';
import { ReplyError } from '../resp/parser.js';
import { NODE_REDIS_ERRORS, type NodeRedisClientLike, toSluiceError } from './stores.js';

/**
 * How it fails: the script connection's {@link ReplyError} for an error reply and its own
 * `UnavailableError`s, or node-redis's failures (for `INFO`).
 */
const SCRIPT_CONNECTION_ERRORS: ClientErrors = {
  toSluiceError: (error) =>
    error instanceof ReplyError
      ? errorFromReply(error.message, error)
      : error instanceof UnavailableError
        ? error
        : toSluiceError(error),
  isNoScript: (error) =>
    (error instanceof ReplyError && error.message.startsWith('NOSCRIPT')) ||
    NODE_REDIS_ERRORS.isNoScript(error),
};

export class ScriptConnectionStore extends CommandStore {
  constructor(client: NodeRedisClientLike, scripts: RespConnection) {
    super(
      (command) =>
        // A WAIT behind a script goes on the script's connection: it waits for its writes.
        command[0] === 'EVALSHA' || command[0] === 'EVAL' || command[0] === 'WAIT'
          ? scripts.call(command)
          : client.sendCommand(command),
      SCRIPT_CONNECTION_ERRORS,
      'sendCommand returned no promise',
    );
  }
}
