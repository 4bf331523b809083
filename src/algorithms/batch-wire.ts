/**
 * The batch wire format: how one call of the batch script (`batch.lua`) carries its
 * requests and brings back their answers. The coalescer writes requests and reads replies;
 * `MemoryStore` reads requests and writes replies; `batch.lua` is the other side of both.
 * This module is the one place the format lives in TypeScript.
 *
 * Request. KEYS: every item's key, in order. ARGV: for each request, its operation (`t`
 * take, all or nothing; `p` peek; `r` reset), its item count n, then for each item its
 * algorithm's batch id (0 for a reset), its argument count, then its arguments. A take with an
 * id (`i`, see `batch.lua`) adds its record as a last item. A run of consecutive lone takes
 * (`t`, one item) of one algorithm with the same arguments — one policy, one cost: most of a
 * busy batch — goes as one `u` entry: `u`, the run's length m, then the batch id, the argument
 * count and the arguments, once; its m keys in KEYS. Each take of a run is still a request of
 * its own (decided, failed and answered alone): the run only saves sending, and Redis parsing,
 * the same arguments m times (the reply has its four slots per take, as without the run).
 *
 * Reply: one flat array. For each item, {@link REPLY_SLOTS} integers — the algorithm's reply
 * `{ allowed, remaining, resetMs, retryAfterMs }`, or `{ -1, k, 0, 0 }` when its request
 * failed — followed by the error messages, the k-th (from 1) at index `4N + k − 1`, N the
 * batch's item count. A failed request reports its error on every item. A lone take sent as
 * its algorithm's own script gets the same four slots, alone.
 */
import type { Decision } from '../types.js';

/**
 * A batch request's operation; `i`: a take with an id, whose last item is the id's record
 * (batch id 0, one argument: its TTL in ms), replied `{ replayed ? 1 : 0, 0, 0, 0 }`; `k`,
 * `s`, `f`, `g`: reserve, settle, refund, charge; `m`: reserve all (see `settle/priced.lua`);
 * `w`, `y`: a prefetch grant and its give-back (see `settle/prefetch.lua`); `c`: claims a
 * retry id for serving (one item, batch id 0, one argument: its TTL in ms; `SET NX`),
 * replied `{ claimed ? 1 : 0, 0, 0, 0 }` (see `limiter/serve-claim.ts`).
 */
export type BatchOp = 't' | 'p' | 'r' | 'i' | 'k' | 's' | 'f' | 'g' | 'm' | 'w' | 'y' | 'c';

/** A run of lone takes on the wire (see the module's doc); read back as takes (`t`). */
const RUN = 'u';

/** Shortest run of lone takes sent as one `u` entry (one take alone costs the same either way). */
const MIN_RUN = 2;

/** Integers per item in a reply. */
export const REPLY_SLOTS = 4;

/** One item as it is sent: its key, its algorithm's batch id (0: reset), its arguments. */
export interface WireItem {
  readonly key: string;
  readonly batchId: number;
  readonly args: readonly string[];
}

/** A request as it is sent: its operation and its items, read by index (no array per call). */
export interface WireRequest {
  readonly op: BatchOp;
  /** Its number of items. */
  readonly size: number;
  /** Item `j`, from 0 to `size − 1`. */
  item(j: number): WireItem;
}

/** Appends `request` to a batch's KEYS and ARGV. */
export function writeRequest(keys: string[], argv: string[], request: WireRequest): void {
  const size = request.size;
  argv.push(request.op, String(size));
  for (let j = 0; j < size; j++) {
    const { key, batchId, args } = request.item(j);
    keys.push(key);
    argv.push(String(batchId), String(args.length));
    for (const arg of args) argv.push(arg);
  }
}

/** True when two items' arguments are the same strings (most often the very same array). */
function sameArgs(a: readonly string[], b: readonly string[]): boolean {
  if (a === b) return true;
  if (a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return false;
  return true;
}

/** The item of `request` when it is a lone take (`t`, one item), which a run may hold. */
function loneTake(request: WireRequest): WireItem | undefined {
  return request.op === 't' && request.size === 1 ? request.item(0) : undefined;
}

/**
 * Appends `requests`, in order, to a batch's KEYS and ARGV: each as {@link writeRequest}
 * writes it, except runs of consecutive lone takes of one algorithm with the same arguments,
 * each written as one `u` entry. Reads each request's items once.
 */
export function writeRequests(
  keys: string[],
  argv: string[],
  requests: readonly WireRequest[],
): void {
  const total = requests.length;
  /** The lone take of `requests[i]`, when the scan for the run before it read it already. */
  let read: WireItem | undefined;
  let i = 0;
  while (i < total) {
    const request = requests[i] as WireRequest;
    const first = read ?? loneTake(request);
    read = undefined;
    if (first === undefined) {
      writeRequest(keys, argv, request);
      i++;
      continue;
    }
    keys.push(first.key);
    let end = i + 1;
    while (end < total) {
      const next = loneTake(requests[end] as WireRequest);
      if (next === undefined) break;
      if (next.batchId !== first.batchId || !sameArgs(next.args, first.args)) {
        read = next;
        break;
      }
      keys.push(next.key);
      end++;
    }
    // `end - i` takes of one algorithm with the same arguments: as one run, or (too few to
    // gain) each as a lone take, as writeRequest writes it.
    const count = end - i;
    for (let written = 0; written < (count >= MIN_RUN ? 1 : count); written++) {
      argv.push(count >= MIN_RUN ? RUN : 't', count >= MIN_RUN ? String(count) : '1');
      argv.push(String(first.batchId), String(first.args.length));
      for (const arg of first.args) argv.push(arg);
    }
    i = end;
  }
}

/** One item as a store reads it. */
export interface ReadItem {
  readonly key: string;
  readonly batchId: number;
  readonly args: readonly string[];
}

/** One request as a store reads it. */
export interface ReadRequest {
  readonly op: BatchOp;
  readonly items: readonly ReadItem[];
}

/**
 * The requests of a batch, in order (the inverse of {@link writeRequests}): a run of lone
 * takes is read back as its takes.
 */
export function readRequests(keys: readonly string[], argv: readonly string[]): ReadRequest[] {
  const requests: ReadRequest[] = [];
  let a = 0;
  let k = 0;
  while (a < argv.length) {
    const op = argv[a] as BatchOp | typeof RUN;
    const n = Number(argv[a + 1]);
    a += 2;
    if (op === RUN) {
      const batchId = Number(argv[a]);
      const count = Number(argv[a + 1]);
      const args = argv.slice(a + 2, a + 2 + count);
      a += 2 + count;
      for (let j = 0; j < n; j++) {
        requests.push({ op: 't', items: [{ key: keys[k + j] as string, batchId, args }] });
      }
      k += n;
      continue;
    }
    const items: ReadItem[] = [];
    for (let j = 0; j < n; j++) {
      const count = Number(argv[a + 1]);
      items.push({
        key: keys[k + j] as string,
        batchId: Number(argv[a]),
        args: argv.slice(a + 2, a + 2 + count),
      });
      a += 2 + count;
    }
    k += n;
    requests.push({ op, items });
  }
  return requests;
}

/** Builds a batch reply, request by request (the inverse of the reading functions below). */
export class ReplyWriter {
  readonly #out: unknown[] = [];
  readonly #errors: string[] = [];

  /** An item's own four slots. */
  item(reply: readonly unknown[]): void {
    this.#out.push(reply[0], reply[1], reply[2], reply[3]);
  }

  /** A request of `n` items that failed with `message`. */
  failed(n: number, message: string): void {
    this.#errors.push(message);
    for (let j = 0; j < n; j++) this.#out.push(-1, this.#errors.length, 0, 0);
  }

  /** The whole reply. */
  finish(): unknown[] {
    return this.#out.concat(this.#errors);
  }
}

/** True when `reply` has the slots of `items` items (the batch reply's least shape). */
export function isBatchReply(reply: unknown, items: number): reply is readonly unknown[] {
  return Array.isArray(reply) && reply.length >= items * REPLY_SLOTS;
}

/** True when `reply` is one item's four slots (a lone take's reply). */
export function isItemReply(reply: unknown): reply is readonly unknown[] {
  return Array.isArray(reply) && reply.length === REPLY_SLOTS;
}

/**
 * The error message of the request whose slots start at `offset` in a reply of `items`
 * items, or `undefined` when it was answered.
 */
export function requestError(
  reply: readonly unknown[],
  offset: number,
  items: number,
): string | undefined {
  if (reply[offset] !== -1) return undefined;
  return String(reply[items * REPLY_SLOTS + (reply[offset + 1] as number) - 1]);
}

/**
 * Decodes one decision from the four slots at `offset`; `retryAfterMs = -1` means the cost
 * can never fit → `Infinity`. Returns `undefined` when the slots are not four numbers.
 */
export function decodeDecision(
  reply: readonly unknown[],
  offset: number,
  limit: number,
): Decision | undefined {
  const allowed = reply[offset];
  const remaining = reply[offset + 1];
  const resetMs = reply[offset + 2];
  const retryAfterMs = reply[offset + 3];
  if (
    typeof allowed !== 'number' ||
    typeof remaining !== 'number' ||
    typeof resetMs !== 'number' ||
    typeof retryAfterMs !== 'number'
  ) {
    return undefined;
  }
  if (remaining < 0) {
    // A blocked scope (see `block.lua`): remaining -1 marks it.
    return {
      allowed: false,
      remaining: 0,
      limit,
      resetMs,
      retryAfterMs: retryAfterMs < 0 ? Number.POSITIVE_INFINITY : retryAfterMs,
      blocked: true,
    };
  }
  return {
    allowed: allowed === 1,
    remaining,
    limit,
    resetMs,
    retryAfterMs: retryAfterMs < 0 ? Number.POSITIVE_INFINITY : retryAfterMs,
  };
}
