/**
 * `reserveAll`: several reservations in one atomic script call, all or nothing as a
 * `takeAll` (op `m` of the batch script, see `algorithms/settle/priced.lua`). Either every
 * item is reserved or none is, so a refused call never holds units that a concurrent call
 * is then refused by, and nothing is left to cancel. Each item gets its own reservation,
 * under the call's id, settled (or cancelled) one by one like any `reserve`'s.
 */
import type { WireItem } from '../algorithms/batch-wire.js';
import type { Decision } from '../types.js';
import { InFlight, type Settler } from './calls.js';
import { pricedRecord, type Reservation } from './priced.js';
import { askDigest } from './retry-safe.js';
import type { Target } from './targets.js';

/** The answer to `reserveAll`. */
export interface ReserveAllResult {
  /** True when every item was reserved; false when none was (nothing consumed). */
  readonly allowed: boolean;
  /**
   * One reservation per item, in item order, each with the call's id. When refused, each
   * holds its item's state as a refused `takeAll` reports it (an item that would have
   * fitted: `retryAfterMs` 0) and its `settle`/`cancel` change nothing.
   */
  readonly reservations: readonly Reservation[];
  /** When refused, the longest wait of its items; 0 when admitted. */
  readonly retryAfterMs: number;
  /** True when this call repeated an earlier one with the same id (nothing taken now). */
  readonly replayed: boolean;
}

/** Estimated µs of Redis time of one item besides its take (dry run, record GET and SET). */
const ITEM_WORK = 10;

/** One `reserveAll` in flight: each item's scope, then its reservation record. */
export class ReserveAllCall extends InFlight {
  readonly op = 'm' as const;
  readonly script = undefined;
  readonly key = '';
  readonly size: number;
  readonly work: number;
  readonly #items: WireItem[] = [];

  constructor(
    settler: Settler,
    targets: readonly Target[],
    id: string,
    readonly finish: (reply: readonly unknown[], offset: number) => void,
    reject: (error: Error) => void,
  ) {
    super(settler, reject);
    let horizonMs = 1;
    for (const target of targets) horizonMs = Math.max(horizonMs, target.policy.horizonMs);
    let work = 0;
    const ask = askDigest(targets);
    for (const target of targets) {
      const args = [...target.args, String(target.cost)];
      this.#items.push({ key: target.key, batchId: target.batchId, args });
      // Every record lives as long as the longest horizon: they are written together and
      // expire together, so a repeat finds all of them or none. Each carries the call's ask.
      this.#items.push({ ...pricedRecord(target, 'rsv', id), args: [String(horizonMs), ask] });
      work += 2 * target.work + ITEM_WORK;
    }
    this.size = this.#items.length;
    this.work = work;
  }

  get args(): readonly string[] {
    return (this.#items[0] as WireItem).args;
  }

  get firstKey(): string {
    return (this.#items[0] as WireItem).key;
  }

  item(j: number): WireItem {
    return this.#items[j] as WireItem;
  }

  done(reply: readonly unknown[], offset: number): void {
    this.settler.pricedAnswered(this, reply, offset);
  }
}

/** The result of a `reserveAll` from its reservations. */
export function reserveAllResult(
  reservations: readonly Reservation[],
  replayed: boolean,
): ReserveAllResult {
  const allowed = reservations.every((r: Decision) => r.allowed);
  let retryAfterMs = 0;
  if (!allowed) for (const r of reservations) retryAfterMs = Math.max(retryAfterMs, r.retryAfterMs);
  return { allowed, reservations, retryAfterMs, replayed };
}
