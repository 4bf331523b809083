/**
 * Why an ioredis client is not ready, when Redis refused its handshake: a wrong password, a
 * user without permission, a database the server lacks. ioredis reports that refusal only as
 * an event (`error` for a `Redis`, `node error` for a `Cluster`) and fails every command of
 * the store with "Stream isn't writeable" (or "Cluster isn't ready"), which alone reads as
 * an outage. So the store listens, and a call that fails as unreachable while a refusal is
 * fresh — seen within {@link FRESH_MS}, with no `ready` and no answered call since — is that
 * refusal, a `RedisConfigError`, as with a `connectRedis` connection.
 *
 * Listening to `error` takes away ioredis's own "[ioredis] Unhandled error event" print for
 * an application that has no listener of its own: then this listener prints the same line.
 */
import { readProperty } from '../call-safely.js';
import type { RedisConfigError } from '../errors.js';
import { setupError } from './setup-errors.js';

/** How long a refusal explains failures without being seen again: ioredis retries within 2 s. */
export const FRESH_MS = 10_000;

interface Emitter {
  on(event: string, listener: (...args: unknown[]) => void): unknown;
  listenerCount(event: string): number;
}

function isEmitter(client: unknown): client is Emitter {
  try {
    const c = client as Partial<Emitter> | null;
    return typeof c?.on === 'function' && typeof c.listenerCount === 'function';
  } catch {
    return false;
  }
}

/** One listener set per client, however many limiters (stores) share it. */
const byClient = new WeakMap<object, HandshakeRefusals>();

/** The handshake refusals one client (ioredis, or node-redis) reports. */
export class HandshakeRefusals {
  /**
   * The refusals of `client`, listened to once: every store of the same client shares them,
   * so a process making many limiters on one client adds no listener per limiter.
   */
  static of(
    client: unknown,
    cluster: boolean,
    unhandled?: (error: unknown) => void,
  ): HandshakeRefusals {
    if (typeof client !== 'object' || client === null) {
      return new HandshakeRefusals(client, cluster, unhandled);
    }
    // node-redis's clients, and their views (`withCommandOptions()`), are objects made from
    // one instance, its `_self`: one listener set for all of them.
    const self = readProperty(client, '_self');
    const key = typeof self === 'object' && self !== null ? self : client;
    let refusals = byClient.get(key);
    if (refusals === undefined) {
      refusals = new HandshakeRefusals(client, cluster, unhandled);
      byClient.set(key, refusals);
    }
    return refusals;
  }

  #last: { readonly error: unknown; readonly at: number } | undefined;

  /** Listens to `client` (a `Redis`, or a `Cluster` when `cluster`); nothing for a non-emitter. */
  private constructor(
    client: unknown,
    cluster: boolean,
    /**
     * What the client does with an `error` event nobody else listens to: ioredis prints it
     * (the default), node-redis's `EventEmitter` throws it.
     */
    unhandled: (error: unknown) => void = (error) =>
      console.error('[ioredis] Unhandled error event:', (error as Error | null)?.stack),
  ) {
    if (!isEmitter(client)) return;
    const heard = (error: unknown) => {
      if (setupError(error) !== undefined) this.#last = { error, at: performance.now() };
    };
    if (cluster) {
      client.on('node error', heard);
    } else {
      client.on('error', (error: unknown) => {
        heard(error);
        if (client.listenerCount('error') === 1) unhandled(error);
      });
    }
    client.on('ready', () => this.answered());
  }

  /** The client answered: nothing it refused before explains what comes next. */
  answered(): void {
    this.#last = undefined;
  }

  /** The fresh refusal behind an "unreachable" failure, if there is one (a new error each time). */
  behind(): RedisConfigError | undefined {
    const last = this.#last;
    if (last === undefined || performance.now() - last.at > FRESH_MS) return undefined;
    return setupError(last.error);
  }
}
