/**
 * Retry-safe takes: a take (or takeAll) with an `id` counts at most once, however often it is
 * sent. The first call with an id is decided as any take and, when admitted, its reply slots
 * are recorded in the same script call, with the digest of what was asked (every item's key
 * and cost, in order), under a key of the tenant's hash tag derived from the id alone; a
 * repeat of the same request within the policies' horizon gets the recorded slots back,
 * marked `replayed`, and consumes nothing (see op `i` in `batch.lua`). A take that timed out
 * can be sent again with its id. The id reused for another request (other items, order,
 * costs or policies) finds another digest: refused with an `InvalidInputError` (field `id`),
 * nothing done. A refusal is not recorded: it consumed nothing, so its repeat is decided
 * afresh, and refusals at any rate write nothing that lives a horizon.
 *
 * The record lives as long as the longest horizon of the call's policies: after that, the
 * state the first decision consumed cannot matter any more, so a repeat decided afresh
 * cannot count twice within a window of the policy.
 *
 * A take with an id is never answered from the local denial cache: the cache knows that a
 * fresh take would be denied now, not what the id's first decision was (another process,
 * or this one before a timeout, may have had it admitted). Its fresh denials feed the cache
 * as any take's; a replayed answer does not (it describes the state when it was decided).
 */
import type { WireItem } from '../algorithms/batch-wire.js';
import { InvalidInputError } from '../errors.js';
import { digest, tenantTag } from '../key.js';
import type { Decision, TakeAllResult } from '../types.js';
import { readProperty } from '../validate.js';
import { Call, GroupCall, type Settler } from './calls.js';
import type { Target } from './targets.js';

/** Longest id, in UTF-16 code units. */
export const MAX_TAKE_ID_LENGTH = 128;

/**
 * The `id` option of a take or a takeAll: absent, or a string of 1–128 characters.
 *
 * @throws {InvalidInputError} field `<field>.id`
 */
export function readTakeId(options: object | undefined, field: string): string | undefined {
  if (options === undefined) return undefined;
  const id = readProperty(options, 'id', field);
  if (id === undefined) return undefined;
  if (typeof id !== 'string' || id.length === 0 || id.length > MAX_TAKE_ID_LENGTH) {
    throw new InvalidInputError(
      `${field}.id`,
      `a string of 1 to ${MAX_TAKE_ID_LENGTH} characters`,
      id,
    );
  }
  return id;
}

/**
 * The digest of what a request asked, sent with its records (`ask`): its items' keys (the
 * scope and the policy's identity, every parameter included) and costs, in order, as a
 * 48-bit integer (exact in a Lua number). A record of the same id with another ask is
 * another request's: its repeat is refused with {@link idReusedError}, not replayed.
 */
export function askDigest(targets: readonly Target[]): string {
  const parts: unknown[] = [];
  for (const target of targets) parts.push(target.key, target.cost);
  return askOf(parts);
}

/** The 48-bit digest of `parts`, as a decimal integer (see {@link askDigest}). */
export function askOf(parts: readonly unknown[]): string {
  return String(Number.parseInt(digest(parts, 12), 16));
}

/** The error of an id whose record holds another request's answer: nothing was done. */
export function idReusedError(id: string): InvalidInputError {
  return new InvalidInputError(
    'id',
    'an id not used for a different request (it was used for a different request: other items, item order, costs or policy; nothing was done)',
    id,
  );
}

/**
 * The record item of a take with `id` on `targets` (one tenant): its key,
 * `<namespace>:{<tenant hash>}:id:<hash of [id]>`, in the tenant's slot — one per id and
 * tenant, whatever was asked, so that the id reused for another request (other items, their
 * order, costs, a policy of another shape) finds the record and is refused — and its
 * arguments: its TTL, the longest horizon of the targets' policies, the request's ask, then
 * per item its key's digest and cost (the record keeps them with the item's mark and
 * generation, so that `refund` with `takeId` gives back only into the state it came from).
 */
export function recordItem(targets: readonly Target[], id: string): WireItem {
  const first = targets[0] as Target;
  let horizonMs = 1;
  for (const target of targets) {
    if (target.policy.horizonMs > horizonMs) horizonMs = target.policy.horizonMs;
  }
  const args = [String(horizonMs), askDigest(targets)];
  // Per item, for a refund of it (see `takeRecordKey`): its key's digest and its cost.
  for (const target of targets) args.push(keyDigest(target.key), String(target.cost));
  return { key: takeRecordKey(first, id), batchId: 0, args };
}

/** The key of the record of a take with `id` of `target`'s tenant (see {@link recordItem}). */
export function takeRecordKey(target: Target, id: string): string {
  return `${target.namespace}:${tenantTag(target.parts.tenant)}:id:${digest([id])}`;
}

/**
 * The 48-bit digest of a scope key, kept per item in a take's record: a refund naming the
 * take finds its own scope and policy's item by it (and nothing on another scope).
 */
export function keyDigest(key: string): string {
  return askOf([key]);
}

/** Work of a record item (a GET and a SET), estimated µs of Redis time. */
const RECORD_WORK = 3;

/**
 * Work per item of an admitted take with an id besides its take: its mark read and the
 * scope's generation kept (a GET and a SET or PEXPIRE of `<key>:g`), as a reserve's
 * (`PRICED_WORK` in `priced.ts` is the record's and this together), estimated µs.
 */
const MARK_WORK = 5;

/** One take with an id in flight: its target, then its record. */
export class IdCall extends Call {
  override readonly size = 2;
  /** The answer was the id's recorded one. */
  replayed = false;

  constructor(
    settler: Settler,
    target: Target,
    readonly record: WireItem,
    readonly id: string,
    resolve: (decision: Decision) => void,
    reject: (error: Error) => void,
  ) {
    super(settler, 'i', target, resolve, reject);
  }

  override get work(): number {
    return this.target.work + RECORD_WORK + MARK_WORK;
  }

  override item(j = 0): WireItem {
    return j === 0 ? this.target : this.record;
  }

  override done(reply: readonly unknown[], offset: number, sentAt: number): void {
    if (reply[offset + 4] === 2) {
      this.settler.pricedAnswered(this, reply, offset);
      return;
    }
    this.replayed = reply[offset + 4] === 1;
    super.done(reply, offset, sentAt);
  }

  /** The id's record was another request's (see `done`): refused, nothing done. */
  finish(): void {
    this.reject(idReusedError(this.id));
  }
}

/** One takeAll with an id in flight: its targets, then its record. */
export class IdGroupCall extends GroupCall {
  override readonly op = 'i' as const;
  override readonly size: number;
  override readonly work: number;
  replayed = false;

  constructor(
    settler: Settler,
    targets: readonly Target[],
    readonly record: WireItem,
    readonly id: string,
    resolve: (result: TakeAllResult) => void,
    reject: (error: Error) => void,
  ) {
    super(settler, targets, resolve, reject);
    this.size = targets.length + 1;
    let work = RECORD_WORK;
    for (const target of targets) work += 2 * target.work + MARK_WORK;
    this.work = work;
  }

  override item(j: number): WireItem {
    return j < this.targets.length ? (this.targets[j] as Target) : this.record;
  }

  override done(reply: readonly unknown[], offset: number, sentAt: number): void {
    if (reply[offset + 4 * this.targets.length] === 2) {
      this.settler.pricedAnswered(this, reply, offset);
      return;
    }
    this.replayed = reply[offset + 4 * this.targets.length] === 1;
    super.done(reply, offset, sentAt);
  }

  /** The id's record was another request's (see `done`): refused, nothing done. */
  finish(): void {
    this.reject(idReusedError(this.id));
  }
}
