/**
 * Retry-safe takes: a take (or takeAll) with an `id` counts at most once, however often it is
 * sent. The first call with an id is decided as any take, and its reply slots are recorded
 * in the same script call, under a key of the tenant's hash tag derived from the id and every
 * item's key (so the same id under another scope or policy is another operation); a repeat
 * within the policies' horizon gets the recorded slots back, marked `replayed`, and consumes
 * nothing (see op `i` in `batch.lua`). A take that timed out can be sent again with its id.
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
 * The record item of a take with `id` on `targets` (one tenant): its key,
 * `<namespace>:{<tenant hash>}:id:<hash of [id, ...keys]>`, in the tenant's slot, and its
 * TTL, the longest horizon of the targets' policies.
 */
export function recordItem(targets: readonly Target[], id: string): WireItem {
  const first = targets[0] as Target;
  const keys: string[] = [id];
  let horizonMs = 1;
  for (const target of targets) {
    keys.push(target.key);
    if (target.policy.horizonMs > horizonMs) horizonMs = target.policy.horizonMs;
  }
  return {
    key: `${first.namespace}:${tenantTag(first.parts.tenant)}:id:${digest(keys)}`,
    batchId: 0,
    args: [String(horizonMs)],
  };
}

/** Work of a record item (a GET and a SET), estimated µs of Redis time. */
const RECORD_WORK = 3;

/** One take with an id in flight: its target, then its record. */
export class IdCall extends Call {
  override readonly size = 2;
  /** The answer was the id's recorded one. */
  replayed = false;

  constructor(
    settler: Settler,
    target: Target,
    readonly record: WireItem,
    resolve: (decision: Decision) => void,
    reject: (error: Error) => void,
  ) {
    super(settler, 'i', target, resolve, reject);
  }

  override get work(): number {
    return this.target.work + RECORD_WORK;
  }

  override item(j = 0): WireItem {
    return j === 0 ? this.target : this.record;
  }

  override done(reply: readonly unknown[], offset: number, sentAt: number): void {
    this.replayed = reply[offset + 4] === 1;
    super.done(reply, offset, sentAt);
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
    resolve: (result: TakeAllResult) => void,
    reject: (error: Error) => void,
  ) {
    super(settler, targets, resolve, reject);
    this.size = targets.length + 1;
    let work = RECORD_WORK;
    for (const target of targets) work += 2 * target.work;
    this.work = work;
  }

  override item(j: number): WireItem {
    return j < this.targets.length ? (this.targets[j] as Target) : this.record;
  }

  override done(reply: readonly unknown[], offset: number, sentAt: number): void {
    this.replayed = reply[offset + 4 * this.targets.length] === 1;
    super.done(reply, offset, sentAt);
  }
}
