/**
 * Coalescing: the takes issued in the same event-loop turn go to Redis as one script call
 * (the batch script), each caller still getting its own exact decision.
 *
 * A batch is flushed in a microtask queued by its first take — after the synchronous code
 * that issued it and the microtasks queued before — or at once when it reaches
 * `maxBatchSize`. No timer, no added wait: a lone take goes out as soon as the current code
 * yields. A batch of one is sent as the algorithm's own script. (Measured: `setImmediate`
 * gathered no larger batches under a closed loop and added latency at concurrency 1.) Items are applied in the order they were added; an item's
 * error is reported to that item alone (see `batch.lua`).
 */
import { batchScript } from './algorithms/batch.js';
import type { LuaScript } from './algorithms/script.js';
import { callSafely } from './call-safely.js';
import { StoreError, UnavailableError } from './errors.js';
import { errorFromReply } from './stores/redis-errors.js';
import { RerouteError, type ScriptStore } from './stores/store.js';

/** One request waiting to be sent: a take, a peek, a takeAll or a reset (see `batch.lua`). */
export interface BatchRequest {
  /** The batch operation: `t` take (all or nothing), `p` peek, `r` reset. */
  readonly op: 't' | 'p' | 'r';
  /** Its number of items (keys). */
  readonly size: number;
  /**
   * A lone take's algorithm script, sent with {@link key} and {@link args} when the batch
   * holds only this request; `undefined` for a request that always goes as a batch.
   */
  readonly script: LuaScript | undefined;
  readonly key: string;
  readonly args: readonly string[];
  /** Its first key: where it goes in a cluster (every key of a request shares its slot). */
  readonly firstKey: string;
  /** Appends the request's keys, and its items' ARGV (id, count, arguments), to the batch's. */
  write(keys: string[], argv: string[]): void;
  /**
   * The request's reply slots (four per item) start at `reply[offset]` (the algorithm's own
   * reply, or the batch's flat reply); `sentAt` is the coalescer's clock when it was sent.
   */
  done(reply: readonly unknown[], offset: number, sentAt: number): void;
  fail(error: unknown): void;
}

/**
 * Calls the store, turning a synchronous throw or a non-promise result (a misbehaving
 * custom store, a callback-style client) into a rejection, so no failure escapes the
 * caller's promise.
 */
function run(
  store: ScriptStore,
  script: LuaScript,
  keys: string[],
  args: readonly string[],
): Promise<unknown> {
  return callSafely(
    () => store.evalScript(script, keys, args),
    () =>
      new UnavailableError(
        'the store returned no promise: is the client a node-redis v6 client (not .legacy())?',
      ),
  );
}

/** The requests waiting for one node (or for the one server). */
interface Pending {
  requests: BatchRequest[];
  items: number;
}

export class Coalescer {
  readonly #store: ScriptStore;
  readonly #maxBatchSize: number;
  /** The node of a key, for a store of several nodes; undefined for one server. */
  readonly #groupOf: ((key: string) => string) | undefined;
  /** What waits, per node ('' for one server). */
  readonly #pending = new Map<string, Pending>();
  #scheduled = false;
  readonly #flushScheduled = () => {
    this.#scheduled = false;
    this.flush();
  };

  readonly #clock: () => number;

  /**
   * @param maxBatchSize most items in one script call (a request is never split)
   * @param clock the clock of `sentAt` (ms), the one the denial cache uses
   */
  constructor(store: ScriptStore, maxBatchSize: number, clock: () => number) {
    this.#store = store;
    this.#maxBatchSize = maxBatchSize;
    this.#clock = clock;
    this.#groupOf =
      typeof store.groupOf === 'function' ? (key) => store.groupOf?.(key) ?? '' : undefined;
  }

  add(request: BatchRequest): void {
    const group = this.#groupOf === undefined ? '' : this.#groupOf(request.firstKey);
    let pending = this.#pending.get(group);
    if (pending !== undefined && pending.items + request.size > this.#maxBatchSize) {
      this.#pending.delete(group);
      this.#send(pending.requests);
      pending = undefined;
    }
    if (pending === undefined) {
      pending = { requests: [], items: 0 };
      this.#pending.set(group, pending);
    }
    pending.requests.push(request);
    pending.items += request.size;
    if (pending.items >= this.#maxBatchSize) {
      this.#pending.delete(group);
      this.#send(pending.requests);
    } else if (!this.#scheduled) {
      this.#scheduled = true;
      queueMicrotask(this.#flushScheduled);
    }
  }

  /** Sends what is pending now: one script call per node. */
  flush(): void {
    if (this.#pending.size === 0) return;
    // Sending never adds synchronously (a resend waits for its batch's answer): the map can
    // be emptied after the loop rather than replaced by a new one each turn.
    for (const pending of this.#pending.values()) this.#send(pending.requests);
    this.#pending.clear();
  }

  /** One script call for `requests`: a lone take as its algorithm's script, else a batch. */
  #send(requests: BatchRequest[]): void {
    const sentAt = this.#clock();
    const lone = requests.length === 1 ? (requests[0] as BatchRequest) : undefined;
    if (lone?.script !== undefined) {
      const script = lone.script;
      run(this.#store, script, [lone.key], lone.args).then(
        (reply) => {
          if (Array.isArray(reply) && reply.length === 4) lone.done(reply, 0, sentAt);
          else lone.fail(new StoreError(`ERR unexpected reply from ${script.name}`));
        },
        (error: unknown) => lone.fail(error),
      );
      return;
    }
    const keys: string[] = [];
    const argv: string[] = [];
    for (const request of requests) {
      argv.push(request.op, String(request.size));
      request.write(keys, argv);
    }
    run(this.#store, batchScript, keys, argv).then(
      (replies) =>
        deliver(requests, keys.length, replies, sentAt, (request) => this.#send([request])),
      (error: unknown) => {
        if (error instanceof RerouteError) {
          // Nothing of it ran: each request again, alone (one slot each, routed as such).
          if (requests.length > 1) for (const request of requests) this.#send([request]);
          else lone?.fail(error.failure);
          return;
        }
        for (const request of requests) request.fail(error);
      },
    );
  }
}

/**
 * A cluster batch's request whose key the node does not serve (its slot moved, or the slot
 * map was stale): it failed at its first read, before writing anything.
 */
const NOT_LOCAL = /non local key/;

/**
 * Hands each request its slots of the batch's flat reply (see `batch.lua`). A request that
 * failed because its key is not on the node the batch went to is sent again, alone
 * (`resend`): nothing of it ran.
 */
function deliver(
  requests: BatchRequest[],
  items: number,
  replies: unknown,
  sentAt: number,
  resend: (request: BatchRequest) => void,
): void {
  const slots = items * 4;
  if (!Array.isArray(replies) || replies.length < slots) {
    const error = new StoreError(`ERR batch reply of unexpected shape for ${items} items`);
    for (const request of requests) request.fail(error);
    return;
  }
  let offset = 0;
  for (const request of requests) {
    if (replies[offset] === -1) {
      const message = String(replies[slots + (replies[offset + 1] as number) - 1]);
      if (NOT_LOCAL.test(message) && requests.length > 1) resend(request);
      // An item's error reply, mapped as if the item had been sent alone.
      else request.fail(errorFromReply(message));
    } else {
      request.done(replies, offset, sentAt);
    }
    offset += request.size * 4;
  }
}
