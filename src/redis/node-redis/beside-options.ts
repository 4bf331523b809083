/**
 * How the script connection beside a node-redis v6 `createClient()` of the application's
 * (`../beside-client.ts`) reads the client: its options, whether it is open and ready, and
 * its `ready` and `end` events.
 *
 * Copied: the host and port (node-redis's defaults `localhost:6379`) or Unix socket path,
 * TLS (`socket.tls: true`, with the socket's `tls.connect` options), the database, the
 * connect timeout, and credentials — none, or the client's async credentials provider (which
 * node-redis also makes of a user and password given as options or in the URL), asked on
 * every handshake. Anything else — a streaming credentials provider, options that cannot be
 * read (a hand-made object with `sendCommand`) — makes no connection beside the client; nor
 * does a `socket.socketTimeout`: node-redis closes a socket idle that long for good, and with
 * the scripts beside it the client's own socket may idle.
 */
import type { ConnectionOptions } from 'node:tls';
import { readProperty as read } from '../../call-safely.js';
import type { ClientReader } from '../beside-client.js';
import type { RespConnectionOptions } from '../resp/connection.js';

/** node-redis's socket options that are not `tls.connect`'s. */
const NODE_REDIS_SOCKET_KEYS = new Set([
  'tls',
  'host',
  'port',
  'path',
  'connectTimeout',
  'reconnectStrategy',
  'socketTimeout',
  'keepAlive',
  'keepAliveInitialDelay',
  'noDelay',
]);

/** node-redis's default `socket.connectTimeout`, in ms. */
const NODE_REDIS_CONNECT_TIMEOUT_MS = 5000;

type Credentials = RespConnectionOptions['credentials'];
type Options = Omit<RespConnectionOptions, 'reconnectStrategy'>;

/**
 * The credentials of node-redis client options: none, or a function asking the client's
 * async credentials provider. `null`: a kind this connection cannot copy.
 */
function credentialsOf(options: unknown): Credentials | null {
  const provider = read(options, 'credentialsProvider');
  if (provider === undefined || provider === null) return undefined;
  const credentials = read(provider, 'credentials');
  if (
    read(provider, 'type') !== 'async-credentials-provider' ||
    typeof credentials !== 'function'
  ) {
    return null;
  }
  return async () => {
    const given = (await (credentials as () => Promise<unknown>).call(provider)) as {
      username?: unknown;
      password?: unknown;
    };
    const username = typeof given?.username === 'string' ? given.username : undefined;
    const password = typeof given?.password === 'string' ? given.password : '';
    return username === undefined ? { password } : { username, password };
  };
}

/**
 * The options of a connection to where a node-redis client with `options` connects, or
 * undefined when they cannot be copied exactly.
 *
 * @internal Exported for tests.
 */
export function nodeRedisBesideOptions(options: unknown): Options | undefined {
  if (typeof options !== 'object' || options === null) return undefined;
  const credentials = credentialsOf(options);
  if (credentials === null) return undefined;
  const database = read(options, 'database') ?? 0;
  if (typeof database !== 'number' || !Number.isInteger(database) || database < 0) {
    return undefined;
  }
  const socket = read(options, 'socket') ?? {};
  if (typeof socket !== 'object' || socket === null) return undefined;
  const given = socket as Record<string, unknown>;
  if (given.socketTimeout !== undefined) return undefined;
  const connectTimeout = given.connectTimeout ?? NODE_REDIS_CONNECT_TIMEOUT_MS;
  if (typeof connectTimeout !== 'number' || !(connectTimeout > 0)) return undefined;
  const common = { credentials, database, name: 'sluice', connectTimeoutMs: connectTimeout };
  if (typeof given.path === 'string') {
    return given.tls === true ? undefined : { ...common, path: given.path };
  }
  const host = given.host ?? 'localhost';
  const port = given.port ?? 6379;
  if (typeof host !== 'string' || typeof port !== 'number') return undefined;
  let tls: ConnectionOptions | undefined;
  if (given.tls === true) {
    tls = {};
    for (const [key, value] of Object.entries(given)) {
      if (!NODE_REDIS_SOCKET_KEYS.has(key)) (tls as Record<string, unknown>)[key] = value;
    }
  } else if (given.tls !== undefined && given.tls !== false) {
    return undefined;
  }
  return { ...common, host, port, tls };
}

/** A node-redis v6 `createClient()`. */
export const NODE_REDIS_READER: ClientReader = {
  kind: 'node-redis',
  options: (client) => nodeRedisBesideOptions(read(client, 'options')),
  isOpen: (client) => read(client, 'isOpen') === true,
  isReady: (client) => read(client, 'isReady') === true,
  // node-redis's clients, and their views (`withCommandOptions()`, `withTypeMapping()`), are
  // objects made from one instance, its `_self`.
  identity: (client) => {
    const self = read(client, '_self');
    return typeof self === 'object' && self !== null ? self : client;
  },
  readyEvent: 'ready',
  endEvent: 'end',
  // node-redis 6: its reconnect strategy gave up (no 'end').
  gaveUpEvent: 'terminated',
};
