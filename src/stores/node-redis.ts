/**
 * The node-redis (`redis` v6) store.
 *
 * Depends on the smallest surface of the client: `sendCommand(args)`. Create the client
 * with `disableOfflineQueue: true` so that commands fail at once while Redis is unreachable
 * (S12); {@link createRedisClient} does that for you, and gives its client a second
 * connection for the limiter's scripts (`resp/connection.ts`), which writes each at once.
 */
import { EventEmitter } from 'node:events';
import { Socket } from 'node:net';
import type { ConnectionOptions } from 'node:tls';
import { createClient, ErrorReply, type RedisClientOptions } from 'redis';
import {
  InvalidInputError,
  RedisConfigError,
  type RedisConfigReason,
  UnavailableError,
} from '../errors.js';
import type { Metrics, RedisEvent } from '../metrics/types.js';
import { observe } from '../observer.js';
import { checkClientOptions } from './client-options.js';
import { type ClientErrors, CommandStore } from './command-store.js';
import { errorFromReply } from './redis-errors.js';
import { RespConnection, type RespConnectionOptions } from './resp/connection.js';
import { attachFastPath } from './resp/fast-path.js';
import { ReplyError } from './resp/parser.js';
import { type StallWatchdog, type WatchedClient, watchForStalls } from './stall-watchdog.js';

/** The part of a node-redis v6 client (`createClient()`) that sluice uses. */
export interface NodeRedisClientLike {
  sendCommand(args: string[]): Promise<unknown>;
}

/** Maps a node-redis failure to a sluice error (see `redis-errors.ts`). */
export function toSluiceError(error: unknown): Error {
  if (error instanceof ErrorReply) return errorFromReply(error.message, error);
  const message = error instanceof Error ? error.message : String(error);
  return new UnavailableError(`Redis unavailable: ${message}`, { cause: error });
}

/**
 * A connection's setup refused by a Redis that was reached — a configuration mistake that
 * no retry fixes — as a {@link RedisConfigError}; undefined for anything else.
 */
export function setupError(error: unknown): RedisConfigError | undefined {
  const message = error instanceof Error ? error.message : String(error);
  const code = (error as { code?: unknown } | null)?.code;
  // A password given to a server that has none is refused like a wrong one.
  const reason: RedisConfigReason | undefined =
    /^WRONGPASS\b|called without any password configured/.test(message)
      ? 'wrong-password'
      : /^NOAUTH\b/.test(message)
        ? 'auth-required'
        : /^NOPERM\b/.test(message)
          ? 'no-permission'
          : /DB index is out of range|invalid DB index/i.test(message)
            ? 'database'
            : (typeof code === 'string' && /^ERR_SSL|^ERR_TLS|CERT|UNABLE_TO_VERIFY/.test(code)) ||
                /SSL routines|wrong version number|self[- ]signed certificate|certificate/i.test(
                  message,
                )
              ? 'tls'
              : undefined;
  return reason === undefined ? undefined : new RedisConfigError(reason, message, { cause: error });
}

/** Whether a plain-text `PING` to the URL's host and port gets a Redis answer (≤ 500 ms). */
function speaksPlainRedis(url: string): Promise<boolean> {
  const { hostname, port } = new URL(url);
  return new Promise((resolve) => {
    const socket = new Socket();
    const finish = (answer: boolean) => {
      socket.destroy();
      resolve(answer);
    };
    socket.setTimeout(500, () => finish(false));
    socket.once('error', () => finish(false));
    socket.once('data', (data) => finish(/^[+-]/.test(data.toString('latin1'))));
    socket.connect(Number(port || 6379), hostname.replace(/^\[|\]$/g, ''), () =>
      socket.write('PING\r\n'),
    );
  });
}

/** How node-redis clients fail: `ErrorReply` for an error reply. */
export const NODE_REDIS_ERRORS: ClientErrors = {
  toSluiceError,
  isNoScript: (error) => error instanceof ErrorReply && error.message.startsWith('NOSCRIPT'),
};

/** The store of a node-redis v6 client (`createClient()`), or anything with `sendCommand(args)`. */
export class NodeRedisStore extends CommandStore {
  /** @throws {InvalidInputError} when `client` has no `sendCommand` function. */
  constructor(client: NodeRedisClientLike) {
    if (typeof (client as Partial<NodeRedisClientLike> | null)?.sendCommand !== 'function') {
      throw new InvalidInputError('client', 'a node-redis v6 client (createClient())', client);
    }
    super(
      (command) => client.sendCommand(command),
      NODE_REDIS_ERRORS,
      'sendCommand returned no promise: use a node-redis v6 client, not .legacy()',
    );
  }
}

/**
 * How a client with a script connection fails: the connection's {@link ReplyError} for an
 * error reply and its own `UnavailableError`s, or node-redis's failures (for `INFO`).
 */
export const FAST_PATH_ERRORS: ClientErrors = {
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

/**
 * The store of a client made by {@link createRedisClient} with its script connection: the
 * limiter's scripts (`EVALSHA`, `EVAL`) go over `scripts`, written at once; anything else
 * (`INFO`) over the node-redis client.
 */
export class NodeRedisFastStore extends CommandStore {
  constructor(client: NodeRedisClientLike, scripts: RespConnection) {
    super(
      (command) =>
        command[0] === 'EVALSHA' || command[0] === 'EVAL'
          ? scripts.call(command)
          : client.sendCommand(command),
      FAST_PATH_ERRORS,
      'sendCommand returned no promise: use a node-redis v6 client, not .legacy()',
    );
  }
}

/** TLS options of {@link createRedisClient}, passed to Node's `tls.connect`. */
export interface RedisTlsOptions {
  /** Certificate authorities to trust (PEM), e.g. a private CA; default: Node's list. */
  readonly ca?: string | Buffer | readonly (string | Buffer)[];
  /** The client's certificate chain (PEM), for mutual TLS. */
  readonly cert?: string | Buffer | readonly (string | Buffer)[];
  /** The client's private key (PEM), for mutual TLS. */
  readonly key?: string | Buffer | readonly (string | Buffer)[];
  /** The name the server's certificate must carry (SNI); default: the URL's host. */
  readonly servername?: string;
  /** Refuse a certificate that does not verify. Default `true`; `false` only for tests. */
  readonly rejectUnauthorized?: boolean;
}

/** Options of {@link createRedisClient}. */
export interface CreateRedisClientOptions {
  /**
   * `redis://host:port` or `rediss://host:port` (TLS), optionally with
   * `user:password@` and `/<database>` (default `redis://127.0.0.1:6379`).
   */
  readonly url?: string;
  /** The ACL user (Redis ≥ 6); default: the URL's, else `default`. */
  readonly username?: string;
  /** The password (of `username`, or `requirepass`); default: the URL's. */
  readonly password?: string;
  /** The database index; default: the URL's, else 0. */
  readonly database?: number;
  /**
   * TLS: `true`, or options such as a private `ca` and a client `cert`/`key` (mutual TLS).
   * A `rediss://` URL turns TLS on by itself.
   */
  readonly tls?: boolean | RedisTlsOptions;
  /** Connect timeout in milliseconds. Default 1000. */
  readonly connectTimeoutMs?: number;
  /**
   * After the first connection, reconnect when it is lost, with exponential backoff and
   * jitter (50 ms doubling to 2 s). Default `true`. The first connection is never retried:
   * `createRedisClient` rejects at once when Redis is unreachable at start. Commands never
   * queue while disconnected either way.
   */
  readonly reconnect?: boolean;
  /**
   * Called with every connection error. Default: a process warning
   * (`process.emitWarning`), at most one per 10 s with the count since the last one.
   */
  readonly onError?: (error: Error) => void;
  /** Called before each reconnect attempt with the attempt number and its delay in ms. */
  readonly onReconnect?: (attempt: number, delayMs: number) => void;
  /**
   * node-redis's own per-command timeout, in ms. Default: `0` (none) while the stall
   * watchdog is on (`stallTimeoutMs`, the default), 5000 with `stallTimeoutMs: 0`. It is not
   * the limiter's deadline: `timeoutMs` of `RateLimiter` bounds every caller's wait on its
   * own. Measured with node-redis 6.3: a command already written to a black-holed connection
   * stays pending past this timeout, so it never freed a `maxInFlight` slot — the watchdog
   * does, by recycling the connection — while arming it cost a timer (`AbortSignal.timeout`)
   * per command: about 15 µs of CPU per decision at concurrency 1 (medians of 5 runs: 63–64
   * µs with it, 47–49 without). It applies to the node-redis connection only (not to the limiter's
   * script connection, see `fastPath`).
   */
  readonly commandTimeoutMs?: number;
  /**
   * Recycle a connection that has stopped answering, in ms (default 2000, at least 100; `0`
   * turns the watchdog off). A `PING` is kept outstanding, one every `stallTimeoutMs / 2`; when one stays
   * unanswered this long, or a new connection's handshake does, the connection is destroyed —
   * every pending command is rejected, so every `maxInFlight` slot is freed — and, with
   * `reconnect`, opened again. The script connection (`fastPath`) is probed alongside, and
   * the two are recycled together. Without it, a black-holed connection holds its commands until
   * the kernel gives up on it, minutes later. Each recycle is reported to `onError` (an
   * {@link UnavailableError} whose message starts "Redis connection stalled") and `onStall`.
   * Keep it well above the slowest reply you expect (a `DEBUG SLEEP`, a long script).
   */
  readonly stallTimeoutMs?: number;
  /** Called once per recycled (stalled) connection, with the error also given to `onError`. */
  readonly onStall?: (error: UnavailableError) => void;
  /**
   * Send the limiter's scripts (`EVALSHA`/`EVAL`) over a second connection of sluice's own
   * that writes each command at once (default `true`); `false`: everything over the one
   * node-redis connection, as before. See {@link createRedisClient}.
   */
  readonly fastPath?: boolean;
  /**
   * A metrics sink (see `Metrics`) that counts this client's connection events:
   * `connection_error`, `reconnect`, `stall_recycle`.
   */
  readonly metrics?: Pick<Metrics, 'redisEvent'>;
}

/**
 * Creates and connects a node-redis client set up for rate limiting: no offline queue
 * (S12), a connect timeout, optional backoff reconnection that reports each attempt, and
 * connection errors that are never silent. Close it with `client.close()` (or
 * `client.destroy()`) at shutdown.
 *
 * Two connections per client: the node-redis client's, for every command of the
 * application and sluice's `INFO`; and, unless `fastPath: false`, one of sluice's own that
 * carries only the limiter's scripts (`EVALSHA`/`EVAL`) and writes each the moment it is
 * called. Why: node-redis writes the commands of an event-loop turn together, in a
 * `setImmediate`, so Redis answers them all at once and Node and Redis take turns instead of
 * overlapping. Measured (closed loop, 16 concurrent callers, fixed window, random keys, one
 * private Redis, 2 cores; medians of 5 runs): 61k decisions/s through node-redis, 114k over
 * the script connection (`maxBatchSize: 4`: 58k and 135k). The gain needs several script
 * calls in flight, as the coalescer sends them: one batch per event-loop turn gave the same
 * (66k) over either. The second connection is set up like the first — the
 * same host, TLS options, user, password and database, `CLIENT SETNAME sluice` — counts
 * toward the server's `maxclients`, and follows the same rules: calls fail at once with
 * `UnavailableError` while it is down, a call that may have run is never sent again, its
 * errors and reconnects are reported as the client's (`onError`, `onReconnect`, `metrics`),
 * the stall watchdog probes and recycles both connections together,
 * `close()`/`destroy()`/`quit()` close both, and `client.isReady` is true while both are
 * ready. With `reconnect: false`, losing either connection closes the client (both). A
 * client made otherwise (`createClient()`, or a `duplicate()`) is driven through node-redis
 * alone.
 *
 * @throws {InvalidInputError} for a bad or unknown option (`.field` is `options.<name>`),
 *   before anything connects.
 * @throws {RedisConfigError} when Redis was reached but refused the setup: a wrong password
 *   or unknown user (`wrong-password`), no password given (`auth-required`), an ACL user
 *   without permission (`no-permission`), a database index the server lacks (`database`),
 *   or a failed TLS handshake (`tls`, e.g. `rediss://` to a plain server).
 * @throws {UnavailableError} when the first connection fails otherwise (unreachable,
 *   refused, timed out; nothing is retried then).
 */
export async function createRedisClient(given?: CreateRedisClientOptions) {
  const options = checkClientOptions(given);
  const reconnect = options.reconnect ?? true;
  let connected = false;
  const reconnectStrategy = (retries: number, cause: Error): number | Error => {
    if (!connected || !reconnect) return cause ?? new Error('connection lost');
    const base = Math.min(2000, 50 * 2 ** Math.min(retries, 6));
    const delay = Math.round(base / 2 + Math.random() * (base / 2));
    options.onReconnect?.(retries + 1, delay);
    count('reconnect');
    return delay;
  };
  const connectTimeoutMs = options.connectTimeoutMs ?? 1000;
  const socket: RedisClientOptions['socket'] = {
    connectTimeout: connectTimeoutMs,
    reconnectStrategy,
  };
  const metrics = options.metrics;
  function count(event: RedisEvent): void {
    if (metrics !== undefined) observe('metrics.redisEvent', () => metrics.redisEvent(event));
  }
  const stallTimeoutMs = options.stallTimeoutMs ?? 2000;
  // The watchdog frees written commands; node-redis's timeout never did, and costs a timer.
  const commandTimeoutMs = options.commandTimeoutMs ?? (stallTimeoutMs > 0 ? 0 : 5000);
  const urlGiven = options.url ?? 'redis://127.0.0.1:6379';
  const tls = options.tls ?? urlGiven.startsWith('rediss://');
  if (tls === false && urlGiven.startsWith('rediss://')) {
    throw new InvalidInputError('options.tls', 'not false with a rediss:// URL', false);
  }
  // node-redis takes TLS from the scheme: the `tls` option implies rediss://.
  const url = tls === false ? urlGiven : urlGiven.replace(/^redis:\/\//, 'rediss://');
  const client = createClient({
    url,
    ...(options.username === undefined ? {} : { username: options.username }),
    ...(options.password === undefined ? {} : { password: options.password }),
    ...(options.database === undefined ? {} : { database: options.database }),
    disableOfflineQueue: true,
    socket: (tls === false
      ? socket
      : { ...socket, tls: true, ...(tls === true ? {} : tls) }) as RedisClientOptions['socket'],
    commandOptions: { timeout: commandTimeoutMs === 0 ? undefined : commandTimeoutMs },
  });
  // The default warning starts after the first connection: before it, the rejection of
  // `createRedisClient` carries the error.
  const warn = throttledWarning();
  const onError = options.onError ?? ((error: Error) => connected && warn(error));
  const report = (error: Error, event: RedisEvent = 'connection_error') => {
    count(event);
    try {
      onError(error);
    } catch (thrown) {
      // Thrown inside node-redis's event emission, it would surface as an uncaught exception.
      process.emitWarning(`onError listener threw: ${String(thrown)}`, {
        code: 'SLUICE_LISTENER_ERROR',
      });
    }
  };
  /** The script connection, once the node-redis client is connected (unless `fastPath: false`). */
  let scripts: RespConnection | undefined;
  client.on('error', (error: Error) => report(error));
  client.on('ready', () => {
    connected = true;
    // The server answers again: the script connection need not wait out its backoff.
    scripts?.retryNow();
  });
  // The reconnect strategy gave up on the node-redis connection (reconnect off): the client
  // is closed for good, and so is its script connection.
  client.on('terminated', () => scripts?.destroy());
  // The connect timeout covers the TCP (and TLS) connection only: a server that accepts it
  // and never answers the handshake (a stopped process, a black hole behind a proxy) would
  // leave this promise pending for ever. Bound the whole start (both connections).
  const startTimeoutMs = connectTimeoutMs + (stallTimeoutMs || 2000);
  let startTimer: NodeJS.Timeout | undefined;
  let abandoned = false;
  const start = async () => {
    await client.connect();
    if (options.fastPath === false || abandoned) return;
    scripts = new RespConnection(
      await scriptConnectionOptions(client, tls, connectTimeoutMs, reconnectStrategy),
    );
    if (abandoned) return;
    await scripts.open();
  };
  try {
    await Promise.race([
      start(),
      new Promise((_, reject) => {
        startTimer = setTimeout(
          () =>
            reject(new Error(`no answer to the connection handshake within ${startTimeoutMs} ms`)),
          startTimeoutMs,
        );
        startTimer.unref();
      }),
    ]);
  } catch (error) {
    abandoned = true;
    scripts?.destroy();
    if (client.isOpen) client.destroy();
    const refused = setupError(error);
    if (refused !== undefined) throw refused;
    // A TLS handshake to a plain server never completes: it looks like a timeout. Ask.
    if (tls !== false && (await speaksPlainRedis(url))) {
      throw new RedisConfigError(
        'tls',
        `the server at ${new URL(url).host} speaks plain Redis, not TLS: use a redis:// URL (no tls option)`,
        { cause: error },
      );
    }
    throw toSluiceError(error);
  } finally {
    clearTimeout(startTimer);
  }
  const fast = scripts;
  // Bound now: the owner's close()/destroy() are wrapped below.
  const destroyClient = client.destroy.bind(client);
  if (fast !== undefined) {
    // Ready means both connections are: a take needs the script connection.
    const prototype: object = Object.getPrototypeOf(client);
    Object.defineProperty(client, 'isReady', {
      configurable: true,
      get: () => Reflect.get(prototype, 'isReady', client) === true && fast.isReady,
    });
    fast.on('error', (error: Error) => report(error));
    // The reconnect strategy gave up on the script connection (reconnect off): close the
    // client for good too, so that its owner sees it closed.
    fast.on('end', () => client.destroy());
    attachFastPath(client, fast);
  }
  const watch = () =>
    watchForStalls(fast === undefined ? client : watchedPair(client, fast, destroyClient), {
      stallTimeoutMs,
      reconnect,
      onStall: (error) => {
        report(error, 'stall_recycle');
        options.onStall?.(error);
      },
    });
  let watchdog: StallWatchdog | undefined = stallTimeoutMs > 0 ? watch() : undefined;
  /** The owner closed the client (the watchdog stopped, the script connection closed). */
  let closedByOwner = false;
  if (watchdog === undefined && fast === undefined) return client;
  // The owner closing the client ends the watchdog at once and closes the script connection
  // too. A graceful close (close, quit) never rejects for a client already closed — by the
  // watchdog mid-recycle, or for good with `reconnect: false` — and never waits longer than
  // `stallTimeoutMs` for replies that may never come (a black hole): then the connections
  // are destroyed.
  const owned = client as unknown as Record<string, unknown>;
  const graceful: Record<string, unknown> = { close: undefined, quit: 'OK', QUIT: 'OK' };
  for (const method of ['close', 'destroy', 'quit', 'QUIT', 'disconnect']) {
    const original = owned[method];
    if (typeof original !== 'function') continue;
    owned[method] = function (this: unknown, ...args: unknown[]) {
      closedByOwner = true;
      const midRecycle = watchdog?.stop() ?? false;
      if (!(method in graceful)) {
        fast?.destroy();
        return original.apply(this, args);
      }
      if (watchdog === undefined) {
        // No watchdog (`stallTimeoutMs: 0`): node-redis's own close, unbounded, as without
        // the script connection; that connection closes alongside, once its replies are in.
        const closing = fast?.close();
        return Promise.resolve(original.apply(this, args)).then((result) =>
          closing === undefined ? result : closing.then(() => result),
        );
      }
      if (midRecycle || !client.isOpen) {
        if (client.isOpen || client.isReady) client.destroy();
        fast?.destroy();
        return Promise.resolve(graceful[method]);
      }
      let cut = false;
      const bound = setTimeout(() => {
        cut = true;
        client.destroy();
      }, stallTimeoutMs);
      bound.unref();
      const closing = fast?.close() ?? Promise.resolve();
      return Promise.all([Promise.resolve(original.apply(this, args)), closing]).then(
        ([result]) => {
          clearTimeout(bound);
          return result;
        },
        (error: unknown) => {
          clearTimeout(bound);
          // QUIT's reply never came and the connection was cut: closed all the same.
          if (cut) return graceful[method];
          fast?.destroy();
          throw error;
        },
      );
    };
  }
  // Opened again by its owner after a close: the script connection and the watchdog too
  // (without this, node-redis answered again while every take stayed UnavailableError).
  const connect = owned.connect;
  if (typeof connect === 'function') {
    owned.connect = function (this: unknown, ...args: unknown[]) {
      return Promise.resolve(connect.apply(this, args)).then(async (result) => {
        if (!closedByOwner) return result;
        closedByOwner = false;
        if (fast !== undefined && !fast.isOpen) {
          try {
            await fast.open();
          } catch (error) {
            destroyClient();
            throw setupError(error) ?? toSluiceError(error);
          }
        }
        if (stallTimeoutMs > 0) watchdog = watch();
        return result;
      });
    };
  }
  if (fast !== undefined) {
    // node-redis's ref()/unref() apply to the script connection too.
    for (const method of ['ref', 'unref'] as const) {
      const original = owned[method];
      if (typeof original !== 'function') continue;
      owned[method] = function (this: unknown, ...args: unknown[]) {
        fast[method]();
        return original.apply(this, args);
      };
    }
  }
  return client;
}

/**
 * Where and how the script connection of `client` connects: the host, port, credentials and
 * database node-redis resolved from the URL and the options (so both connections are set up
 * alike), and the TLS options given.
 */
async function scriptConnectionOptions(
  client: { readonly options?: RedisClientOptions },
  tls: boolean | RedisTlsOptions,
  connectTimeoutMs: number,
  reconnectStrategy: RespConnectionOptions['reconnectStrategy'],
): Promise<RespConnectionOptions> {
  const resolved = client.options ?? {};
  const where = (resolved.socket ?? {}) as { host?: string; port?: number };
  const provider = resolved.credentialsProvider;
  const credentials =
    provider?.type === 'async-credentials-provider' ? await provider.credentials() : undefined;
  const host = where.host ?? '127.0.0.1';
  return {
    host,
    port: where.port ?? 6379,
    tls: tls === false ? undefined : { ...(tls === true ? {} : (tls as ConnectionOptions)) },
    username: credentials?.username,
    password: credentials?.password,
    database: resolved.database,
    name: 'sluice',
    connectTimeoutMs,
    reconnectStrategy,
  };
}

/** Settles when both have settled: rejects with the first failure, if any. */
async function both(a: Promise<unknown>, b: Promise<unknown>): Promise<void> {
  const [first, second] = await Promise.allSettled([a, b]);
  if (first.status === 'rejected') throw first.reason;
  if (second.status === 'rejected') throw second.reason;
}

/**
 * The node-redis client and its script connection as one connection for the stall
 * watchdog: probed together (a `PING` on each), recycled together (a stall of either path
 * recycles both, reported once), reopened together; `'connect'` when either connects,
 * `'ready'` when both are ready.
 */
function watchedPair(
  client: WatchedClient & { sendCommand(args: string[]): Promise<unknown> },
  scripts: RespConnection,
  destroyClient: () => void,
): WatchedClient {
  const events = new EventEmitter();
  events.on('error', () => {});
  const ready = () => {
    if (client.isReady && scripts.isReady) events.emit('ready');
  };
  for (const source of [client, scripts] as const) {
    source.on('connect', () => events.emit('connect'));
    source.on('ready', ready);
    source.on('error', () => events.emit('error'));
  }
  return {
    get isOpen() {
      return client.isOpen;
    },
    get isReady() {
      return client.isReady && scripts.isReady;
    },
    // Settled once both are: a probe stays outstanding while either PING is unanswered, and
    // an attempt while either connection is still opening (the watchdog's stop() destroys a
    // connection left opening once the attempt settles).
    sendCommand: (args) => both(client.sendCommand(args), scripts.call(args)),
    destroy: () => {
      destroyClient();
      scripts.destroy();
    },
    connect: () => {
      // The script connection first: an owner closing the client from inside the client's
      // connect() then finds both connections opening, and closes both.
      const opening = scripts.connect();
      return both(client.connect(), opening);
    },
    on: (event, listener) => events.on(event, listener),
    off: (event, listener) => events.off(event, listener),
  };
}

/** The default error listener: a process warning at most every 10 s, with a count. */
function throttledWarning(): (error: Error) => void {
  let last = 0;
  let suppressed = 0;
  return (error) => {
    const now = Date.now();
    if (now - last < 10_000) {
      suppressed++;
      return;
    }
    const more = suppressed > 0 ? ` (+${suppressed} more since the last warning)` : '';
    process.emitWarning(`Redis connection error: ${error.message}${more}`, {
      code: 'SLUICE_REDIS_ERROR',
    });
    last = now;
    suppressed = 0;
  };
}
