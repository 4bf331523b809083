/**
 * Leases of a concurrency policy: `acquire`, `release` and `renew`, each one call of
 * `concurrency.lua` through the same decision path as a take (validation, in-flight cap,
 * coalescer, deadline). An acquisition is a take: counted as `allowed` or `limited`, reported
 * as a `take` decision event. A release or a renewal is counted apart (`leasesReleased`,
 * `leasesRenewed`, `leasesLost`) and never cached.
 *
 * What is applied once: a lease is one member of the scope's set, named by its id, so a
 * release sent twice (a retry after a timeout) frees one slot, the second finds nothing; a
 * renewal extends only a lease that is still live, so a renewal racing a release either
 * extends it before it is released or finds it gone, and an expired lease is never revived
 * (its slot may be someone else's). An acquisition with the id of a live lease returns that
 * lease (renewed), so a retried acquisition holds one slot, not two.
 */
import { randomUUID } from 'node:crypto';
import { decodeDecision } from '../algorithms/batch-wire.js';
import {
  type ConcurrencyPolicy,
  checkLeaseId,
  isConcurrency,
  type LeaseAction,
  leaseIdOf,
} from '../algorithms/concurrency.js';
import { InvalidInputError, StoreError } from '../errors.js';
import type { Decision, Lease, Policy, Scope, TakeAllResult } from '../types.js';
import { onlyKnownKeys, readProperty } from '../validate.js';
import {
  Call,
  type GroupCall,
  type InFlight,
  type PricedAnswer,
  type ResetCall,
  type Settler,
} from './calls.js';
import type { CallMeta } from './events.js';
import type { Outcomes } from './outcomes.js';
import { readRequestId, type ScopeParts, type Target, type TargetMaker } from './targets.js';

/** Options of `acquire`. */
export interface AcquireOptions {
  /**
   * The lease's id: 1 to 128 printable ASCII characters without spaces; default a random
   * UUID. An id that holds a live lease of the scope gets that lease back (renewed), so a
   * retried acquisition holds one slot.
   */
  readonly id?: string;
  /** As in `TakeOptions`: passed through to the decision event. */
  readonly requestId?: string;
}

/** What the limiter lends the lease calls: its targets and its way of sending a call. */
export interface LeasePath {
  readonly targets: TargetMaker;
  readonly outcomes: Outcomes;
  send<T>(
    make: (resolve: (value: T) => void, reject: (error: Error) => void) => InFlight,
    meta: CallMeta | undefined,
  ): Promise<T>;
  /** Whether acquisitions are reported as decision events. */
  readonly reported: boolean;
}

const ACQUIRE_KEYS: readonly string[] = ['id', 'requestId'];

export class Leases {
  readonly #path: LeasePath;
  readonly #settler: LeaseSettler;
  /** Called with a scope's key when this limiter released a lease of it (`wait.ts`). */
  onReleased: ((key: string) => void) | undefined = undefined;

  constructor(path: LeasePath) {
    this.#path = path;
    this.#settler = new LeaseSettler(path.outcomes);
  }

  acquire(scope: Scope, policy: Policy, options?: AcquireOptions): Promise<Lease> {
    let target: Target;
    let requestId: string | undefined;
    try {
      let id: unknown;
      if (options !== undefined) {
        if (typeof options !== 'object' || options === null) {
          throw new InvalidInputError('options', 'an object such as { id }', options);
        }
        onlyKnownKeys(options, ACQUIRE_KEYS, 'options');
        id = readProperty(options, 'id', 'options');
        requestId = readRequestId(options, 'options');
      }
      target = this.target(scope, policy, id);
    } catch (error) {
      this.#path.outcomes.stats.invalid++;
      return Promise.reject(error);
    }
    return this.acquireTarget(target, requestId);
  }

  /**
   * The target of an acquisition of the lease `id` (checked; a random UUID when undefined).
   *
   * @throws {InvalidInputError} a bad scope, policy (not a concurrency policy) or `options.id`
   */
  target(scope: Scope, policy: Policy, id: unknown): Target {
    const leaseId = id === undefined ? randomUUID() : checkLeaseId('options.id', id);
    return this.#path.targets.lease(scope, policy, 'a', leaseId);
  }

  /** Acquires the lease of a validated target (its ARGV name the action `a` and the id). */
  acquireTarget(target: Target, requestId?: string): Promise<Lease> {
    const meta: CallMeta | undefined = this.#path.reported
      ? { targets: [target], operation: 'take', requestId, startedAt: performance.now() }
      : undefined;
    const outcomes = this.#path.outcomes;
    return this.#path
      .send<Decision>((resolve, reject) => {
        const call = new Call(outcomes, 't', target, resolve, reject);
        // Admitted after the caller's TimeoutError: nobody knows its id, so it is freed now.
        call.late = (decision) => this.#releaseLate(target, decision);
        return call;
      }, meta)
      .then((decision) => this.lease(target, decision));
  }

  /** Releases a lease admitted after its caller was told the call timed out. */
  #releaseLate(target: Target, decision: Decision): void {
    if (!decision.allowed) return;
    this.lease(target, decision)
      .release()
      .catch(() => false);
  }

  /** Releases the leases of a takeAll admitted after its caller was told it timed out. */
  releaseLateAll(targets: readonly Target[], result: TakeAllResult): void {
    for (const lease of this.withLeases(targets, result).leases ?? []) {
      lease.release().catch(() => false);
    }
  }

  /** The lease of `decision`, acquired for `target`. */
  lease(target: Target, decision: Decision): Lease {
    const id = leaseIdOf(target.args);
    const scope = scopeOf(target.parts);
    const policy = target.policy;
    return Object.freeze({
      ...decision,
      id,
      release: () => (decision.allowed ? this.release(scope, policy, id) : Promise.resolve(false)),
      renew: () =>
        decision.allowed
          ? this.renew(scope, policy, id)
          : Promise.resolve({ ...decision, allowed: false, retryAfterMs: Infinity }),
    });
  }

  /** The result of a takeAll, with the leases of its concurrency items when it was admitted. */
  withLeases(targets: readonly Target[], result: TakeAllResult): TakeAllResult {
    if (!result.allowed) return result;
    const leases: Lease[] = [];
    for (let j = 0; j < targets.length; j++) {
      const target = targets[j] as Target;
      if (isConcurrency(target.policy)) {
        leases.push(this.lease(target, result.decisions[j] as Decision));
      }
    }
    return leases.length === 0 ? result : { ...result, leases };
  }

  release(scope: Scope, policy: Policy, id: string): Promise<boolean> {
    return this.#call('l', scope, policy, id).then((decision) => decision.allowed);
  }

  renew(scope: Scope, policy: Policy, id: string): Promise<Decision> {
    return this.#call('n', scope, policy, id);
  }

  #call(action: LeaseAction, scope: Scope, policy: Policy, id: string): Promise<Decision> {
    let target: Target;
    try {
      target = this.#path.targets.lease(scope, policy, action, checkLeaseId('id', id));
    } catch (error) {
      this.#path.outcomes.stats.invalid++;
      return Promise.reject(error);
    }
    const settler = this.#settler;
    return this.#path
      .send<Decision>(
        (resolve, reject) => new Call(settler, 't', target, resolve, reject),
        undefined,
      )
      .then((decision) => {
        if (action === 'l' && decision.allowed) this.onReleased?.(target.key);
        return decision;
      });
  }
}

/** A validated scope as a scope object again (what a lease's own calls pass). */
function scopeOf(parts: ScopeParts): Scope {
  const { tenant, route, user } = parts;
  return route === undefined
    ? user === undefined
      ? { tenant }
      : { tenant, user }
    : user === undefined
      ? { tenant, route }
      : { tenant, route, user };
}

/**
 * Settles releases and renewals: decoded and counted as lease outcomes (never cached, never
 * `allowed`/`limited`); failures and deadlines as every call's.
 */
class LeaseSettler implements Settler {
  constructor(readonly outcomes: Outcomes) {}

  answered(call: Call, reply: readonly unknown[], offset: number): void {
    const { stats, deadlines } = this.outcomes;
    stats.inFlight--;
    const policy = call.target.policy as ConcurrencyPolicy;
    const decision = decodeDecision(reply, offset, policy.limit);
    if (decision === undefined) {
      this.outcomes.failed(
        call,
        new StoreError(`ERR unexpected reply from ${policy.script.name}`),
        true,
      );
      return;
    }
    if (!deadlines.settle(call)) return;
    if (!decision.allowed) stats.leasesLost++;
    else if (call.target.args[3] === 'l') stats.leasesReleased++;
    else stats.leasesRenewed++;
    call.resolve(decision);
  }

  groupAnswered(call: GroupCall): void {
    this.outcomes.failed(call, new StoreError('ERR a lease call is never a group'));
  }

  deleted(call: ResetCall): void {
    this.outcomes.failed(call, new StoreError('ERR a lease call is never a reset'));
  }

  pricedAnswered(call: PricedAnswer): void {
    this.outcomes.failed(call, new StoreError('ERR a lease call is never a priced call'));
  }

  failed(call: InFlight, error: unknown, counted?: boolean): void {
    this.outcomes.failed(call, error, counted);
  }

  expired(call: InFlight): void {
    this.outcomes.expired(call);
  }
}
