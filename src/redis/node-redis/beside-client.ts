/**
 * A script connection of sluice's own beside a node-redis client that the application made
 * (`createClient()`), so that the limiter's scripts are written the moment they are made.
 *
 * Why: node-redis writes the commands of one event-loop turn together, in a `setImmediate`.
 * On the application's own client the process then hands out a turn's answers and gathers
 * its next batch while Redis waits, and Redis runs that batch while the process waits: they
 * take turns instead of overlapping (bench/PROFILE.md, "lock-step"). A connection of
 * `connectRedis` has carried its scripts on a connection of sluice's own for that reason;
 * this gives an application's own client the same, set up from the client's own options.
 *
 * Rules:
 * - Made only when the client's options can be copied exactly: its host and port or Unix
 *   socket, TLS and its `tls.connect` options, its database, and credentials that are a
 *   user and password or an async credentials provider (asked for on every handshake).
 *   Anything else — a streaming credentials provider, a client whose options cannot be read
 *   (a hand-made object with `sendCommand`) — keeps the scripts on the client.
 * - One per client, however many limiters share it; it opens when the client is ready and
 *   ends when the client ends (`close`, `destroy`, or its reconnect strategy giving up).
 * - Scripts go over it only while it is ready **and** the client is open: a closed client
 *   fails the call as it would without this connection (a limiter on a closed connection
 *   throws, S19); while this connection is down or reconnecting the scripts go over the
 *   client, written once per turn as before. A script and the `WAIT` behind it are sent in
 *   the same turn, so they always share a connection.
 * - It never keeps the process alive (its socket is unref'd): the client's does.
 * - It does not follow a `SELECT` sent on the client after it connected: give the database
 *   in the client's options (`database`, or the URL's path), or turn this connection off
 *   (`scriptConnection: false`).
 * - Its failures while the client is ready (an outage is the client's to report) are
 *   process warnings (`SLUICE_SCRIPT_CONNECTION`), at most one per 10 s.
 *
 * It counts toward the server's `maxclients`, like the second connection of `connectRedis`.
 */
import type { ConnectionOptions } from 'node:tls';
import { RespConnection, type RespConnectionOptions } from '../resp/connection.js';

/** What this module reads of a node-redis v6 client. */
interface ClientShape {
  readonly options?: unknown;
  readonly isOpen?: boolean;
  readonly isReady?: boolean;
  on(event: string, listener: (...args: unknown[]) => void): unknown;
}

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

function read(object: unknown, key: string): unknown {
  if (typeof object !== 'object' || object === null) return undefined;
  try {
    return (object as Record<string, unknown>)[key];
  } catch {
    return undefined;
  }
}

type Credentials = RespConnectionOptions['credentials'];

/**
 * The credentials of node-redis client options: none, or a function asking the client's
 * async credentials provider (which node-redis also makes of a user and password given as
 * options or in the URL). `null`: a kind this connection cannot copy.
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
 * undefined when they cannot be copied exactly (see the module's rules).
 *
 * @internal Exported for tests.
 */
export function scriptConnectionOptionsOf(
  options: unknown,
  reconnectStrategy: RespConnectionOptions['reconnectStrategy'],
): RespConnectionOptions | undefined {
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
  const connectTimeout = given.connectTimeout ?? NODE_REDIS_CONNECT_TIMEOUT_MS;
  if (typeof connectTimeout !== 'number' || !(connectTimeout > 0)) return undefined;
  const common = {
    credentials,
    database,
    name: 'sluice',
    connectTimeoutMs: connectTimeout,
    reconnectStrategy,
  };
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

/** One per client (`null`: its options cannot be copied). */
const byClient = new WeakMap<object, ScriptConnectionBeside | null>();

/** The delay before reconnect attempt `retries + 1`: 50 ms doubling to 2 s, jittered. */
function backoffMs(retries: number): number {
  const base = Math.min(2000, 50 * 2 ** Math.min(retries, 6));
  return Math.round(base / 2 + Math.random() * (base / 2));
}

const WARN_EVERY_MS = 10_000;

export class ScriptConnectionBeside {
  readonly #client: ClientShape;
  readonly #connection: RespConnection;
  #lastWarning = Number.NEGATIVE_INFINITY;
  #unreported = 0;

  /**
   * The script connection beside `client`, made (and opened once the client is ready) on
   * the first call for that client; undefined when the client's options cannot be copied.
   */
  static of(client: object): ScriptConnectionBeside | undefined {
    const known = byClient.get(client);
    if (known !== undefined) return known ?? undefined;
    let made: ScriptConnectionBeside | null = null;
    if (typeof read(client, 'on') === 'function') {
      const shape = client as ClientShape;
      const options = scriptConnectionOptionsOf(read(client, 'options'), (retries) =>
        shape.isOpen === true ? backoffMs(retries) : new Error('the client is closed'),
      );
      if (options !== undefined) made = new ScriptConnectionBeside(shape, options);
    }
    byClient.set(client, made);
    return made ?? undefined;
  }

  private constructor(client: ClientShape, options: RespConnectionOptions) {
    this.#client = client;
    this.#connection = new RespConnection(options);
    this.#connection.unref();
    this.#connection.on('error', (error: Error) => this.#warn(error));
    client.on('ready', () => this.#start());
    client.on('end', () => this.#end());
    if (client.isReady === true) this.#start();
  }

  /** The connection, when a script can go over it now; undefined: send it on the client. */
  get ready(): RespConnection | undefined {
    return this.#connection.isReady && this.#client.isOpen === true ? this.#connection : undefined;
  }

  /** @internal The connection itself, for tests. */
  get connection(): RespConnection {
    return this.#connection;
  }

  #start(): void {
    if (this.#connection.isOpen) {
      // The server answers the client again: no need to wait out this connection's backoff.
      this.#connection.retryNow();
      return;
    }
    // Each failed attempt is an 'error' event; the loop ends when the client does.
    this.#connection.connect().catch(() => {});
  }

  /**
   * The client ended (closed by its owner, or given up on): so does this connection, at once
   * (a call still on it fails with `UnavailableError`), as `connectRedis`'s script connection
   * does; a client connected again opens it again.
   */
  #end(): void {
    this.#connection.destroy();
  }

  #warn(error: Error): void {
    if (this.#client.isReady !== true) return; // an outage: the client reports it
    const now = Date.now();
    if (now - this.#lastWarning < WARN_EVERY_MS) {
      this.#unreported++;
      return;
    }
    const more = this.#unreported > 0 ? ` (+${this.#unreported} more since the last warning)` : '';
    this.#lastWarning = now;
    this.#unreported = 0;
    process.emitWarning(
      `sluice's script connection beside the node-redis client failed: ${error.message}${more}; the limiter's scripts go over the client meanwhile`,
      { code: 'SLUICE_SCRIPT_CONNECTION' },
    );
  }
}
