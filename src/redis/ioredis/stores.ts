/**
 * The stores of an ioredis `Redis` (`new Redis()`) and an ioredis `Cluster`
 * (`new Redis.Cluster()`), typed structurally: ioredis is an optional peer dependency, and
 * nothing here loads it or needs its types.
 *
 * A command goes out as `client.call(name, args)`; a Cluster routes `EVALSHA` by its first
 * key. Create the client with `enableOfflineQueue: false` (for a Cluster, at the top level of
 * its options) so that commands fail at once while Redis is unreachable: a client
 * with its offline queue on is refused when the store is made. `maxRetriesPerRequest: 0`
 * is advised too: otherwise a command already sent when the connection drops waits for up
 * to 20 reconnections (ioredis's default) and is sent again after one, instead of failing
 * at once.
 *
 * Cluster: as `NodeRedisClusterStore` — the coalescer sends one batch per node
 * ({@link IoRedisClusterStore.groupOf}, from the client's slot map), a batch whose keys span
 * slots goes as the `allow-cross-slot-keys` batch script, and a batch refused before it ran
 * (a redirection, or ioredis giving up following them) is a `RerouteError`: the coalescer
 * sends each of its calls again, alone.
 */
import calculateSlot from 'cluster-key-slot';
import { batchScript, crossSlotBatchScript } from '../../algorithms/batch.js';
import type { LuaScript } from '../../algorithms/script.js';
import { callSafely, readProperty } from '../../call-safely.js';
import { InvalidInputError, SluiceError, UnavailableError } from '../../errors.js';
import { type ReplicaAcks, RerouteError, type ServerFacts } from '../../stores/store.js';
import {
  isScriptCommand,
  type ScriptConnectionBeside,
  withScriptConnection,
} from '../beside-client.js';
import { redirected, spansSlots } from '../cluster-slots.js';
import { type ClientErrors, CommandStore } from '../command-store.js';
import { ioredisFirstConnection } from '../first-connection.js';
import { HandshakeRefusals } from '../handshake-refusals.js';
import { errorFromReply } from '../reply-errors.js';
import { factsFromInfo } from '../server-checks.js';

/** The options of an ioredis client that sluice reads. */
export interface IoRedisOptionsLike {
  /** Must be `false`: commands fail at once while Redis is unreachable. */
  readonly enableOfflineQueue?: boolean | undefined;
  /** Put before every key by the client (so sluice's keys carry it too). */
  readonly keyPrefix?: string | undefined;
}

/** The part of an ioredis `Redis` (`new Redis({ enableOfflineQueue: false })`) that sluice uses. */
export interface IoRedisLike {
  call(command: string, args: string[]): Promise<unknown>;
  /** `false` for a `Redis`, `true` for a `Cluster`. */
  readonly isCluster: boolean;
  readonly options: IoRedisOptionsLike;
}

/** The part of an ioredis `Cluster` (`new Redis.Cluster(nodes, { enableOfflineQueue: false })`). */
export interface IoRedisClusterLike extends IoRedisLike {
  /** `redisOptions.enableOfflineQueue` must not be `true` either. */
  readonly options: IoRedisOptionsLike & {
    readonly redisOptions?: object | undefined;
    /** Must be `0`: a command refused with "Connection is closed" is never sent again. */
    readonly retryDelayOnFailover?: number;
  };
  /** Per slot, the keys (`host:port`) of the nodes serving it, the primary first. */
  readonly slots: ArrayLike<readonly string[] | undefined>;
  /** The client of each node of a role. */
  nodes(role: 'master'): readonly IoRedisLike[];
}

/**
 * The options an ioredis `Redis` must be created with to be given to a limiter: no offline
 * queue (commands fail at once while Redis is unreachable), no retry of a command whose
 * connection was lost, no resend after a reconnect (a script that may have run is never sent
 * again), and a `socketTimeout` (ms): a connection with commands pending that receives
 * nothing for that long is replaced, so a connection that stopped answering (a black hole, a
 * load balancer that lost its state) does not hold its calls until the operating system
 * gives up on it. Any `socketTimeout` from 100 ms is accepted; keep it above the longest
 * reply you expect, and give sluice a client that runs no blocking commands (`BLPOP`…),
 * which that timeout would cut. Spread them into the client's options.
 */
export const IOREDIS_OPTIONS = Object.freeze({
  enableOfflineQueue: false,
  maxRetriesPerRequest: 0,
  autoResendUnfulfilledCommands: false,
  socketTimeout: 3000,
} as const);

/**
 * The options an ioredis `Cluster` must be created with (`new Redis.Cluster(nodes,
 * { ...IOREDIS_CLUSTER_OPTIONS })`): as {@link IOREDIS_OPTIONS}, with the per-node ones in
 * `redisOptions` (merge your own into it), and no resend after a failover.
 */
export const IOREDIS_CLUSTER_OPTIONS = Object.freeze({
  enableOfflineQueue: false,
  retryDelayOnFailover: 0,
  redisOptions: Object.freeze({
    maxRetriesPerRequest: 0,
    autoResendUnfulfilledCommands: false,
    socketTimeout: 3000,
  }),
} as const);

/** The last error reply ioredis gave up on after following redirections. */
const GAVE_UP = /^Too many Cluster redirections\. Last error: ReplyError: ([\s\S]*)$/;

/**
 * The text of a Redis error reply inside an ioredis failure: a `ReplyError` (from the
 * `redis-errors` package; told by its name, so ioredis is never loaded), or the last reply
 * of a Cluster that gave up following redirections. Undefined for anything else (a closed
 * connection, `MaxRetriesPerRequestError`, a command timeout, a Cluster not ready).
 */
function replyText(error: unknown): string | undefined {
  if (!(error instanceof Error)) return undefined;
  if (error.name === 'ReplyError') return error.message;
  return GAVE_UP.exec(error.message)?.[1];
}

/** Maps an ioredis failure to a sluice error (see `reply-errors.ts`). */
export function toSluiceError(error: unknown): Error {
  if (error instanceof SluiceError) return error;
  const reply = replyText(error);
  if (reply !== undefined) return errorFromReply(reply, error);
  const message = error instanceof Error ? error.message : String(error);
  return new UnavailableError(`Redis unavailable: ${message}`, { cause: error });
}

/** How ioredis clients fail: `ReplyError` for an error reply. */
export const IOREDIS_ERRORS: ClientErrors = {
  toSluiceError,
  isNoScript: (error) => replyText(error)?.startsWith('NOSCRIPT') === true,
};

const read = readProperty;

/**
 * Refuses an ioredis client whose offline queue is on: while Redis is unreachable its
 * commands would pile up in process instead of failing at once.
 *
 * @param field the name of the client in the error (`client`, `options.client`)
 * @throws {InvalidInputError} naming what to set
 */
export function checkIoRedisClient(client: unknown, field: string): void {
  const isCluster = read(client, 'isCluster') === true;
  const options = read(client, 'options');
  if (read(options, 'enableOfflineQueue') !== false) {
    throw new InvalidInputError(
      field,
      isCluster
        ? 'an ioredis Cluster created with enableOfflineQueue: false at the top level of its options (new Redis.Cluster(nodes, { enableOfflineQueue: false })), so that commands fail at once while Redis is unreachable instead of queueing'
        : 'an ioredis Redis created with enableOfflineQueue: false (new Redis({ enableOfflineQueue: false })), so that commands fail at once while Redis is unreachable instead of queueing',
      client,
    );
  }
  if (isCluster && read(read(options, 'redisOptions'), 'enableOfflineQueue') === true) {
    throw new InvalidInputError(
      field,
      'an ioredis Cluster without redisOptions.enableOfflineQueue: true (leave it out; enableOfflineQueue: false belongs at the top level of its options)',
      client,
    );
  }
  const nodeOptions = isCluster ? read(options, 'redisOptions') : options;
  // Without it, a command whose connection is lost is neither resent nor rejected: its
  // promise never settles, and its in-flight slot is held for good (a few restarts of Redis
  // under load fill maxInFlight, and every later call is an OverloadError).
  if (read(nodeOptions, 'maxRetriesPerRequest') !== 0) {
    throw new InvalidInputError(
      field,
      isCluster
        ? 'an ioredis Cluster created with redisOptions: { maxRetriesPerRequest: 0 }, so that a command whose connection is lost fails at once'
        : 'an ioredis Redis created with maxRetriesPerRequest: 0, so that a command whose connection is lost fails at once',
      client,
    );
  }
  // A Cluster resends a command refused with "Connection is closed" after
  // retryDelayOnFailover: one that may have run would run twice (a take counted twice).
  if (isCluster && read(options, 'retryDelayOnFailover') !== 0) {
    throw new InvalidInputError(
      field,
      'an ioredis Cluster created with retryDelayOnFailover: 0, so that a call whose connection was lost (it may have run) is never sent again',
      client,
    );
  }
  // ioredis resends, after a reconnect, the commands whose answer the lost connection
  // never brought: a script that may have run would run twice. Never replay such a call.
  if (read(nodeOptions, 'autoResendUnfulfilledCommands') !== false) {
    throw new InvalidInputError(
      field,
      isCluster
        ? 'an ioredis Cluster created with redisOptions: { autoResendUnfulfilledCommands: false }, so that a call whose connection dropped (it may have run) is never sent again'
        : 'an ioredis Redis created with autoResendUnfulfilledCommands: false, so that a call whose connection dropped (it may have run) is never sent again',
      client,
    );
  } // Without it, a connection that stopped answering keeps its calls (and their replies never
  // come) until the operating system gives up on the socket.
  const socketTimeout = read(nodeOptions, 'socketTimeout');
  if (typeof socketTimeout !== 'number' || !(socketTimeout >= 100)) {
    throw new InvalidInputError(
      field,
      isCluster
        ? 'an ioredis Cluster created with redisOptions: { socketTimeout } of at least 100 ms (IOREDIS_CLUSTER_OPTIONS from sluice/ioredis), so that a connection that stopped answering is replaced'
        : 'an ioredis Redis created with socketTimeout of at least 100 ms (IOREDIS_OPTIONS from sluice/ioredis), so that a connection that stopped answering is replaced',
      client,
    );
  }
}

/** The key prefix an ioredis client puts before every key ('' for none). */
function keyPrefixOf(client: IoRedisLike): string {
  const prefix = read(client.options, 'keyPrefix');
  return typeof prefix === 'string' ? prefix : '';
}

/**
 * The store of an ioredis `Redis` created with `enableOfflineQueue: false`. A call that
 * fails because the client is not ready while Redis refuses its handshake is the
 * `RedisConfigError` of that refusal (see `refusals.ts`).
 */
export class IoRedisStore extends CommandStore {
  /** The handshake refusals the client reports. */
  protected readonly refusals: HandshakeRefusals;

  /**
   * With `scripts` (an ioredis `Redis`, not a `Cluster`), the limiter's scripts go over that
   * connection of sluice's own while it is ready and the client is open, and over the client
   * otherwise (see `../beside-client.ts`).
   *
   * @throws {InvalidInputError} when `client` has no `call` function, or its offline queue
   *   is on.
   */
  constructor(client: IoRedisLike, scripts?: ScriptConnectionBeside) {
    if (typeof read(client, 'call') !== 'function') {
      throw new InvalidInputError('client', 'an ioredis Redis or Cluster', client);
    }
    checkIoRedisClient(client, 'client');
    const refusals = HandshakeRefusals.of(client, read(client, 'isCluster') === true);
    const errors = withScriptConnection(IOREDIS_ERRORS);
    const answered = (reply: unknown) => {
      refusals.answered();
      return reply;
    };
    super(
      (command) => {
        const beside = scripts?.ready;
        if (beside !== undefined && isScriptCommand(command)) {
          return beside.call(command).then(answered);
        }
        return callSafely(
          () => client.call(command[0] as string, command.slice(1)),
          () => new UnavailableError('call returned no promise: use an ioredis Redis or Cluster'),
        ).then(answered);
      },
      {
        toSluiceError: (error) => {
          const mapped = errors.toSluiceError(error);
          return (mapped instanceof UnavailableError && refusals.behind()) || mapped;
        },
        isNoScript: errors.isNoScript,
      },
      'call returned no promise: use an ioredis Redis or Cluster',
    );
    this.refusals = refusals;
    this.#client = client;
    this.pipelineDepth = scripts === undefined ? 2 : undefined;
  }

  readonly #client: IoRedisLike;

  /**
   * Two script calls in flight per node, not four (see `ScriptStore.pipelineDepth`): ioredis
   * builds a `Command` of every argument of a call and writes each call on its own, so that
   * at a few dozen callers this process, not Redis, bounds the rate (bench/PROFILE.md). With
   * a script connection beside the client, the coalescer's default.
   */
  readonly pipelineDepth: number | undefined;

  /** See `ScriptStore.firstConnection`: the connection, and a `Cluster`'s primaries. */
  firstConnection(): Promise<void> | undefined {
    return ioredisFirstConnection(this.#client, read(this.#client, 'isCluster') === true);
  }
}

/** The store of an ioredis `Cluster` created with `enableOfflineQueue: false`. */
export class IoRedisClusterStore extends IoRedisStore {
  readonly #cluster: IoRedisClusterLike;
  readonly #prefix: string;

  /**
   * @throws {InvalidInputError} when `cluster` has no `call` function, or its offline queue
   *   is on.
   */
  constructor(cluster: IoRedisClusterLike) {
    super(cluster);
    this.#cluster = cluster;
    this.#prefix = keyPrefixOf(cluster);
  }

  override readonly cluster = true;

  /** The facts of every primary the client knows (the start-up checks read them all). */
  override serverFacts(): Promise<ServerFacts[]> {
    let nodes: readonly IoRedisLike[];
    try {
      nodes = this.#cluster.nodes('master');
    } catch {
      nodes = [];
    }
    const reads = nodes.map((node) =>
      callSafely(
        () => node.call('INFO', []),
        () => new UnavailableError('call returned no promise'),
      ).then(
        (reply) => ({
          ...factsFromInfo(String(reply)),
          node: `${read(node.options, 'host')}:${read(node.options, 'port')}`,
        }),
        () => undefined,
      ),
    );
    return Promise.all(reads).then((all) => all.filter((f) => f !== undefined) as ServerFacts[]);
  }

  /** The node serving `key`'s slot (`host:port`, its primary), per the client's slot map. */
  override groupOf(key: string): string {
    const slot = calculateSlot(this.#prefix + key);
    let node: string | undefined;
    try {
      node = this.#cluster.slots[slot]?.[0];
    } catch {
      node = undefined; // no slot map yet
    }
    return node ?? `slot ${slot}`;
  }

  override evalScript(
    script: LuaScript,
    keys: readonly string[],
    args: readonly string[],
    acks?: ReplicaAcks,
  ): Promise<unknown> {
    if (script !== batchScript || !spansSlots(keys, this.#prefix)) {
      return super.evalScript(script, keys, args, acks);
    }
    // Several slots of one node: no declared keys (ioredis prefixes only declared keys, so
    // the prefix is added here), sent to the node of the first key (see batch.ts).
    return this.evalRouted(
      crossSlotBatchScript,
      keys,
      args,
      keys[0] as string,
      this.#prefix,
      acks,
    ).catch((error: unknown) => {
      throw redirected(error) ? new RerouteError(error as Error) : error;
    });
  }

  /**
   * A command with no declared keys and a route key goes to the primary serving that key's
   * slot (ioredis would pick any node); every other command through the cluster client.
   */
  protected override send(command: string[], routeKey: string | undefined): Promise<unknown> {
    // A routed script (no declared keys) and the WAIT behind a script go to its node.
    if (routeKey === undefined || (command[2] !== '0' && command[0] !== 'WAIT')) {
      return super.send(command, routeKey);
    }
    const address = this.groupOf(routeKey);
    let node: IoRedisLike | undefined;
    try {
      node = this.#cluster
        .nodes('master')
        .find((n) => `${read(n.options, 'host')}:${read(n.options, 'port')}` === address);
    } catch {
      node = undefined;
    }
    if (node === undefined) {
      // No such primary in the client's view now: nothing was sent; send each call alone.
      return Promise.reject(
        new RerouteError(new UnavailableError(`no cluster node ${address} in the slot map`)),
      );
    }
    const target = node;
    return callSafely(
      () => target.call(command[0] as string, command.slice(1)),
      () => new UnavailableError('call returned no promise: use an ioredis Cluster'),
    ).then((reply) => {
      this.refusals.answered();
      return reply;
    });
  }
}
