/**
 * The node-redis (`redis` v6) store.
 *
 * Depends on the smallest surface of the client: `sendCommand(args)`. Create the client
 * with `disableOfflineQueue: true` so that commands fail at once while Redis is unreachable
 * (S12); {@link createRedisClient} does that for you.
 */
import { Socket } from 'node:net';
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
import { watchForStalls } from './stall-watchdog.js';

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
  const reason: RedisConfigReason | undefined = /^WRONGPASS\b/.test(message)
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
   * node-redis's own per-command timeout, in ms (default 5000, node-redis's default). It is
   * not the limiter's deadline: `timeoutMs` of `RateLimiter` bounds every caller's wait on
   * its own. Measured with node-redis 6.3: a command already written to a black-holed
   * connection stayed pending past this timeout, so its `maxInFlight` slot is freed only
   * when Redis answers or the connection fails. `0` turns the timeout off: node-redis then
   * arms no timer per command (measured: about 30 µs less CPU per decision at concurrency 1).
   */
  readonly commandTimeoutMs?: number;
  /**
   * Recycle a connection that has stopped answering, in ms (default 2000, at least 100; `0`
   * turns the watchdog off). A `PING` is kept outstanding, one every `stallTimeoutMs / 2`; when one stays
   * unanswered this long, or a new connection's handshake does, the connection is destroyed —
   * every pending command is rejected, so every `maxInFlight` slot is freed — and, with
   * `reconnect`, opened again. Without it, a black-holed connection holds its commands until
   * the kernel gives up on it, minutes later. Each recycle is reported to `onError` (an
   * {@link UnavailableError} whose message starts "Redis connection stalled") and `onStall`.
   * Keep it well above the slowest reply you expect (a `DEBUG SLEEP`, a long script).
   */
  readonly stallTimeoutMs?: number;
  /** Called once per recycled (stalled) connection, with the error also given to `onError`. */
  readonly onStall?: (error: UnavailableError) => void;
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
  const socket: RedisClientOptions['socket'] = {
    connectTimeout: options.connectTimeoutMs ?? 1000,
    reconnectStrategy: (retries: number, cause: Error) => {
      if (!connected || !reconnect) return cause ?? new Error('connection lost');
      const base = Math.min(2000, 50 * 2 ** Math.min(retries, 6));
      const delay = Math.round(base / 2 + Math.random() * (base / 2));
      options.onReconnect?.(retries + 1, delay);
      count('reconnect');
      return delay;
    },
  };
  const metrics = options.metrics;
  function count(event: RedisEvent): void {
    if (metrics !== undefined) observe('metrics.redisEvent', () => metrics.redisEvent(event));
  }
  const commandTimeoutMs = options.commandTimeoutMs ?? 5000;
  const stallTimeoutMs = options.stallTimeoutMs ?? 2000;
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
  client.on('error', (error: Error) => report(error));
  client.on('ready', () => {
    connected = true;
  });
  // The connect timeout covers the TCP (and TLS) connection only: a server that accepts it
  // and never answers the handshake (a stopped process, a black hole behind a proxy) would
  // leave this promise pending for ever. Bound the whole start.
  const startTimeoutMs = (options.connectTimeoutMs ?? 1000) + (stallTimeoutMs || 2000);
  let startTimer: NodeJS.Timeout | undefined;
  try {
    await Promise.race([
      client.connect(),
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
  if (stallTimeoutMs > 0) {
    const watchdog = watchForStalls(client, {
      stallTimeoutMs,
      reconnect,
      onStall: (error) => {
        report(error, 'stall_recycle');
        options.onStall?.(error);
      },
    });
    // The owner closing the client ends the watchdog at once. A graceful close (close, quit)
    // never rejects for a client already closed — by the watchdog mid-recycle, or for good
    // with `reconnect: false` — and never waits longer than `stallTimeoutMs` for replies
    // that may never come (a black hole): then the connection is destroyed.
    const owned = client as unknown as Record<string, unknown>;
    const graceful: Record<string, unknown> = { close: undefined, quit: 'OK', QUIT: 'OK' };
    for (const method of ['close', 'destroy', 'quit', 'QUIT', 'disconnect']) {
      const original = owned[method];
      if (typeof original !== 'function') continue;
      owned[method] = function (this: unknown, ...args: unknown[]) {
        const midRecycle = watchdog.stop();
        if (!(method in graceful)) return original.apply(this, args);
        if (midRecycle || !client.isOpen) {
          if (client.isOpen || client.isReady) client.destroy();
          return Promise.resolve(graceful[method]);
        }
        let cut = false;
        const bound = setTimeout(() => {
          cut = true;
          client.destroy();
        }, stallTimeoutMs);
        bound.unref();
        return Promise.resolve(original.apply(this, args)).then(
          (result) => {
            clearTimeout(bound);
            return result;
          },
          (error: unknown) => {
            clearTimeout(bound);
            // QUIT's reply never came and the connection was cut: closed all the same.
            if (cut) return graceful[method];
            throw error;
          },
        );
      };
    }
  }
  return client;
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
