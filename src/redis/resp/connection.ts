/**
 * sluice's own Redis connection for the limiter's scripts (EVALSHA/EVAL) of a connection made
 * by `connectRedis`: one pipelined RESP2 connection that writes each command the moment it
 * is called.
 *
 * Why: node-redis writes the commands of one event-loop turn together, in a `setImmediate`.
 * Redis then runs them all and answers them all at once, and Node and Redis take turns
 * instead of working at the same time. Everything else (INFO, the application's own
 * commands) stays on the node-redis client.
 *
 * Behaviour, like the node-redis client's as `connectRedis` sets it up:
 * - no offline queue: while not connected, {@link RespConnection.call} rejects at once with
 *   an `UnavailableError`;
 * - a lost connection rejects every pending call with an `UnavailableError` — a call that
 *   may have run is never sent again — reports the error (`'error'` event) and, when the
 *   reconnect strategy gives a delay, connects again after it;
 * - the handshake: `AUTH` with the credentials of the moment (asked for on every attempt),
 *   `CLIENT SETNAME` (its refusal ignored when not permitted or unknown), `SELECT` when the
 *   database is not 0; a refused handshake fails the attempt with the reply's error;
 * - `isOpen`, `isReady`, `sendCommand`, `connect`, `destroy` and the `connect`/`ready`/`error`
 *   events of node-redis, so the stall watchdog (`stall-watchdog.ts`) can drive it.
 */
import { EventEmitter } from 'node:events';
import net from 'node:net';
import tls from 'node:tls';
import { UnavailableError } from '../../errors.js';
import { Fifo } from './fifo.js';
import { handshake } from './handshake.js';
import { encodeCommand, ReplyError, ReplyParser } from './parser.js';

/** Options of a {@link RespConnection}. */
export interface RespConnectionOptions {
  /** TCP host and port, or `path` for a Unix socket. */
  readonly host?: string | undefined;
  readonly port?: number | undefined;
  readonly path?: string | undefined;
  /** `tls.connect` options (TLS on), or undefined (plain TCP). */
  readonly tls?: tls.ConnectionOptions | undefined;
  /** The credentials of each attempt's `AUTH`; undefined: no `AUTH`. */
  readonly credentials?:
    | (() => Promise<{ readonly username?: string; readonly password: string }>)
    | undefined;
  /** The database to `SELECT` (when not 0). */
  readonly database?: number | undefined;
  /** A name to set with `CLIENT SETNAME` (its refusal is ignored). */
  readonly name?: string | undefined;
  /** How long the TCP (and TLS) connect may take, in ms. */
  readonly connectTimeoutMs: number;
  /**
   * Before each reconnect attempt (`retries` from 0): its delay in ms, or an Error to stop
   * reconnecting (the connection is then closed for good: `'end'`).
   */
  readonly reconnectStrategy: (retries: number, cause: Error) => number | Error;
}

/** The read buffer of a plain socket: a reply larger than this arrives over several reads. */
const READ_BUFFER_BYTES = 64 * 1024;

interface Waiter {
  resolve(reply: unknown): void;
  reject(error: Error): void;
}

/** Why a call is refused at once, or a pending one rejected, as an `UnavailableError`. */
function unavailable(reason: string, cause?: unknown): UnavailableError {
  return new UnavailableError(
    `Redis unavailable: ${reason}`,
    cause === undefined ? undefined : { cause },
  );
}

/**
 * A pipelined RESP2 connection: calls are written at once and their replies matched in
 * order. Events: `'connect'` (a socket connected, the handshake starts), `'ready'`,
 * `'error'` (every connection error after the first connection: a lost connection, a failed
 * reconnect attempt), `'end'` (closed for good by the reconnect strategy).
 */
export class RespConnection extends EventEmitter {
  readonly #options: RespConnectionOptions;
  readonly #parser: ReplyParser;
  /** What a plain socket reads into (`onread`), reused from read to read. */
  readonly #readBuffer = Buffer.allocUnsafe(READ_BUFFER_BYTES);
  readonly #waiting = new Fifo<Waiter>();
  #socket: net.Socket | undefined;
  /** Wanted open: from `open`/`connect` until `destroy`, `close`, or the strategy gives up. */
  #open = false;
  #ready = false;
  #unrefed = false;
  /** Bumped by every open, `destroy` and `close`: a reconnect loop of an older one stops. */
  #session = 0;
  /** Fails the connection attempt under way (its socket not ready yet). */
  #failAttempt: ((error: Error) => void) | undefined;
  /** Ends the wait before a reconnect attempt. */
  #wakeUp: (() => void) | undefined;
  /** Resolves a graceful `close` once nothing is pending. */
  #closed: (() => void) | undefined;

  constructor(options: RespConnectionOptions) {
    super();
    // An 'error' emitted with no listener would throw from a socket callback.
    this.on('error', () => {});
    this.#options = options;
    this.#parser = new ReplyParser((reply) => this.#onReply(reply));
  }

  /** True from `open`/`connect` until closed (also while reconnecting). */
  get isOpen(): boolean {
    return this.#open;
  }

  /** True while connected and set up: calls are sent. */
  get isReady(): boolean {
    return this.#ready;
  }

  /** Calls written and not answered yet. */
  get pending(): number {
    return this.#waiting.length;
  }

  /**
   * Sends `args` at once; resolves with the reply, rejects with a {@link ReplyError} for an
   * error reply, or an `UnavailableError` when not connected or the connection is lost
   * before the reply.
   */
  call(args: readonly string[]): Promise<unknown> {
    const socket = this.#socket;
    if (!this.#ready || socket === undefined) {
      return Promise.reject(
        unavailable(this.#open ? 'the connection is not ready' : 'the connection is closed'),
      );
    }
    return this.#send(socket, args);
  }

  /** {@link call}, as the stall watchdog names it. */
  sendCommand(args: string[]): Promise<unknown> {
    return this.call(args);
  }

  #send(socket: net.Socket, args: readonly string[]): Promise<unknown> {
    return new Promise((resolve, reject) => {
      this.#waiting.push({ resolve, reject });
      try {
        socket.write(encodeCommand(args));
      } catch (error) {
        this.#died(socket, error instanceof Error ? error : new Error(String(error)));
      }
    });
  }

  #onReply(reply: unknown): void {
    const waiter = this.#waiting.shift();
    if (waiter === undefined) {
      const socket = this.#socket;
      if (socket !== undefined) this.#died(socket, new Error('a reply to no command'));
      return;
    }
    if (reply instanceof ReplyError) waiter.reject(reply);
    else waiter.resolve(reply);
    if (this.#closed !== undefined && this.#waiting.length === 0) this.#finishClose();
  }

  /**
   * Connects once (no retry): resolves when ready, rejects with the failure (a refused
   * handshake: its {@link ReplyError}). For the first connection, whose failure is the
   * caller's to report.
   */
  open(): Promise<void> {
    return this.#start(false);
  }

  /**
   * Connects, retrying failed attempts as the reconnect strategy says (each failure is
   * reported as `'error'`); resolves when ready, rejects when closed or given up on.
   */
  connect(): Promise<void> {
    return this.#start(true);
  }

  #start(retry: boolean): Promise<void> {
    if (this.#open) return Promise.reject(new Error('the connection is already open'));
    this.#open = true;
    return this.#connectLoop(++this.#session, retry ? 0 : undefined);
  }

  /** Whether `session` is still the one wanted open (no `destroy`/`close` since). */
  #current(session: number): boolean {
    return this.#open && this.#session === session;
  }

  /** Attempts until ready; `retries` undefined: one attempt only. */
  async #connectLoop(session: number, retries: number | undefined): Promise<void> {
    let attempt = retries;
    for (;;) {
      try {
        await this.#attempt();
        return;
      } catch (error) {
        const cause = error instanceof Error ? error : new Error(String(error));
        if (!this.#current(session)) throw cause;
        if (attempt === undefined) {
          this.#open = false;
          throw cause;
        }
        this.emit('error', cause);
        if (!(await this.#waitToReconnect(session, attempt++, cause))) throw cause;
      }
    }
  }

  /**
   * Waits the strategy's delay before reconnect attempt `retries + 1`; false when `session`
   * ended meanwhile or the strategy gave up (then closed for good: `'end'`).
   */
  async #waitToReconnect(session: number, retries: number, cause: Error): Promise<boolean> {
    if (!this.#current(session)) return false;
    let delay: number | Error;
    try {
      delay = this.#options.reconnectStrategy(retries, cause);
    } catch (error) {
      delay = error instanceof Error ? error : new Error(String(error));
    }
    if (!this.#current(session)) return false;
    if (delay instanceof Error) {
      this.#open = false;
      this.emit('end');
      return false;
    }
    await new Promise<void>((resolve) => {
      const timer = setTimeout(() => {
        this.#wakeUp = undefined;
        resolve();
      }, delay);
      timer.unref();
      this.#wakeUp = () => {
        clearTimeout(timer);
        this.#wakeUp = undefined;
        resolve();
      };
    });
    return this.#current(session);
  }

  /** One connection attempt: connect, hand-shake; resolves when ready. */
  #attempt(): Promise<void> {
    const { host, port, path, connectTimeoutMs } = this.#options;
    const secure = this.#options.tls;
    const where: net.NetConnectOpts = path === undefined ? { host, port: port ?? 6379 } : { path };
    // Plain TCP and Unix sockets read into one buffer of this connection's, handed straight
    // to the parser (no stream 'data' event, no buffer per read); TLS reads as a stream.
    const socket: net.Socket =
      secure === undefined
        ? net.connect({
            ...where,
            noDelay: true,
            keepAlive: true,
            keepAliveInitialDelay: 30_000,
            onread: {
              buffer: this.#readBuffer,
              callback: (bytes: number): boolean => {
                this.#read(socket, this.#readBuffer.subarray(0, bytes));
                return true; // keep reading
              },
            },
          })
        : tls.connect({ ...where, ...secure } as tls.ConnectionOptions);
    if (secure !== undefined) {
      socket.setNoDelay(true);
      socket.setKeepAlive(true, 30_000);
    }
    if (this.#unrefed) socket.unref();
    this.#socket = socket;
    this.#parser.reset();
    return new Promise<void>((resolve, reject) => {
      let settled = false;
      this.#failAttempt = (error) => {
        if (settled) return;
        settled = true;
        this.#failAttempt = undefined;
        reject(error);
      };
      const onTimeout = () =>
        this.#died(socket, new Error(`connection timeout (${connectTimeoutMs} ms)`));
      socket.setTimeout(connectTimeoutMs, onTimeout);
      if (secure !== undefined) socket.on('data', (chunk: Buffer) => this.#read(socket, chunk));
      socket.on('error', (error: Error) => this.#died(socket, error));
      socket.on('close', () => this.#died(socket, new Error('connection closed')));
      socket.once(secure === undefined ? 'connect' : 'secureConnect', () => {
        socket.setTimeout(0);
        socket.off('timeout', onTimeout);
        if (this.#socket !== socket) return;
        this.emit('connect');
        void handshake(this.#options, (args) => {
          if (this.#socket !== socket) throw new Error('connection closed during the handshake');
          return this.#send(socket, args);
        }).then(
          () => {
            if (settled || this.#socket !== socket) return;
            settled = true;
            this.#failAttempt = undefined;
            this.#ready = true;
            resolve();
            this.emit('ready');
          },
          (error: Error) => {
            if (this.#socket === socket) this.#died(socket, error);
          },
        );
      });
    });
  }

  /** Bytes read from `socket`: parsed at once (the parser copies what it keeps). */
  #read(socket: net.Socket, chunk: Buffer): void {
    if (this.#socket !== socket) return;
    try {
      this.#parser.feed(chunk);
    } catch (error) {
      this.#died(socket, error as Error);
    }
  }

  /**
   * `socket` failed or closed: if it is the current one, every pending call is rejected, an
   * attempt under way fails, and a ready connection lost is reported and, while open,
   * connected again.
   */
  #died(socket: net.Socket, error: Error): void {
    if (this.#socket !== socket) return;
    this.#socket = undefined;
    const wasReady = this.#ready;
    this.#ready = false;
    socket.destroy();
    this.#parser.reset();
    this.#rejectPending(unavailable(error.message, error));
    const failAttempt = this.#failAttempt;
    if (failAttempt !== undefined) {
      failAttempt(error);
      return;
    }
    if (this.#closed !== undefined) {
      this.#finishClose();
      return;
    }
    if (!wasReady) return;
    this.emit('error', error);
    const session = this.#session;
    void this.#waitToReconnect(session, 0, error).then((again) => {
      // Failures are reported ('error') by the loop; it ends when closed or given up on.
      if (again) this.#connectLoop(session, 1).catch(() => {});
    });
  }

  #rejectPending(error: UnavailableError): void {
    for (const waiter of this.#waiting.drain()) waiter.reject(error);
  }

  /**
   * Ends a wait before a reconnect attempt at once (the server is known to answer again):
   * the attempt starts now. No-op when not waiting.
   */
  retryNow(): void {
    if (this.#open) this.#wakeUp?.();
  }

  /**
   * Closes at once: pending calls are rejected (`UnavailableError`), an attempt under way or
   * a reconnect wait ends, and nothing reconnects until `connect`. Idempotent.
   */
  destroy(): void {
    this.#open = false;
    this.#session++;
    this.#ready = false;
    this.#wakeUp?.();
    const socket = this.#socket;
    this.#socket = undefined;
    socket?.destroy();
    this.#parser.reset();
    this.#rejectPending(unavailable('the connection was closed'));
    this.#failAttempt?.(unavailable('the connection was closed while connecting'));
    this.#finishClose();
  }

  /**
   * Closes gracefully: new calls are refused at once, calls already sent get their replies,
   * then the socket ends. Resolves when closed (at once when not connected). Bound the wait
   * with {@link destroy} (the replies of a black-holed connection never come).
   */
  close(): Promise<void> {
    const closing = this.#closed;
    if (closing === undefined && (!this.#ready || this.#socket === undefined)) {
      this.destroy();
      return Promise.resolve();
    }
    this.#open = false;
    this.#session++;
    this.#ready = false;
    return new Promise<void>((resolve) => {
      this.#closed = () => {
        closing?.();
        resolve();
      };
      if (this.#waiting.length === 0) this.#finishClose();
    });
  }

  #finishClose(): void {
    const closed = this.#closed;
    if (closed === undefined) return;
    this.#closed = undefined;
    const socket = this.#socket;
    this.#socket = undefined;
    socket?.end();
    // A peer that never acknowledges the end must not keep the socket.
    socket?.destroySoon();
    closed();
  }

  /** Lets the process exit while this connection is open (as node-redis's `unref`). */
  unref(): void {
    this.#unrefed = true;
    this.#socket?.unref();
  }

  /** Undoes {@link unref}. */
  ref(): void {
    this.#unrefed = false;
    this.#socket?.ref();
  }
}
