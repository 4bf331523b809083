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
 * means nothing sent before it has been answered either: the connection is stalled. The
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
  /** Stops watching (idempotent). */
  stop(): void;
}

/** Starts watching `client`; the timer is unref'd and never keeps the process alive. */
export function watchForStalls(
  client: WatchedClient,
  options: StallWatchdogOptions,
): StallWatchdog {
  const { stallTimeoutMs, reconnect, onStall } = options;
  // Bound now: the owner's close()/destroy() may be wrapped afterwards to stop the watchdog.
  const destroy = client.destroy.bind(client);
  /** When the outstanding probe was sent, or undefined when none is outstanding. */
  let probeSentAt: number | undefined;
  /** When the current connection's TCP handshake completed, until it is ready. */
  let connectedAt: number | undefined;
  let recycles = 0;
  let stopped = false;
  /** The watchdog's own `connect()` in progress, settled (never rejects). */
  let connecting: Promise<void> | undefined;
  /** Set from a recycle until the client is reopened. */
  let reopening: Promise<void> | undefined;

  client.on('connect', () => {
    connectedAt = performance.now();
  });
  const notConnecting = () => {
    connectedAt = undefined;
  };
  // A failed attempt ('error') waits out the reconnect backoff: not a hung handshake.
  client.on('ready', notConnecting);
  client.on('error', notConnecting);

  const recycle = (reason: string): void => {
    recycles++;
    probeSentAt = undefined;
    connectedAt = undefined;
    onStall(
      new UnavailableError(
        `Redis connection stalled: ${reason}; ${reconnect ? 'reconnecting' : 'closing it (reconnect is off)'}`,
      ),
    );
    destroy();
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
        reopening = undefined;
        if (stopped || client.isOpen) return;
        connecting = client.connect().then(
          () => {},
          () => {},
        );
      });
  };

  const check = (): void => {
    if (reopening) return;
    if (!client.isOpen) {
      stop();
      return;
    }
    const now = performance.now();
    if (probeSentAt !== undefined && now - probeSentAt >= stallTimeoutMs) {
      recycle(`no reply to PING within ${stallTimeoutMs} ms`);
      return;
    }
    if (connectedAt !== undefined && !client.isReady && now - connectedAt >= stallTimeoutMs) {
      recycle(`no reply to the connection handshake within ${stallTimeoutMs} ms`);
      return;
    }
    if (probeSentAt === undefined && client.isReady) {
      const sentAt = now;
      probeSentAt = sentAt;
      const settle = () => {
        if (probeSentAt === sentAt) probeSentAt = undefined;
      };
      // A rejected probe means the connection failed, which node-redis reports and handles.
      callSafely(
        () => client.sendCommand(['PING']),
        () => new UnavailableError('sendCommand returned no promise'),
      ).then(settle, settle);
    }
  };

  const timer = setInterval(check, Math.max(5, Math.floor(stallTimeoutMs / 2)));
  timer.unref();
  function stop(): void {
    if (stopped) return;
    stopped = true;
    clearInterval(timer);
  }
  return {
    get recycles() {
      return recycles;
    },
    stop,
  };
}
