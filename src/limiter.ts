/**
 * The decision path: validate → local denial cache → in-flight cap → coalesced script call
 * on Redis → per-call deadline → decision.
 *
 * Every decision is made inside one atomic Lua script on the Redis server, on the server's
 * clock; nothing is read and then written from here (S5, S9). The hot path allocates one
 * promise and one call object per take, hashes the scope once, and creates no timer.
 */
import { performance } from 'node:perf_hooks';
import { batchId } from './algorithms/batch.js';
import { decodeDecision, isPolicy, type Policy } from './algorithms/policy.js';
import type { LuaScript } from './algorithms/script.js';
import { type BatchItem, Coalescer } from './coalescer.js';
import { type DeadlineEntry, DeadlineQueue } from './deadline.js';
import { DenialCache } from './denial-cache.js';
import {
  InvalidInputError,
  OverloadError,
  StoreError,
  TimeoutError,
  UnavailableError,
} from './errors.js';
import { keyPrefix, scopeKey } from './key.js';
import { type NodeRedisClientLike, NodeRedisStore } from './stores/node-redis.js';
import type { ScriptStore } from './stores/store.js';
import type { Decision, Scope, TakeOptions } from './types.js';
import {
  MAX_TIMER_MS,
  optionalPositiveInteger,
  positiveSafeInteger,
  readProperty,
} from './validate.js';

/** Options of {@link RateLimiter}. Give exactly one of `client` and `store`. */
export interface RateLimiterOptions {
  /**
   * A connected node-redis v6 client. Create it with `disableOfflineQueue: true` (or use
   * `createRedisClient`) so that calls fail at once while Redis is unreachable.
   */
  readonly client?: NodeRedisClientLike;
  /** A store to use instead of `client`. */
  readonly store?: ScriptStore;
  /**
   * First part of every key, to keep kinds of quota apart in one Redis: 1–64 characters of
   * `[A-Za-z0-9._:-]` (no braces, so it can never form a hash tag). Default `"rate"`.
   */
  readonly namespace?: string;
  /**
   * Deadline of each call in milliseconds, from `take` to its settlement, including a
   * script reload after NOSCRIPT: a positive safe integer. Default 150. A call that times
   * out may still have consumed quota on the server; it is never refunded (S13).
   */
  readonly timeoutMs?: number;
  /**
   * Most calls in flight at once; a call over the cap rejects at once with
   * `OverloadError` (S14). A call stays in flight until Redis answers or the connection
   * fails, even after its deadline, so the cap also bounds work stuck in the client.
   * A positive safe integer. Default 1000.
   */
  readonly maxInFlight?: number;
  /**
   * Most takes coalesced into one script call: takes issued in the same event-loop turn
   * are sent together (see `coalescer.ts`). 1 sends every take alone. A positive safe
   * integer. Default 128.
   */
  readonly maxBatchSize?: number;
  /**
   * The local denial cache: a scope whose quota is used up until a known time is denied in
   * process until then, with no Redis call, where that is exact for its policy (see
   * `denial-cache.ts`). `false` turns it off; `maxEntries` (a positive safe integer,
   * default 10,000) bounds its memory.
   */
  readonly denialCache?: false | { readonly maxEntries?: number };
}

/** Counts of outcomes since the limiter was created, plus calls in flight now. */
export interface LimiterStats {
  /** Decisions that admitted. */
  allowed: number;
  /** Decisions that denied (rate-limited). */
  limited: number;
  /** Calls rejected for bad input (nothing sent). */
  invalid: number;
  /** Calls whose deadline passed. */
  timeout: number;
  /** Calls that failed because Redis was unreachable or not serving. */
  unavailable: number;
  /** Calls rejected because `maxInFlight` was reached (nothing sent). */
  overload: number;
  /** Calls that Redis answered with an error reply. */
  storeError: number;
  /** Denials answered by the local denial cache (also counted in `limited`). */
  cachedDenials: number;
  /** Calls sent and not yet answered by Redis (may exceed pending callers after timeouts). */
  inFlight: number;
}

const NAMESPACE = /^[A-Za-z0-9._:-]{1,64}$/;
/** Largest `maxBatchSize`: one script call blocks Redis while it runs; keep it short. */
export const MAX_BATCH_SIZE = 1024;
/** Longest tenant or route accepted, in UTF-16 code units. */
export const MAX_SCOPE_PART_LENGTH = 65_536;

/** Per policy and limiter: what every take under the policy shares. */
interface Compiled {
  readonly prefix: string;
  readonly batchId: number;
  /** The policy's parameters, so that a cached denial answers only the policy it was decided under. */
  readonly fingerprint: string;
}

/**
 * One take in flight: its deadline entry and its batch item at once, so that a take costs
 * one object besides its promise.
 */
class Call implements DeadlineEntry, BatchItem {
  deadline = 0;
  settled = false;
  readonly script: LuaScript;

  constructor(
    readonly engine: Engine,
    readonly policy: Policy,
    readonly batchId: number,
    readonly key: string,
    /** The denial cache's key for this scope (no hashing needed to compute it). */
    readonly localKey: string,
    readonly fingerprint: string,
    readonly cost: number,
    readonly args: readonly string[],
    readonly resolve: (decision: Decision) => void,
    readonly reject: (error: Error) => void,
  ) {
    this.script = policy.script;
  }

  done(reply: readonly unknown[], offset: number, sentAt: number): void {
    this.engine.answered(this, reply, offset, sentAt);
  }

  fail(error: Error): void {
    this.engine.failed(this, error);
  }

  expire(): void {
    this.engine.expired(this);
  }
}

/** The limiter's state, shared with its calls. */
class Engine {
  readonly stats: LimiterStats = {
    allowed: 0,
    limited: 0,
    invalid: 0,
    timeout: 0,
    unavailable: 0,
    overload: 0,
    storeError: 0,
    cachedDenials: 0,
    inFlight: 0,
  };

  constructor(
    readonly deadlines: DeadlineQueue,
    readonly denials: DenialCache | undefined,
    /** The store's clock (ms), which times the denial cache. */
    readonly clock: () => number,
  ) {}

  answered(call: Call, reply: readonly unknown[], offset: number, sentAt: number): void {
    this.stats.inFlight--;
    const decision = decodeDecision(reply, offset, call.policy.limit);
    if (decision === undefined) {
      this.failed(call, new StoreError(`ERR unexpected reply from ${call.script.name}`), true);
      return;
    }
    if (this.denials !== undefined) {
      const hold = call.policy.denialHold(decision, call.cost);
      if (hold !== undefined) {
        const now = this.clock();
        this.denials.set(
          call.localKey,
          {
            until: sentAt + hold.ms,
            resetAt: now + decision.resetMs,
            retryAt: now + hold.ms + 1,
            limit: decision.limit,
            fingerprint: call.fingerprint,
            anyCost: hold.anyCost,
          },
          now,
        );
      }
    }
    if (!this.deadlines.settle(call)) return; // the caller already got a TimeoutError
    if (decision.allowed) this.stats.allowed++;
    else this.stats.limited++;
    call.resolve(decision);
  }

  failed(call: Call, error: unknown, counted = false): void {
    if (!counted) this.stats.inFlight--;
    if (!this.deadlines.settle(call)) return;
    if (error instanceof StoreError) this.stats.storeError++;
    else this.stats.unavailable++;
    call.reject(
      error instanceof StoreError || error instanceof UnavailableError
        ? error
        : toUnavailable(error),
    );
  }

  expired(call: Call): void {
    this.stats.timeout++;
    call.reject(new TimeoutError(this.deadlines.timeoutMs));
  }
}

function toUnavailable(error: unknown): UnavailableError {
  const message = error instanceof Error ? error.message : String(error);
  return new UnavailableError(`Redis unavailable: ${message}`, { cause: error });
}

export class RateLimiter {
  readonly #namespace: string;
  readonly #maxInFlight: number;
  readonly #engine: Engine;
  readonly #coalescer: Coalescer;
  readonly #compiled = new WeakMap<Policy, Compiled>();

  /** @throws {InvalidInputError} for a missing/ambiguous store or an out-of-range option. */
  constructor(options: RateLimiterOptions) {
    const read = (name: string) => readProperty(options, name, 'options');
    const client = read('client');
    const givenStore = read('store') as ScriptStore | undefined;
    if ((client === undefined) === (givenStore === undefined)) {
      throw new InvalidInputError('options.client', 'given alone, or options.store alone', client);
    }
    if (
      givenStore !== undefined &&
      typeof readProperty(givenStore, 'evalScript', 'options.store') !== 'function'
    ) {
      throw new InvalidInputError('options.store', 'a ScriptStore', givenStore);
    }
    const store: ScriptStore = givenStore ?? new NodeRedisStore(client as NodeRedisClientLike);
    const namespace = read('namespace') ?? 'rate';
    if (typeof namespace !== 'string' || !NAMESPACE.test(namespace)) {
      throw new InvalidInputError(
        'options.namespace',
        '1–64 characters of [A-Za-z0-9._:-]',
        namespace,
      );
    }
    this.#namespace = namespace;
    this.#maxInFlight = optionalPositiveInteger('options.maxInFlight', read('maxInFlight'), 1000);
    const timeoutMs = optionalPositiveInteger(
      'options.timeoutMs',
      read('timeoutMs'),
      150,
      MAX_TIMER_MS,
    );
    const maxBatchSize = optionalPositiveInteger(
      'options.maxBatchSize',
      read('maxBatchSize'),
      128,
      MAX_BATCH_SIZE,
    );
    const cache = read('denialCache');
    if (cache !== undefined && cache !== false && (typeof cache !== 'object' || cache === null)) {
      throw new InvalidInputError('options.denialCache', 'false or { maxEntries }', cache);
    }
    const denials =
      cache === false
        ? undefined
        : new DenialCache(
            optionalPositiveInteger(
              'options.denialCache.maxEntries',
              cache === undefined
                ? undefined
                : readProperty(cache, 'maxEntries', 'options.denialCache'),
              10_000,
            ),
          );
    const clock = typeof store.clock === 'function' ? store.clock : () => performance.now();
    this.#coalescer = new Coalescer(store, maxBatchSize, clock);
    this.#engine = new Engine(new DeadlineQueue(timeoutMs), denials, clock);
    // `take` may be passed around as a function (`const take = limiter.take`).
    this.take = this.take.bind(this);
  }

  /**
   * Decides, atomically on Redis, whether `scope` may spend `cost` units under `policy`,
   * and spends them when it may. A denial resolves (`allowed: false`); only failures reject.
   * Always returns a promise: bad input rejects, it never throws synchronously.
   *
   * @returns the decision; see {@link Decision} for each field's meaning.
   * @throws {InvalidInputError} bad scope, policy or cost (nothing sent to Redis).
   * @throws {OverloadError} `maxInFlight` calls already in flight (nothing sent).
   * @throws {TimeoutError} no answer within `timeoutMs` (quota may have been spent).
   * @throws {UnavailableError} Redis unreachable, client closed, or connection lost.
   * @throws {StoreError} Redis replied with an error (e.g. `WRONGTYPE`, `OOM`).
   */
  take(scope: Scope, policy: Policy, options?: TakeOptions): Promise<Decision> {
    const engine = this.#engine;
    let args: readonly string[];
    let compiled: Compiled;
    let cost: number;
    let tenant: string;
    let route: string;
    try {
      if (!isPolicy(policy)) {
        throw new InvalidInputError(
          'policy',
          'a policy from a builder such as fixedWindow()',
          policy,
        );
      }
      cost = takeCost(options);
      compiled = this.#compile(policy);
      tenant = scopePart(scope, 'tenant');
      route = scopePart(scope, 'route');
      args = policy.args(cost);
    } catch (error) {
      engine.stats.invalid++;
      return Promise.reject(error);
    }
    const denials = engine.denials;
    // The cache is keyed by the scope's text, so a cached denial costs no hashing
    // (and without a cache the key is never built).
    const localKey =
      denials === undefined ? '' : `${compiled.prefix}${tenant.length}:${tenant}${route}`;
    if (denials !== undefined && denials.size > 0) {
      const cacheNow = engine.clock();
      const held = denials.get(localKey, cacheNow);
      if (
        held !== undefined &&
        held.fingerprint === compiled.fingerprint &&
        (held.anyCost || cost === 1 || cost > policy.maxCost)
      ) {
        engine.stats.limited++;
        engine.stats.cachedDenials++;
        return Promise.resolve({
          allowed: false,
          remaining: 0,
          limit: held.limit,
          resetMs: Math.max(0, Math.ceil(held.resetAt - cacheNow)),
          retryAfterMs:
            cost > policy.maxCost
              ? Number.POSITIVE_INFINITY
              : Math.max(1, Math.ceil(held.retryAt - cacheNow)),
        });
      }
    }
    const now = performance.now();
    if (engine.stats.inFlight >= this.#maxInFlight) {
      engine.stats.overload++;
      return Promise.reject(new OverloadError(this.#maxInFlight));
    }
    engine.stats.inFlight++;
    const key = scopeKey(compiled.prefix, tenant, route);
    return new Promise<Decision>((resolve, reject) => {
      const call = new Call(
        engine,
        policy,
        compiled.batchId,
        key,
        localKey,
        compiled.fingerprint,
        cost,
        args,
        resolve,
        reject,
      );
      engine.deadlines.track(call, now);
      this.#coalescer.add(call);
    });
  }

  /** A snapshot of the outcome counters. */
  stats(): LimiterStats {
    return { ...this.#engine.stats };
  }

  #compile(policy: Policy): Compiled {
    let compiled = this.#compiled.get(policy);
    if (compiled === undefined) {
      const id = batchId(policy.script);
      if (id === undefined)
        throw new InvalidInputError('policy', 'a policy of a known algorithm', policy);
      compiled = {
        prefix: keyPrefix(this.#namespace, policy.keyTag, policy.version),
        batchId: id,
        fingerprint: policy.args(1).join(' '),
      };
      this.#compiled.set(policy, compiled);
    }
    return compiled;
  }
}

function takeCost(options: TakeOptions | undefined): number {
  if (options === undefined) return 1;
  const cost = readProperty(options, 'cost', 'options');
  return cost === undefined ? 1 : positiveSafeInteger('options.cost', cost);
}

/** Reads `scope[part]` once and checks it; the value returned is the value checked. */
function scopePart(scope: unknown, part: 'tenant' | 'route'): string {
  const value = readProperty(scope, part, 'scope');
  checkPart(`scope.${part}`, value);
  return value;
}

function checkPart(field: string, value: unknown): asserts value is string {
  if (typeof value !== 'string' || value.length === 0 || value.length > MAX_SCOPE_PART_LENGTH) {
    throw new InvalidInputError(
      field,
      `a non-empty string of at most ${MAX_SCOPE_PART_LENGTH} characters`,
      value,
    );
  }
}
