/**
 * The stores of a Valkey GLIDE `GlideClient` and `GlideClusterClient`
 * (`@valkey/valkey-glide`), typed structurally: GLIDE is an optional peer dependency, and
 * nothing here loads it, its native binding or its types. Its errors are told by their class
 * name.
 *
 * A command goes out as `client.customCommand(args)` — `EVALSHA`, then `EVAL` on `NOSCRIPT`,
 * as for every client (`CommandStore`); GLIDE's `invokeScript` is not used, since it keeps
 * each script's source in its native core and reloads it on its own, which would hide the
 * reload from the caller's deadline. A cluster client's command is routed explicitly to the
 * primary serving its first key (`route: { type: 'primarySlotKey', key }`), which is what
 * sends a batch spanning slots (no declared keys) to the node that serves them.
 *
 * What GLIDE does on failure, as measured against Redis 7.0 (test/integration/valkey-glide.test.ts):
 * a command whose connection drops after it was sent fails with a `ConnectionError` and is
 * not sent again (standalone and cluster); while the server is unreachable a standalone
 * client holds new commands until it reconnects or `requestTimeout` passes (then a
 * `TimeoutError`), and sends them after the reconnect if that comes first; a cluster client
 * fails them after its reconnection attempts (about 1.3 s), and with
 * `recoveryRequestsQueueSize` above 0 keeps up to that many to retry after a reconnect — an
 * offline queue, so a cluster client must be created with `recoveryRequestsQueueSize: 0`.
 */
import calculateSlot from 'cluster-key-slot';
import { batchScript, crossSlotBatchScript } from '../../algorithms/batch.js';
import type { LuaScript } from '../../algorithms/script.js';
import { callSafely, readProperty as read } from '../../call-safely.js';
import { InvalidInputError, SluiceError, UnavailableError } from '../../errors.js';
import { type ReplicaAcks, RerouteError, type ServerFacts } from '../../stores/store.js';
import { redirected, spansSlots } from '../cluster-slots.js';
import { type ClientErrors, CommandStore } from '../command-store.js';
import { errorFromReply } from '../reply-errors.js';
import { factsFromInfo } from '../server-checks.js';
import { setupError } from '../setup-errors.js';

/** A GLIDE route to the primary serving `key`'s slot. */
export interface GlideSlotKeyRoute {
  readonly type: 'primarySlotKey';
  readonly key: string;
}

/** The part of a GLIDE `GlideClient` (`await GlideClient.createClient(…)`) that sluice uses. */
export interface GlideClientLike {
  customCommand(args: string[]): Promise<unknown>;
  invokeScript(script: unknown, options?: unknown): Promise<unknown>;
}

/** The part of a GLIDE `GlideClusterClient` that sluice uses. */
export interface GlideClusterClientLike {
  customCommand(
    args: string[],
    options?: { route?: GlideSlotKeyRoute | 'allPrimaries' | 'randomNode' },
  ): Promise<unknown>;
  invokeScript(script: unknown, options?: unknown): Promise<unknown>;
  invokeScriptWithRoute(script: unknown, options?: unknown): Promise<unknown>;
}

/**
 * What a GLIDE `GlideClient` should be created with for a limiter
 * (`GlideClient.createClient({ addresses, ...GLIDE_OPTIONS })`): a `requestTimeout` (ms) —
 * how long GLIDE holds a command, including while it reconnects — at least the limiter's
 * `timeoutMs` (so GLIDE never cuts a call the limiter still waits for) and at most its
 * `stallTimeoutMs` (default 2000, so that commands held while Redis is unreachable are
 * dropped before the limiter gives up on them). GLIDE's default is 250 ms. Nothing here is
 * checked at construction: a standalone GLIDE client never sends a command twice.
 */
export const GLIDE_OPTIONS = Object.freeze({ requestTimeout: 1000 } as const);

/**
 * What a GLIDE `GlideClusterClient` must be created with
 * (`GlideClusterClient.createClient({ addresses, ...GLIDE_CLUSTER_OPTIONS })`): as
 * {@link GLIDE_OPTIONS}, and `recoveryRequestsQueueSize: 0` — checked at construction
 * (`InvalidInputError` otherwise): GLIDE's default keeps up to 1000 requests while it
 * reconnects to a node and retries them after, an offline queue whose calls run after their
 * callers were answered.
 */
export const GLIDE_CLUSTER_OPTIONS = Object.freeze({
  requestTimeout: 1000,
  recoveryRequestsQueueSize: 0,
} as const);

/** The class names in `error`'s prototype chain. */
function classNames(error: unknown): string[] {
  const names: string[] = [];
  for (
    let proto: unknown = error instanceof Error ? Object.getPrototypeOf(error) : null;
    proto !== null && proto !== Error.prototype && names.length < 8;
    proto = Object.getPrototypeOf(proto)
  ) {
    const name = (proto as { constructor?: { name?: unknown } }).constructor?.name;
    if (typeof name === 'string') names.push(name);
  }
  return names;
}

/**
 * The Redis code of each error kind that GLIDE's core names instead of the reply's first
 * word ("An error was signalled by the server: - NoScriptError: …").
 */
const KIND_CODES: Readonly<Record<string, string>> = {
  ResponseError: 'ERR',
  BusyLoadingError: 'LOADING',
  NoScriptError: 'NOSCRIPT',
  Moved: 'MOVED',
  Ask: 'ASK',
  TryAgain: 'TRYAGAIN',
  ClusterDown: 'CLUSTERDOWN',
  CrossSlot: 'CROSSSLOT',
  MasterDown: 'MASTERDOWN',
  ReadOnly: 'READONLY',
  NotBusy: 'NOTBUSY',
  ExecAbortError: 'EXECABORT',
  PermissionDenied: 'NOPERM',
};

const SIGNALLED = /^An error was signalled by the server: - (\w+): ([\s\S]*)$/;
/** Any other reply: its code, a colon, its text ("WRONGTYPE: Operation against …"). */
const CODED = /^([A-Z][A-Z0-9_-]*): ([\s\S]*)$/;
/** A refused handshake inside a connection failure ("… connect failed - …: WRONGPASS: …"). */
const REFUSED_HANDSHAKE = /\b(WRONGPASS|NOAUTH|NOPERM): ([^\n]*)|(DB index is out of range)/;

/**
 * The text of the Redis error reply inside a GLIDE failure, as Redis wrote it
 * (`NOSCRIPT No matching script…`): for a `RequestError` or an `ExecAbortError` whose
 * message is a reply. Undefined for anything else (a `ConnectionError`, a `TimeoutError`,
 * a `ClosingError`, an internal error of the client).
 */
export function glideReplyText(error: unknown): string | undefined {
  const names = classNames(error);
  const kind = names[0];
  if (kind !== 'RequestError' && kind !== 'ExecAbortError') return undefined;
  const message = (error as Error).message;
  const signalled = SIGNALLED.exec(message);
  if (signalled !== null) {
    const code = KIND_CODES[signalled[1] as string];
    return code === undefined ? undefined : `${code} ${signalled[2]}`;
  }
  const coded = CODED.exec(message);
  return coded === null ? undefined : `${coded[1]} ${coded[2]}`;
}

/** Maps a GLIDE failure to a sluice error (see `reply-errors.ts`). */
export function toSluiceError(error: unknown): Error {
  if (error instanceof SluiceError) return error;
  const reply = glideReplyText(error);
  // The reply as Redis wrote it, with GLIDE's error as its cause: what `errorFromReply` reads.
  if (reply !== undefined) return errorFromReply(reply, new Error(reply, { cause: error }));
  const message = error instanceof Error ? error.message : String(error);
  // A (re)connection whose handshake Redis refused: GLIDE reports it on each command.
  const refused = REFUSED_HANDSHAKE.exec(message);
  if (refused !== null) {
    const text = refused[3] ?? `${refused[1]} ${refused[2]}`;
    const config = setupError(new Error(text, { cause: error }));
    if (config !== undefined) return config;
  }
  return new UnavailableError(`Redis unavailable: ${message}`, { cause: error });
}

/** How GLIDE clients fail. */
export const GLIDE_ERRORS: ClientErrors = {
  toSluiceError,
  isNoScript: (error) => glideReplyText(error)?.startsWith('NOSCRIPT') === true,
};

/** True for a GLIDE client: `customCommand` and `invokeScript`. */
export function isGlideClient(client: unknown): boolean {
  return (
    typeof read(client, 'customCommand') === 'function' &&
    typeof read(client, 'invokeScript') === 'function'
  );
}

/** True for a GLIDE cluster client (`GlideClusterClient`, with `invokeScriptWithRoute`). */
export function isGlideClusterClient(client: unknown): boolean {
  return isGlideClient(client) && typeof read(client, 'invokeScriptWithRoute') === 'function';
}

/**
 * Refuses a GLIDE cluster client whose configuration keeps requests to retry after a
 * reconnect (`recoveryRequestsQueueSize` other than 0). A configuration that cannot be read
 * is not judged.
 *
 * @param field the name of the client in the error (`client`, `options.client`)
 * @throws {InvalidInputError} naming what to set
 */
export function checkGlideClient(client: unknown, field: string): void {
  if (!isGlideClusterClient(client)) return;
  const config = read(client, 'config');
  if (config === undefined || config === null) return;
  if (read(config, 'recoveryRequestsQueueSize') !== 0) {
    throw new InvalidInputError(
      field,
      'a GLIDE GlideClusterClient created with recoveryRequestsQueueSize: 0 (GLIDE_CLUSTER_OPTIONS from sluice/valkey-glide), so that requests fail at once while a node reconnects instead of queueing',
      client,
    );
  }
}

/** The store of a GLIDE `GlideClient`. */
export class GlideStore extends CommandStore {
  /** @throws {InvalidInputError} when `client` is not a GLIDE client. */
  constructor(client: GlideClientLike) {
    if (!isGlideClient(client)) {
      throw new InvalidInputError('client', 'a Valkey GLIDE GlideClient', client);
    }
    super(
      (command) => client.customCommand(command),
      GLIDE_ERRORS,
      'customCommand returned no promise: use a Valkey GLIDE client',
    );
  }
}

/** How often the cluster store reads the slot map again, in ms (and after a redirection). */
export const SLOT_MAP_REFRESH_MS = 1000;

/**
 * The primary serving each slot, as `CLUSTER SLOTS` said last (GLIDE keeps its own map in
 * its native core, out of reach): read at once, again when older than
 * {@link SLOT_MAP_REFRESH_MS} or after a redirection. It only groups calls into batches: a
 * stale map costs a batch refused before it ran (each call then sent alone), never a wrong
 * decision, since every command is routed by GLIDE to the primary of its first key.
 */
class SlotMap {
  readonly #client: GlideClusterClientLike;
  /** Per slot, the primary's `host:port`. */
  #owners: (string | undefined)[] = [];
  #readAt = Number.NEGATIVE_INFINITY;
  #reading = false;

  constructor(client: GlideClusterClientLike) {
    this.#client = client;
    this.refresh();
  }

  /** The primary serving `slot`, or undefined before the first read. */
  ownerOf(slot: number): string | undefined {
    if (performance.now() - this.#readAt > SLOT_MAP_REFRESH_MS) this.refresh();
    return this.#owners[slot];
  }

  /** Reads the map again, unless a read is under way; failures keep the old map. */
  refresh(): void {
    if (this.#reading) return;
    this.#reading = true;
    callSafely(
      () => this.#client.customCommand(['CLUSTER', 'SLOTS'], { route: 'randomNode' }),
      () => new UnavailableError('customCommand returned no promise'),
    )
      .then((reply) => {
        const owners: (string | undefined)[] = [];
        for (const range of Array.isArray(reply) ? (reply as unknown[]) : []) {
          if (!Array.isArray(range)) continue;
          const [start, end, primary] = range as [unknown, unknown, unknown];
          if (!Array.isArray(primary)) continue;
          const address = `${String(primary[0])}:${String(primary[1])}`;
          for (let slot = Number(start); slot <= Number(end) && slot < 16384; slot++) {
            owners[slot] = address;
          }
        }
        if (owners.length > 0) this.#owners = owners;
        this.#readAt = performance.now();
      })
      .catch(() => {
        this.#readAt = performance.now();
      })
      .finally(() => {
        this.#reading = false;
      });
  }
}

/** The store of a GLIDE `GlideClusterClient` created with `recoveryRequestsQueueSize: 0`. */
export class GlideClusterStore extends CommandStore {
  readonly #client: GlideClusterClientLike;
  readonly #slots: SlotMap;

  /**
   * @throws {InvalidInputError} when `client` is not a GLIDE cluster client, or keeps
   *   requests to retry after a reconnect.
   */
  constructor(client: GlideClusterClientLike) {
    if (!isGlideClusterClient(client)) {
      throw new InvalidInputError('client', 'a Valkey GLIDE GlideClusterClient', client);
    }
    checkGlideClient(client, 'client');
    super(
      (command, routeKey) =>
        routeKey === undefined
          ? client.customCommand(command, { route: 'randomNode' })
          : client.customCommand(command, { route: { type: 'primarySlotKey', key: routeKey } }),
      GLIDE_ERRORS,
      'customCommand returned no promise: use a Valkey GLIDE GlideClusterClient',
    );
    this.#client = client;
    this.#slots = new SlotMap(client);
  }

  override readonly cluster = true;

  /** The facts of every primary (the start-up checks read them all). */
  override serverFacts(): Promise<ServerFacts[]> {
    return callSafely(
      () => this.#client.customCommand(['INFO'], { route: 'allPrimaries' }),
      () => new UnavailableError('customCommand returned no promise'),
    ).then(
      (reply) => {
        // GLIDE answers a multi-node route with [{ key: 'host:port', value }] (a record in
        // older versions).
        const entries = Array.isArray(reply)
          ? (reply as { key?: unknown; value?: unknown }[]).map((e) => [e.key, e.value] as const)
          : Object.entries((reply ?? {}) as Record<string, unknown>);
        return entries.map(([node, text]) => ({
          ...factsFromInfo(String(text)),
          node: String(node),
        }));
      },
      (error: unknown) => {
        throw toSluiceError(error);
      },
    );
  }

  /** The primary serving `key`'s slot (`host:port`), per the last `CLUSTER SLOTS` read. */
  override groupOf(key: string): string {
    const slot = calculateSlot(key);
    return this.#slots.ownerOf(slot) ?? `slot ${slot}`;
  }

  override evalScript(
    script: LuaScript,
    keys: readonly string[],
    args: readonly string[],
    acks?: ReplicaAcks,
  ): Promise<unknown> {
    if (script !== batchScript || !spansSlots(keys)) {
      return super.evalScript(script, keys, args, acks);
    }
    // Several slots of one node: no declared keys, routed by the first key (see batch.ts).
    return this.evalRouted(crossSlotBatchScript, keys, args, keys[0] as string, '', acks).catch(
      (error: unknown) => {
        if (!redirected(error)) throw error;
        this.#slots.refresh();
        throw new RerouteError(error as Error);
      },
    );
  }
}
