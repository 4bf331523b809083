/**
 * A watchdog that recycles a Redis connection which has stopped answering.
 *
 * Why: when the network path to Redis black-holes traffic (a partition, a dead load
 * balancer, a paused VM) the TCP connection stays "up": nothing fails until the kernel gives
 * up on retransmissions, many minutes later. node-redis keeps every command already written
 * in its reply queue until then — measured with node-redis 6.3, its own command timeout does
 * not release a written command — so the limiter's callers get their `TimeoutError` at the
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
 * It stops by itself once it finds the client closed by its owner; {@link createRedisClient}
 * also stops it the moment the owner calls `close()`, `destroy()`, `quit()` or `disconnect()`,
 * so a client closed while the watchdog is reopening it stays closed.
 */
import { callSafely } from '../call-safely.js';
import { UnavailableError } from '../errors.js';

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

/** A running watchdog. */
export interface StallWatchdog {
  /** Connections recycled so far. */
  readonly recycles: number;
  /**
   * Stops watching (idempotent). Returns `true` when a recycle's reconnect was under way
   * (the client is closed, or being reopened, by the watchdog, not by its owner); the
   * connection being reopened is then destroyed once its attempt settles.
   */
  stop(): boolean;
}

/** Starts watching `client`; the timer is unref'd and never keeps the process alive. */
export function watchForStalls(
  client: WatchedClient,
  options: StallWatchdogOptions,
): StallWatchdog {
  const { stallTimeoutMs, reconnect, onStall } = options;
  // Bound now: the owner's close()/destroy() may be wrapped afterwards to stop the watchdog.
  const destroy = client.destroy.bind(client);
  // A wait counts at most one interval per check, however late the check runs: a blocked
  // process cannot read a reply that has arrived.
  const interval = Math.max(5, Math.floor(stallTimeoutMs / 2));
  let lastCheckAt = performance.now();
  /** The outstanding probe (an object per probe), or undefined when none is outstanding. */
  let probe: { waitedMs: number } | undefined;
  /** The current connection's handshake, from its TCP connect until it is ready. */
  let handshake: { waitedMs: number } | undefined;
  let recycles = 0;
  let stopped = false;
  /** The watchdog's own `connect()` in progress, settled (never rejects). */
  let connecting: Promise<void> | undefined;
  /** Set from a recycle until the client is reopened. */
  let reopening: Promise<void> | undefined;

  client.on('connect', () => {
    // The next check adds the time since the last one: count only the part after now.
    handshake = { waitedMs: lastCheckAt - performance.now() };
  });
  const notConnecting = () => {
    handshake = undefined;
  };
  // A failed attempt ('error') waits out the reconnect backoff: not a hung handshake.
  client.on('ready', notConnecting);
  client.on('error', notConnecting);

  const recycle = (reason: string): void => {
    recycles++;
    probe = undefined;
    handshake = undefined;
    destroy();
    const error = new UnavailableError(
      `Redis connection stalled: ${reason}; ${reconnect ? 'reconnecting' : 'closing it (reconnect is off)'}`,
    );
    try {
      onStall(error);
    } catch (thrown) {
      // A throwing listener must neither crash the process from a timer nor stop the recycle.
      process.emitWarning(`onStall listener threw: ${String(thrown)}`, {
        code: 'SLUICE_LISTENER_ERROR',
      });
    }
    if (!reconnect) {
      stop();
      return;
    }
    // Connect again only once the attempt that `destroy()` aborted has unwound (its
    // rejections run as microtasks): a client reopened before that would let the aborted
    // attempt carry on beside the new one. Failures to connect are reported through the
    // client's 'error' events and retried by its reconnect strategy.
    const aborted = connecting;
    connecting = undefined;
    reopening = (aborted ?? Promise.resolve())
      .then(() => new Promise((resolve) => setImmediate(resolve)))
      .then(() => {
        if (stopped || client.isOpen) {
          reopening = undefined;
          return;
        }
        // `reopening` stays set until `connecting` is: an owner closing the client from
        // inside connect() (say, from an event listener) still finds the recycle under way.
        const attempt: Promise<void> = client.connect().then(
          () => {},
          () => {},
        );
        connecting = attempt;
        reopening = undefined;
        void attempt.then(() => {
          if (connecting === attempt) connecting = undefined;
        });
      });
  };

  /** Why the connection counts as stalled now, or undefined. */
  const stalledBecause = (): string | undefined => {
    if (probe !== undefined && probe.waitedMs >= stallTimeoutMs) {
      return `no reply to PING within ${stallTimeoutMs} ms`;
    }
    if (handshake !== undefined && !client.isReady && handshake.waitedMs >= stallTimeoutMs) {
      return `no reply to the connection handshake within ${stallTimeoutMs} ms`;
    }
    return undefined;
  };

  let confirming = false;
  const check = (): void => {
    const now = performance.now();
    const elapsed = now - lastCheckAt;
    lastCheckAt = now;
    // A late tick means the event loop was blocked: only one interval of it counts.
    const waited = Math.min(elapsed, interval);
    if (probe !== undefined) probe.waitedMs += waited;
    if (handshake !== undefined) handshake.waitedMs += waited;
    if (reopening || confirming) return;
    if (!client.isOpen) {
      stop();
      return;
    }
    if (stalledBecause() !== undefined) {
      // Timers run before sockets are read: after the event loop was blocked, the reply may
      // be waiting unread. Decide only after pending I/O has been processed (setImmediate
      // runs after the poll phase), and only if the loop was not blocked again meanwhile —
      // else the next check decides.
      confirming = true;
      const suspectedAt = now;
      setImmediate(() => {
        confirming = false;
        if (stopped || reopening || !client.isOpen) return;
        if (performance.now() - suspectedAt > interval / 2) return;
        const reason = stalledBecause();
        if (reason !== undefined) recycle(reason);
      });
      return;
    }
    if (probe === undefined && client.isReady) {
      const sent = { waitedMs: 0 };
      probe = sent;
      const settle = () => {
        if (probe === sent) probe = undefined;
      };
      // A rejected probe means the connection failed, which node-redis reports and handles.
      callSafely(
        () => client.sendCommand(['PING']),
        () => new UnavailableError('sendCommand returned no promise'),
      ).then(settle, settle);
    }
  };

  const timer = setInterval(check, interval);
  timer.unref();
  /**
   * Stops watching. When a recycle's reconnect is under way, the connection it opens is
   * destroyed as soon as its socket appears and once the attempt settles. Returns whether a
   * recycle was under way: the client was closed by the watchdog, not by its owner.
   */
  function stop(): boolean {
    if (stopped) return false;
    stopped = true;
    clearInterval(timer);
    const pending = reopening ?? connecting;
    if (pending === undefined) return false;
    // node-redis can go on opening a socket destroyed mid-connect (the socket is attached
    // when its TCP connect completes, after the destroy): destroy it when it appears, and
    // once the attempt has settled. `destroy()` is a no-op once no socket is left.
    const closeLate = () => destroy();
    client.on('connect', closeLate);
    let finished = false;
    const done = () => {
      if (finished) return;
      finished = true;
      clearTimeout(fallback);
      client.off('connect', closeLate);
      destroy();
    };
    // In case the aborted attempt never settles (a handshake held by a black hole).
    const fallback = setTimeout(done, Math.max(stallTimeoutMs, 10_000));
    fallback.unref();
    void pending.then(() => (connecting ?? Promise.resolve()).then(done));
    return true;
  }
  return {
    get recycles() {
      return recycles;
    },
    stop,
  };
}
