/**
 * The decision path: validate → local denial cache → in-flight cap → coalesced script call
 * on Redis → per-call deadline → decision. `take`, `takeAll`, `peek` and `reset` all take it.
 *
 * Every decision is made inside one atomic Lua script on the Redis server, on the server's
 * clock; nothing is read and then written from here (S5, S9). The hot path allocates one
 * promise and one call object per take, hashes the scope once, and creates no timer.
 */
import { performance } from 'node:perf_hooks';
import { batchId, batchWork } from './algorithms/batch.js';
import { decodeDecision, isPolicy, type Policy } from './algorithms/policy.js';
import type { LuaScript } from './algorithms/script.js';
import { callSafely } from './call-safely.js';
import { type BatchRequest, Coalescer } from './coalescer.js';
import { type DeadlineEntry, DeadlineQueue } from './deadline.js';
import { DenialCache } from './denial-cache.js';
import {
  InvalidInputError,
  OverloadError,
  StoreError,
  TimeoutError,
  UnavailableError,
} from './errors.js';
import { resetEpochKey, scopeKey, tenantTag } from './key.js';
import type { DecisionEvent, DecisionOutcome, Metrics } from './metrics/types.js';
import { observe, observerFailed } from './observer.js';
import {
  EPOCH_POLL_MS,
  EPOCH_TTL_MS,
  EPOCH_VALID_MS,
  newEpochToken,
  resetEpochScript,
} from './reset-epoch.js';
import type { IoRedisClusterLike, IoRedisLike } from './stores/ioredis.js';
import type { NodeRedisClientLike } from './stores/node-redis.js';
import type { NodeRedisClusterLike, NodeRedisSentinelLike } from './stores/node-redis-cluster.js';
import { storeFor } from './stores/select.js';
import { type ServerFacts, type StartupWarning, warningsFor } from './stores/server-checks.js';
import type { ScriptStore } from './stores/store.js';
import type {
  Decision,
  Scope,
  TakeAllItem,
  TakeAllOptions,
  TakeAllResult,
  TakeOptions,
} from './types.js';
import {
  MAX_TIMER_MS,
  optionalPositiveInteger,
  positiveSafeInteger,
  readProperty,
  rejectUnknownKeys,
} from './validate.js';

/** Options of {@link RateLimiter}. Give exactly one of `client` and `store`. */
export interface RateLimiterOptions {
  /**
   * A connected Redis client: node-redis v6 `createClient()` (or use `createRedisClient`),
   * `createCluster()` or `createSentinel()`; or an ioredis `Redis` or `Cluster`. Recognised
   * here (see `stores/select.ts`); anything else is an `InvalidInputError`. Create it
   * without an offline queue (`disableOfflineQueue: true`; ioredis:
   * `enableOfflineQueue: false` and `autoResendUnfulfilledCommands: false`; a node-redis
   * sentinel: also `maxCommandRediscovers: 0`) so that calls fail at once while Redis is
   * unreachable and a call that may have run is never sent again.
   */
  readonly client?:
    | NodeRedisClientLike
    | NodeRedisClusterLike
    | NodeRedisSentinelLike
    | IoRedisLike
    | IoRedisClusterLike;
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
   * Most items coalesced into one script call: calls issued in the same event-loop turn
   * are sent together, in batches of a share of what is in flight (see `coalescer.ts`).
   * 1 sends every take alone. Whatever this says, a batch also holds at most about 0.5 ms
   * of estimated Redis work (`MAX_BATCH_WORK`), and a `takeAll` is never split. A positive
   * safe integer up to 1024. Default 128.
   */
  readonly maxBatchSize?: number;
  /**
   * The local denial cache: a scope whose quota is used up until a known time is denied in
   * process until then, with no Redis call, where that is exact for its policy (see
   * `denial-cache.ts`). `false` turns it off; `maxEntries` (a positive safe integer,
   * default 10,000) bounds its memory.
   */
  readonly denialCache?: false | { readonly maxEntries?: number };
  /**
   * A metrics sink (`prometheusMetrics()` from `sluice/prometheus`, `openTelemetryMetrics()`
   * from `sluice/opentelemetry`, or your own `Metrics`): every decided policy, its latency
   * and the calls in flight. Unset: nothing is measured.
   */
  readonly metrics?: Metrics;
  /**
   * Called with each decided policy's {@link DecisionEvent} (outcome, policy name, route,
   * latency, the call's `requestId`), e.g. to log it. An error it throws is reported as a
   * process warning and changes no decision.
   */
  readonly onDecision?: (event: DecisionEvent) => void;
  /**
   * Put the tenant in decision events (`onDecision` only; metrics never carry it). Default
   * `false`: tenants are often personal data, log them only where that is allowed (S24).
   */
  readonly eventTenant?: boolean;
  /**
   * Receives what the start-up checks find wrong with the Redis behind `client` (an
   * eviction policy that can evict quota keys, a replica, a Redis older than 7.0), once per
   * limiter, shortly after construction. Default: a process warning
   * (`process.emitWarning`, with the warning's `code`).
   */
  readonly onWarning?: (warning: StartupWarning) => void;
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
  /** `peek` calls answered (they admit and count nothing). */
  peeks: number;
  /** `reset` calls that completed. */
  resets: number;
  /** Times a changed reset epoch emptied the local denial cache. */
  cacheInvalidations: number;
  /** Calls sent and not yet answered by Redis (may exceed pending callers after timeouts). */
  inFlight: number;
}

const NAMESPACE = /^[A-Za-z0-9._:-]{1,64}$/;
const RATE_LIMITER_OPTIONS = [
  'client',
  'store',
  'namespace',
  'timeoutMs',
  'maxInFlight',
  'maxBatchSize',
  'denialCache',
  'metrics',
  'onDecision',
  'eventTenant',
  'onWarning',
] as const;
/** Largest `maxBatchSize`: one script call blocks Redis while it runs; keep it short. */
export const MAX_BATCH_SIZE = 1024;
/** Longest tenant, route or user accepted, in UTF-16 code units. */
export const MAX_SCOPE_PART_LENGTH = 65_536;
/** Most items in one `takeAll`. */
export const MAX_TAKE_ALL_ITEMS = 16;

const NO_ARGS: readonly string[] = Object.freeze([]);

/**
 * Scopes whose parts add up to more characters than this are cached under their Redis key
 * (a hash), so that the denial cache's memory stays small per entry whatever the ids hold.
 */
const LOCAL_KEY_MAX_TEXT = 256;

/** Per policy and limiter. */
interface Compiled {
  readonly batchId: number;
  readonly localId: number;
  /** Redis work of one item, estimated µs (see `BatchRequest.work`). */
  readonly work: number;
}

/** One validated scope under one policy: what a call sends and caches. */
class Target {
  #key: string | undefined;
  /** The denial cache's key for this scope and policy ('' without a cache). */
  readonly localKey: string;

  constructor(
    readonly namespace: string,
    readonly parts: ScopeParts,
    readonly policy: Policy,
    readonly batchId: number,
    /** Redis work of its item, estimated µs (see `BatchRequest.work`). */
    readonly work: number,
    readonly cost: number,
    readonly args: readonly string[],
    /** The policy's short id in this limiter's denial cache; undefined without a cache. */
    localId: number | undefined,
  ) {
    const { tenant, route, user } = parts;
    // The cache is keyed by the scope's text, so a cached denial costs no hashing (the
    // lengths keep it unambiguous); long ids are keyed by their hash instead, to bound each
    // entry's size.
    this.localKey =
      localId === undefined
        ? ''
        : tenant.length + (route?.length ?? 0) + (user?.length ?? 0) > LOCAL_KEY_MAX_TEXT
          ? `#${this.key}`
          : `${localId}:${tenant.length}:${tenant}${
              route === undefined ? '-' : `${route.length}:${route}`
            }${user ?? ''}`;
  }

  /** The Redis key (hashed once, when first needed: not for an answer from the cache). */
  get key(): string {
    this.#key ??= scopeKey(
      this.namespace,
      this.policy.id,
      this.parts.tenant,
      this.parts.route,
      this.parts.user,
    );
    return this.#key;
  }

  /** The Redis key, given the tenant's hash tag (the items of a takeAll share one). */
  keyWithTag(tag: string): string {
    this.#key ??= scopeKey(
      this.namespace,
      this.policy.id,
      this.parts.tenant,
      this.parts.route,
      this.parts.user,
      tag,
    );
    return this.#key;
  }
}

/**
 * What every call in flight shares: its deadline entry and its batch request at once, so
 * that a take costs one object besides its promise. A subclass says what it sends (`write`)
 * and what its reply means (`done`).
 */
abstract class InFlight implements DeadlineEntry, BatchRequest {
  deadline = 0;
  settled = false;
  /** What decision events need, when the limiter reports them (see `Observer`). */
  meta: CallMeta | undefined = undefined;
  abstract readonly op: 't' | 'p' | 'r';
  abstract readonly size: number;
  abstract readonly work: number;
  abstract readonly script: LuaScript | undefined;
  abstract readonly key: string;
  abstract readonly args: readonly string[];
  abstract readonly firstKey: string;

  constructor(
    readonly engine: Engine,
    readonly reject: (error: Error) => void,
  ) {}

  abstract write(keys: string[], argv: string[]): void;
  abstract done(reply: readonly unknown[], offset: number, sentAt: number): void;

  fail(error: Error): void {
    this.engine.failed(this, error);
  }

  expire(): void {
    this.engine.expired(this);
  }
}

/** Appends one item (its algorithm id, argument count and arguments) to a batch's ARGV. */
function writeItem(argv: string[], batchId: number, args: readonly string[]): void {
  argv.push(String(batchId), String(args.length));
  for (const arg of args) argv.push(arg);
}

/** One take or peek in flight. */
class Call extends InFlight {
  readonly size = 1;
  readonly work: number;
  readonly script: LuaScript | undefined;

  get firstKey(): string {
    return this.key;
  }

  constructor(
    engine: Engine,
    readonly op: 't' | 'p',
    readonly policy: Policy,
    readonly batchId: number,
    work: number,
    readonly key: string,
    readonly localKey: string,
    readonly cost: number,
    readonly args: readonly string[],
    readonly resolve: (decision: Decision) => void,
    reject: (error: Error) => void,
  ) {
    super(engine, reject);
    // A lone take goes as its algorithm's own script; a peek always as a batch (dry).
    this.script = op === 't' ? policy.script : undefined;
    this.work = work;
  }

  write(keys: string[], argv: string[]): void {
    keys.push(this.key);
    writeItem(argv, this.batchId, this.args);
  }

  done(reply: readonly unknown[], offset: number, sentAt: number): void {
    this.engine.answered(this, reply, offset, sentAt);
  }
}

/** One `takeAll` in flight. */
class GroupCall extends InFlight {
  readonly op = 't' as const;
  readonly script = undefined;
  readonly key = '';
  readonly args = NO_ARGS;
  readonly size: number;
  readonly work: number;

  get firstKey(): string {
    return (this.targets[0] as Target).key;
  }

  constructor(
    engine: Engine,
    readonly targets: readonly Target[],
    readonly resolve: (result: TakeAllResult) => void,
    reject: (error: Error) => void,
  ) {
    super(engine, reject);
    this.size = targets.length;
    // Each item decided dry, then taken or probed: twice an item's work.
    let work = 0;
    for (const target of targets) work += 2 * target.work;
    this.work = work;
  }

  write(keys: string[], argv: string[]): void {
    for (const target of this.targets) {
      keys.push(target.key);
      writeItem(argv, target.batchId, target.args);
    }
  }

  done(reply: readonly unknown[], offset: number, sentAt: number): void {
    this.engine.groupAnswered(this, reply, offset, sentAt);
  }
}

/** One `reset` in flight: the key's DEL, then the namespace's new reset epoch. */
class ResetCall extends InFlight {
  readonly op = 'r' as const;
  readonly size = 1;
  readonly work = 2; // one DEL
  readonly script = undefined;
  readonly args = NO_ARGS;

  get firstKey(): string {
    return this.key;
  }

  constructor(
    engine: Engine,
    readonly key: string,
    readonly localKey: string,
    readonly resolve: (existed: boolean) => void,
    reject: (error: Error) => void,
  ) {
    super(engine, reject);
  }

  write(keys: string[], argv: string[]): void {
    keys.push(this.key);
    argv.push('0', '0');
  }

  done(reply: readonly unknown[], offset: number): void {
    this.engine.deleted(this, reply[offset] === 1);
  }
}

type AnyCall = InFlight;

/** What an observed take or takeAll reports: its items, request id and start. */
interface CallMeta {
  readonly targets: readonly Target[];
  readonly operation: 'take' | 'takeAll';
  readonly requestId: string | undefined;
  /** `performance.now()` when the call was made. */
  readonly startedAt: number;
}

/**
 * Delivers decision events to the metrics sink and `onDecision`: one event per decided
 * policy. Exists only when one of them was given, so an unobserved limiter builds nothing.
 */
class Observer {
  constructor(
    readonly metrics: Metrics | undefined,
    readonly onDecision: ((event: DecisionEvent) => void) | undefined,
    readonly withTenant: boolean,
  ) {}

  /** Events for every item of a call, with the call's outcome. */
  report(
    meta: CallMeta,
    outcome: DecisionOutcome,
    cached: boolean,
    decisions?: readonly Decision[],
    error?: Error,
  ): void {
    const latencyMs =
      cached || outcome === 'overload' ? 0 : Math.max(0, performance.now() - meta.startedAt);
    const { targets, operation, requestId } = meta;
    for (let i = 0; i < targets.length; i++) {
      const { policy, parts } = targets[i] as Target;
      const decision = decisions?.[i];
      // One shape for every event (absent fields undefined): cheap to build and to read.
      this.deliver({
        outcome,
        policy: policy.name,
        route: parts.route,
        latencyMs,
        cached,
        operation,
        requestId,
        tenant: this.withTenant ? parts.tenant : undefined,
        // A copy: what an observer does to it never reaches the caller's decision.
        decision: decision === undefined ? undefined : Object.freeze({ ...decision }),
        error,
      });
    }
  }

  /** A call refused for bad input: one event, naming the policy when it was one. */
  invalid(
    operation: 'take' | 'takeAll',
    policy: unknown,
    requestId: string | undefined,
    error: Error,
  ): void {
    this.deliver({
      outcome: 'invalid',
      policy: isPolicy(policy) ? policy.name : '',
      route: undefined,
      latencyMs: 0,
      cached: false,
      operation,
      requestId,
      tenant: undefined,
      decision: undefined,
      error,
    });
  }

  deliver(event: DecisionEvent): void {
    const { metrics, onDecision } = this;
    if (metrics !== undefined) observe('metrics.decision', () => metrics.decision(event));
    if (onDecision !== undefined) observe('onDecision', () => onDecision(event));
  }
}

/**
 * The start-up checks (see `server-checks.ts`), once, in the background: a store that cannot
 * answer them (none to ask, or Redis unreachable now) is not checked — its calls will say.
 */
function checkServer(
  store: ScriptStore,
  onWarning: ((warning: StartupWarning) => void) | undefined,
): void {
  if (typeof store.serverFacts !== 'function') return;
  callSafely(
    () => store.serverFacts?.(),
    () => new UnavailableError('serverFacts returned no promise'),
  ).then(
    (found) => {
      // One warning per kind, for a cluster naming the first node it concerns.
      const seen = new Set<string>();
      const all = Array.isArray(found) ? (found as ServerFacts[]) : [found as ServerFacts];
      for (const facts of all) {
        for (const warning of warningsFor(facts, store.cluster === true)) {
          if (seen.has(warning.code)) continue;
          seen.add(warning.code);
          if (onWarning === undefined) {
            process.emitWarning(warning.message, { code: warning.code });
            continue;
          }
          observe('onWarning', () => onWarning(warning));
        }
      }
    },
    () => {},
  );
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
    peeks: 0,
    resets: 0,
    cacheInvalidations: 0,
    inFlight: 0,
  };

  /** The reset epoch token last read (undefined before the first read). */
  #epoch: string | undefined;
  /** When the read that confirmed `#epoch` was sent (clock ms). */
  #epochConfirmedAt = Number.NEGATIVE_INFINITY;
  /** When the last epoch read was sent, and its sequence number. */
  #epochReadAt = Number.NEGATIVE_INFINITY;
  #epochRead = 0;
  #epochReading = false;
  /** Denials decided by calls sent before this time are not cached (see reset-epoch.ts). */
  #epochFloor = Number.NEGATIVE_INFINITY;

  constructor(
    readonly store: ScriptStore,
    readonly deadlines: DeadlineQueue,
    readonly denials: DenialCache | undefined,
    /** The store's clock (ms), which times the denial cache. */
    readonly clock: () => number,
    readonly epochKey: string,
    /** Decision events' destination; undefined when nothing observes this limiter. */
    readonly observer: Observer | undefined,
  ) {}

  /** A cached denial for a take of `cost` on `target`'s scope, if the cache holds one. */
  held(localKey: string, policy: Policy, cost: number): Decision | undefined {
    const denials = this.denials;
    if (denials === undefined || denials.size === 0) return undefined;
    const now = this.clock();
    const held = denials.get(localKey, now);
    if (held === undefined || !(held.anyCost || cost === 1 || cost > policy.maxCost)) {
      return undefined;
    }
    if (!this.#epochFresh(now)) return undefined;
    return {
      allowed: false,
      remaining: 0,
      limit: held.limit,
      resetMs: Math.max(0, Math.ceil(held.resetAt - now)),
      retryAfterMs:
        cost > policy.maxCost
          ? Number.POSITIVE_INFINITY
          : Math.max(1, Math.ceil(held.retryAt - now)),
    };
  }

  /**
   * Sends the first reset-epoch read, once, with the limiter's first call: denials decided by
   * calls sent from then on can be cached as soon as it returns.
   */
  firstEpochRead(): void {
    if (this.denials !== undefined && this.#epochRead === 0) this.#readEpoch(this.clock());
  }

  /** True while the reset epoch was confirmed recently enough to answer from the cache. */
  #epochFresh(now: number): boolean {
    const stale = now - this.#epochReadAt;
    if (stale >= EPOCH_POLL_MS && (!this.#epochReading || stale > EPOCH_VALID_MS)) {
      this.#readEpoch(now);
    }
    return now - this.#epochConfirmedAt <= EPOCH_VALID_MS;
  }

  #readEpoch(sentAt: number): void {
    const read = ++this.#epochRead;
    this.#epochReading = true;
    this.#epochReadAt = sentAt;
    callSafely(
      () => this.store.evalScript(resetEpochScript, [this.epochKey], ['', '0']),
      () => new UnavailableError('the store returned no promise'),
    ).then(
      (reply) => {
        if (read !== this.#epochRead) return; // a newer read was sent since
        this.#epochReading = false;
        const token = typeof reply === 'string' ? reply : String(reply ?? '');
        if (token !== this.#epoch) {
          // A reset happened (or this is the first read): what was cached may predate it.
          if (this.#epoch !== undefined) this.stats.cacheInvalidations++;
          this.denials?.clear();
          this.#epochFloor = sentAt;
          this.#epoch = token;
        }
        this.#epochConfirmedAt = sentAt;
      },
      () => {
        if (read === this.#epochRead) this.#epochReading = false;
      },
    );
  }

  /** Caches what `decision` makes certain (see `Policy.denialHold`). */
  #remember(
    policy: Policy,
    localKey: string,
    cost: number,
    decision: Decision,
    sentAt: number,
    dry: boolean,
  ): void {
    const denials = this.denials;
    if (denials === undefined || (dry && decision.allowed) || sentAt < this.#epochFloor) return;
    const hold = policy.denialHold(decision, cost);
    if (hold === undefined) return;
    const now = this.clock();
    // Have the epoch confirmed by the time the next take on this scope comes.
    if (now - this.#epochReadAt >= EPOCH_POLL_MS && !this.#epochReading) this.#readEpoch(now);
    denials.set(
      localKey,
      {
        until: sentAt + hold.ms,
        resetAt: now + decision.resetMs,
        retryAt: now + hold.ms + 1,
        limit: decision.limit,
        anyCost: hold.anyCost,
      },
      now,
    );
  }

  answered(call: Call, reply: readonly unknown[], offset: number, sentAt: number): void {
    this.stats.inFlight--;
    const decision = decodeDecision(reply, offset, call.policy.limit);
    if (decision === undefined) {
      this.failed(
        call,
        new StoreError(`ERR unexpected reply from ${call.policy.script.name}`),
        true,
      );
      return;
    }
    const dry = call.op === 'p';
    this.#remember(call.policy, call.localKey, call.cost, decision, sentAt, dry);
    if (!this.deadlines.settle(call)) return; // the caller already got a TimeoutError
    if (dry) this.stats.peeks++;
    else if (decision.allowed) this.stats.allowed++;
    else this.stats.limited++;
    if (call.meta !== undefined) {
      this.observer?.report(call.meta, decision.allowed ? 'allowed' : 'limited', false, [decision]);
    }
    call.resolve(decision);
  }

  groupAnswered(call: GroupCall, reply: readonly unknown[], offset: number, sentAt: number): void {
    this.stats.inFlight--;
    const decisions: Decision[] = [];
    let allowed = true;
    let retryAfterMs = 0;
    for (let j = 0; j < call.targets.length; j++) {
      const target = call.targets[j] as Target;
      const decision = decodeDecision(reply, offset + 4 * j, target.policy.limit);
      if (decision === undefined) {
        this.failed(call, new StoreError('ERR unexpected reply from batch'), true);
        return;
      }
      decisions.push(decision);
      if (!decision.allowed) allowed = false;
      if (decision.retryAfterMs > retryAfterMs) retryAfterMs = decision.retryAfterMs;
    }
    for (let j = 0; j < decisions.length; j++) {
      const target = call.targets[j] as Target;
      this.#remember(
        target.policy,
        target.localKey,
        target.cost,
        decisions[j] as Decision,
        sentAt,
        false,
      );
    }
    if (!this.deadlines.settle(call)) return;
    if (allowed) this.stats.allowed++;
    else this.stats.limited++;
    if (call.meta !== undefined) {
      this.observer?.report(call.meta, allowed ? 'allowed' : 'limited', false, decisions);
    }
    call.resolve({ allowed, decisions, retryAfterMs: allowed ? 0 : retryAfterMs, cached: false });
  }

  /** The scope's key is gone: drop its cached denial here, then tell every other limiter. */
  deleted(call: ResetCall, existed: boolean): void {
    this.denials?.delete(call.localKey);
    callSafely(
      () =>
        this.store.evalScript(
          resetEpochScript,
          [this.epochKey],
          [newEpochToken(), String(EPOCH_TTL_MS)],
        ),
      () => new UnavailableError('the store returned no promise'),
    ).then(
      () => {
        this.stats.inFlight--;
        if (!this.deadlines.settle(call)) return;
        this.stats.resets++;
        call.resolve(existed);
      },
      (error: unknown) => this.failed(call, error),
    );
  }

  failed(call: AnyCall, error: unknown, counted = false): void {
    if (!counted) this.stats.inFlight--;
    if (!this.deadlines.settle(call)) return;
    const failure =
      error instanceof StoreError || error instanceof UnavailableError
        ? error
        : toUnavailable(error);
    if (failure instanceof StoreError) this.stats.storeError++;
    else this.stats.unavailable++;
    if (call.meta !== undefined) {
      const outcome = failure instanceof StoreError ? 'store_error' : 'unavailable';
      this.observer?.report(call.meta, outcome, false, undefined, failure);
    }
    call.reject(failure);
  }

  expired(call: AnyCall): void {
    this.stats.timeout++;
    const error = new TimeoutError(this.deadlines.timeoutMs);
    if (call.meta !== undefined)
      this.observer?.report(call.meta, 'timeout', false, undefined, error);
    call.reject(error);
  }
}

function toUnavailable(error: unknown): UnavailableError {
  const message = error instanceof Error ? error.message : String(error);
  return new UnavailableError(`Redis unavailable: ${message}`, { cause: error });
}

/** A validated scope: its parts as read once. */
interface ScopeParts {
  readonly tenant: string;
  readonly route: string | undefined;
  readonly user: string | undefined;
}

export class RateLimiter {
  readonly #namespace: string;
  readonly #maxInFlight: number;
  readonly #engine: Engine;
  readonly #coalescer: Coalescer;
  readonly #compiled = new WeakMap<Policy, Compiled>();
  #policies = 0;

  /** @throws {InvalidInputError} for a missing/ambiguous store or an out-of-range option. */
  constructor(options: RateLimiterOptions) {
    const read = (name: string) => readProperty(options, name, 'options');
    if (typeof options === 'object' && options !== null) {
      rejectUnknownKeys(options, RATE_LIMITER_OPTIONS, 'options');
    }
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
    const store: ScriptStore = givenStore ?? storeFor(client);
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
    if (typeof cache === 'object' && cache !== null) {
      rejectUnknownKeys(cache, ['maxEntries'], 'options.denialCache');
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
    const metrics = checkMetrics(read('metrics'));
    const onDecision = read('onDecision');
    if (onDecision !== undefined && typeof onDecision !== 'function') {
      throw new InvalidInputError('options.onDecision', 'a function', onDecision);
    }
    const eventTenant = read('eventTenant');
    if (eventTenant !== undefined && typeof eventTenant !== 'boolean') {
      throw new InvalidInputError('options.eventTenant', 'true or false', eventTenant);
    }
    this.#coalescer = new Coalescer(store, maxBatchSize, clock);
    this.#engine = new Engine(
      store,
      new DeadlineQueue(timeoutMs),
      denials,
      clock,
      resetEpochKey(namespace),
      metrics === undefined && onDecision === undefined
        ? undefined
        : new Observer(
            metrics,
            onDecision as ((event: DecisionEvent) => void) | undefined,
            eventTenant === true,
          ),
    );
    const onWarning = read('onWarning');
    if (onWarning !== undefined && typeof onWarning !== 'function') {
      throw new InvalidInputError('options.onWarning', 'a function', onWarning);
    }
    checkServer(store, onWarning as ((warning: StartupWarning) => void) | undefined);
    if (metrics !== undefined) {
      // A weak reference: a sink outliving the limiter must not keep it alive.
      const engine = new WeakRef(this.#engine);
      try {
        metrics.attach({ timeoutMs, inFlight: () => engine.deref()?.stats.inFlight });
      } catch (error) {
        observerFailed('metrics.attach', error);
      }
    }
    // The methods may be passed around as functions (`const take = limiter.take`).
    this.take = this.take.bind(this);
    this.takeAll = this.takeAll.bind(this);
    this.peek = this.peek.bind(this);
    this.reset = this.reset.bind(this);
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
    return this.#decide('t', scope, policy, options);
  }

  /**
   * The decision `take(scope, policy, options)` would get now, made by the same script on
   * Redis, consuming and writing nothing (not even a repair of foreign state). For
   * inspection and for "check only" callers; a later take may decide differently.
   *
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
   *   items of different tenants, or a repeated scope and policy (nothing sent to Redis).
   * @throws the failures of {@link take}; a failure rejects the whole call.
   */
  takeAll(items: readonly TakeAllItem[], options?: TakeAllOptions): Promise<TakeAllResult> {
    const engine = this.#engine;
    let targets: Target[];
    let requestId: string | undefined;
    try {
      targets = this.#targets(items);
      requestId = readRequestId(options, 'options');
    } catch (error) {
      engine.stats.invalid++;
      engine.observer?.invalid('takeAll', undefined, requestIdIfValid(options), error as Error);
      return Promise.reject(error);
    }
    let cached: Decision[] | undefined;
    let retryAfterMs = 0;
    for (let j = 0; j < targets.length; j++) {
      const target = targets[j] as Target;
      const held = engine.held(target.localKey, target.policy, target.cost);
      if (held === undefined) continue;
      cached ??= targets.map((t) => ({
        allowed: false,
        remaining: 0,
        limit: t.policy.limit,
        resetMs: 0,
        // Known without Redis: a cost above what the policy can ever admit.
        retryAfterMs: t.cost > t.policy.maxCost ? Number.POSITIVE_INFINITY : 0,
      }));
      cached[j] = held;
    }
    if (cached !== undefined) {
      for (const decision of cached) {
        if (decision.retryAfterMs > retryAfterMs) retryAfterMs = decision.retryAfterMs;
      }
    }
    if (cached !== undefined) {
      engine.stats.limited++;
      engine.stats.cachedDenials++;
      engine.observer?.report(
        { targets, operation: 'takeAll', requestId, startedAt: 0 },
        'limited',
        true,
        cached,
      );
      return Promise.resolve({ allowed: false, decisions: cached, retryAfterMs, cached: true });
    }
    const meta: CallMeta | undefined =
      engine.observer === undefined
        ? undefined
        : { targets, operation: 'takeAll', requestId, startedAt: performance.now() };
    return this.#send((resolve, reject) => new GroupCall(engine, targets, resolve, reject), meta);
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
      target = this.#target(scope, policy, undefined, 'scope', 'policy', 'options');
    } catch (error) {
      this.#engine.stats.invalid++;
      return Promise.reject(error);
    }
    return this.#send(
      (resolve, reject) =>
        new ResetCall(this.#engine, target.key, target.localKey, resolve, reject),
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
    return this.#target(scope, policy, undefined, 'scope', 'policy', 'options').key;
  }

  /** A snapshot of the outcome counters. */
  stats(): LimiterStats {
    return { ...this.#engine.stats };
  }

  #decide(op: 't' | 'p', scope: Scope, policy: Policy, options?: TakeOptions): Promise<Decision> {
    const engine = this.#engine;
    let target: Target;
    let requestId: string | undefined;
    try {
      target = this.#target(scope, policy, options, 'scope', 'policy', 'options');
      requestId = readRequestId(options, 'options');
    } catch (error) {
      engine.stats.invalid++;
      if (op === 't') {
        engine.observer?.invalid('take', policy, requestIdIfValid(options), error as Error);
      }
      return Promise.reject(error);
    }
    const held = engine.held(target.localKey, policy, target.cost);
    if (held !== undefined) {
      if (op === 'p') engine.stats.peeks++;
      else {
        engine.stats.limited++;
        engine.stats.cachedDenials++;
        // Answered here: no round trip to time.
        engine.observer?.report(
          { targets: [target], operation: 'take', requestId, startedAt: 0 },
          'limited',
          true,
          [held],
        );
      }
      return Promise.resolve(held);
    }
    // Peeks decide nothing: only takes are reported.
    const meta: CallMeta | undefined =
      engine.observer === undefined || op === 'p'
        ? undefined
        : { targets: [target], operation: 'take', requestId, startedAt: performance.now() };
    return this.#send(
      (resolve, reject) =>
        new Call(
          engine,
          op,
          policy,
          target.batchId,
          target.work,
          target.key,
          target.localKey,
          target.cost,
          target.args,
          resolve,
          reject,
        ),
      meta,
    );
  }

  /** The in-flight cap, the deadline and the coalescer, for every kind of call. */
  #send<T>(
    make: (resolve: (value: T) => void, reject: (error: Error) => void) => AnyCall,
    meta: CallMeta | undefined,
  ): Promise<T> {
    const engine = this.#engine;
    const now = performance.now();
    if (engine.stats.inFlight >= this.#maxInFlight) {
      engine.stats.overload++;
      const error = new OverloadError(this.#maxInFlight);
      if (meta !== undefined) engine.observer?.report(meta, 'overload', false, undefined, error);
      return Promise.reject(error);
    }
    engine.stats.inFlight++;
    engine.firstEpochRead();
    return new Promise<T>((resolve, reject) => {
      const call = make(resolve, reject);
      call.meta = meta;
      engine.deadlines.track(call, now);
      this.#coalescer.add(call);
    });
  }

  #targets(items: readonly TakeAllItem[]): Target[] {
    const expected = `an array of 1 to ${MAX_TAKE_ALL_ITEMS} { scope, policy, cost? }`;
    let count: unknown;
    try {
      count = Array.isArray(items) ? items.length : undefined;
    } catch {
      count = undefined; // a revoked Proxy
    }
    if (typeof count !== 'number' || count < 1 || count > MAX_TAKE_ALL_ITEMS) {
      throw new InvalidInputError('items', expected, items);
    }
    const targets: Target[] = [];
    const seen = new Map<string, number>();
    let tenant: string | undefined;
    let tag = '';
    // `count` was read once: a Proxy whose length changes cannot add items.
    for (let i = 0; i < count; i++) {
      const field = `items[${i}]`;
      const item = readProperty(items, String(i), 'items');
      const target = this.#target(
        readProperty(item, 'scope', field) as Scope,
        readProperty(item, 'policy', field) as Policy,
        item as TakeOptions,
        `${field}.scope`,
        `${field}.policy`,
        field,
      );
      if (tenant === undefined) {
        tenant = target.parts.tenant;
        tag = tenantTag(tenant); // hashed once for every item
      } else if (target.parts.tenant !== tenant) {
        throw new InvalidInputError(
          `${field}.scope.tenant`,
          'the tenant of items[0] (one takeAll decides for one tenant)',
          target.parts.tenant,
        );
      }
      const key = target.keyWithTag(tag);
      const earlier = seen.get(key);
      if (earlier !== undefined) {
        throw new InvalidInputError(
          field,
          `a scope and policy not already in items[${earlier}]`,
          item,
        );
      }
      seen.set(key, i);
      targets.push(target);
    }
    return targets;
  }

  /** Validates one scope, policy and cost (reading each field once) into a target. */
  #target(
    scope: Scope,
    policy: Policy,
    options: TakeOptions | undefined,
    scopeField: string,
    policyField: string,
    optionsField: string,
  ): Target {
    if (!isPolicy(policy)) {
      throw new InvalidInputError(
        policyField,
        'a policy from a builder such as fixedWindow()',
        policy,
      );
    }
    const cost = takeCost(options, optionsField);
    const compiled = this.#compile(policy, policyField);
    const parts = scopeParts(scope, scopeField);
    const args = policy.args(cost);
    return new Target(
      this.#namespace,
      parts,
      policy,
      compiled.batchId,
      compiled.work,
      cost,
      args,
      this.#engine.denials === undefined ? undefined : compiled.localId,
    );
  }

  /** What this limiter keeps per policy: its batch id and its short id in cache keys. */
  #compile(policy: Policy, field: string): Compiled {
    let compiled = this.#compiled.get(policy);
    if (compiled === undefined) {
      const id = batchId(policy.script);
      if (id === undefined)
        throw new InvalidInputError(field, 'a policy of a known algorithm', policy);
      compiled = { batchId: id, localId: this.#policies++, work: batchWork(id, policy.limit) };
      this.#compiled.set(policy, compiled);
    }
    return compiled;
  }
}

/** The `requestId` option: absent, or a string of 1–256 characters. */
function readRequestId(options: TakeOptions | TakeAllOptions | undefined, field: string) {
  if (options === undefined) return undefined;
  const id = readProperty(options, 'requestId', field);
  if (id === undefined) return undefined;
  if (typeof id !== 'string' || id.length === 0 || id.length > 256) {
    throw new InvalidInputError(`${field}.requestId`, 'a string of 1 to 256 characters', id);
  }
  return id;
}

/** The `requestId` of options that were refused for another field, when it is valid. */
function requestIdIfValid(options: TakeOptions | TakeAllOptions | undefined): string | undefined {
  try {
    return readRequestId(options, 'options');
  } catch {
    return undefined;
  }
}

/** The `metrics` option: absent, or an object with the four methods of `Metrics`. */
function checkMetrics(value: unknown): Metrics | undefined {
  if (value === undefined) return undefined;
  for (const method of ['decision', 'request', 'redisEvent', 'attach']) {
    if (typeof readProperty(value, method, 'options.metrics') !== 'function') {
      throw new InvalidInputError(
        'options.metrics',
        'a Metrics (prometheusMetrics(), openTelemetryMetrics(), or an object with decision, request, redisEvent and attach)',
        value,
      );
    }
  }
  return value as Metrics;
}

function takeCost(options: TakeOptions | undefined, field: string): number {
  if (options === undefined) return 1;
  const cost = readProperty(options, 'cost', field);
  return cost === undefined ? 1 : positiveSafeInteger(`${field}.cost`, cost);
}

/** Reads each part of `scope` once and checks it; the values returned are the values checked. */
function scopeParts(scope: unknown, field: string): ScopeParts {
  const tenant = readProperty(scope, 'tenant', field);
  checkPart(field, 'tenant', tenant);
  const route = readProperty(scope, 'route', field);
  if (route !== undefined) checkPart(field, 'route', route);
  const user = readProperty(scope, 'user', field);
  if (user !== undefined) checkPart(field, 'user', user);
  return { tenant, route, user };
}

/** Checks one part of a scope; the field's name is built only for the error. */
function checkPart(field: string, part: string, value: unknown): asserts value is string {
  if (typeof value !== 'string' || value.length === 0 || value.length > MAX_SCOPE_PART_LENGTH) {
    throw new InvalidInputError(
      `${field}.${part}`,
      `a non-empty string of at most ${MAX_SCOPE_PART_LENGTH} characters`,
      value,
    );
  }
}
