/**
 * What every Redis client's store shares: run a script by its SHA (`EVALSHA`), reload it
 * with `EVAL` on `NOSCRIPT` — the server lost its script cache after a restart, a failover,
 * a new node or `SCRIPT FLUSH` — still inside the caller's deadline, and map every failure
 * to a sluice error. A client adapter gives only how to send one command (routed by its
 * first key, for a cluster) and how to read its client's errors.
 */
import type { LuaScript } from '../algorithms/script.js';
import { callSafely } from '../call-safely.js';
import { UnavailableError } from '../errors.js';
import type { ReplicaAcks, ScriptStore, ServerFacts } from '../stores/store.js';
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
    const command = ['EVALSHA', script.sha1, String(keys.length), ...keys, ...args];
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
      if (!this.#errors.isNoScript(error)) throw this.#errors.toSluiceError(error);
      // The server lost its script cache: EVAL sends the source and caches it again, on the
      // same node (the same route key), still inside the caller's deadline.
      command[0] = 'EVAL';
      command[1] = script.source;
      return this.#acknowledged(command, routeKey, acks).catch((retryError: unknown) => {
        throw this.#errors.toSluiceError(retryError);
      });
    });
  }

  /**
   * Sends `command`, and with `acks` a `WAIT` right behind it on the same connection (the
   * route key picks the node, and a client keeps one connection per node): resolves with
   * the command's reply once enough replicas have what it wrote.
   */
  #acknowledged(
    command: string[],
    routeKey: string | undefined,
    acks: ReplicaAcks | undefined,
  ): Promise<unknown> {
    const reply = this.send(command, routeKey);
    if (acks === undefined || acks.replicas === 0) return reply;
    const wait = ['WAIT', String(acks.replicas), String(acks.timeoutMs)];
    return Promise.all([reply, this.send(wait, routeKey)]).then(([result, acknowledged]) => {
      if (Number(acknowledged) >= acks.replicas) return result;
      throw new UnavailableError(
        `Redis unavailable: ${String(acknowledged)} of ${acks.replicas} replica(s) acknowledged the decision within ${acks.timeoutMs} ms (waitForReplicas): it is not given`,
      );
    });
  }

  /** True for a cluster client's store (set by the cluster stores). */
  readonly cluster: boolean = false;

  /** The server's version, role and eviction policy, from one `INFO` (a primary's). */
  serverFacts(): Promise<ServerFacts | readonly ServerFacts[]> {
    return this.send(['INFO'], undefined).then((reply) => factsFromInfo(String(reply)));
  }

  /** `send`, with a synchronous throw or a non-promise result turned into a rejection. */
  protected send(command: string[], firstKey: string | undefined): Promise<unknown> {
    return callSafely(
      () => this.#send(command, firstKey),
      () => new UnavailableError(this.#noPromise),
    );
  }
}
