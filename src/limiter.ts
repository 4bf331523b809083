/**
 * The decision path: validate → in-flight cap → script on Redis → deadline → decision.
 *
 * Every decision is made inside one atomic Lua script on the Redis server, on the server's
 * clock; nothing is read and then written from here (S5, S9).
 */
import { decodeDecision, isPolicy, type Policy } from './algorithms/policy.js';
import { DeadlineQueue } from './deadline.js';
import {
  InvalidInputError,
  OverloadError,
  type SluiceError,
  StoreError,
  TimeoutError,
} from './errors.js';
import { keyPrefix, scopeKey } from './key.js';
import { type NodeRedisClientLike, NodeRedisStore } from './stores/node-redis.js';
import type { ScriptStore } from './stores/store.js';
import type { Decision, Scope, TakeOptions } from './types.js';

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
  /** Calls sent and not yet answered by Redis (may exceed pending callers after timeouts). */
  inFlight: number;
}

const NAMESPACE = /^[A-Za-z0-9._:-]{1,64}$/;
/** Longest tenant or route accepted, in UTF-16 code units. */
export const MAX_SCOPE_PART_LENGTH = 65_536;

export class RateLimiter {
  readonly #store: ScriptStore;
  readonly #namespace: string;
  readonly #maxInFlight: number;
  readonly #deadlines: DeadlineQueue;
  readonly #prefixes = new WeakMap<Policy, string>();
  readonly #stats: LimiterStats = {
    allowed: 0,
    limited: 0,
    invalid: 0,
    timeout: 0,
    unavailable: 0,
    overload: 0,
    storeError: 0,
    inFlight: 0,
  };
  readonly #release = () => {
    this.#stats.inFlight--;
  };
  readonly #count = (decision: Decision) => {
    if (decision.allowed) this.#stats.allowed++;
    else this.#stats.limited++;
    return decision;
  };
  readonly #countError = (error: SluiceError) => {
    if (error instanceof TimeoutError) this.#stats.timeout++;
    else if (error instanceof StoreError) this.#stats.storeError++;
    else this.#stats.unavailable++;
    throw error;
  };

  /** @throws {InvalidInputError} for a missing/ambiguous store or an out-of-range option. */
  constructor(options: RateLimiterOptions) {
    if (typeof options !== 'object' || options === null) {
      throw new InvalidInputError('options', 'an object { client } or { store }', options);
    }
    if ((options.client === undefined) === (options.store === undefined)) {
      throw new InvalidInputError(
        'options.client',
        'given alone, or options.store alone',
        options.client,
      );
    }
    if (options.store !== undefined && typeof options.store?.evalScript !== 'function') {
      throw new InvalidInputError('options.store', 'a ScriptStore', options.store);
    }
    this.#store = options.store ?? new NodeRedisStore(options.client as NodeRedisClientLike);
    const namespace = options.namespace ?? 'rate';
    if (typeof namespace !== 'string' || !NAMESPACE.test(namespace)) {
      throw new InvalidInputError(
        'options.namespace',
        '1–64 characters of [A-Za-z0-9._:-]',
        namespace,
      );
    }
    this.#namespace = namespace;
    this.#maxInFlight = option('options.maxInFlight', options.maxInFlight, 1000);
    this.#deadlines = new DeadlineQueue(option('options.timeoutMs', options.timeoutMs, 150));
  }

  /**
   * Decides, atomically on Redis, whether `scope` may spend `cost` units under `policy`,
   * and spends them when it may. A denial resolves (`allowed: false`); only failures reject.
   *
   * @returns the decision; see {@link Decision} for each field's meaning.
   * @throws {InvalidInputError} bad scope, policy or cost (nothing sent to Redis).
   * @throws {OverloadError} `maxInFlight` calls already in flight (nothing sent).
   * @throws {TimeoutError} no answer within `timeoutMs` (quota may have been spent).
   * @throws {UnavailableError} Redis unreachable, client closed, or connection lost.
   * @throws {StoreError} Redis replied with an error (e.g. `WRONGTYPE`, `OOM`).
   */
  take(scope: Scope, policy: Policy, options?: TakeOptions): Promise<Decision> {
    let key: string;
    let args: string[];
    try {
      if (!isPolicy(policy)) {
        throw new InvalidInputError(
          'policy',
          'a policy from a builder such as fixedWindow()',
          policy,
        );
      }
      const cost = takeCost(options);
      const { tenant, route } = checkScope(scope);
      key = scopeKey(this.#prefix(policy), tenant, route);
      args = policy.args(cost);
    } catch (error) {
      this.#stats.invalid++;
      return Promise.reject(error);
    }
    if (this.#stats.inFlight >= this.#maxInFlight) {
      this.#stats.overload++;
      return Promise.reject(new OverloadError(this.#maxInFlight));
    }
    this.#stats.inFlight++;
    const limit = policy.limit;
    const reply = this.#store.evalScript(policy.script, [key], args);
    reply.then(this.#release, this.#release);
    const decision = reply.then((raw) => {
      const decoded = decodeDecision(raw, limit);
      if (decoded === undefined)
        throw new StoreError(`unexpected reply from ${policy.script.name}`);
      return decoded;
    });
    return this.#deadlines.race(decision).then(this.#count, this.#countError);
  }

  /** A snapshot of the outcome counters. */
  stats(): LimiterStats {
    return { ...this.#stats };
  }

  #prefix(policy: Policy): string {
    let prefix = this.#prefixes.get(policy);
    if (prefix === undefined) {
      prefix = keyPrefix(this.#namespace, policy.keyTag, policy.version);
      this.#prefixes.set(policy, prefix);
    }
    return prefix;
  }
}

function option(field: string, value: unknown, fallback: number): number {
  if (value === undefined) return fallback;
  if (typeof value === 'number' && Number.isSafeInteger(value) && value >= 1) return value;
  throw new InvalidInputError(field, 'a positive safe integer', value);
}

function takeCost(options: TakeOptions | undefined): number {
  if (options === undefined) return 1;
  if (typeof options !== 'object' || options === null) {
    throw new InvalidInputError('options', 'an object { cost }', options);
  }
  const cost = options.cost;
  if (cost === undefined) return 1;
  if (typeof cost === 'number' && Number.isSafeInteger(cost) && cost >= 1) return cost;
  throw new InvalidInputError('options.cost', 'a positive safe integer', cost);
}

function checkScope(scope: unknown): Scope {
  if (typeof scope !== 'object' || scope === null) {
    throw new InvalidInputError('scope', 'an object { tenant, route }', scope);
  }
  const { tenant, route } = scope as Record<string, unknown>;
  checkPart('scope.tenant', tenant);
  checkPart('scope.route', route);
  return scope as Scope;
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
