/**
 * A watchdog that recycles a Redis connection which has stopped answering.
 *
 * Why: when the network path to Redis black-holes traffic (a partition, a dead load
 * balancer, a paused VM) the TCP connection stays "up": nothing fails until the kernel gives
 * up on retransmissions, many minutes later. node-redis keeps every command already written
 * in its reply queue until then — its own command timeout does not release a written command
 * — so the limiter's callers get their `TimeoutError` at the
 * deadline, but each call's `maxInFlight` slot stays held, and once the cap is reached every
 * caller gets `OverloadError` until the connection dies.
 *
 * How: a `PING` is kept outstanding, one at a time, one every `stallTimeoutMs / 2`. Redis
 * answers commands on a connection in order, so a `PING` unanswered for `stallTimeoutMs`
 * means nothing sent before it has been answered either: the connection is stalled. Only
 * time in which this process's event loop ran on time counts (a check that runs late means
 * the loop was blocked, and a reply may be sitting unread), and the verdict is confirmed
 * after pending I/O has been read with the loop running on time, so a busy process never
 * mistakes itself for a stalled connection; a loop blocked most of the time delays
 * detection until a check and its confirmation run unblocked. The
 * watchdog then destroys the connection (node-redis rejects every pending command, which frees
 * every slot at once) and, when reconnection is on, connects again, and keeps doing so while a
 * new connection's handshake stays unanswered. While it reconnects, calls fail at once with
 * `UnavailableError` (no offline queue), never wait.
 *
 * It stops by itself once it finds the client closed by its owner; a `RedisConnection` also
 * stops it the moment its owner closes it, so a connection closed while the watchdog is
 * reopening it stays closed.
 */
import { callSafely } from '../call-safely.js';
import { UnavailableError } from '../errors.js';
import { observe } from '../observer.js';

/** The part of a node-redis v6 client the watchdog drives (all public API). */
export interface WatchedClient {
  readonly isOpen: boolean;
  readonly isReady: boolean;
  sendCommand(args: string[]): Promise<unknown>;
  destroy(): void;
  connect(): Promise<unknown>;
  on(event: 'connect' | 'ready' | 'error', listener: () => void): unknown;
  off(event: 'connect', listener: () => void): unknown;
}

/** Options of {@link watchForStalls}. */
export interface StallWatchdogOptions {
  /** How long a `PING`, or a new connection's handshake, may stay unanswered, in ms (> 0). */
  readonly stallTimeoutMs: number;
  /** Connect again after recycling (`true`), or leave the client closed (`false`). */
  readonly reconnect: boolean;
  /** Called with an `UnavailableError` describing each stall, just before the recycle. */
  readonly onStall: (error: UnavailableError) => void;
}

/** A running watchdog (see the module's doc). */
export interface StallWatchdog {
  /** Connections recycled so far. */
  readonly recycles: number;
  /**
   * True while a recycle has closed the client and the watchdog is to open it again: the
   * connection is reconnecting, not closed (its owner's close or destroy stops the watchdog).
   */
  readonly reconnecting: boolean;
  /**
   * Stops watching (idempotent). Returns `true` when a recycle's reconnect was under way
   * (the client is closed, or being reopened, by the watchdog, not by its owner); the
   * connection being reopened is then destroyed once its attempt settles.
   */
  stop(): boolean;
}

/** How long something has waited, counted only while the event loop ran on time. */
interface Wait {
  waitedMs: number;
}

/** Starts watching `client`; the timer is unref'd and never keeps the process alive. */
export function watchForStalls(
  client: WatchedClient,
  options: StallWatchdogOptions,
): StallWatchdog {
  return new Watchdog(client, options);
}

class Watchdog implements StallWatchdog {
  readonly #client: WatchedClient;
  readonly #options: StallWatchdogOptions;
  /** Bound at the start: the owner's close()/destroy() may be wrapped to stop the watchdog. */
  readonly #destroy: () => void;
  /**
   * A wait counts at most one interval per check, however late the check runs: a blocked
   * process cannot read a reply that has arrived.
   */
  readonly #interval: number;
  readonly #timer: NodeJS.Timeout;
  #lastCheckAt = performance.now();
  /** The outstanding probe (an object per probe), or undefined when none is outstanding. */
  #probe: Wait | undefined;
  /** The current connection's handshake, from its TCP connect until it is ready. */
  #handshake: Wait | undefined;
  #recycles = 0;
  #stopped = false;
  #confirming = false;
  /** The watchdog's own `connect()` in progress, settled (never rejects). */
  #connecting: Promise<void> | undefined;
  /** Set from a recycle until the client is reopened. */
  #reopening: Promise<void> | undefined;

  get reconnecting(): boolean {
    return !this.#stopped && this.#recycles > 0 && !this.#client.isOpen;
  }

  constructor(client: WatchedClient, options: StallWatchdogOptions) {
    this.#client = client;
    this.#options = options;
    this.#destroy = client.destroy.bind(client);
    this.#interval = Math.max(5, Math.floor(options.stallTimeoutMs / 2));
    client.on('connect', () => {
      // The next check adds the time since the last one: count only the part after now.
      this.#handshake = { waitedMs: this.#lastCheckAt - performance.now() };
    });
    const notConnecting = () => {
      this.#handshake = undefined;
    };
    // A failed attempt ('error') waits out the reconnect backoff: not a hung handshake.
    client.on('ready', notConnecting);
    client.on('error', notConnecting);
    this.#timer = setInterval(() => this.#check(), this.#interval);
    this.#timer.unref();
  }

  get recycles(): number {
    return this.#recycles;
  }

  /** One tick: count the waits, then suspect a stall, or send a probe. */
  #check(): void {
    const now = performance.now();
    const elapsed = now - this.#lastCheckAt;
    this.#lastCheckAt = now;
    // A late tick means the event loop was blocked: only one interval of it counts.
    const waited = Math.min(elapsed, this.#interval);
    if (this.#probe !== undefined) this.#probe.waitedMs += waited;
    if (this.#handshake !== undefined) this.#handshake.waitedMs += waited;
    if (this.#reopening || this.#confirming) return;
    if (!this.#client.isOpen) {
      this.stop();
      return;
    }
    if (this.#stalledBecause() !== undefined) this.#confirm(now);
    else if (this.#probe === undefined && this.#client.isReady) this.#sendProbe();
  }

  /**
   * Timers run before sockets are read: after the event loop was blocked, the reply may be
   * waiting unread. Decide only after pending I/O has been processed (setImmediate runs
   * after the poll phase), and only if the loop was not blocked again meanwhile — else the
   * next check decides.
   */
  #confirm(suspectedAt: number): void {
    this.#confirming = true;
    setImmediate(() => {
      this.#confirming = false;
      if (this.#stopped || this.#reopening || !this.#client.isOpen) return;
      if (performance.now() - suspectedAt > this.#interval / 2) return;
      const reason = this.#stalledBecause();
      if (reason !== undefined) this.#recycle(reason);
    });
  }

  #sendProbe(): void {
    const sent: Wait = { waitedMs: 0 };
    this.#probe = sent;
    const settle = () => {
      if (this.#probe === sent) this.#probe = undefined;
    };
    // A rejected probe means the connection failed, which the client reports and handles.
    callSafely(
      () => this.#client.sendCommand(['PING']),
      () => new UnavailableError('sendCommand returned no promise'),
    ).then(settle, settle);
  }

  /** Why the connection counts as stalled now, or undefined. */
  #stalledBecause(): string | undefined {
    const { stallTimeoutMs } = this.#options;
    if (this.#probe !== undefined && this.#probe.waitedMs >= stallTimeoutMs) {
      return `no reply to PING within ${stallTimeoutMs} ms`;
    }
    const handshake = this.#handshake;
    if (handshake !== undefined && !this.#client.isReady && handshake.waitedMs >= stallTimeoutMs) {
      return `no reply to the connection handshake within ${stallTimeoutMs} ms`;
    }
    return undefined;
  }

  #recycle(reason: string): void {
    const { reconnect, onStall } = this.#options;
    this.#recycles++;
    this.#probe = undefined;
    this.#handshake = undefined;
    this.#destroy();
    const error = new UnavailableError(
      `Redis connection stalled: ${reason}; ${reconnect ? 'reconnecting' : 'closing it (reconnect is off)'}`,
    );
    // A throwing listener must neither crash the process from a timer nor stop the recycle.
    observe('onStall', () => onStall(error));
    if (!reconnect) {
      this.stop();
      return;
    }
    this.#reopen();
  }

  /**
   * Connects again once the attempt that `destroy()` aborted has unwound (its rejections run
   * as microtasks): a client reopened before that would let the aborted attempt carry on
   * beside the new one. Failures to connect are reported through the client's 'error'
   * events and retried by its reconnect strategy.
   */
  #reopen(): void {
    const aborted = this.#connecting;
    this.#connecting = undefined;
    this.#reopening = (aborted ?? Promise.resolve())
      .then(() => new Promise((resolve) => setImmediate(resolve)))
      .then(() => {
        if (this.#stopped || this.#client.isOpen) {
          this.#reopening = undefined;
          return;
        }
        // `#reopening` stays set until `#connecting` is: an owner closing the client from
        // inside connect() (say, from an event listener) still finds the recycle under way.
        const attempt: Promise<void> = this.#client.connect().then(
          () => {},
          () => {},
        );
        this.#connecting = attempt;
        this.#reopening = undefined;
        void attempt.then(() => {
          if (this.#connecting === attempt) this.#connecting = undefined;
        });
      });
  }

  /**
   * Stops watching. When a recycle's reconnect is under way, the connection it opens is
   * destroyed as soon as its socket appears and once the attempt settles. Returns whether a
   * recycle was under way: the client was closed by the watchdog, not by its owner.
   */
  stop(): boolean {
    if (this.#stopped) return false;
    this.#stopped = true;
    clearInterval(this.#timer);
    const pending = this.#reopening ?? this.#connecting;
    if (pending === undefined) return false;
    // A client can go on opening a socket destroyed mid-connect (the socket is attached when
    // its TCP connect completes, after the destroy): destroy it when it appears, and once the
    // attempt has settled. `destroy()` is a no-op once no socket is left.
    const closeLate = () => this.#destroy();
    this.#client.on('connect', closeLate);
    let finished = false;
    const done = () => {
      if (finished) return;
      finished = true;
      clearTimeout(fallback);
      this.#client.off('connect', closeLate);
      this.#destroy();
    };
    // In case the aborted attempt never settles (a handshake held by a black hole).
    const fallback = setTimeout(done, Math.max(this.#options.stallTimeoutMs, 10_000));
    fallback.unref();
    void pending.then(() => (this.#connecting ?? Promise.resolve()).then(done));
    return true;
  }
}
