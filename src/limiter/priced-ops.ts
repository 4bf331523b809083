/**
 * The limiter's reserve, settle, cancel, refund and charge (see `priced.ts`): validate, then
 * one priced call through the limiter's in-flight cap, deadline and coalescer. Kept apart
 * from `rate-limiter.ts`, whose methods call these.
 */
import { decodeDecision, type WireItem } from '../algorithms/batch-wire.js';
import { StoreError } from '../errors.js';
import type { Policy, Scope, TakeAllItem, TakeAllOptions } from '../types.js';
import type { InFlight, Settler } from './calls.js';
import {
  checkReused,
  PricedCall,
  type PricedOp,
  type PricedOptions,
  pricedRecord,
  type RefundOptions,
  Reservation,
  type ReserveOptions,
  readPricedId,
  readRefundOptions,
  readReservationId,
  readUnits,
  replayedAt,
  requireSettle,
  reservationId,
  type Settlement,
  settlement,
} from './priced.js';
import { ReserveAllCall, type ReserveAllResult, reserveAllResult } from './reserve-all.js';
import { askDigest, askOf, idReusedError, keyDigest, takeRecordKey } from './retry-safe.js';
import { readTakeAllOptions, type Target, type TargetMaker } from './targets.js';

/** What the operations need of their limiter. */
export interface PricedHost {
  readonly targets: TargetMaker;
  readonly settler: Settler;
  /** The limiter's path for a call: in-flight cap, deadline, coalescer. */
  send<T>(
    make: (resolve: (value: T) => void, reject: (error: Error) => void) => InFlight,
  ): Promise<T>;
  /** Counts a call refused for bad input, and rejects it. */
  invalid<T>(error: unknown): Promise<T>;
  /** Units were given back to `target`'s scope: cached denials of it no longer hold. */
  gaveBack(target: Target): void;
}

export class PricedOps {
  constructor(readonly host: PricedHost) {}

  reserve(scope: Scope, policy: Policy, options?: ReserveOptions): Promise<Reservation> {
    let target: Target;
    let id: string;
    try {
      target = this.#target(scope, policy, options);
      id = reservationId(options);
    } catch (error) {
      return this.host.invalid(error);
    }
    const settle = (actualCost: number) => {
      try {
        return this.#settle(target, id, readUnits(actualCost, 'actualCost', true));
      } catch (error) {
        return this.host.invalid<Settlement>(error);
      }
    };
    const record = pricedRecord(target, 'rsv', id, askDigest([target]));
    return this.#call('k', target, target.cost, record, (reply, at) => {
      checkReused(reply, at, id);
      const decision = decodeDecision(reply, at, policy.limit);
      if (decision === undefined) throw new StoreError('ERR unexpected reply to a reserve');
      return new Reservation({ ...decision, replayed: replayedAt(reply, at, 2) }, id, settle);
    });
  }

  reserveAll(items: readonly TakeAllItem[], options?: TakeAllOptions): Promise<ReserveAllResult> {
    let targets: Target[];
    let id: string;
    try {
      targets = this.host.targets.all(items);
      for (const [i, target] of targets.entries()) {
        requireSettle(target.policy, `items[${i}].policy`);
      }
      readTakeAllOptions(options);
      id = reservationId(options);
    } catch (error) {
      return this.host.invalid(error);
    }
    return this.host.send<ReserveAllResult>(
      (resolve, reject) =>
        new ReserveAllCall(
          this.host.settler,
          targets,
          id,
          (reply, offset) => {
            if (reply[offset + 4] === 2) {
              reject(idReusedError(id));
              return;
            }
            const reservations: Reservation[] = [];
            for (const [j, target] of targets.entries()) {
              const at = offset + 8 * j;
              const decision = decodeDecision(reply, at, target.policy.limit);
              if (decision === undefined) {
                reject(new StoreError('ERR unexpected reply to a reserveAll'));
                return;
              }
              const replayed = reply[at + 4] === 1;
              reservations.push(
                new Reservation({ ...decision, replayed }, id, (actualCost: number) => {
                  try {
                    return this.#settle(target, id, readUnits(actualCost, 'actualCost', true));
                  } catch (error) {
                    return this.host.invalid<Settlement>(error);
                  }
                }),
              );
            }
            resolve(reserveAllResult(reservations, reply[offset + 4] === 1));
          },
          reject,
        ),
    );
  }

  settle(scope: Scope, policy: Policy, id: string, actualCost: number): Promise<Settlement> {
    let target: Target;
    let units: number;
    let reservation: string;
    try {
      target = this.#target(scope, policy, undefined);
      reservation = readReservationId(id);
      units = readUnits(actualCost, 'actualCost', true);
    } catch (error) {
      return this.host.invalid(error);
    }
    return this.#settle(target, reservation, units);
  }

  /**
   * A refund of `cost` units of the take or reservation `options.takeId`: items the scope,
   * the refund's record, then its anchor (the reservation record and the take record of
   * `takeId`; see op `f` in `settle/priced.lua`).
   */
  refund(
    scope: Scope,
    policy: Policy,
    cost: number,
    options: RefundOptions | undefined,
  ): Promise<Settlement> {
    let target: Target;
    let units: number;
    let ids: { id: string; takeId: string };
    try {
      target = this.#target(scope, policy, undefined);
      units = readUnits(cost, 'cost', false);
      ids = readRefundOptions(options);
    } catch (error) {
      return this.host.invalid(error);
    }
    const { id, takeId } = ids;
    const ttl = String(target.policy.horizonMs);
    const record = pricedRecord(target, 'refund', id, askOf([target.key, units, takeId]));
    const anchor: WireItem[] = [
      { ...pricedRecord(target, 'rsv', takeId), args: [ttl] },
      { key: takeRecordKey(target, takeId), batchId: 0, args: [ttl, keyDigest(target.key)] },
    ];
    return this.#call(
      'f',
      target,
      units,
      record,
      (reply, at) => {
        checkReused(reply, at, id);
        return this.#settled(target, settlement(reply, at, policy.limit, replayedAt(reply, at, 2)));
      },
      anchor,
    );
  }

  charge(
    scope: Scope,
    policy: Policy,
    cost: number,
    options: PricedOptions | undefined,
  ): Promise<Settlement> {
    let target: Target;
    let units: number;
    let id: string | undefined;
    try {
      target = this.#target(scope, policy, undefined);
      units = readUnits(cost, 'cost', false);
      id = readPricedId(options);
    } catch (error) {
      return this.host.invalid(error);
    }
    const record =
      id === undefined ? undefined : pricedRecord(target, 'charge', id, askOf([target.key, units]));
    return this.#call('g', target, units, record, (reply, at) => {
      if (id !== undefined) checkReused(reply, at, id);
      return this.#settled(
        target,
        settlement(reply, at, policy.limit, replayedAt(reply, at, record === undefined ? 1 : 2)),
        true,
      );
    });
  }

  #target(scope: Scope, policy: Policy, options: ReserveOptions | undefined): Target {
    const target = this.host.targets.one(scope, policy, options, 'scope', 'policy', 'options');
    requireSettle(policy);
    return target;
  }

  #settle(target: Target, id: string, units: number): Promise<Settlement> {
    return this.#call('s', target, units, pricedRecord(target, 'rsv', id), (reply, at) =>
      this.#settled(target, settlement(reply, at, target.policy.limit, replayedAt(reply, at, 2))),
    );
  }

  /**
   * A settlement that may have given units back makes cached denials of the scope stale:
   * any settle or refund but an overrun (`applied` rounds toward 0, so a token-bucket or
   * GCRA give-back of a whole token can answer 0 although the token is back).
   */
  #settled(target: Target, result: Settlement, charge = false): Settlement {
    if (!charge && result.applied <= 0 && !result.replayed) this.host.gaveBack(target);
    return result;
  }

  #call<T>(
    op: PricedOp,
    target: Target,
    units: number,
    record: WireItem | undefined,
    decode: (reply: readonly unknown[], offset: number) => T,
    anchor: readonly WireItem[] = [],
  ): Promise<T> {
    return this.host.send<T>(
      (resolve, reject) =>
        new PricedCall(
          this.host.settler,
          op,
          target,
          units,
          record,
          (reply, offset) => {
            try {
              resolve(decode(reply, offset));
            } catch (error) {
              reject(error as Error);
            }
          },
          reject,
          anchor,
        ),
    );
  }
}
