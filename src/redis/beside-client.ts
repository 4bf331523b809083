/**
 * A script connection of sluice's own beside a Redis client that the application made — a
 * node-redis `createClient()` or an ioredis (iovalkey) `Redis` — so that the limiter's
 * scripts are written the moment they are made, on a connection that carries nothing else.
 *
 * Why: node-redis writes the commands of one event-loop turn together, in a `setImmediate`:
 * on the application's own client the process hands out a turn's answers and gathers its
 * next batch while Redis waits, and Redis runs that batch while the process waits (the
 * "lock-step" of bench/PROFILE.md). ioredis writes each call at once, but builds a `Command`
 * of every argument of every call and writes each on its own: at a few dozen callers that
 * work, not Redis, bounds the rate. A connection of `connectRedis` has carried its scripts on
 * a connection of sluice's own for these reasons; this gives a client of the application's
 * the same, set up from that client's own options.
 *
 * Rules:
 * - Made only when the client's options can be copied exactly (each client's reader says
 *   what it copies: `node-redis/beside-options.ts`, `ioredis/beside-options.ts`); otherwise
 *   the scripts stay on the client.
 * - One per client, however many limiters (or views of the client) share it; it opens when
 *   the client is ready and ends when the client ends: closed by its owner, gracefully (the
 *   answers of scripts already sent are read, within 2 s), or given up on by its
 *   reconnection, at once.
 * - Scripts go over it only while it is ready **and** the client is open: a closed client
 *   fails the call as it would without this connection (a limiter on a closed connection
 *   throws, S19); while this connection is down or reconnecting the scripts go over the
 *   client. A script and the `WAIT` behind it are sent in the same turn, so they always
 *   share a connection.
 * - A connection that stops answering (a black-holed path) is found and replaced by the stall
 *   watchdog (`stall-watchdog.ts`, a `PING` every second, 2 s to answer), as a connection
 *   of `connectRedis`'s is; meanwhile the limiter's own stall rule (`stallTimeoutMs`) fails
 *   its calls at once.
 * - It never keeps the process alive (its socket and its watchdog's timer are unref'd): the
 *   client's does.
 * - It does not follow a `SELECT` sent on the client after it connected: the database is
 *   the one of the client's options. (A limiter's keys must not change database under it
 *   anyway: on the client alone, a `SELECT` moves every scope to a fresh quota.)
 * - Its failures while the client is ready (an outage is the client's to report) are
 *   process warnings (`SLUICE_SCRIPT_CONNECTION`), at most one per 10 s per client.
 *
 * It counts toward the server's `maxclients`, like the second connection of `connectRedis`.
 */
import { readProperty } from '../call-safely.js';
import type { ClientErrors } from './command-store.js';
import { errorFromReply } from './reply-errors.js';
import { RespConnection, type RespConnectionOptions } from './resp/connection.js';
import { ReplyError } from './resp/parser.js';
import { type StallWatchdog, watchForStalls } from './stall-watchdog.js';

/** Whether `command` is a script call, or the `WAIT` sent right behind one. */
export function isScriptCommand(command: readonly string[]): boolean {
  const name = command[0];
  return name === 'EVALSHA' || name === 'EVAL' || name === 'WAIT';
}

/**
 * How a store that also sends over a script connection of sluice's own reads its failures:
 * that connection's {@link ReplyError} for an error reply (its `UnavailableError`s are sluice
 * errors already), else as the client's `errors` say.
 */
export function withScriptConnection(errors: ClientErrors): ClientErrors {
  return {
    toSluiceError: (error) =>
      error instanceof ReplyError
        ? errorFromReply(error.message, error)
        : errors.toSluiceError(error),
    isNoScript: (error) =>
      (error instanceof ReplyError && error.message.startsWith('NOSCRIPT')) ||
      errors.isNoScript(error),
  };
}

/** How the connection beside one kind of client reads that client. */
export interface ClientReader {
  /** The kind, for messages: `node-redis`, `ioredis`. */
  readonly kind: string;
  /**
   * The options of a connection to where `client` connects (without the reconnect
   * strategy), or undefined when they cannot be copied exactly.
   */
  options(client: object): Omit<RespConnectionOptions, 'reconnectStrategy'> | undefined;
  /** True from connecting until closed by its owner or given up on (also while reconnecting). */
  isOpen(client: object): boolean;
  /** True while connected and set up. */
  isReady(client: object): boolean;
  /**
   * What identifies the client: one connection beside it however many views of it there are
   * (node-redis's `withCommandOptions()` and the like share the client's options).
   */
  identity(client: object): object;
  /** The event that says the client is ready. */
  readonly readyEvent: string;
  /** The event that says its owner closed it (`close()`, `quit()`, `destroy()`). */
  readonly endEvent: string;
  /** The event that says its reconnection gave up, when not {@link endEvent}. */
  readonly gaveUpEvent?: string;
}

interface Emitter {
  on(event: string, listener: (...args: unknown[]) => void): unknown;
}

/** One per client (`null`: its options cannot be copied). */
const byClient = new WeakMap<object, ScriptConnectionBeside | null>();

/** The delay before reconnect attempt `retries + 1`: 50 ms doubling to 2 s, jittered. */
function backoffMs(retries: number): number {
  const base = Math.min(2000, 50 * 2 ** Math.min(retries, 6));
  return Math.round(base / 2 + Math.random() * (base / 2));
}

const WARN_EVERY_MS = 10_000;

/** How long a graceful close waits for the answers of scripts already sent, in ms. */
const CLOSE_WAIT_MS = 2000;

/** How long the watchdog lets a `PING`, or a handshake, go unanswered: as `connectRedis`'s default. */
const STALL_TIMEOUT_MS = 2000;

export class ScriptConnectionBeside {
  readonly #client: object;
  readonly #reader: ClientReader;
  readonly #connection: RespConnection;
  #watchdog: StallWatchdog | undefined;
  /** A graceful close under way (the client ended), until it settles. */
  #closing: Promise<void> | undefined;
  #lastWarning = Number.NEGATIVE_INFINITY;
  #unreported = 0;

  /**
   * The script connection beside `client`, made (and opened once the client is ready) on
   * the first call for that client; undefined when the client's options cannot be copied.
   */
  static of(client: object, reader: ClientReader): ScriptConnectionBeside | undefined {
    const identity = reader.identity(client);
    const known = byClient.get(identity);
    if (known !== undefined) return known ?? undefined;
    let made: ScriptConnectionBeside | null = null;
    const options =
      typeof readProperty(client, 'on') === 'function' ? reader.options(client) : undefined;
    if (options !== undefined) made = new ScriptConnectionBeside(client, reader, options);
    byClient.set(identity, made);
    return made ?? undefined;
  }

  private constructor(
    client: object,
    reader: ClientReader,
    options: Omit<RespConnectionOptions, 'reconnectStrategy'>,
  ) {
    this.#client = client;
    this.#reader = reader;
    this.#connection = new RespConnection({
      ...options,
      reconnectStrategy: (retries) =>
        reader.isOpen(client) ? backoffMs(retries) : new Error('the client is closed'),
    });
    this.#connection.unref();
    this.#connection.on('error', (error: Error) => this.#warn(error));
    const emitter = client as Emitter;
    emitter.on(reader.readyEvent, () => this.#start());
    // Closed by its owner: this connection closes too, gracefully — the answers to the scripts
    // already sent on it are read (its owner's `close()` waited only for the client's own) —
    // within CLOSE_WAIT_MS. A client connected again opens it again.
    emitter.on(reader.endEvent, () => this.#end(true));
    // Given up on by its reconnection: at once (a call still on it fails with
    // `UnavailableError`), as `connectRedis`'s script connection does.
    if (reader.gaveUpEvent !== undefined) emitter.on(reader.gaveUpEvent, () => this.#end(false));
    if (reader.isReady(client)) this.#start();
  }

  /** The connection, when a script can go over it now; undefined: send it on the client. */
  get ready(): RespConnection | undefined {
    return this.#connection.isReady && this.#reader.isOpen(this.#client)
      ? this.#connection
      : undefined;
  }

  /** @internal The connection itself, for tests. */
  get connection(): RespConnection {
    return this.#connection;
  }

  /** The client ended: gracefully (its owner closed it) or at once. */
  #end(graceful: boolean): void {
    this.#watchdog?.stop();
    this.#watchdog = undefined;
    if (!graceful || !this.#connection.isReady) {
      this.#connection.destroy();
      return;
    }
    const closing = this.#connection.close();
    this.#closing = closing;
    const timer = setTimeout(() => {
      if (this.#closing === closing) this.#connection.destroy();
    }, CLOSE_WAIT_MS);
    timer.unref();
    void closing.then(() => {
      clearTimeout(timer);
      if (this.#closing === closing) this.#closing = undefined;
    });
  }

  #start(): void {
    if (this.#closing !== undefined) {
      // Connected again while the last close still reads its answers: those fail now.
      this.#closing = undefined;
      this.#connection.destroy();
    }
    if (this.#connection.isOpen) {
      // The server answers the client again: no need to wait out this connection's backoff.
      this.#connection.retryNow();
      return;
    }
    // Each failed attempt is an 'error' event; the loop ends when the client does.
    this.#connection.connect().catch(() => {});
    this.#watchdog?.stop();
    this.#watchdog = watchForStalls(this.#connection, {
      stallTimeoutMs: STALL_TIMEOUT_MS,
      reconnect: true,
      onStall: (error) => this.#warn(error),
    });
  }

  #warn(error: Error): void {
    if (!this.#reader.isReady(this.#client)) return; // an outage: the client reports it
    const now = Date.now();
    if (now - this.#lastWarning < WARN_EVERY_MS) {
      this.#unreported++;
      return;
    }
    const more = this.#unreported > 0 ? ` (+${this.#unreported} more since the last warning)` : '';
    this.#lastWarning = now;
    this.#unreported = 0;
    process.emitWarning(
      `sluice's script connection beside the ${this.#reader.kind} client failed: ${error.message}${more}; the limiter's scripts go over the client meanwhile`,
      { code: 'SLUICE_SCRIPT_CONNECTION' },
    );
  }
}
