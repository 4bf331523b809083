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
import type { ScriptStore } from './stores/store.js';

/** One decision waiting to be sent. */
export interface BatchItem {
  /** The algorithm's own script (sent alone when the batch has one item). */
  readonly script: LuaScript;
  /** The algorithm's id in the batch script. */
  readonly batchId: number;
  readonly key: string;
  readonly args: readonly string[];
  /**
   * The item's four reply slots start at `reply[offset]` (the algorithm's own reply, or the
   * batch's flat reply); `sentAt` is the coalescer's clock when the call was sent.
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

export class Coalescer {
  readonly #store: ScriptStore;
  readonly #maxBatchSize: number;
  #pending: BatchItem[] = [];
  #scheduled = false;
  readonly #flushScheduled = () => {
    this.#scheduled = false;
    this.flush();
  };

  readonly #clock: () => number;

  /** @param clock the clock of `sentAt` (ms), the one the denial cache uses. */
  constructor(store: ScriptStore, maxBatchSize: number, clock: () => number) {
    this.#store = store;
    this.#maxBatchSize = maxBatchSize;
    this.#clock = clock;
  }

  add(item: BatchItem): void {
    this.#pending.push(item);
    if (this.#pending.length >= this.#maxBatchSize) this.flush();
    else if (!this.#scheduled) {
      this.#scheduled = true;
      queueMicrotask(this.#flushScheduled);
    }
  }

  /** Sends what is pending now. */
  flush(): void {
    const items = this.#pending;
    if (items.length === 0) return;
    this.#pending = [];
    const sentAt = this.#clock();
    if (items.length === 1) {
      const item = items[0] as BatchItem;
      run(this.#store, item.script, [item.key], item.args).then(
        (reply) => {
          if (Array.isArray(reply) && reply.length === 4) item.done(reply, 0, sentAt);
          else item.fail(new StoreError(`ERR unexpected reply from ${item.script.name}`));
        },
        (error: unknown) => item.fail(error),
      );
      return;
    }
    const keys: string[] = new Array(items.length);
    const argv: string[] = [];
    for (let i = 0; i < items.length; i++) {
      const item = items[i] as BatchItem;
      keys[i] = item.key;
      argv.push(String(item.batchId), String(item.args.length));
      for (const arg of item.args) argv.push(arg);
    }
    run(this.#store, batchScript, keys, argv).then(
      (replies) => deliver(items, replies, sentAt),
      (error: unknown) => {
        for (const item of items) item.fail(error);
      },
    );
  }
}

/** Hands each item its four slots of the batch's flat reply (see `batch.lua`). */
function deliver(items: BatchItem[], replies: unknown, sentAt: number): void {
  const slots = items.length * 4;
  if (!Array.isArray(replies) || replies.length < slots) {
    const error = new StoreError(`ERR batch reply of unexpected shape for ${items.length} items`);
    for (const item of items) item.fail(error);
    return;
  }
  for (let i = 0; i < items.length; i++) {
    const item = items[i] as BatchItem;
    const offset = i * 4;
    if (replies[offset] === -1) {
      item.fail(new StoreError(String(replies[slots + (replies[offset + 1] as number) - 1])));
    } else {
      item.done(replies, offset, sentAt);
    }
  }
}
