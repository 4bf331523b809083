/**
 * The options of `connectRedis`, and their check (zod) before anything connects: a bad or
 * unknown option is an `InvalidInputError` naming `options.<field>`, and no socket is ever
 * opened for it.
 */
import { z } from 'zod';
import { MAX_TIMER_MS } from '../../bounds.js';
import { InvalidInputError, type UnavailableError } from '../../errors.js';
import type { Metrics } from '../../metrics/types.js';
import { readOwnProperties } from '../../validate.js';

/** TLS options of `connectRedis`, passed to Node's `tls.connect`. */
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

/** Credentials for one connection's `AUTH`. */
export interface RedisCredentials {
  /** The ACL user; absent: `default`. */
  readonly username?: string;
  readonly password: string;
}

/** Options of `connectRedis`. */
export interface ConnectRedisOptions {
  /**
   * Where Redis is: `redis://host:port` or `rediss://host:port` (TLS), optionally with
   * `user:password@` and `/<database>`; or a Unix socket, `unix:///path/to/redis.sock`
   * (optionally `unix://user:password@/path?db=<database>`). Default `redis://127.0.0.1:6379`.
   */
  readonly url?: string;
  /** The ACL user (Redis ≥ 6); default: the URL's, else `default`. */
  readonly username?: string;
  /** The password (of `username`, or `requirepass`); default: the URL's. */
  readonly password?: string;
  /**
   * Credentials that change (a secret manager, short-lived tokens): called for every
   * connection's handshake, both connections and every reconnect, instead of a fixed
   * `username`/`password` (give one or the other). A throw or a rejection fails that
   * connection attempt: at start, `connectRedis` rejects with an `UnavailableError` whose
   * `cause` it is; later, it is reported to `onError` and the attempt is retried.
   */
  readonly credentials?: () => RedisCredentials | Promise<RedisCredentials>;
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
   * `connectRedis` rejects at once when Redis is unreachable at start. Commands never queue
   * while disconnected either way.
   */
  readonly reconnect?: boolean;
  /**
   * Called with every connection error. Default: a process warning
   * (`process.emitWarning`), at most one per 10 s with the count since the last one. An
   * error it throws is reported as a process warning.
   */
  readonly onError?: (error: Error) => void;
  /**
   * Called before each reconnect attempt with the attempt number and its delay in ms. An
   * error it throws is reported as a process warning and never stops the reconnect.
   */
  readonly onReconnect?: (attempt: number, delayMs: number) => void;
  /**
   * node-redis's own per-command timeout for the application's commands, in ms. Default:
   * `0` (none) while the stall watchdog is on (`stallTimeoutMs`, the default), 5000 with
   * `stallTimeoutMs: 0`. It is not the limiter's deadline: `timeoutMs` of `RateLimiter`
   * bounds every caller's wait on its own. A command already written to a connection that
   * stopped answering stays pending past this timeout, so it never frees a `maxInFlight`
   * slot — the watchdog does, by recycling the connection — while it costs a timer per
   * command. It does not apply to the limiter's script connection (see `fastPath`).
   */
  readonly commandTimeoutMs?: number;
  /**
   * Recycle a connection that has stopped answering, in ms (default 2000, at least 100; `0`
   * turns the watchdog off). A `PING` is kept outstanding, one every `stallTimeoutMs / 2`;
   * when one stays unanswered this long, or a new connection's handshake does, the
   * connection is destroyed — every pending command is rejected, so every `maxInFlight` slot
   * is freed — and, with `reconnect`, opened again. The script connection (`fastPath`) is
   * probed alongside, and the two are recycled together. Without it, a black-holed
   * connection holds its commands until the kernel gives up on it, minutes later. Each
   * recycle is reported to `onError` (an `UnavailableError` whose message starts "Redis
   * connection stalled") and `onStall`. Keep it well above the slowest reply you expect (a
   * `DEBUG SLEEP`, a long script).
   */
  readonly stallTimeoutMs?: number;
  /** Called once per recycled (stalled) connection, with the error also given to `onError`. */
  readonly onStall?: (error: UnavailableError) => void;
  /**
   * Send the limiter's scripts (`EVALSHA`/`EVAL`) over a second connection of sluice's own
   * that writes each command at once (default `true`); `false`: everything over the one
   * node-redis connection. See `connectRedis`.
   */
  readonly fastPath?: boolean;
  /**
   * A metrics sink (see `Metrics`) that counts this connection's events:
   * `connection_error`, `reconnect`, `stall_recycle`.
   */
  readonly metrics?: Pick<Metrics, 'redisEvent'>;
}

const callback = z.custom<(...args: never[]) => unknown>(
  (value) => typeof value === 'function',
  'a function',
);
/** Milliseconds: an integer from `min` to the longest timer Node.js honours. */
const ms = (min: number) => {
  const expected = `an integer from ${min} to ${MAX_TIMER_MS}`;
  return z.number(expected).int(expected).min(min, expected).max(MAX_TIMER_MS, expected);
};

/** PEM text or bytes, or a list of them (Node's `tls.connect` options). */
const pem = z.union(
  [z.string(), z.instanceof(Buffer), z.array(z.union([z.string(), z.instanceof(Buffer)]))],
  'PEM text, a Buffer, or an array of them',
);

/** A Unix socket's URL: `unix://[user[:password]@]/path[?db=n]`. */
export const UNIX_URL = /^unix:\/\/(?:([^:@/]*)(?::([^@/]*))?@)?(\/[^?#]+)(?:\?db=(\d+))?$/;

/** A URL of a scheme sluice connects to, with at most a database number as its path. */
function isRedisUrl(url: string): boolean {
  if (url.startsWith('unix://')) return UNIX_URL.test(url);
  return /^rediss?:\/\//.test(url) && URL.canParse(url) && /^\/?\d*$/.test(new URL(url).pathname);
}

const schema = z.strictObject({
  username: z.string('a string (an ACL user name)').min(1, 'a non-empty string').optional(),
  password: z.string('a string').min(1, 'a non-empty string').optional(),
  credentials: callback.optional(),
  database: z
    .number('an integer from 0 (a database index)')
    .int('an integer from 0')
    .min(0, 'an integer from 0')
    .optional(),
  tls: z
    .union(
      [
        z.boolean(),
        z.strictObject({
          ca: pem.optional(),
          cert: pem.optional(),
          key: pem.optional(),
          servername: z.string('a host name').min(1, 'a host name').optional(),
          rejectUnauthorized: z.boolean('true or false').optional(),
        }),
      ],
      'true, or { ca, cert, key, servername, rejectUnauthorized }',
    )
    .optional(),
  url: z
    .string('a redis://, rediss:// or unix:// URL')
    .max(4096, 'a URL of at most 4,096 characters')
    .refine(
      isRedisUrl,
      'a redis://host:port or rediss://host:port URL with at most a database number as its path (/0), or unix:///path/to/redis.sock',
    )
    .optional(),
  connectTimeoutMs: ms(1).optional(),
  reconnect: z.boolean('true or false').optional(),
  onError: callback.optional(),
  onReconnect: callback.optional(),
  commandTimeoutMs: ms(0).optional(),
  // Below 100 ms an answer merely delayed by a busy pipeline would read as a stall.
  stallTimeoutMs: ms(0)
    .refine((v) => v === 0 || v >= 100, `0 (off) or an integer from 100 to ${MAX_TIMER_MS}`)
    .optional(),
  onStall: callback.optional(),
  fastPath: z.boolean('true or false').optional(),
  metrics: z
    .custom<object>(
      (value) =>
        typeof value === 'object' &&
        value !== null &&
        typeof (value as { redisEvent?: unknown }).redisEvent === 'function',
      'a Metrics (with redisEvent)',
    )
    .optional(),
});

/** The options, checked; `undefined` is `{}`. */
export function checkOptions(options: ConnectRedisOptions | undefined): ConnectRedisOptions {
  if (options === undefined) return {};
  if (typeof options !== 'object' || options === null || Array.isArray(options)) {
    throw new InvalidInputError('options', 'an object of connectRedis options', options);
  }
  // Each option read once (a getter or Proxy trap that throws is an InvalidInputError), and
  // the TLS options too: what is checked is what connects.
  const read = readOwnProperties(options, 'options');
  if (typeof read.tls === 'object' && read.tls !== null && !Array.isArray(read.tls)) {
    read.tls = readOwnProperties(read.tls, 'options.tls');
  }
  const parsed = schema.safeParse(read);
  if (!parsed.success) throw invalidOption(read, parsed.error.issues[0]);
  const checked = read as ConnectRedisOptions;
  if (checked.credentials !== undefined) {
    for (const fixed of ['username', 'password'] as const) {
      if (checked[fixed] !== undefined) {
        throw new InvalidInputError(
          `options.${fixed}`,
          'absent with options.credentials (give fixed credentials or a function, not both)',
          checked[fixed],
        );
      }
    }
  }
  return checked;
}

/** The `InvalidInputError` of zod's first issue. */
function invalidOption(options: object, issue: z.core.$ZodIssue | undefined): InvalidInputError {
  const path = (issue?.path ?? []).map(String);
  if (issue?.code === 'unrecognized_keys' && issue.keys[0] !== undefined) path.push(issue.keys[0]);
  const field = ['options', ...path].join('.');
  const expected =
    issue?.code === 'unrecognized_keys'
      ? 'absent: it is not a connectRedis option'
      : (issue?.message ?? 'a valid option');
  let received: unknown = options;
  for (const key of path) received = (received as Record<string, unknown> | undefined)?.[key];
  return new InvalidInputError(field, expected, received);
}
