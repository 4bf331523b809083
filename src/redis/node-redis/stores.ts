/**
 * The stores of node-redis v6 clients that the application made itself: `createClient()`,
 * `createCluster()` and `createSentinel()`. Typed structurally, and node-redis's errors are
 * recognised by their class name, so nothing here loads the `redis` package: the root entry
 * accepts these clients without importing it.
 *
 * Each depends on the smallest surface of its client: `sendCommand`. Create the client with
 * `disableOfflineQueue: true` so that commands fail at once while Redis is unreachable.
 *
 * Cluster: every key of one tenant shares one hash slot (key scheme v2), so a take, a
 * `takeAll` or a reset is one slot. The coalescer groups a turn's calls by the node that
 * serves their slots ({@link NodeRedisClusterStore.groupOf}, from the client's slot map) and
 * sends one batch per node: the `allow-cross-slot-keys` batch script with its keys in ARGV,
 * routed to the node of its first key (see `crossSlotBatchScript`). If the slot map was
 * stale, a request whose key the node does not serve fails at its first read ("non local
 * key"), before it writes anything, and the coalescer sends it again alone (one slot, which
 * the client routes and redirects); a batch refused as a whole before it ran is a
 * `RerouteError` (each call sent again alone). A call that may have run (a timeout, a lost
 * connection) is never resent.
 */
import calculateSlot from 'cluster-key-slot';
import { batchScript, crossSlotBatchScript } from '../../algorithms/batch.js';
import type { LuaScript } from '../../algorithms/script.js';
import { InvalidInputError, SluiceError, UnavailableError } from '../../errors.js';
import { type ReplicaAcks, RerouteError, type ServerFacts } from '../../stores/store.js';
import {
  isScriptCommand,
  type ScriptConnectionBeside,
  withScriptConnection,
} from '../beside-client.js';
import { redirected, spansSlots } from '../cluster-slots.js';
import { type ClientErrors, CommandStore } from '../command-store.js';
import { nodeRedisFirstConnection } from '../first-connection.js';
import { HandshakeRefusals } from '../handshake-refusals.js';
import { errorFromReply } from '../reply-errors.js';
import { factsFromInfo } from '../server-checks.js';

/** The part of a node-redis v6 client (`createClient()`) that sluice uses. */
export interface NodeRedisClientLike {
  sendCommand(args: string[]): Promise<unknown>;
}

/** The part of a node-redis `createCluster()` client that sluice uses. */
export interface NodeRedisClusterLike {
  /** The primaries, each with its address and (once connected) its client. */
  readonly masters?: ArrayLike<{
    readonly address?: string;
    readonly client?: { sendCommand(args: string[]): Promise<unknown> } | unknown;
  }>;
  sendCommand(
    firstKey: string | undefined,
    isReadonly: boolean | undefined,
    args: string[],
  ): Promise<unknown>;
  /** Per slot, its shard: the primary's `address` (`host:port`). */
  readonly slots: ArrayLike<{ readonly master?: { readonly address?: string } } | undefined>;
}

/** The part of a node-redis `createSentinel()` client that sluice uses. */
export interface NodeRedisSentinelLike {
  sendCommand(isReadonly: boolean | undefined, args: string[]): Promise<unknown>;
}

/**
 * Whether `error` is a node-redis error reply: an instance of its `ErrorReply` class (or of
 * a subclass, `SimpleError`, `BlobError`), told by the class's name so that node-redis is
 * never loaded here.
 */
export function isErrorReply(error: unknown): error is Error {
  if (!(error instanceof Error)) return false;
  for (
    let proto: unknown = Object.getPrototypeOf(error);
    proto !== null && proto !== Error.prototype;
    proto = Object.getPrototypeOf(proto)
  ) {
    if ((proto as { constructor?: { name?: unknown } }).constructor?.name === 'ErrorReply') {
      return true;
    }
  }
  return false;
}

/** Maps a node-redis failure to a sluice error (see `reply-errors.ts`). */
export function toSluiceError(error: unknown): Error {
  if (error instanceof SluiceError) return error;
  if (isErrorReply(error)) return errorFromReply(error.message, error);
  const message = error instanceof Error ? error.message : String(error);
  return new UnavailableError(`Redis unavailable: ${message}`, { cause: error });
}

/** How node-redis clients fail: an error reply is an `ErrorReply`. */
export const NODE_REDIS_ERRORS: ClientErrors = {
  toSluiceError,
  isNoScript: (error) => isErrorReply(error) && error.message.startsWith('NOSCRIPT'),
};

/** How node-redis clients fail, with a script connection of sluice's own beside them. */
export const SCRIPT_CONNECTION_ERRORS: ClientErrors = withScriptConnection(NODE_REDIS_ERRORS);

/**
 * The store of a node-redis v6 client (`createClient()`), or anything with `sendCommand(args)`.
 * With `scripts`, the limiter's scripts go over that connection of sluice's own while it is
 * ready and the client is open, and over the client otherwise (see `../beside-client.ts`).
 */
export class NodeRedisStore extends CommandStore {
  /** @throws {InvalidInputError} when `client` has no `sendCommand` function. */
  constructor(client: NodeRedisClientLike, scripts?: ScriptConnectionBeside) {
    if (typeof (client as Partial<NodeRedisClientLike> | null)?.sendCommand !== 'function') {
      throw new InvalidInputError('client', 'a node-redis v6 client (createClient())', client);
    }
    // A refused handshake (a wrong password) is heard on the client's `error` events; the
    // calls meanwhile fail with "The client is offline", which it then explains.
    const refusals = HandshakeRefusals.of(client, false, (error) => {
      throw error; // as the EventEmitter would, without the owner's listener
    });
    const answered = (answer: unknown) => {
      refusals.answered();
      return answer;
    };
    super(
      (command) => {
        const beside = scripts?.ready;
        if (beside !== undefined && isScriptCommand(command)) {
          return beside.call(command).then(answered);
        }
        const reply = client.sendCommand(command);
        return typeof (reply as Partial<Promise<unknown>> | undefined)?.then === 'function'
          ? reply.then(answered)
          : reply;
      },
      {
        toSluiceError: (error) => {
          const mapped = SCRIPT_CONNECTION_ERRORS.toSluiceError(error);
          return (mapped instanceof UnavailableError && refusals.behind()) || mapped;
        },
        isNoScript: SCRIPT_CONNECTION_ERRORS.isNoScript,
      },
      'sendCommand returned no promise: use a node-redis v6 client, not .legacy()',
    );
    this.#client = client;
    this.writesPerTurn = scripts === undefined;
  }

  readonly #client: NodeRedisClientLike;

  /**
   * node-redis writes a turn's commands together, in a `setImmediate`; with a script
   * connection beside it, the scripts are written as they are made.
   */
  readonly writesPerTurn: boolean;

  /** See `ScriptStore.firstConnection`. */
  firstConnection(): Promise<void> | undefined {
    return nodeRedisFirstConnection(this.#client, false);
  }
}

/** The store of a node-redis v6 cluster (`createCluster()`). */
export class NodeRedisClusterStore extends CommandStore {
  readonly #cluster: NodeRedisClusterLike;

  constructor(cluster: NodeRedisClusterLike) {
    super(
      (command, firstKey) => cluster.sendCommand(firstKey, false, command),
      NODE_REDIS_ERRORS,
      'sendCommand returned no promise: use a node-redis v6 cluster (createCluster())',
    );
    this.#cluster = cluster;
  }

  override readonly cluster = true;

  /** Each node's client writes a turn's commands together, in a `setImmediate`. */
  readonly writesPerTurn = true;

  /** See `ScriptStore.firstConnection`. */
  firstConnection(): Promise<void> | undefined {
    return nodeRedisFirstConnection(this.#cluster, true);
  }

  /** The facts of every primary the client knows (the start-up checks read them all). */
  override serverFacts(): Promise<ServerFacts[]> {
    let masters: NodeRedisClusterLike['masters'];
    try {
      masters = this.#cluster.masters;
    } catch {
      masters = undefined;
    }
    const reads = Array.from(masters ?? [], (master) => {
      const client = master.client as { sendCommand?: (args: string[]) => Promise<unknown> };
      if (typeof client?.sendCommand !== 'function') return Promise.resolve(undefined);
      return client.sendCommand(['INFO']).then(
        (reply) => ({ ...factsFromInfo(String(reply)), node: master.address }),
        () => undefined,
      );
    });
    return Promise.all(reads).then((all) => all.filter((f) => f !== undefined) as ServerFacts[]);
  }

  /** The node serving `key`'s slot (`host:port`), per the client's slot map. */
  override groupOf(key: string): string {
    const slot = calculateSlot(key);
    let address: string | undefined;
    try {
      address = this.#cluster.slots[slot]?.master?.address;
    } catch {
      address = undefined; // no slot map yet
    }
    return address ?? `slot ${slot}`;
  }

  override evalScript(
    script: LuaScript,
    keys: readonly string[],
    args: readonly string[],
    acks?: ReplicaAcks,
  ): Promise<unknown> {
    if (script !== batchScript || !spansSlots(keys))
      return super.evalScript(script, keys, args, acks);
    // Several slots of one node: no declared keys, routed by the first key (see batch.ts).
    return this.evalRouted(crossSlotBatchScript, keys, args, keys[0] as string, '', acks).catch(
      (error: unknown) => {
        throw redirected(error) ? new RerouteError(error as Error) : error;
      },
    );
  }
}

/** The store of a node-redis v6 sentinel client (`createSentinel()`). */
export class NodeRedisSentinelStore extends CommandStore {
  readonly sentinel = true;

  /** node-redis writes a turn's commands together, in a `setImmediate`. */
  readonly writesPerTurn = true;

  constructor(sentinel: NodeRedisSentinelLike) {
    super(
      (command) => sentinel.sendCommand(false, command),
      NODE_REDIS_ERRORS,
      'sendCommand returned no promise: use a node-redis v6 sentinel (createSentinel())',
    );
  }
}
