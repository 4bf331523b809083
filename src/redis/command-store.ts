/**
 * What every Redis client's store shares: run a script by its SHA (`EVALSHA`), reload it
 * with `EVAL` on `NOSCRIPT` — the server lost its script cache after a restart, a failover,
 * a new node or `SCRIPT FLUSH` — still inside the caller's deadline, and map every failure
 * to a sluice error. A client adapter gives only how to send one command (routed by its
 * first key, for a cluster) and how to read its client's errors.
 *
 * With replica acknowledgements (`waitForReplicas`), a `WAIT` follows each script on its
 * connection, given half the caller's deadline, so that a replica that does not answer is
 * reported as such (`UnavailableError`) before the deadline. A `WAIT` blocks its
 * connection while it waits: once one comes back short, the node's calls fail at once,
 * before any script runs, while one call at a time goes as the probe that finds the
 * replicas back — instead of queueing behind one `WAIT` after another.
 */
import type { LuaScript } from '../algorithms/script.js';
import { asPromise } from '../call-safely.js';
import { UnavailableError } from '../errors.js';
import {
  type ReplicaAcks,
  RerouteError,
  type ScriptStore,
  type ServerFacts,
} from '../stores/store.js';
import { factsFromInfo } from './server-checks.js';

/** How a client adapter sends one command: `firstKey` routes it in a cluster. */
export type SendCommand = (command: string[], firstKey: string | undefined) => unknown;

/** How a client adapter reads its client's failures. */
export interface ClientErrors {
  /** The sluice error for a failure (`errorFromReply` for an error reply). */
  toSluiceError(error: unknown): Error;
  /** True when the failure is a `NOSCRIPT` reply. */
  isNoScript(error: unknown): boolean;
}

export abstract class CommandStore implements ScriptStore {
  readonly #send: SendCommand;
  readonly #errors: ClientErrors;
  readonly #noPromise: string;
  /**
   * Nodes (by `groupOf`, '' for a single node) whose last `WAIT` came back short, and
   * whether a call there is the probe now.
   */
  readonly #shortOfReplicas = new Map<string, { probing: boolean }>();

  /** The node group of a key, for a cluster's store (see `ScriptStore.groupOf`). */
  groupOf?(key: string): string;

  /**
   * @param noPromise what to say when `send` returns no promise (a callback-style client)
   */
  constructor(send: SendCommand, errors: ClientErrors, noPromise: string) {
    this.#send = send;
    this.#errors = errors;
    this.#noPromise = noPromise;
  }

  /** Every client's store can wait for replicas (see `ReplicaAcks`). */
  readonly replicaAcks = true;

  evalScript(
    script: LuaScript,
    keys: readonly string[],
    args: readonly string[],
    acks?: ReplicaAcks,
  ): Promise<unknown> {
    const command = ['EVALSHA', script.sha1, String(keys.length)];
    for (const key of keys) command.push(key);
    for (const arg of args) command.push(arg);
    return this.#run(script, command, keys[0], acks);
  }

  /**
   * Runs `script` with no declared keys — its keys and arguments in ARGV: the key count,
   * the keys (each after `keyPrefix`, which a client adds only to declared keys), then
   * `args` — on the node serving `routeKey`. For a batch whose keys span slots of one node:
   * Redis checks the slots of declared keys before running a script, not of keys a script
   * declared `allow-cross-slot-keys` touches (each must still be served by the node).
   */
  protected evalRouted(
    script: LuaScript,
    keys: readonly string[],
    args: readonly string[],
    routeKey: string,
    keyPrefix = '',
    acks?: ReplicaAcks,
  ): Promise<unknown> {
    const command = ['EVALSHA', script.sha1, '0', String(keys.length)];
    for (const key of keys) command.push(keyPrefix + key);
    for (const arg of args) command.push(arg);
    return this.#run(script, command, routeKey, acks);
  }

  /** Sends `command` (an EVALSHA of `script`); on NOSCRIPT, again as EVAL on the same node. */
  #run(
    script: LuaScript,
    command: string[],
    routeKey: string | undefined,
    acks: ReplicaAcks | undefined,
  ): Promise<unknown> {
    return this.#acknowledged(command, routeKey, acks).catch((error: unknown) => {
      // A batch refused before it ran (a cluster store's own verdict): the coalescer's to
      // resend, request by request, not a failure to map.
      if (error instanceof RerouteError) throw error;
      if (!this.#errors.isNoScript(error)) throw this.#errors.toSluiceError(error);
      // The server lost its script cache: EVAL sends the source and caches it again, on the
      // same node (the same route key), still inside the caller's deadline.
      command[0] = 'EVAL';
      command[1] = script.source;
      return this.#acknowledged(command, routeKey, acks).catch((retryError: unknown) => {
        if (retryError instanceof RerouteError) throw retryError;
        throw this.#errors.toSluiceError(retryError);
      });
    });
  }

  /**
   * Sends `command`, and with `acks` a `WAIT` right behind it on the same connection (the
   * route key picks the node, and a client keeps one connection per node): resolves with
   * the command's reply once enough replicas have what it wrote. On a node short of
   * replicas, only the probe is sent; every other call fails at once.
   */
  #acknowledged(
    command: string[],
    routeKey: string | undefined,
    acks: ReplicaAcks | undefined,
  ): Promise<unknown> {
    if (acks === undefined || acks.replicas === 0) return this.send(command, routeKey);
    const node = routeKey === undefined ? '' : (this.groupOf?.(routeKey) ?? '');
    const short = this.#shortOfReplicas.get(node);
    if (short?.probing === true) {
      return Promise.reject(
        new UnavailableError(
          `Redis unavailable: fewer than ${acks.replicas} replica(s) acknowledged this node's last decision (waitForReplicas); no call runs there until one finds them back`,
        ),
      );
    }
    if (short !== undefined) short.probing = true;
    const budgetMs = Math.max(1, Math.floor(acks.timeoutMs / 2));
    const wait = ['WAIT', String(acks.replicas), String(budgetMs)];
    return Promise.all([this.send(command, routeKey), this.send(wait, routeKey)]).then(
      ([result, acknowledged]) => {
        if (Number(acknowledged) >= acks.replicas) {
          this.#shortOfReplicas.delete(node);
          return result;
        }
        this.#shortOfReplicas.set(node, { probing: false });
        throw new UnavailableError(
          `Redis unavailable: ${String(acknowledged)} of ${acks.replicas} replica(s) acknowledged the decision within ${budgetMs} ms (waitForReplicas): it is not given`,
        );
      },
      (error: unknown) => {
        if (short !== undefined) short.probing = false;
        throw error;
      },
    );
  }

  /** True for a cluster client's store (set by the cluster stores). */
  readonly cluster: boolean = false;

  /** The server's version, role and eviction policy, from one `INFO` (a primary's). */
  serverFacts(): Promise<ServerFacts | readonly ServerFacts[]> {
    return this.send(['INFO'], undefined).then(
      (reply) => factsFromInfo(String(reply)),
      (error: unknown) => {
        throw this.#errors.toSluiceError(error);
      },
    );
  }

  /** `send`, with a synchronous throw or a non-promise result turned into a rejection. */
  protected send(command: string[], firstKey: string | undefined): Promise<unknown> {
    let result: unknown;
    try {
      result = this.#send(command, firstKey);
    } catch (error) {
      return Promise.reject(error);
    }
    return asPromise(result, this.#noPromiseError);
  }

  readonly #noPromiseError = (): Error => new UnavailableError(this.#noPromise);
}
