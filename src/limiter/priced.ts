/**
 * Priced at the end: reserve then settle, refund, charge (see `docs/priced.md`).
 *
 * - `reserve` takes `cost` now, as a take, and when admitted records the reservation (its
 *   answer, its cost, the mark of the window or bucket state it was taken from, and the
 *   digest of what was asked) in the same script call, under a key of the tenant's slot
 *   derived from its id, scope and policy; a repeat with the same id and cost replays the
 *   first answer and takes nothing, one with another cost is refused (`InvalidInputError`,
 *   field `id`). A refused reserve records nothing. A cancel before the reserve arrived
 *   leaves a tombstone: the reserve is then refused and takes nothing.
 * - `settle(actual)` moves `actual − cost` units into the state the reservation was taken
 *   from — back when less, charged when more (past the limit) — and marks it settled: a
 *   repeat replays the first settle's answer. `cancel` is `settle(0)`. Once that state is
 *   gone (the window ended, the bucket refilled the reservation's tokens), nothing moves.
 *   A reservation never settled stays consumed; one refused (or expired) changes nothing.
 * - `refund` names the take (a `take`/`takeAll` with an id) or the reservation it gives back
 *   from (`takeId`), and gives back at most `cost` units only into the state that one was
 *   taken from (its mark and generation, as a settle), never above the capacity, once per
 *   id; all refunds of one take give back at most its cost. `charge` consumes `cost` units
 *   whatever is left, within what the state holds in one horizon (a full window, an empty
 *   bucket or burst).
 *
 * Each is one atomic script call (ops `k`, `s`, `f`, `g` of the batch script, and `m` for
 * `reserveAll` in `reserve-all.ts`; see `algorithms/settle/priced.lua`); records expire with
 * the policy's horizon (a `reserveAll`'s: the longest of its policies'). The sliding
 * window log's settle rewrites up to `limit` members, so its policies are refused here above
 * `MAX_PRICED_LOG_LIMIT` with an `InvalidInputError` (`policy.limit`); concurrency policies
 * have no settle body at all.
 */
import { randomUUID } from 'node:crypto';
import type { WireItem } from '../algorithms/batch-wire.js';
import { settleOf } from '../algorithms/settle/registry.js';
import {
  MAX_LOG_LIMIT,
  MAX_PRICED_LOG_LIMIT,
  slidingWindowLogScript,
} from '../algorithms/sliding-window-log.js';
import { InvalidInputError } from '../errors.js';
import { digest, tenantTag } from '../key.js';
import type { Decision, Policy } from '../types.js';
import { onlyKnownKeys, readProperty } from '../validate.js';
import { InFlight, type Settler } from './calls.js';
import { idReusedError, MAX_TAKE_ID_LENGTH, readTakeId } from './retry-safe.js';
import type { Target } from './targets.js';

/** The answer to `settle`, `cancel`, `refund` and `charge`. */
export interface Settlement {
  /**
   * Units this call moved: negative when given back, positive when charged, 0 when nothing
   * changed (a reservation refused or unknown, a window that ended, a bucket that refilled,
   * a give-back on a state with nothing to give back). A replay reports the first call's.
   */
  readonly applied: number;
  /**
   * Units left now, after this call: what a `peek` right after reports (0 while the scope
   * is blocked). Read now on every answer, a replayed or unknown one included.
   */
  readonly remaining: number;
  /** The policy's limit. */
  readonly limit: number;
  /**
   * False when no reservation of this id, scope and policy is known: never made, refused
   * (a refusal is not recorded), expired with the policy's horizon, cancelled before its
   * reserve arrived, or a record this policy could not have written (a hand edit: another
   * shape, a cost above the limit, a mark in the future); nothing changed. A cancel that
   * knows none leaves a tombstone (see `RateLimiter.cancel`). For a refund: false when no
   * admitted take or reservation of its `takeId` on this scope and policy is known (the
   * same cases, a take without an id or refused); nothing changed, and the refund is not
   * recorded. Always true for a charge.
   */
  readonly known: boolean;
  /** True when this is the recorded answer of an earlier call with the same id. */
  readonly replayed: boolean;
}

/** Options of `reserve`. */
export interface ReserveOptions {
  /** Units to reserve: a positive safe integer. Default 1. */
  readonly cost?: number;
  /**
   * The reservation's id, 1–128 characters: makes the reserve retry-safe (as a take's `id`)
   * and names it for `settle`/`cancel` from any process. Default: a random UUID.
   */
  readonly id?: string;
  /** As a take's `requestId`. */
  readonly requestId?: string;
}

/** Options of `charge`. */
export interface PricedOptions {
  /** An id, 1–128 characters: the operation applies once, however often it is sent. */
  readonly id?: string;
}

/** Options of `refund`: both required. */
export interface RefundOptions {
  /** The refund's id, 1–128 characters: it applies once, however often it is sent. */
  readonly id: string;
  /**
   * The id (1–128 characters) of what the refund gives back from: an admitted `take` or
   * `takeAll` made with this `id`, or a reservation, on the same scope and policy. Units go
   * back only into the state that one was taken from, at most its cost over all its refunds.
   */
  readonly takeId: string;
}

/** A priced operation of the batch script. */
export type PricedOp = 'k' | 's' | 'f' | 'g';

/** Estimated µs of Redis time of a priced request besides its take (a GET, a SET, a body). */
const PRICED_WORK = 8;

/** One reserve, settle, refund or charge in flight: its scope item, then its record. */
export class PricedCall extends InFlight {
  readonly size: number;
  readonly work: number;
  readonly script = undefined;
  readonly args: readonly string[];
  readonly #item: WireItem;

  constructor(
    settler: Settler,
    readonly op: PricedOp,
    readonly target: Target,
    units: number,
    readonly record: WireItem | undefined,
    readonly finish: (reply: readonly unknown[], offset: number) => void,
    reject: (error: Error) => void,
    /** A refund's anchor: the reservation record and the take record of its `takeId`. */
    readonly anchor: readonly WireItem[] = [],
  ) {
    super(settler, reject);
    this.args = [...target.args, String(units)];
    this.#item = { key: target.key, batchId: target.batchId, args: this.args };
    this.size = record === undefined ? 1 : 2 + anchor.length;
    // A settle or refund of a sliding window log rewrites members: more work, with its limit.
    const rewrite = op === 's' || op === 'f' ? settleOf(target.policy.script)?.work : undefined;
    this.work = target.work + PRICED_WORK + (rewrite?.(target.policy.limit) ?? 0);
  }

  get key(): string {
    return this.target.key;
  }

  get firstKey(): string {
    return this.target.key;
  }

  item(j: number): WireItem {
    if (j === 0) return this.#item;
    return j === 1 ? (this.record as WireItem) : (this.anchor[j - 2] as WireItem);
  }

  done(reply: readonly unknown[], offset: number): void {
    this.settler.pricedAnswered(this, reply, offset);
  }
}

/**
 * Checks that `policy`'s algorithm has a settle body, and that a sliding window log's limit
 * is within {@link MAX_PRICED_LOG_LIMIT} (its settle rewrites up to `limit` members).
 *
 * @throws {InvalidInputError} field `policy` for a policy without one (a concurrency
 *   policy), `policy.limit` for a sliding window log above the bound
 */
export function requireSettle(policy: Policy, field = 'policy'): void {
  if (settleOf(policy.script) === undefined) {
    throw new InvalidInputError(
      field,
      'a policy whose algorithm supports reserve, settle, refund and charge (fixed window, token bucket, GCRA, sliding window counter, sliding window log)',
      policy.name,
    );
  }
  if (policy.script === slidingWindowLogScript && policy.limit > MAX_PRICED_LOG_LIMIT) {
    throw new InvalidInputError(
      `${field}.limit`,
      `at most ${MAX_PRICED_LOG_LIMIT} for reserve, settle, refund and charge on a sliding window log (a settle rewrites up to limit members; takes accept up to ${MAX_LOG_LIMIT})`,
      policy.limit,
    );
  }
}

/**
 * A record item of `kind` for `id` on `target`, in the tenant's slot, for the policy's
 * horizon, with `ask`, the digest of what the request asked (see `askDigest`; none for a
 * settle, which finds the reservation's record and asks nothing new of it).
 */
export function pricedRecord(
  target: Target,
  kind: 'rsv' | 'refund' | 'charge',
  id: string,
  ask?: string,
): WireItem {
  const ttl = String(target.policy.horizonMs);
  return {
    key: `${target.namespace}:${tenantTag(target.parts.tenant)}:${kind === 'rsv' ? 'rsv' : 'id'}:${digest([kind, id, target.key])}`,
    batchId: 0,
    args: ask === undefined ? [ttl] : [ttl, ask],
  };
}

/**
 * Throws {@link idReusedError} when the reply's record slot (at `offset + 4`, a request of
 * two items) says the id was another request's: nothing was done.
 */
export function checkReused(reply: readonly unknown[], offset: number, id: string): void {
  if (reply[offset + 4] === 2) throw idReusedError(id);
}

/** The id of a reserve: the option, or a new random UUID. */
export function reservationId(options: ReserveOptions | undefined): string {
  return readTakeId(options, 'options') ?? randomUUID();
}

/**
 * A reservation id given to `settle`/`cancel`: a string of 1–128 characters.
 *
 * @throws {InvalidInputError} field `id`
 */
export function readReservationId(id: unknown): string {
  if (typeof id !== 'string' || id.length === 0 || id.length > MAX_TAKE_ID_LENGTH) {
    throw new InvalidInputError('id', `a string of 1 to ${MAX_TAKE_ID_LENGTH} characters`, id);
  }
  return id;
}

/**
 * The options of `charge`: `{ id? }`, nothing else.
 *
 * @throws {InvalidInputError} field `options` or `options.id`
 */
export function readPricedId(options: PricedOptions | undefined): string | undefined {
  if (options !== undefined) {
    if (typeof options !== 'object' || options === null) {
      throw new InvalidInputError('options', 'an object such as { id }', options);
    }
    onlyKnownKeys(options, ['id'], 'options');
  }
  return readTakeId(options, 'options');
}

/**
 * The options of `refund`: `{ id, takeId }`, both required, nothing else.
 *
 * @throws {InvalidInputError} field `options`, `options.id` or `options.takeId`
 */
export function readRefundOptions(options: RefundOptions | undefined): {
  id: string;
  takeId: string;
} {
  if (typeof options !== 'object' || options === null) {
    throw new InvalidInputError('options', 'an object such as { id, takeId }', options);
  }
  onlyKnownKeys(options, ['id', 'takeId'], 'options');
  const chars = `a string of 1 to ${MAX_TAKE_ID_LENGTH} characters`;
  const id = readTakeId(options, 'options');
  if (id === undefined) {
    throw new InvalidInputError(
      'options.id',
      `${chars} (a refund needs an id: it applies once)`,
      id,
    );
  }
  const takeId = readProperty(options, 'takeId', 'options');
  if (typeof takeId !== 'string' || takeId.length === 0 || takeId.length > MAX_TAKE_ID_LENGTH) {
    throw new InvalidInputError(
      'options.takeId',
      `${chars}: the id of the take (a take or takeAll with an id) or reservation the refund gives back from`,
      takeId,
    );
  }
  return { id, takeId };
}

/**
 * Units given to `settle` (`actualCost`: a non-negative safe integer) or to `refund` and
 * `charge` (`cost`: a positive safe integer).
 *
 * @throws {InvalidInputError} naming `field`
 */
export function readUnits(value: unknown, field: string, allowZero: boolean): number {
  if (typeof value !== 'number' || !Number.isSafeInteger(value) || value < (allowZero ? 0 : 1)) {
    throw new InvalidInputError(
      field,
      allowZero ? 'a non-negative safe integer' : 'a positive safe integer',
      value,
    );
  }
  return value;
}

/** A settle-like reply's slots as a {@link Settlement}. */
export function settlement(
  reply: readonly unknown[],
  offset: number,
  limit: number,
  replayed: boolean,
): Settlement {
  return {
    applied: Number(reply[offset + 1]),
    remaining: Number(reply[offset + 2]),
    limit,
    known: reply[offset] === 1,
    replayed,
  };
}

/** The replay flag of a request of `size` items whose record is its second item. */
export function replayedAt(reply: readonly unknown[], offset: number, size: number): boolean {
  return size >= 2 && reply[offset + 4] === 1;
}

/**
 * A reservation: the decision of its `reserve`, its id, and the way to settle it. `settle`
 * and `cancel` may be called from this object or, with the id, from any process
 * (`limiter.settle(scope, policy, id, actualCost)`); each reservation is settled at most once.
 */
export class Reservation implements Decision {
  readonly allowed: boolean;
  readonly remaining: number;
  readonly limit: number;
  readonly resetMs: number;
  readonly retryAfterMs: number;
  /**
   * True when this reserve repeated an earlier one with the same id (nothing taken now), or
   * found the id cancelled before it arrived (refused, nothing taken).
   */
  readonly replayed: boolean;
  /** Present (true) when the scope is blocked (see {@link Decision.blocked}). */
  readonly blocked?: true;
  readonly #settle: (actualCost: number) => Promise<Settlement>;

  /** @internal Made by `RateLimiter.reserve`. */
  constructor(
    decision: Decision,
    /** The reservation's id: the `id` option, or a random UUID. */
    readonly id: string,
    settle: (actualCost: number) => Promise<Settlement>,
  ) {
    this.#settle = settle;
    this.allowed = decision.allowed;
    this.remaining = decision.remaining;
    this.limit = decision.limit;
    this.resetMs = decision.resetMs;
    this.retryAfterMs = decision.retryAfterMs;
    this.replayed = decision.replayed === true;
    if (decision.blocked === true) this.blocked = true;
  }

  /**
   * Settles with the units actually used (a non-negative safe integer): less than the cost
   * gives the difference back, more charges the excess, past the limit — only into the
   * window (or bucket state) the reservation was taken from. Once per reservation.
   */
  settle(actualCost: number): Promise<Settlement> {
    return this.#settle(actualCost);
  }

  /** Gives the whole reservation back (a settle of 0). */
  cancel(): Promise<Settlement> {
    return this.#settle(0);
  }
}
