/**
 * `RateLimiter`: the decision path. Every call goes the same way —
 *
 * 1. validate: the input, read once, into targets (`targets.ts`); bad input rejects with an
 *    `InvalidInputError` and sends nothing;
 * 2. the local denial cache: a scope certain to be denied is answered in process
 *    (`local-denials.ts`);
 * 3. the in-flight cap: over `maxInFlight`, an `OverloadError`, nothing sent;
 *    (calls issued while the client makes its first connections wait for it: `start-gate.ts`)
 * 4. the coalesced script call: the calls of one event-loop turn go to Redis together
 *    (`coalescer.ts`), each decided by its algorithm's Lua script on Redis server time;
 * 5. the deadline: one timer for every call (`deadline.ts`); past it, a `TimeoutError`;
 * 6. the decision: decoded, cached, counted, reported and resolved (`outcomes.ts`).
 *
 * Nothing is read and then written from here: every decision is made inside one atomic
 * script. The hot path allocates a promise, a target and a call object per take, hashes the
 * scope once, and creates no timer.
 */
import { performance } from 'node:perf_hooks';
import type { WireItem } from '../algorithms/batch-wire.js';
import { type ConcurrencyPolicy, isConcurrency } from '../algorithms/concurrency.js';
import { InvalidInputError, OverloadError, UnavailableError } from '../errors.js';
import { resetEpochKey } from '../key.js';
import { observerFailed } from '../observer.js';
import { checkServer } from '../redis/server-checks.js';
import type { ScriptStore } from '../stores/store.js';
import type {
  Decision,
  Lease,
  Policy,
  Scope,
  TakeAllItem,
  TakeAllOptions,
  TakeAllResult,
  TakeOptions,
} from '../types.js';
import { Call, GroupCall, type InFlight, ResetCall } from './calls.js';
import { Coalescer } from './coalescer.js';
import { DeadlineQueue } from './deadline.js';
import { type CallMeta, DecisionReporter } from './events.js';
import { type AcquireOptions, Leases } from './leases.js';
import { LocalDenials } from './local-denials.js';
import { type RateLimiterOptions, readOptions } from './options.js';
import { Outcomes } from './outcomes.js';
import { Prefetcher } from './prefetch.js';
import type {
  PricedOptions,
  RefundOptions,
  Reservation,
  ReserveOptions,
  Settlement,
} from './priced.js';
import { PricedOps } from './priced-ops.js';
import type { ReserveAllResult } from './reserve-all.js';
import { IdCall, IdGroupCall, readTakeId, recordItem } from './retry-safe.js';
import { ClaimCall, claimItem } from './serve-claim.js';
import { StartGate } from './start-gate.js';
import { type LimiterStats, newStats } from './stats.js';
import {
  readRequestId,
  readTakeAllOptions,
  requestIdIfValid,
  type Target,
  TargetMaker,
} from './targets.js';
import { type Scheduled, type WaitOptions, Waits } from './wait.js';

export class RateLimiter {
  readonly #maxInFlight: number;
  readonly #timeoutMs: number;
  readonly #stats: LimiterStats = newStats();
  readonly #targets: TargetMaker;
  readonly #denials: LocalDenials;
  readonly #deadlines: DeadlineQueue;
  readonly #coalescer: Coalescer;
  readonly #outcomes: Outcomes;
  /** Decision events' destination; undefined when nothing observes this limiter. */
  readonly #reporter: DecisionReporter | undefined;
  /** Holds the calls issued while the client makes its first connections. */
  readonly #gate: StartGate;
  readonly #checks: () => Promise<void>;
  /** The start-up checks, once they ran (or while they run); undefined after a failure. */
  #checked: Promise<void> | undefined;
  readonly #leases: Leases;
  readonly #waits: Waits;
  /** Reserve, settle, cancel, refund and charge (see `priced.ts`). */
  readonly #priced: PricedOps;
  /** Prefetched quota of hot scopes (see `prefetch.ts`). */
  readonly #prefetch: Prefetcher;

  /**
   * @throws {InvalidInputError} for a missing or ambiguous store, an unknown option or an
   *   option out of its range (see {@link RateLimiterOptions}).
   */
  constructor(options: RateLimiterOptions) {
    const settings = readOptions(options);
    const { store, metrics, onDecision, timeoutMs } = settings;
    this.#maxInFlight = settings.maxInFlight;
    this.#timeoutMs = timeoutMs;
    this.#denials = new LocalDenials(
      store,
      resetEpochKey(settings.namespace),
      settings.denialCacheEntries,
      settings.clock,
      this.#stats,
    );
    this.#targets = new TargetMaker(settings.namespace, this.#denials.enabled);
    this.#deadlines = new DeadlineQueue(timeoutMs);
    this.#coalescer = new Coalescer(
      store,
      settings.maxBatchSize,
      settings.clock,
      undefined,
      settings.stallTimeoutMs,
      settings.waitForReplicas === 0
        ? undefined
        : { replicas: settings.waitForReplicas, timeoutMs: timeoutMs },
    );
    this.#reporter =
      metrics === undefined && onDecision === undefined
        ? undefined
        : new DecisionReporter(metrics, onDecision, settings.eventTenant);
    this.#outcomes = new Outcomes(this.#stats, this.#deadlines, this.#denials, this.#reporter);
    this.#gate = new StartGate(firstConnectionOf(store), (calls) => {
      const now = performance.now();
      for (const call of calls) this.#coalescer.add(call, now);
    });
    this.#checks = () => checkServer(store, settings.onWarning);
    this.#leases = new Leases({
      targets: this.#targets,
      outcomes: this.#outcomes,
      send: (make, meta) => this.#send(make, meta),
      reported: this.#reporter !== undefined,
    });
    this.#waits = new Waits({
      targets: this.#targets,
      leases: this.#leases,
      stats: this.#stats,
      maxWaiters: settings.maxWaiters,
      take: (target, requestId) => this.#sendTake(target, requestId),
      reporter: this.#reporter,
    });
    this.ready().catch(() => {}); // the checks' warnings, at start; the calls say the rest
    if (metrics !== undefined) {
      // A weak reference: a sink outliving the limiter must not keep it alive.
      const stats = new WeakRef(this.#stats);
      try {
        metrics.attach({ timeoutMs, inFlight: () => stats.deref()?.inFlight });
      } catch (error) {
        observerFailed('metrics.attach', error);
      }
    }
    this.#priced = new PricedOps({
      targets: this.#targets,
      settler: this.#outcomes,
      send: (make) => this.#send(make, undefined),
      invalid: (error) => {
        this.#stats.invalid++;
        return Promise.reject(error);
      },
      // Here at once; elsewhere within the reset epoch's bound (a failed write: until the
      // cached denials end, which under-admits, never over-admits).
      gaveBack: (target) => {
        this.#denials.forget(target.localKey);
        this.#denials.announceReset().catch(() => {});
      },
    });
    this.#prefetch = new Prefetcher({
      settler: this.#outcomes,
      stats: this.#stats,
      reporter: this.#reporter,
      send: (make) => this.#send(make, undefined),
      refused: (target, decision, sentAt) =>
        this.#denials.remember(target.policy, target.localKey, 1, decision, sentAt, false),
      gaveBack: (target) => {
        this.#denials.forget(target.localKey);
        this.#denials.announceReset().catch(() => {});
      },
      alone: (target, requestId) => this.#sendTake(target, requestId),
    });
    // The methods may be passed around as functions (`const take = limiter.take`).
    this.take = this.take.bind(this);
    this.takeAll = this.takeAll.bind(this);
    this.peek = this.peek.bind(this);
    this.ready = this.ready.bind(this);
    this.reset = this.reset.bind(this);
    this.acquire = this.acquire.bind(this);
    this.release = this.release.bind(this);
    this.renew = this.renew.bind(this);
    this.wait = this.wait.bind(this);
    this.schedule = this.schedule.bind(this);
    this.reserve = this.reserve.bind(this);
    this.reserveAll = this.reserveAll.bind(this);
    this.settle = this.settle.bind(this);
    this.cancel = this.cancel.bind(this);
    this.refund = this.refund.bind(this);
    this.charge = this.charge.bind(this);
    this.close = this.close.bind(this);
  }

  /**
   * Gives back every prefetched unit this limiter holds (policies with `prefetch`, see
   * `docs/prefetch.md`) into the window it came from, and stops prefetching: later takes of
   * those policies go to Redis one by one. Resolves once Redis answered every give-back (one
   * that fails is dropped: its units end with their window). Closes neither the client nor
   * anything else; the limiter keeps deciding. Never rejects.
   */
  close(): Promise<void> {
    return this.#prefetch.close();
  }

  /** `await using limiter = new RateLimiter(…)`: {@link close} at the end of the scope. */
  [Symbol.asyncDispose](): Promise<void> {
    return this.close();
  }

  /**
   * Resolves once the limiter can decide: the client's first connection is up (a cluster
   * client's, to every primary; see `redis/first-connection.ts`) and the start-up checks ran
   * (their warnings reported). Awaiting it is optional: calls issued before wait for the same
   * within their deadline (one that passes first rejects with `UnavailableError`, nothing
   * sent). For a readiness probe, or to take traffic only once Redis answers.
   *
   * @throws {UnavailableError} no Redis server answered the checks' `INFO`.
   * @throws {RedisConfigError} Redis refused the connection's configuration (a password, a
   *   permission).
   * A call after a failure asks again; once resolved it stays resolved: it answers for the
   * start, not for liveness (a later outage shows in the calls' errors and the metrics).
   */
  ready(): Promise<void> {
    if (this.#checked === undefined) {
      const checked = this.#gate.opened.then(this.#checks);
      this.#checked = checked;
      checked.catch(() => {
        if (this.#checked === checked) this.#checked = undefined;
      });
    }
    return this.#checked;
  }

  /**
   * Decides, atomically on Redis, whether `scope` may spend `cost` units under `policy`,
   * and spends them when it may. A denial resolves (`allowed: false`); only failures reject.
   * Always returns a promise: bad input rejects, it never throws synchronously.
   *
   * @returns the decision; see {@link Decision} for each field's meaning.
   * @throws {InvalidInputError} bad scope, policy or cost (nothing sent to Redis); field
   *   `id`: the `id` was used within the horizon for a different request (nothing changed).
   * @throws {OverloadError} `maxInFlight` calls already in flight (nothing sent).
   * @throws {TimeoutError} no answer within `timeoutMs` (quota may have been spent).
   * @throws {UnavailableError} Redis unreachable, client closed, or connection lost.
   * @throws {StoreError} Redis replied with an error (e.g. `WRONGTYPE`, `OOM`).
   */
  take(scope: Scope, policy: Policy, options?: TakeOptions): Promise<Decision> {
    return this.#decide('t', scope, policy, options);
  }

  /**
   * The state of `scope` under `policy` now, and whether `take(scope, policy, options)` would
   * be admitted now, decided by the same script on Redis, consuming and writing nothing (not
   * even a repair of foreign state). For inspection and for "check only" callers; a later take
   * may decide differently.
   *
   * The decision's fields, for every policy:
   * - `remaining`: the units left now, before any take — what the last take's answer reported
   *   when nothing changed since (a refill, a window boundary or entries leaving the window
   *   can raise it); `limit` on a scope without state (or with foreign state, which a take
   *   would clear).
   * - `allowed`: a take of `cost` (default 1) would be admitted now.
   * - `retryAfterMs`: 0 when it would; else the ms until it would, absent other traffic
   *   (`Infinity` when `cost` is larger than the policy can ever admit), as a take's denial.
   * - `resetMs`: the ms until the scope is clean now, whatever the cost (not after a take of
   *   it): what the last take's answer reported, less the time since; 0 on a scope without
   *   state; for a fixed window, the time left in the key's window.
   *
   * A scope whose denial is held in the local denial cache is answered from it, without a
   * Redis call, as a take would be: `allowed: false`, `remaining: 0` (the cache holds a
   * denial only while no unit is left), the cached `resetMs` and `retryAfterMs`. A peek never
   * adds a denial to the cache when it would be admitted.
   *
   * @returns the decision described above, the {@link Decision} shape of a take.
   * @throws the errors of {@link take}.
   */
  peek(scope: Scope, policy: Policy, options?: TakeOptions): Promise<Decision> {
    return this.#decide('p', scope, policy, options);
  }

  /**
   * Takes from several limits at once, all or nothing, in one atomic script call: when any
   * item is denied, no item consumes anything. For stacked limits (10 per second *and*
   * 1,000 per hour) and for tenant-wide plus per-route or per-user limits. Every item must
   * be of the same tenant (their keys share one Redis Cluster hash slot), and no two items
   * may name the same scope under the same policy.
   *
   * @param items 1 to 16 of `{ scope, policy, cost? }`.
   * @param options `requestId` for decision events.
   * @returns see {@link TakeAllResult}.
   * @throws {InvalidInputError} no items or more than 16, an invalid item (`items[i]…`),
   *   items of different tenants, or a repeated scope and policy (nothing sent to Redis);
   *   field `id`: the `id` was used for a different request (nothing changed).
   * @throws the failures of {@link take}; a failure rejects the whole call.
   */
  takeAll(items: readonly TakeAllItem[], options?: TakeAllOptions): Promise<TakeAllResult> {
    let targets: Target[];
    let requestId: string | undefined;
    let id: string | undefined;
    try {
      targets = this.#targets.all(items);
      requestId = readTakeAllOptions(options);
      id = readTakeId(options, 'options');
      if (id !== undefined && targets.some((target) => isConcurrency(target.policy))) {
        // A replay could not give back the first call's leases: each item's lease gets a
        // fresh id (acquire() with an id is the retry-safe way to hold a lease).
        throw new InvalidInputError(
          'options.id',
          'no id on a takeAll with a concurrency item (its leases get fresh ids)',
          id,
        );
      }
    } catch (error) {
      return this.#invalid('takeAll', undefined, options, error);
    }
    // A retry-safe call is never answered from the cache (see retry-safe.ts).
    const cached = id === undefined ? this.#heldAll(targets) : undefined;
    if (cached !== undefined) {
      this.#stats.limited++;
      this.#stats.cachedDenials++;
      this.#reporter?.report(
        { targets, operation: 'takeAll', requestId, startedAt: 0 },
        'limited',
        true,
        cached.decisions,
      );
      return Promise.resolve(cached);
    }
    const meta: CallMeta | undefined =
      this.#reporter === undefined
        ? undefined
        : { targets, operation: 'takeAll', requestId, startedAt: performance.now() };
    const leased = targets.some((target) => isConcurrency(target.policy));
    const record = id === undefined ? undefined : recordItem(targets, id);
    return this.#send((resolve, reject) => {
      const done: (result: TakeAllResult) => void = leased
        ? (result) => resolve(this.#leases.withLeases(targets, result))
        : resolve;
      const call =
        record === undefined
          ? new GroupCall(this.#outcomes, targets, done, reject)
          : new IdGroupCall(this.#outcomes, targets, record, id as string, done, reject);
      if (leased) call.late = (result) => this.#leases.releaseLateAll(targets, result);
      return call;
    }, meta);
  }

  /**
   * Acquires a lease of `scope` under a {@link concurrency} policy: one of its `limit` slots,
   * held until the lease is released or expires (`leaseMs` after its acquisition or last
   * renewal). A refusal resolves a lease with `allowed: false` that holds nothing. Counted
   * and reported as a take. See docs/concurrency.md.
   *
   * @returns the lease: its decision, its `id`, `release()` and `renew()`.
   * @throws {InvalidInputError} bad scope, a policy not from `concurrency()`, bad `options.id`.
   * @throws the failures of {@link take}.
   */
  acquire(scope: Scope, policy: Policy, options?: AcquireOptions): Promise<Lease> {
    return this.#leases.acquire(scope, policy, options);
  }

  /**
   * Releases the lease `id` of `scope` under a concurrency policy, from any process: true
   * when it was live (its slot is free now), false when there was none (released already,
   * expired). Applied at most once.
   *
   * @throws the errors of {@link acquire}.
   */
  release(scope: Scope, policy: Policy, id: string): Promise<boolean> {
    return this.#leases.release(scope, policy, id);
  }

  /**
   * Extends the lease `id` of `scope` to `leaseMs` from now, if it is still live (`allowed`);
   * an expired or released lease is never revived (`allowed: false`, `retryAfterMs: Infinity`).
   *
   * @throws the errors of {@link acquire}.
   */
  renew(scope: Scope, policy: Policy, id: string): Promise<Decision> {
    return this.#leases.renew(scope, policy, id);
  }

  /**
   * Waits for `scope` to be admitted under `policy` instead of being refused: resolves the
   * admitted decision (a {@link Lease} for a concurrency policy) as soon as one is granted,
   * or a refused one by `maxWaitMs`, never later. Waiters of one scope in this limiter are
   * served in arrival order; see `wait.ts` and docs/concurrency.md for what is guaranteed.
   *
   * @throws {InvalidInputError} bad scope, policy or options (nothing sent).
   * @throws {DOMException} an `AbortError` when `options.signal` fires first.
   * @throws the failures of {@link take} (the wait ends with the first one).
   */
  wait(scope: Scope, policy: ConcurrencyPolicy, options: WaitOptions): Promise<Lease>;
  wait(scope: Scope, policy: Policy, options: WaitOptions): Promise<Decision>;
  wait(scope: Scope, policy: Policy, options: WaitOptions): Promise<Decision> {
    return this.#waits.wait(scope, policy, options);
  }

  /**
   * Runs `fn` once `scope` is admitted under `policy` (as {@link wait}); a lease is renewed
   * while `fn` runs and released when it settles. `fn`'s second argument, an `AbortSignal`,
   * fires when its lease is lost — a renewal refused (the lease expired: this process was
   * paused, Redis unreachable for `leaseMs`) or not answered within `leaseMs` — so that `fn`
   * stops, since another holder may have its slot now. It never fires for a rate policy.
   *
   * @returns `{ admitted: true, value }` with what `fn` returned, or `{ admitted: false }`
   *   with the refusal when the wait ended first.
   * @throws what `fn` throws, and the errors of {@link wait}.
   */
  schedule<T>(
    scope: Scope,
    policy: ConcurrencyPolicy,
    fn: (lease: Lease, signal: AbortSignal) => T | PromiseLike<T>,
    options: WaitOptions,
  ): Promise<Scheduled<T>>;
  schedule<T>(
    scope: Scope,
    policy: Policy,
    fn: (decision: Decision, signal: AbortSignal) => T | PromiseLike<T>,
    options: WaitOptions,
  ): Promise<Scheduled<T>>;
  schedule<T>(
    scope: Scope,
    policy: Policy,
    fn:
      | ((lease: Lease, signal: AbortSignal) => T | PromiseLike<T>)
      | ((decision: Decision, signal: AbortSignal) => T | PromiseLike<T>),
    options: WaitOptions,
  ): Promise<Scheduled<T>> {
    type Fn = (decision: Decision, signal: AbortSignal) => T;
    return this.#waits.schedule(scope, policy, fn as Fn, options);
  }

  /**
   * Reserves `cost` units for work priced when it ends (an LLM call's tokens, a login that
   * counts only if it fails): decided as a take of `cost` and, when admitted, consumed at
   * once; the reservation is recorded in the same script call, with the window or bucket
   * state it was taken from. Settle it with the units actually used
   * ({@link Reservation.settle}, or {@link settle} with its id from any process): less gives
   * the difference back, more charges the excess past the limit, {@link cancel} gives all
   * back — only into that state (see `docs/priced.md` for each algorithm). A repeat with the
   * same `id` and cost within the policy's horizon returns the first answer
   * (`replayed: true`) and takes nothing. Only an admitted reservation is recorded: a
   * refused one consumed nothing, and its repeat is decided afresh. A reserve whose id was
   * cancelled before it arrived ({@link cancel} after a timeout) is refused and takes
   * nothing. Never answered from the local denial cache.
   *
   * @returns the {@link Reservation}: the take's {@link Decision}, its `id`, `settle`, `cancel`.
   * @throws {InvalidInputError} bad scope, policy, cost or id; a concurrency policy (field
   *   `policy`); a sliding window log policy with a `limit` above 500 (field `policy.limit`:
   *   its settle rewrites up to `limit` members, see docs/priced.md); field `id`: the id's
   *   reservation was of another cost, or of a `reserveAll` (nothing changed).
   * @throws the failures of {@link take}.
   */
  reserve(scope: Scope, policy: Policy, options?: ReserveOptions): Promise<Reservation> {
    return this.#priced.reserve(scope, policy, options);
  }

  /**
   * Reserves every item at once, all or nothing as {@link takeAll}: in one atomic script
   * call, either each item's `cost` is reserved or none is (a refused call consumes nothing
   * and leaves nothing to cancel). Each item gets a {@link Reservation} under the call's id
   * (the `id` option, else a random UUID), settled or cancelled one by one, from this
   * object or by `limiter.settle(item.scope, item.policy, id, actualCost)`. A repeat with the
   * same id and items within their longest horizon replays the first answer; the id with
   * other items, order or costs is an `InvalidInputError` (field `id`), nothing changed. A
   * refused call records nothing.
   *
   * @param items 1 to 16 of `{ scope, policy, cost? }`, of one tenant.
   * @returns see {@link ReserveAllResult}.
   * @throws {InvalidInputError} the errors of {@link takeAll}, a concurrency item
   *   (`items[i].policy`), a sliding window log item with a `limit` above 500
   *   (`items[i].policy.limit`), bad `options.id`.
   * @throws the failures of {@link take}.
   */
  reserveAll(items: readonly TakeAllItem[], options?: TakeAllOptions): Promise<ReserveAllResult> {
    return this.#priced.reserveAll(items, options);
  }

  /**
   * Settles the reservation `id` of `scope` under `policy` with `actualCost` units (a
   * non-negative safe integer), from any process: moves `actualCost − cost` units into the
   * state it was taken from, once (a repeat replays the first answer). Nothing moves for a
   * refused reservation or an unknown one (`known: false`: never made, refused, expired with
   * the horizon, or a record of a shape this policy could not have written), or once its
   * state is gone (the window ended). The answer's `remaining` is what a `peek` reports
   * right after.
   *
   * @throws {InvalidInputError} bad scope, policy, id or `actualCost` (a policy as for
   *   {@link reserve}).
   * @throws the failures of {@link take}: a settle that timed out can be sent again.
   */
  settle(scope: Scope, policy: Policy, id: string, actualCost: number): Promise<Settlement> {
    return this.#priced.settle(scope, policy, id, actualCost);
  }

  /**
   * Gives the whole reservation `id` back: {@link settle} with 0. Same errors. Safe after an
   * unknown outcome: a `reserve` (or `reserveAll`) that failed with a `TimeoutError` may
   * still be applied in Redis, later. A cancel that finds the reservation gives it back; one
   * that finds none (`known: false`) leaves a tombstone for the policy's horizon, so that
   * reserve, if it arrives afterwards, is refused and takes nothing. A cancel applies at
   * most once, so one that timed out may be sent again.
   */
  cancel(scope: Scope, policy: Policy, id: string): Promise<Settlement> {
    return this.#priced.settle(scope, policy, id, 0);
  }

  /**
   * Gives back at most `cost` units (a positive safe integer) of the take or reservation
   * `options.takeId` (an admitted `take`/`takeAll` made with that `id`, or a reservation, on
   * this `scope` and `policy`), only into the state it was taken from (its window, bucket
   * state or log member, and its generation: as a settle; see `docs/priced.md`), never above
   * the policy's capacity. All refunds of one take give back at most its cost. `options.id`
   * makes the refund apply once, however often it is sent. A refund of a take unknown here
   * (never recorded, refused, expired, on another scope) answers `known: false`; one of a
   * take whose state has ended, from before a `reset`, or of a settled reservation moves
   * nothing (`applied: 0`).
   *
   * @throws {InvalidInputError} bad scope, policy or cost, or a missing or bad `options.id`
   *   or `options.takeId` (nothing sent).
   * @throws the failures of {@link take}.
   */
  refund(scope: Scope, policy: Policy, cost: number, options: RefundOptions): Promise<Settlement> {
    return this.#priced.refund(scope, policy, cost, options);
  }

  /**
   * Consumes `cost` units (a positive safe integer) whatever is left: a penalty. The state
   * holds at most what one horizon can (a full window, an empty bucket or burst), so the
   * debt is bounded and the next take's `retryAfterMs` is exact. With an `id`, applied once.
   *
   * @throws {InvalidInputError} bad scope, policy, cost or `options.id`.
   * @throws the failures of {@link take}.
   */
  charge(scope: Scope, policy: Policy, cost: number, options?: PricedOptions): Promise<Settlement> {
    return this.#priced.charge(scope, policy, cost, options);
  }

  /**
   * Claims the admission of a retry-safe take (or takeAll) with `id` on `items` for serving:
   * true for the first claim of the id within the horizon of the items' policies, false for
   * every later one. Call it once a take with an `id` was admitted, before running its work,
   * and run the work only on true: a repeat of the id replays "admitted" without consuming
   * (`replayed: true`), so without a claim each repeat would run the work again for free
   * (see `serve-claim.ts`). The HTTP guard's `retryId` option does. One `SET NX` on Redis.
   *
   * @param items the take's scope and policy (`[{ scope, policy }]`), or the takeAll's items
   * @throws {InvalidInputError} bad items or `id`; the failures of {@link take}.
   */
  claimServe(items: readonly TakeAllItem[], id: string): Promise<boolean> {
    let claim: WireItem;
    try {
      const checked = readTakeId({ id }, 'options');
      claim = claimItem(this.#targets.all(items), checked as string);
    } catch (error) {
      this.#stats.invalid++;
      return Promise.reject(error);
    }
    return this.#send(
      (resolve, reject) => new ClaimCall(this.#outcomes, claim, resolve, reject),
      undefined,
    );
  }

  /**
   * Deletes the state of `scope` under `policy` on Redis, so its next take starts afresh,
   * and tells every limiter sharing the Redis (same namespace) to stop answering cached
   * denials: none answers one later than 750 ms after this resolves (see `reset-epoch.ts`).
   *
   * @returns true when there was state to delete, false when there was none.
   * @throws the errors of {@link take}. A failure after the delete (the epoch write) rejects
   *   too: the state is gone, but other limiters may answer cached denials until they end.
   */
  reset(scope: Scope, policy: Policy): Promise<boolean> {
    let target: Target;
    try {
      target = this.#targets.one(scope, policy, undefined, 'scope', 'policy', 'options');
    } catch (error) {
      this.#stats.invalid++;
      return Promise.reject(error);
    }
    // A grant of the window being deleted must not admit into the next one.
    this.#prefetch.forget(target);
    return this.#send(
      (resolve, reject) => new ResetCall(this.#outcomes, target, resolve, reject),
      undefined,
    );
  }

  /**
   * The Redis key that holds `scope`'s state under `policy` in this limiter's namespace
   * (key scheme v2, see `key.ts`): for operators and tests. Reading it is harmless; edit it
   * only through `reset`.
   *
   * @throws {InvalidInputError} bad scope or policy.
   */
  keyOf(scope: Scope, policy: Policy): string {
    return this.#targets.one(scope, policy, undefined, 'scope', 'policy', 'options').key;
  }

  /** A snapshot of the outcome counters. */
  stats(): LimiterStats {
    return { ...this.#stats };
  }

  /** A take or a peek: validate → denial cache → send. */
  #decide(op: 't' | 'p', scope: Scope, policy: Policy, options?: TakeOptions): Promise<Decision> {
    let target: Target;
    let requestId: string | undefined;
    let id: string | undefined;
    try {
      target = this.#targets.one(scope, policy, options, 'scope', 'policy', 'options');
      requestId = readRequestId(options, 'options');
      if (op === 't' && isConcurrency(policy)) {
        throw new InvalidInputError('policy', 'a rate policy (acquire() takes a lease)', policy);
      }
      id = readTakeId(options, 'options');
      if (id !== undefined && op === 'p') {
        throw new InvalidInputError('options.id', 'no id on a peek (it consumes nothing)', id);
      }
    } catch (error) {
      // Peeks decide nothing: only takes are reported.
      return this.#invalid(op === 't' ? 'take' : undefined, policy, options, error);
    }
    if (id !== undefined) {
      // Retry-safe: never answered from the cache (see retry-safe.ts).
      const record = recordItem([target], id);
      return this.#send(
        (resolve, reject) => new IdCall(this.#outcomes, target, record, id, resolve, reject),
        this.#reporter === undefined
          ? undefined
          : { targets: [target], operation: 'take', requestId, startedAt: performance.now() },
      );
    }
    const held = this.#denials.held(target);
    if (held !== undefined) {
      if (op === 'p') this.#stats.peeks++;
      else {
        this.#stats.limited++;
        this.#stats.cachedDenials++;
        // Answered here: no round trip to time.
        this.#reporter?.report(
          { targets: [target], operation: 'take', requestId, startedAt: 0 },
          'limited',
          true,
          [held],
        );
      }
      return Promise.resolve(held);
    }
    if (op === 't' && policy.prefetch !== undefined) {
      const local = this.#prefetch.take(target, requestId);
      if (local !== undefined) return local;
    }
    const meta: CallMeta | undefined =
      this.#reporter === undefined || op === 'p'
        ? undefined
        : { targets: [target], operation: 'take', requestId, startedAt: performance.now() };
    return this.#send(
      (resolve, reject) => new Call(this.#outcomes, op, target, resolve, reject),
      meta,
    );
  }

  /** A take of a validated target (a waiter's): the denial cache, then Redis. */
  #sendTake(target: Target, requestId: string | undefined): Promise<Decision> {
    const held = this.#denials.held(target);
    if (held !== undefined) {
      this.#stats.limited++;
      this.#stats.cachedDenials++;
      return Promise.resolve(held);
    }
    const meta: CallMeta | undefined =
      this.#reporter === undefined
        ? undefined
        : { targets: [target], operation: 'take', requestId, startedAt: performance.now() };
    return this.#send(
      (resolve, reject) => new Call(this.#outcomes, 't', target, resolve, reject),
      meta,
    );
  }

  /** The in-flight cap, the deadline and the coalescer, for every kind of call. */
  #send<T>(
    make: (resolve: (value: T) => void, reject: (error: Error) => void) => InFlight,
    meta: CallMeta | undefined,
  ): Promise<T> {
    const stats = this.#stats;
    const now = performance.now();
    if (stats.inFlight >= this.#maxInFlight) {
      // Calls stuck on a Redis that stopped answering free their slots after stallTimeoutMs.
      this.#coalescer.reap(now);
      if (stats.inFlight >= this.#maxInFlight) return this.#full(now, meta);
    }
    stats.inFlight++;
    this.#denials.start();
    return new Promise<T>((resolve, reject) => {
      const call = make(resolve, reject);
      call.meta = meta;
      this.#deadlines.track(call, now);
      if (!this.#gate.hold(call)) this.#coalescer.add(call, now);
    });
  }

  /**
   * The in-flight cap is reached: this process has too much in flight (`OverloadError`), or
   * Redis stopped answering what it has (the oldest call waited past its deadline:
   * `UnavailableError`, never an overload).
   */
  #full<T>(now: number, meta: CallMeta | undefined): Promise<T> {
    const waitedMs = this.#coalescer.oldestWaitMs(now);
    if (waitedMs > this.#timeoutMs) {
      this.#stats.unavailable++;
      const error = new UnavailableError(
        `Redis unavailable: ${this.#maxInFlight} calls in flight, the oldest unanswered for ${Math.round(waitedMs)} ms`,
      );
      if (meta !== undefined) this.#reporter?.report(meta, 'unavailable', false, undefined, error);
      return Promise.reject(error);
    }
    this.#stats.overload++;
    const error = new OverloadError(this.#maxInFlight);
    if (meta !== undefined) this.#reporter?.report(meta, 'overload', false, undefined, error);
    return Promise.reject(error);
  }

  /** A refused takeAll answered from the cache, when any of its items is held there. */
  #heldAll(targets: readonly Target[]): TakeAllResult | undefined {
    let decisions: Decision[] | undefined;
    for (let j = 0; j < targets.length; j++) {
      const target = targets[j] as Target;
      const held = this.#denials.held(target);
      if (held === undefined) continue;
      decisions ??= targets.map((t) => ({
        allowed: false,
        remaining: 0,
        limit: t.policy.limit,
        resetMs: 0,
        // Known without Redis: a cost above what the policy can ever admit.
        retryAfterMs: t.cost > t.policy.maxCost ? Number.POSITIVE_INFINITY : 0,
      }));
      decisions[j] = held;
    }
    if (decisions === undefined) return undefined;
    let retryAfterMs = 0;
    for (const decision of decisions) {
      if (decision.retryAfterMs > retryAfterMs) retryAfterMs = decision.retryAfterMs;
    }
    return { allowed: false, decisions, retryAfterMs, cached: true };
  }

  /** Counts and reports a call refused for bad input, and rejects it. */
  #invalid<T>(
    operation: 'take' | 'takeAll' | undefined,
    policy: unknown,
    options: TakeOptions | TakeAllOptions | undefined,
    error: unknown,
  ): Promise<T> {
    this.#stats.invalid++;
    if (operation !== undefined) {
      this.#reporter?.invalid(operation, policy, requestIdIfValid(options), error as Error);
    }
    return Promise.reject(error);
  }
}

/** The store's first connection, if it is still being made; a throw counts as none. */
function firstConnectionOf(store: ScriptStore): Promise<void> | undefined {
  try {
    return typeof store.firstConnection === 'function' ? store.firstConnection() : undefined;
  } catch {
    return undefined;
  }
}
