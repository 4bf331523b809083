/**
 * `connectRedis`: a Redis connection set up for rate limiting, with node-redis for the
 * application's own commands and a script connection of sluice's own for the limiter's.
 */
import { Socket } from 'node:net';
import { createClient } from 'redis';
import { RedisConfigError, UnavailableError } from '../../errors.js';
import type { RedisEvent } from '../../metrics/types.js';
import { observe } from '../../observer.js';
import type { ScriptStore } from '../../stores/store.js';
import { RespConnection } from '../resp/connection.js';
import { setupError } from '../setup-errors.js';
import { type NodeRedisClient, RedisConnection } from './connection.js';
import {
  nodeRedisOptions,
  type RedisEndpoint,
  resolveEndpoint,
  scriptConnectionOptions,
} from './endpoint.js';
import { type ConnectRedisOptions, checkOptions } from './options.js';
import { ScriptConnectionStore } from './script-store.js';
import { NodeRedisStore, toSluiceError } from './stores.js';

/**
 * Connects to Redis, set up for rate limiting: no offline queue, a connect timeout, optional
 * backoff reconnection that reports each attempt, a stall watchdog, and connection errors
 * that are never silent. Give the result to a limiter (`new RateLimiter({ client:
 * connection })`), use `connection.client` for your own commands, and close it with
 * `connection.close()` (or `destroy()`) at shutdown.
 *
 * Two connections: the node-redis client's, for every command of the application and
 * sluice's `INFO`; and, unless `fastPath: false`, one of sluice's own that carries only the
 * limiter's scripts (`EVALSHA`/`EVAL`) and writes each the moment it is called — node-redis
 * writes the commands of an event-loop turn together, in a `setImmediate`, so Node and Redis
 * would take turns instead of overlapping (see bench/RESULTS.md for what it is worth). Both
 * are set up from the same options — host or Unix socket, TLS, credentials (asked for on
 * every handshake when `credentials` is a function), database, `CLIENT SETNAME sluice` — and
 * follow the same rules: calls fail at once with `UnavailableError` while either is down, a
 * call that may have run is never sent again, errors and reconnects are reported once as the
 * connection's (`onError`, `onReconnect`, `metrics`), the stall watchdog probes and recycles
 * both together, and `isReady` is true while both are ready. With `reconnect: false`, losing
 * either connection closes both. The script connection counts toward the server's
 * `maxclients`.
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
export async function connectRedis(given?: ConnectRedisOptions): Promise<RedisConnection> {
  const options = checkOptions(given);
  const endpoint = resolveEndpoint(options);
  const reconnect = options.reconnect ?? true;
  const metrics = options.metrics;
  const count = (event: RedisEvent) => {
    if (metrics !== undefined) observe('metrics.redisEvent', () => metrics.redisEvent(event));
  };
  let connected = false;
  // One outage reaches both connections: each step of it (the n-th error, the n-th
  // reconnect attempt) is reported once, by whichever connection gets there first.
  const steps = new OutageSteps();
  const reconnectStrategy =
    (_source: Source) =>
    (retries: number, cause: Error): number | Error => {
      if (!connected || !reconnect) return cause ?? new Error('connection lost');
      const base = Math.min(2000, 50 * 2 ** Math.min(retries, 6));
      const delay = Math.round(base / 2 + Math.random() * (base / 2));
      if (steps.reconnect(retries + 1)) {
        const onReconnect = options.onReconnect;
        if (onReconnect !== undefined)
          observe('onReconnect', () => onReconnect(retries + 1, delay));
        count('reconnect');
      }
      return delay;
    };
  const stallTimeoutMs = options.stallTimeoutMs ?? 2000;
  // The watchdog frees written commands; node-redis's timeout never did, and costs a timer.
  const commandTimeoutMs = options.commandTimeoutMs ?? (stallTimeoutMs > 0 ? 0 : 5000);
  const client = createClient(
    nodeRedisOptions(endpoint, reconnectStrategy('client'), commandTimeoutMs),
  ) as unknown as NodeRedisClient;
  // The default warning starts after the first connection: before it, the rejection of
  // `connectRedis` carries the error.
  const warn = throttledWarning();
  const onError = options.onError ?? ((error: Error) => connected && warn(error));
  /** The last reconnect refused for its configuration (a rotated password), until ready. */
  let refused: RedisConfigError | undefined;
  const tell = (error: Error, event: RedisEvent) => {
    count(event);
    observe('onError', () => onError(error));
  };
  const report = (source: Source, error: Error) => {
    refused = setupError(error) ?? refused;
    if (steps.error(source)) tell(error, 'connection_error');
  };
  let scripts: RespConnection | undefined;
  const ready = (source: Source) => {
    steps.ready(source, client.isReady && (scripts?.isReady ?? true));
    if (client.isReady && (scripts?.isReady ?? true)) refused = undefined;
  };
  client.on('error', (error: Error) => report('client', error));
  client.on('ready', () => {
    connected = true;
    ready('client');
    // The server answers again: the script connection need not wait out its backoff.
    scripts?.retryNow();
  });
  if (options.fastPath !== false) {
    scripts = new RespConnection(scriptConnectionOptions(endpoint, reconnectStrategy('scripts')));
    scripts.on('error', (error: Error) => report('scripts', error));
    scripts.on('ready', () => ready('scripts'));
  }
  await start(client, scripts, endpoint, stallTimeoutMs);
  const store = refusalAware(
    scripts === undefined ? new NodeRedisStore(client) : new ScriptConnectionStore(client, scripts),
    () => refused,
  );
  return new RedisConnection(client, scripts, store, {
    stallTimeoutMs,
    reconnect,
    onStall: (error) => {
      tell(error, 'stall_recycle');
      const onStall = options.onStall;
      if (onStall !== undefined) observe('onStall', () => onStall(error));
    },
  });
}

/**
 * Opens both connections once (no retry). The connect timeout covers the TCP (and TLS)
 * connection only: a server that accepts it and never answers the handshake (a stopped
 * process, a black hole behind a proxy) would leave the start pending for ever, so the whole
 * start is bounded too.
 *
 * @throws the errors of {@link connectRedis}; nothing is left open.
 */
async function start(
  client: NodeRedisClient,
  scripts: RespConnection | undefined,
  endpoint: RedisEndpoint,
  stallTimeoutMs: number,
): Promise<void> {
  const startTimeoutMs = endpoint.connectTimeoutMs + (stallTimeoutMs || 2000);
  let timer: NodeJS.Timeout | undefined;
  let abandoned = false;
  const open = async () => {
    await client.connect();
    if (scripts !== undefined && !abandoned) await scripts.open();
  };
  try {
    await Promise.race([
      open(),
      new Promise((_, reject) => {
        timer = setTimeout(
          () =>
            reject(new Error(`no answer to the connection handshake within ${startTimeoutMs} ms`)),
          startTimeoutMs,
        );
        timer.unref();
      }),
    ]);
  } catch (error) {
    abandoned = true;
    scripts?.destroy();
    if (client.isOpen) client.destroy();
    const refused = setupError(error);
    if (refused !== undefined) throw refused;
    // A TLS handshake to a plain server never completes: it looks like a timeout. Ask.
    if (endpoint.tls !== undefined && (await speaksPlainRedis(endpoint))) {
      throw new RedisConfigError(
        'tls',
        `the server at ${endpoint.address} speaks plain Redis, not TLS: use a redis:// URL (no tls option)`,
        { cause: error },
      );
    }
    throw toSluiceError(error);
  } finally {
    clearTimeout(timer);
  }
}

/** One of the two connections of a `RedisConnection`. */
type Source = 'client' | 'scripts';

/**
 * The steps of one outage as the two connections go through it: each connection counts its
 * errors and reconnect attempts since it was last ready, and the n-th of each is reported
 * only by the first connection to reach it. The outage ends when both are ready.
 */
class OutageSteps {
  readonly #errors = new Map<Source, number>();
  #reportedErrors = 0;
  #reportedReconnects = 0;

  /** A connection's error: true when it is the first to reach this step. */
  error(source: Source): boolean {
    const n = (this.#errors.get(source) ?? 0) + 1;
    this.#errors.set(source, n);
    if (n <= this.#reportedErrors) return false;
    this.#reportedErrors = n;
    return true;
  }

  /** A connection's reconnect attempt `attempt` (from 1): true when it is the first there. */
  reconnect(attempt: number): boolean {
    if (attempt <= this.#reportedReconnects) return false;
    this.#reportedReconnects = attempt;
    return true;
  }

  /** A connection is ready; `both` when the other is too, which ends the outage. */
  ready(source: Source, both: boolean): void {
    this.#errors.set(source, 0);
    if (both) {
      this.#reportedErrors = 0;
      this.#reportedReconnects = 0;
    }
  }
}

/**
 * `store`, whose "not connected" failures are the configuration refusal that keeps it from
 * connecting, while there is one: after a password was rotated on the server, every call is
 * a `RedisConfigError` (`wrong-password`), not an outage.
 */
function refusalAware(
  store: ScriptStore,
  refused: () => RedisConfigError | undefined,
): ScriptStore {
  return {
    replicaAcks: true,
    evalScript: (script, keys, args, acks) =>
      store.evalScript(script, keys, args, acks).catch((error: unknown) => {
        const refusal = error instanceof UnavailableError ? refused() : undefined;
        throw refusal ?? error;
      }),
    serverFacts: () => store.serverFacts?.() ?? Promise.resolve([]),
  };
}

/** Whether a plain-text `PING` to the endpoint gets a Redis answer (≤ 500 ms). */
function speaksPlainRedis(endpoint: RedisEndpoint): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = new Socket();
    const finish = (answer: boolean) => {
      socket.destroy();
      resolve(answer);
    };
    socket.setTimeout(500, () => finish(false));
    socket.once('error', () => finish(false));
    socket.once('data', (data) => finish(/^[+-]/.test(data.toString('latin1'))));
    socket.connect(endpoint.port ?? 6379, endpoint.host ?? '127.0.0.1', () =>
      socket.write('PING\r\n'),
    );
  });
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
