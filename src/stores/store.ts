/**
 * The one thing the decision path needs from a store: run a script atomically on the
 * server and return its raw reply, or reject with a sluice error
 * (`UnavailableError`, `StoreError`).
 */
import type { LuaScript } from '../algorithms/script.js';

export interface ScriptStore {
  /**
   * Runs `script` with `keys` and `args` in one atomic step. Implementations use the
   * server's script cache (EVALSHA) and reload the script transparently after a restart or
   * `SCRIPT FLUSH` (NOSCRIPT is never reported as a failure).
   */
  evalScript(
    script: LuaScript,
    keys: readonly string[],
    args: readonly string[],
    acks?: ReplicaAcks,
  ): Promise<unknown>;
  /**
   * True when the store can wait for replicas after a script (Redis `WAIT`, see
   * {@link ReplicaAcks}); a limiter given `waitForReplicas` requires it.
   */
  readonly replicaAcks?: boolean;
  /**
   * The clock this store decides with, in ms, when it is not Redis's (`MemoryStore` with an
   * injected clock). The limiter's local denial cache then follows it; by default the cache
   * uses the process's monotonic clock.
   */
  readonly clock?: () => number;
  /**
   * The server's version, role and eviction policy, for the limiter's start-up checks
   * (see `redis/server-checks.ts`); stores without a server (`MemoryStore`) leave it out.
   */
  serverFacts?(): Promise<ServerFacts | readonly ServerFacts[]>;
  /**
   * While the client is still making its first connections: a promise that settles (never
   * rejects) once it is usable, once its first attempt failed, or after a bound; `undefined`
   * when it is usable already (see `redis/first-connection.ts`). The limiter holds the calls
   * issued meanwhile, within their deadline. Stores that are always usable leave it out.
   */
  firstConnection?(): Promise<void> | undefined;
  /** True for a store of a cluster client (the start-up checks then read every primary). */
  readonly cluster?: boolean;
  /** True for a store of a Sentinel client: its primary is failed over by Sentinel. */
  readonly sentinel?: boolean;
  /**
   * For a store of several nodes (Redis Cluster): the node that serves `key`, so that the
   * coalescer sends one batch per node. Absent: one batch for everything (one server).
   */
  groupOf?(key: string): string;
  /**
   * True when the client writes every command of one event-loop turn together, after the
   * turn (node-redis: in a `setImmediate`), rather than each as it is sent. The coalescer
   * then sends one batch per node per turn: batches sent earlier in the turn would reach
   * Redis no sooner, only as more script calls (see `PIPELINE_DEPTH` in `coalescer.ts`).
   */
  readonly writesPerTurn?: boolean;
  /**
   * How many script calls the coalescer aims to keep in flight per node (see
   * `PIPELINE_DEPTH` in `coalescer.ts`, the default): a batch goes before the end of its turn
   * once it holds this share of the node's load. Fewer for a client whose every call costs
   * this process much (ioredis builds a `Command` of every argument and writes each call on
   * its own): fewer, larger calls, less of the process's time per decision. An integer ≥ 1;
   * anything else is the default.
   */
  readonly pipelineDepth?: number;
}

/**
 * Acknowledge a script's reply only once `replicas` replicas have received what it wrote:
 * the store sends Redis `WAIT` right behind the script, on the same connection, and rejects
 * with an `UnavailableError` when fewer acknowledge in time (the script ran; its decision is
 * not given to anyone). `timeoutMs` is the caller's deadline: the stores of sluice give the
 * `WAIT` half of it.
 */
export interface ReplicaAcks {
  readonly replicas: number;
  readonly timeoutMs: number;
}

/**
 * A store's answer to a batch of several requests that was refused before any of it ran
 * (in a cluster, a slot it named is served elsewhere): the coalescer sends each request of
 * the batch again, on its own. Never for a call that may have run.
 */
export class RerouteError extends Error {
  constructor(readonly failure: Error) {
    super(`batch refused before it ran (${failure.message}): resend each request alone`);
    this.name = 'RerouteError';
  }
}

/** What a store tells the start-up checks about the server. */
export interface ServerFacts {
  /** `redis_version`, e.g. `"7.0.15"`. */
  readonly version: string;
  /** `role`: `"master"` or `"slave"` (a replica). */
  readonly role: string;
  /** `maxmemory_policy`, e.g. `"noeviction"`. */
  readonly maxmemoryPolicy: string;
  /** `cluster_enabled`: the server is a Redis Cluster node. */
  readonly clusterEnabled?: boolean;
  /** `connected_slaves`: replicas attached to this primary now. */
  readonly connectedReplicas?: number;
  /** `min-replicas-to-write` is on (INFO shows `min_slaves_good_slaves` only then). */
  readonly minReplicasToWrite?: boolean;
  /** Which node, for a cluster (`host:port`). */
  readonly node?: string;
}
