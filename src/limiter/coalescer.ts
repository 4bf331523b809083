/**
 * Coalescing: the takes issued in the same event-loop turn go to Redis as one script call
 * (the batch script), each caller still getting its own exact decision.
 *
 * A batch is flushed in a microtask queued by its first take — after the synchronous code
 * that issued it and the microtasks queued before — or at once when it reaches
 * `maxBatchSize`. No timer, no added wait: a lone take goes out as soon as the current code
 * yields (a `setImmediate` would gather no larger batches under a closed loop, and would add
 * latency to a lone take). A batch of one is sent as the algorithm's own script. Items are
 * applied in the order they were added; an item's error is reported to that item alone (see
 * `batch.lua`).
 */
import { batchScript } from '../algorithms/batch.js';
import {
  isBatchReply,
  isItemReply,
  REPLY_SLOTS,
  requestError,
  type WireRequest,
  writeRequests,
} from '../algorithms/batch-wire.js';
import type { LuaScript } from '../algorithms/script.js';
import { asPromise } from '../call-safely.js';
import { StoreError, UnavailableError } from '../errors.js';
import { errorFromReply } from '../redis/reply-errors.js';
import { type ReplicaAcks, RerouteError, type ScriptStore } from '../stores/store.js';
import { NodeWatch, SentCall } from './node-watch.js';

/**
 * One request waiting to be sent: a take, a peek, a takeAll or a reset — its operation and
 * items as the batch wire format carries them (see `batch-wire.ts`), and how it goes alone.
 */
export interface BatchRequest extends WireRequest {
  /**
   * The Redis time it asks for at worst, in µs estimated from its algorithms (see
   * `Algorithm.work`): what bounds a script call's run time (see `MAX_BATCH_WORK`).
   */
  readonly work: number;
  /**
   * A lone take's algorithm script, sent with {@link key} and {@link args} when the batch
   * holds only this request; `undefined` for a request that always goes as a batch.
   */
  readonly script: LuaScript | undefined;
  readonly key: string;
  readonly args: readonly string[];
  /** Its first key: where it goes in a cluster (every key of a request shares its slot). */
  readonly firstKey: string;
  /**
   * The request's reply slots start at `reply[offset]` (the algorithm's own reply, or the
   * batch's flat reply; see `batch-wire.ts`); `sentAt` is the coalescer's clock when it was
   * sent.
   */
  done(reply: readonly unknown[], offset: number, sentAt: number): void;
  fail(error: unknown): void;
}

/** A store that returned no promise (see {@link run}). */
function noPromise(): UnavailableError {
  return new UnavailableError(
    'the store returned no promise: is the client a node-redis v6 client (not .legacy())?',
  );
}

/**
 * Calls the store, turning a synchronous throw or a non-promise result (a misbehaving
 * custom store, a callback-style client) into a rejection, so no failure escapes the
 * caller's promise. (`callSafely`'s contract, without its two closures per call: this is
 * every script call's path.)
 */
function run(
  store: ScriptStore,
  script: LuaScript,
  keys: string[],
  args: readonly string[],
  acks: ReplicaAcks | undefined,
): Promise<unknown> {
  let result: unknown;
  try {
    result =
      acks === undefined
        ? store.evalScript(script, keys, args)
        : store.evalScript(script, keys, args, acks);
  } catch (error) {
    return Promise.reject(error);
  }
  return asPromise(result, noPromise);
}

/** What is waiting for one node (or for the one server), and what it has in flight. */
interface Group {
  requests: BatchRequest[];
  /** Items and work units waiting. */
  items: number;
  work: number;
  /** Script calls, and their items, sent and not answered yet. */
  calls: number;
  callItems: number;
  /** In the list of groups to send at the end of this turn. */
  queued: boolean;
  /** Its script calls in flight, and whether the node stopped answering. */
  readonly watch: NodeWatch<BatchRequest>;
}

function newGroup(): Group {
  return {
    requests: [],
    items: 0,
    work: 0,
    calls: 0,
    callItems: 0,
    queued: false,
    watch: new NodeWatch(),
  };
}

/**
 * Script calls a node should have in flight for Node.js and Redis to work at once: while
 * Redis runs one batch, this process reads the answer of another and gathers the next. A
 * batch goes as soon as it holds its share of the node's load (what waits plus what is in
 * flight, over this depth) and at least {@link MIN_EARLY_BATCH} items. One batch per
 * event-loop turn would run Node.js and Redis in lock-step (see bench/RESULTS.md for what
 * sending by shares is worth). Not for a store whose client writes once per turn
 * (`ScriptStore.writesPerTurn`, node-redis): there it would only split a turn's batch.
 */
export const PIPELINE_DEPTH = 4;

/** The fewest items a batch goes with before the end of its turn (see PIPELINE_DEPTH). */
export const MIN_EARLY_BATCH = 4;

/**
 * Most work in one script call, whatever `maxBatchSize` says, in estimated µs of Redis time
 * (see `BatchRequest.work`): a script call holds Redis while it runs. 0.5 ms, a tenth of
 * the rule that no script call holds Redis for 5 ms (test/integration/script-time.test.ts),
 * because some calls run several times their estimate (Lua's garbage collector sweeping
 * what earlier calls left, which grows with the batch), and a server may be slower than
 * the one the estimates come from. A request is never split; one heavier than this goes
 * alone, and its work is bounded by its algorithm.
 */
export const MAX_BATCH_WORK = 500;

/**
 * The default clock of `sentAt` (the process's monotonic clock): with it, a script call
 * reads the clock once for both its stall watch and its `sentAt`.
 */
export const performanceNow = (): number => performance.now();

export class Coalescer {
  readonly #store: ScriptStore;
  readonly #maxBatchSize: number;
  readonly #maxBatchWork: number;
  /** The fewest items a batch goes with before the end of its turn (see MIN_EARLY_BATCH). */
  readonly #minEarlyBatch: number;
  /** Script calls to keep in flight per node (see PIPELINE_DEPTH, `ScriptStore.pipelineDepth`). */
  readonly #depth: number;
  /** The node of a key, for a store of several nodes; undefined for one server. */
  readonly #groupOf: ((key: string) => string) | undefined;
  /** The one server's group (no lookup per request), or each node's, by name. */
  readonly #single: Group = newGroup();
  readonly #groups = new Map<string, Group>();
  /** Groups with requests waiting for the end of this turn. */
  readonly #waiting: Group[] = [];
  #scheduled = false;
  readonly #flushScheduled = () => {
    this.#scheduled = false;
    this.flush();
  };

  readonly #clock: () => number;
  readonly #stallTimeoutMs: number;
  /** What every script call that may write waits for (see `ReplicaAcks`), if anything. */
  readonly #acks: ReplicaAcks | undefined;

  /**
   * @param maxBatchSize most items in one script call (a request is never split)
   * @param clock the clock of `sentAt` (ms), the one the denial cache uses
   * @param maxBatchWork most work units in one script call (a request is never split)
   * @param stallTimeoutMs how long a script call may stay unanswered before it is abandoned
   *   and its node counts as stalled (see `node-watch.ts`), in ms
   * @param acks replicas to wait for after each script call that may write
   */
  constructor(
    store: ScriptStore,
    maxBatchSize: number,
    clock: () => number,
    maxBatchWork = MAX_BATCH_WORK,
    stallTimeoutMs = Number.POSITIVE_INFINITY,
    acks: ReplicaAcks | undefined = undefined,
  ) {
    this.#acks = acks;
    this.#store = store;
    this.#maxBatchSize = maxBatchSize;
    this.#maxBatchWork = maxBatchWork;
    // A client that writes once per turn sends every batch of the turn together: no early ones.
    this.#minEarlyBatch = store.writesPerTurn === true ? Number.POSITIVE_INFINITY : MIN_EARLY_BATCH;
    const depth = store.pipelineDepth;
    this.#depth =
      typeof depth === 'number' && Number.isSafeInteger(depth) && depth >= 1
        ? depth
        : PIPELINE_DEPTH;
    this.#clock = clock;
    this.#stallTimeoutMs = stallTimeoutMs;
    this.#groupOf =
      typeof store.groupOf === 'function' ? (key) => store.groupOf?.(key) ?? '' : undefined;
  }

  #group(request: BatchRequest): Group {
    if (this.#groupOf === undefined) return this.#single;
    const name = this.#groupOf(request.firstKey);
    let group = this.#groups.get(name);
    if (group === undefined) {
      group = newGroup();
      this.#groups.set(name, group);
    }
    return group;
  }

  /**
   * Queues a request in its node's next batch. The batch goes when it holds its share of the
   * node's load (see {@link PIPELINE_DEPTH}), when it reaches `maxBatchSize` or the work
   * bound, or at the end of the current turn (a microtask), whichever comes first; a request
   * that would take it past either bound goes in the next batch. To a stalled node, a request
   * goes alone as its probe, or fails at once while a probe is in flight.
   *
   * @param now `performance.now()`, for the stall check
   */
  add(request: BatchRequest, now: number = performance.now()): void {
    const group = this.#group(request);
    this.#abandonOverdue(group, now);
    if (group.watch.stalled) {
      if (group.watch.probe !== undefined) request.fail(this.#stalled());
      else this.#send(group, [request], request.size, true);
      return;
    }
    if (
      group.items > 0 &&
      (group.items + request.size > this.#maxBatchSize ||
        group.work + request.work > this.#maxBatchWork)
    ) {
      this.#sendWaiting(group);
    }
    if (!group.queued) {
      group.queued = true;
      this.#waiting.push(group);
    }
    group.requests.push(request);
    group.items += request.size;
    group.work += request.work;
    if (
      group.items >= this.#maxBatchSize ||
      group.work >= this.#maxBatchWork ||
      (group.items >= this.#minEarlyBatch &&
        group.items * this.#depth >= group.callItems + group.items)
    ) {
      this.#sendWaiting(group);
    } else if (!this.#scheduled) {
      this.#scheduled = true;
      queueMicrotask(this.#flushScheduled);
    }
  }

  /** Sends what is waiting now: one script call per node. */
  flush(): void {
    const waiting = this.#waiting;
    // Sending never adds synchronously (a resend waits for its batch's answer).
    for (let i = 0; i < waiting.length; i++) {
      const group = waiting[i] as Group;
      group.queued = false;
      this.#sendWaiting(group);
    }
    waiting.length = 0;
  }

  #sendWaiting(group: Group): void {
    if (group.requests.length === 0) return;
    const requests = group.requests;
    const items = group.items;
    group.requests = [];
    group.items = 0;
    group.work = 0;
    // Queued before their node stalled: they go as its probe, or fail with the others.
    const { stalled, probe } = group.watch;
    if (stalled && probe !== undefined) {
      const error = this.#stalled();
      for (const request of requests) request.fail(error);
      return;
    }
    this.#send(group, requests, items, stalled);
  }

  /**
   * Abandons every script call in flight longer than `stallTimeoutMs`, on every node: their
   * callers fail (if their deadline has not passed yet) and their in-flight slots are freed.
   */
  reap(now: number): void {
    this.#abandonOverdue(this.#single, now);
    for (const group of this.#groups.values()) this.#abandonOverdue(group, now);
  }

  /** How long the oldest script call in flight has waited, in ms (0 when none). */
  oldestWaitMs(now: number): number {
    let oldest = this.#single.watch.oldestSentAt() ?? now;
    for (const group of this.#groups.values()) {
      oldest = Math.min(oldest, group.watch.oldestSentAt() ?? now);
    }
    return now - oldest;
  }

  #abandonOverdue(group: Group, now: number): void {
    const overdue = group.watch.overdue(now - this.#stallTimeoutMs);
    if (overdue.length === 0) return;
    const error = this.#stalled();
    for (const call of overdue) {
      group.calls--;
      group.callItems -= call.items;
      for (const request of call.requests) request.fail(error);
    }
  }

  #stalled(): UnavailableError {
    return new UnavailableError(
      `Redis stalled: a script call got no answer within ${this.#stallTimeoutMs} ms; calls fail at once until Redis answers again`,
    );
  }

  /**
   * One script call for `requests`: a lone take as its algorithm's script, else a batch.
   * `probe`: the call that tests a stalled node.
   */
  #send(group: Group, requests: BatchRequest[], items: number, probe = false): void {
    group.calls++;
    group.callItems += items;
    const now = performance.now();
    const call = new SentCall(requests, items, now);
    group.watch.track(call);
    if (probe) group.watch.probe = call;
    const sentAt = this.#clock === performanceNow ? now : this.#clock();
    const lone = requests.length === 1 ? (requests[0] as BatchRequest) : undefined;
    if (lone?.script !== undefined) {
      const script = lone.script;
      run(this.#store, script, [lone.key], lone.args, this.#acks).then(
        (reply) => {
          if (!answered(group, call)) return;
          if (isItemReply(reply)) lone.done(reply, 0, sentAt);
          else lone.fail(new StoreError(`ERR unexpected reply from ${script.name}`));
        },
        (error: unknown) => {
          if (answered(group, call)) lone.fail(error);
        },
      );
      return;
    }
    const keys: string[] = [];
    const argv: string[] = [];
    writeRequests(keys, argv, requests);
    // Peeks write nothing: no replica to wait for.
    const acks = requests.every((r) => r.op === 'p') ? undefined : this.#acks;
    run(this.#store, batchScript, keys, argv, acks).then(
      (replies) => {
        if (!answered(group, call)) return;
        deliver(requests, keys.length, replies, sentAt, (request) =>
          this.#send(this.#group(request), [request], request.size),
        );
      },
      (error: unknown) => {
        if (!answered(group, call)) return;
        if (error instanceof RerouteError) {
          // Nothing of it ran: each request again, alone (one slot each, routed as such).
          if (requests.length > 1) {
            for (const request of requests)
              this.#send(this.#group(request), [request], request.size);
          } else lone?.fail(error.failure);
          return;
        }
        for (const request of requests) request.fail(error);
      },
    );
  }
}

/**
 * The node answered `call`: false when the call was abandoned (its requests failed
 * already); else its in-flight counts are freed.
 */
function answered(group: Group, call: SentCall<BatchRequest>): boolean {
  if (!group.watch.answered(call)) return false;
  group.calls--;
  group.callItems -= call.items;
  return true;
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
  if (!isBatchReply(replies, items)) {
    const error = new StoreError(`ERR batch reply of unexpected shape for ${items} items`);
    for (const request of requests) request.fail(error);
    return;
  }
  let offset = 0;
  for (const request of requests) {
    const message = requestError(replies, offset, items);
    if (message === undefined) request.done(replies, offset, sentAt);
    else if (NOT_LOCAL.test(message) && requests.length > 1) resend(request);
    // An item's error reply, mapped as if the item had been sent alone.
    else request.fail(errorFromReply(message));
    offset += request.size * REPLY_SLOTS;
  }
}
