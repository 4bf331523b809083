/**
 * `RedisConnection`: what `connectRedis` returns — an object sluice owns, holding the
 * node-redis client (the application's commands, and sluice's `INFO`), the script
 * connection (the limiter's scripts), the store the limiter decides on, and the stall
 * watchdog. Its lifecycle (`connect`, `close`, `destroy`, `ref`, `unref`) drives all of them
 * together; no library object is patched.
 */
import type { RedisClientType } from 'redis';
import type { UnavailableError } from '../../errors.js';
import type { ScriptStore } from '../../stores/store.js';
import type { RespConnection } from '../resp/connection.js';
import { setupError } from '../setup-errors.js';
import { type StallWatchdog, type WatchedClient, watchForStalls } from '../stall-watchdog.js';
import { toSluiceError } from './stores.js';
import { watchedPair } from './watched-pair.js';

/** The node-redis client of a {@link RedisConnection}. */
export type NodeRedisClient = RedisClientType;

/** How a connection watches for stalls. */
export interface WatchSettings {
  /** 0: no watchdog. */
  readonly stallTimeoutMs: number;
  readonly reconnect: boolean;
  /** Reports a recycle (to `onError`, `onStall` and the metrics). */
  readonly onStall: (error: UnavailableError) => void;
}

export class RedisConnection {
  /** The node-redis client, for your own commands. Close it through this connection. */
  readonly client: NodeRedisClient;
  /** What a `RateLimiter` decides on (`new RateLimiter({ client: connection })`). */
  readonly store: ScriptStore;
  readonly #scripts: RespConnection | undefined;
  readonly #settings: WatchSettings;
  #watchdog: StallWatchdog | undefined;
  /** Closed by its owner (this object's `close`/`destroy`, or the client's own). */
  #closed = false;
  /** The watchdog is destroying both connections to recycle them: not a close. */
  #recycling = false;

  /** @internal Made by `connectRedis`, once both connections are ready. */
  constructor(
    client: NodeRedisClient,
    scripts: RespConnection | undefined,
    store: ScriptStore,
    settings: WatchSettings,
  ) {
    this.client = client;
    this.#scripts = scripts;
    this.store = store;
    this.#settings = settings;
    // The client closed by its owner directly (`connection.client.close()`): the script
    // connection and the watchdog end with it.
    client.on('end', () => {
      if (this.#recycling || this.#closed) return;
      this.#closed = true;
      this.#watchdog?.stop();
      scripts?.destroy();
    });
    // The reconnect strategy gave up (reconnect off): closed for good, both connections.
    client.on('terminated', () => scripts?.destroy());
    scripts?.on('end', () => {
      if (client.isOpen) client.destroy();
    });
    this.#watch();
  }

  /** @internal The script connection, for tests; undefined with `fastPath: false`. */
  get scriptConnection(): RespConnection | undefined {
    return this.#scripts;
  }

  /** True while both connections are ready: a take can be sent. */
  get isReady(): boolean {
    return this.client.isReady && (this.#scripts?.isReady ?? true);
  }

  /**
   * True from connecting until closed (also while reconnecting, and while the stall watchdog
   * recycles the connection: an owner's `if (isOpen) destroy()` at shutdown still stops it).
   */
  get isOpen(): boolean {
    return this.client.isOpen || (this.#watchdog?.reconnecting ?? false);
  }

  /**
   * Opens the connection again after `close()` or `destroy()`: both connections and the
   * watchdog.
   *
   * @throws {RedisConfigError} when Redis refuses the setup; {@link UnavailableError} when
   *   it cannot be reached.
   */
  async connect(): Promise<void> {
    if (this.client.isOpen) return;
    try {
      await this.client.connect();
      if (this.#scripts !== undefined && !this.#scripts.isOpen) await this.#scripts.open();
    } catch (error) {
      this.#destroyBoth();
      throw setupError(error) ?? toSluiceError(error);
    }
    this.#closed = false;
    this.#watch();
  }

  /**
   * Closes gracefully: new commands are refused, those sent get their replies, then both
   * connections end. Never rejects for a connection already closed (by the watchdog
   * mid-recycle, or for good with `reconnect: false`), and never waits longer than
   * `stallTimeoutMs` for replies that may never come: then both are destroyed.
   */
  async close(): Promise<void> {
    this.#closed = true;
    const midRecycle = this.#watchdog?.stop() ?? false;
    this.#watchdog = undefined;
    const scripts = this.#scripts;
    if (midRecycle || !this.client.isOpen) {
      this.#destroyBoth();
      return;
    }
    const stallTimeoutMs = this.#settings.stallTimeoutMs;
    if (stallTimeoutMs === 0) {
      // No watchdog: node-redis's own close, unbounded; the script connection alongside.
      const closing = scripts?.close();
      await this.client.close();
      await closing;
      return;
    }
    let cut = false;
    const bound = setTimeout(() => {
      cut = true;
      this.#destroyBoth();
    }, stallTimeoutMs);
    bound.unref();
    try {
      await Promise.all([this.client.close(), scripts?.close()]);
    } catch (error) {
      // The replies never came and the connection was cut: closed all the same.
      if (!cut) {
        scripts?.destroy();
        throw error;
      }
    } finally {
      clearTimeout(bound);
    }
  }

  /** Closes at once: pending commands and calls are rejected. Idempotent. */
  destroy(): void {
    this.#closed = true;
    this.#watchdog?.stop();
    this.#watchdog = undefined;
    this.#destroyBoth();
  }

  /** Lets the process exit while the connection is open (both connections). */
  unref(): void {
    this.#scripts?.unref();
    this.client.unref();
  }

  /** Undoes {@link unref}. */
  ref(): void {
    this.#scripts?.ref();
    this.client.ref();
  }

  #destroyBoth(): void {
    this.#scripts?.destroy();
    if (this.client.isOpen || this.client.isReady) this.client.destroy();
  }

  #watch(): void {
    const { stallTimeoutMs, reconnect, onStall } = this.#settings;
    if (stallTimeoutMs === 0) return;
    const client = this.client as unknown as WatchedClient;
    const scripts = this.#scripts;
    // The watchdog's destroy: a recycle, which the client's 'end' listener lets pass.
    const recycle = () => {
      this.#recycling = true;
      try {
        this.client.destroy();
        scripts?.destroy();
      } finally {
        this.#recycling = false;
      }
    };
    const watched: WatchedClient =
      scripts === undefined
        ? {
            get isOpen() {
              return client.isOpen;
            },
            get isReady() {
              return client.isReady;
            },
            sendCommand: (args) => client.sendCommand(args),
            destroy: recycle,
            connect: () => client.connect(),
            on: (event, listener) => client.on(event, listener),
            off: (event, listener) => client.off(event, listener),
          }
        : watchedPair(client, scripts, recycle);
    this.#watchdog = watchForStalls(watched, { stallTimeoutMs, reconnect, onStall });
  }
}
