/**
 * Where and how to connect, resolved once from `connectRedis`'s options: the one place the
 * URL, the credentials, TLS and the database are read, so that both connections — the
 * node-redis client's and the script connection — are set up alike from it.
 */
import type { ConnectionOptions } from 'node:tls';
import { InvalidInputError } from '../../errors.js';
import type { RespConnectionOptions } from '../resp/connection.js';
import { type ConnectRedisOptions, type RedisCredentials, UNIX_URL } from './options.js';

/** A Redis to connect to, as both connections see it. */
export interface RedisEndpoint {
  /** TCP host and port (undefined for a Unix socket). */
  readonly host: string | undefined;
  readonly port: number | undefined;
  /** A Unix socket's path (undefined for TCP). */
  readonly path: string | undefined;
  /** `tls.connect` options, or undefined for plain TCP. */
  readonly tls: ConnectionOptions | undefined;
  readonly database: number;
  /** Called for every connection's handshake; undefined: no `AUTH`. */
  readonly credentials: (() => Promise<RedisCredentials>) | undefined;
  readonly connectTimeoutMs: number;
  /** `host:port` or the socket's path, for messages. */
  readonly address: string;
}

const DEFAULT_URL = 'redis://127.0.0.1:6379';

/** What a URL says. */
interface FromUrl {
  host?: string;
  port?: number;
  path?: string;
  secure: boolean;
  username?: string;
  password?: string;
  database?: number;
}

function parseUrl(url: string): FromUrl {
  const unix = UNIX_URL.exec(url);
  if (unix !== null) {
    const [, username, password, path, database] = unix;
    return {
      path: decodeURIComponent(path as string),
      secure: false,
      username: username ? decodeURIComponent(username) : undefined,
      password: password ? decodeURIComponent(password) : undefined,
      database: database === undefined ? undefined : Number(database),
    };
  }
  const parsed = new URL(url);
  return {
    host: parsed.hostname.replace(/^\[|\]$/g, '') || '127.0.0.1',
    port: parsed.port === '' ? 6379 : Number(parsed.port),
    secure: parsed.protocol === 'rediss:',
    username: parsed.username ? decodeURIComponent(parsed.username) : undefined,
    password: parsed.password ? decodeURIComponent(parsed.password) : undefined,
    database: parsed.pathname.length > 1 ? Number(parsed.pathname.slice(1)) : undefined,
  };
}

/**
 * The endpoint of checked options: the URL's parts, with `username`, `password` and
 * `database` given as options taking precedence.
 *
 * @throws {InvalidInputError} `options.tls` false with a `rediss://` URL or set with a
 *   `unix://` one; `options.credentials` with credentials in the URL.
 */
export function resolveEndpoint(options: ConnectRedisOptions): RedisEndpoint {
  const url = options.url ?? DEFAULT_URL;
  const from = parseUrl(url);
  if (from.secure && options.tls === false) {
    throw new InvalidInputError('options.tls', 'not false with a rediss:// URL', false);
  }
  if (from.path !== undefined && options.tls !== undefined && options.tls !== false) {
    throw new InvalidInputError('options.tls', 'absent with a unix:// URL', options.tls);
  }
  const tlsOption = options.tls ?? from.secure;
  const tls =
    tlsOption === false ? undefined : { ...(tlsOption === true ? {} : (tlsOption as object)) };
  if (
    options.credentials !== undefined &&
    (from.username !== undefined || from.password !== undefined)
  ) {
    throw new InvalidInputError(
      'options.credentials',
      'absent when the URL carries a user or password (give one or the other)',
      options.credentials,
    );
  }
  return {
    host: from.host,
    port: from.port,
    path: from.path,
    tls: tls as ConnectionOptions | undefined,
    database: options.database ?? from.database ?? 0,
    credentials: credentialsOf(options, from),
    connectTimeoutMs: options.connectTimeoutMs ?? 1000,
    address: from.path ?? `${from.host}:${from.port}`,
  };
}

function credentialsOf(
  options: ConnectRedisOptions,
  from: FromUrl,
): (() => Promise<RedisCredentials>) | undefined {
  const provider = options.credentials;
  if (provider !== undefined) return async () => provider();
  const username = options.username ?? from.username;
  const password = options.password ?? from.password;
  if (username === undefined && password === undefined) return undefined;
  const fixed: RedisCredentials = {
    ...(username === undefined ? {} : { username }),
    password: password ?? '',
  };
  return () => Promise.resolve(fixed);
}

/** The node-redis `createClient` options of an endpoint (no URL: the endpoint's parts). */
export function nodeRedisOptions(
  endpoint: RedisEndpoint,
  reconnectStrategy: (retries: number, cause: Error) => number | Error,
  commandTimeoutMs: number,
): Record<string, unknown> {
  const connect = { connectTimeout: endpoint.connectTimeoutMs, reconnectStrategy };
  const socket =
    endpoint.path !== undefined
      ? { ...connect, path: endpoint.path }
      : {
          ...connect,
          host: endpoint.host,
          port: endpoint.port,
          ...(endpoint.tls === undefined ? {} : { tls: true, ...endpoint.tls }),
        };
  const credentials = endpoint.credentials;
  return {
    socket,
    ...(credentials === undefined
      ? {}
      : { credentialsProvider: { type: 'async-credentials-provider', credentials } }),
    ...(endpoint.database === 0 ? {} : { database: endpoint.database }),
    disableOfflineQueue: true,
    commandOptions: { timeout: commandTimeoutMs === 0 ? undefined : commandTimeoutMs },
  };
}

/** The script connection's options of an endpoint. */
export function scriptConnectionOptions(
  endpoint: RedisEndpoint,
  reconnectStrategy: RespConnectionOptions['reconnectStrategy'],
): RespConnectionOptions {
  return {
    host: endpoint.host,
    port: endpoint.port,
    path: endpoint.path,
    tls: endpoint.tls,
    credentials: endpoint.credentials,
    database: endpoint.database,
    name: 'sluice',
    connectTimeoutMs: endpoint.connectTimeoutMs,
    reconnectStrategy,
  };
}
