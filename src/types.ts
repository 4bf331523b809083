/**
 * The shapes shared by every part of sluice. Every duration is in milliseconds and its
 * name ends in `Ms`.
 */
import type { LuaScript } from './algorithms/script.js';

/**
 * Who is limited, for what. Every part comes from the server, never from the request:
 * `tenant` from the verified session, `route` from a fixed business route template such as
 * `"POST/orders"`, never the raw URL with its query string, `user` from the session.
 *
 * - `{ tenant }`: a tenant-wide limit, over every route;
 * - `{ tenant, route }`: one route of a tenant;
 * - `{ tenant, route, user }`: one user of a tenant on one route (`{ tenant, user }`: one
 *   user over every route).
 *
 * Every key of one tenant shares one Redis Cluster hash slot, so one `takeAll` can decide
 * limits of several scopes of the same tenant atomically. Each part is a non-empty string
 * of at most 65,536 UTF-16 code units; none of it reaches Redis in clear (see `key.ts`).
 */
export interface Scope {
  /** The authenticated tenant (or API key): required. */
  readonly tenant: string;
  /** The business route template, e.g. `"POST/orders"`; absent for a tenant-wide limit. */
  readonly route?: string;
  /** The user inside the tenant; absent for a limit shared by the tenant's users. */
  readonly user?: string;
}

/**
 * The answer to one `take`, the same shape for every policy. A denial is a value, not an
 * error. Times are whole milliseconds.
 *
 * - `allowed`: the cost was admitted and counted. A denied take changes nothing.
 * - `remaining`: units that could still pass now, after this decision, an integer in
 *   `[0, limit]` — in the current window (fixed window), in the sliding window (log,
 *   counter: by the weighted estimate), whole tokens (token bucket), the burst left (GCRA).
 *   A `peek` consumes nothing: its `remaining` is the units left now, before its cost.
 * - `limit`: the policy's limit (the capacity of a token bucket, the burst of a GCRA).
 * - `resetMs`: ms until the scope is back to a clean state: the window ends (fixed window;
 *   0 when there is none, e.g. a denied oversize cost on a fresh scope), the window holds
 *   nothing (log), both windows are empty (counter), the bucket is full (token bucket), the
 *   full burst is available (GCRA). A take reports it after its decision; a `peek`, which
 *   takes nothing, from the state now (0 on a scope without state).
 * - `retryAfterMs`: 0 when allowed; when denied, the ms after which the same cost succeeds
 *   absent other traffic, exactly (one ms earlier fails) — for the fixed window
 *   `resetMs + 1`, since Redis expires a key only once its expiry time has passed;
 *   `Infinity` when the cost is larger than the policy can ever admit (`JSON.stringify`
 *   writes it as `null`).
 */
export interface Decision {
  readonly allowed: boolean;
  readonly remaining: number;
  readonly limit: number;
  readonly resetMs: number;
  readonly retryAfterMs: number;
  /**
   * Present on the answer to a take with an `id` (see {@link TakeOptions.id}): true when it
   * is the id's recorded first answer, replayed (every other field as first decided; nothing
   * consumed now), false when it was decided now.
   */
  readonly replayed?: boolean;
  /**
   * Present (true) when the scope is blocked: its policy has `blockMs` and a take was
   * refused less than a block ago. `resetMs` is then what is left of the block,
   * `retryAfterMs` at least that; over HTTP the problem type is `abnormal-usage-detected`.
   */
  readonly blocked?: true;
}

/** Options of one `take` call. */
export interface TakeOptions {
  /** Units this request consumes: a positive safe integer. Default 1. */
  readonly cost?: number;
  /**
   * The request's id, passed through to decision events (`onDecision`) to correlate them
   * with your logs: 1–256 characters. Never part of the key or the decision.
   */
  readonly requestId?: string;
  /**
   * An idempotency key chosen by the caller, 1–128 characters, that makes the take
   * retry-safe: the first take with this id is decided as usual and, when admitted, its
   * answer recorded in the same script call; a repeat of the same request (the same scope,
   * policy and cost) within the policy's horizon (`Policy.horizonMs`) returns that answer
   * (`allowed`, `remaining`, `resetMs`, `retryAfterMs` as first decided, `replayed: true`)
   * and consumes nothing. So a take that failed with a `TimeoutError` (it may have been
   * counted) can be sent again with its id and counts at most once. A refused take is not
   * recorded (it consumed nothing): its repeat is decided afresh. An id names one request
   * of its tenant: reused within the horizon for another one (another scope, policy or
   * cost, or a `takeAll`) it is refused with an `InvalidInputError` (field `id`) and
   * nothing changes. Use a fresh id per operation (a request id, a UUID). A take with an id
   * is never answered from the local denial cache. Costs a record key per admitted id (its
   * length about 100 bytes) for the horizon, and a GET and SET in the script. Not on
   * `peek` (an `InvalidInputError`).
   */
  readonly id?: string;
}

/** Options of one `takeAll` call. */
export interface TakeAllOptions {
  /** As in {@link TakeOptions}: passed through to every item's decision event. */
  readonly requestId?: string;
  /**
   * As in {@link TakeOptions.id}, for the whole call: a repeat with this id and the same
   * items (scopes, policies and costs, in order) within the longest of their policies'
   * horizons returns the recorded admission (`replayed: true`) and consumes nothing; the id
   * with other items, another order or other costs is an `InvalidInputError` (field `id`),
   * nothing changed; a refused call is not recorded (its repeat is decided afresh).
   */
  readonly id?: string;
}

/** One item of `takeAll`: a scope, its policy and the units to spend (default 1). */
export interface TakeAllItem {
  readonly scope: Scope;
  readonly policy: Policy;
  /** A positive safe integer; default 1. */
  readonly cost?: number;
}

/**
 * The answer to one `takeAll`: all or nothing.
 *
 * - `allowed`: every item was admitted and counted; when false, no item consumed anything.
 * - `decisions[i]`: item i's decision. When refused, every `allowed` is false; a blocking
 *   item reports its denial, an item that would have fitted reports its state as it is
 *   (`remaining` units left now, `resetMs`) with `retryAfterMs: 0`. When the local denial
 *   cache refused it (`cached: true`), only the items it held were evaluated: the others
 *   report `remaining: 0`, `resetMs: 0`, `retryAfterMs: 0`.
 * - `retryAfterMs`: 0 when allowed; else the largest `retryAfterMs` among the blocking items
 *   (`Infinity` when one of them can never fit).
 */
export interface TakeAllResult {
  readonly allowed: boolean;
  readonly decisions: readonly Decision[];
  readonly retryAfterMs: number;
  /** True when the local denial cache refused it without a Redis call. */
  readonly cached: boolean;
  /** Present when the call had an `id`: as {@link Decision.replayed}. */
  readonly replayed?: boolean;
  /**
   * When admitted, the lease of each item of a `concurrency` policy, in item order (absent
   * when there is none): release each when its work ends.
   */
  readonly leases?: readonly Lease[];
}

/**
 * A lease of a concurrency policy: the decision of its acquisition, its id, and the calls
 * that end or extend it. A lease that was not granted (`allowed: false`) holds nothing: its
 * `release()` resolves false, its `renew()` a refusal.
 */
export interface Lease extends Decision {
  /**
   * The lease's id (given to `acquire`, or a random UUID): what `limiter.release` and
   * `limiter.renew` take, from any process.
   */
  readonly id: string;
  /**
   * Frees the lease's slot now. Resolves true when it held a live lease, false when there
   * was none (released already, expired, never granted). Applied at most once however often
   * it is called or retried.
   *
   * @throws the failures of `take` (`TimeoutError`, `UnavailableError`, …).
   */
  release(): Promise<boolean>;
  /**
   * Extends the lease to `leaseMs` from now, if it is still live: `allowed` true (then
   * `resetMs` = `leaseMs`); else `allowed` false with `retryAfterMs: Infinity` — it expired or
   * was released, and is never revived.
   *
   * @throws the failures of `take`.
   */
  renew(): Promise<Decision>;
}

/**
 * A server-side rate policy, built by a policy builder such as `fixedWindow`. Frozen;
 * reuse one object per route rather than building one per request.
 */
export interface Policy {
  /**
   * The policy's name, used in the `RateLimit-Policy` header, metrics and the CLI: the
   * builder's `name` option, or one derived from the algorithm and its parameters (e.g.
   * `"fixed-window-10-per-60000ms"`). Part of the policy's identity.
   */
  readonly name: string;
  /** @internal True when `name` was given to the builder (not derived). */
  readonly named: boolean;
  /**
   * The policy's identity as it appears in Redis keys: the algorithm's key tag and a digest
   * of the algorithm, every parameter, the version and the name, e.g. `"fw.17b030aa42ef23f5"`.
   * Two policies with different ids never share state; changing any parameter, the version
   * or the name starts a fresh quota.
   */
  readonly id: string;
  /**
   * The policy's horizon, in ms: the longest any state of one scope can matter — the window
   * (fixed window, sliding window log), two windows (sliding window counter), the time to
   * refill the whole capacity (token bucket) or to recover the whole burst (GCRA). No key
   * of this policy ever lives longer, and nothing stored can hold a scope longer.
   */
  readonly horizonMs: number;
  /** The algorithm's standard name, e.g. `"fixed-window"`. */
  readonly algorithm: string;
  /** Short algorithm tag used in Redis keys, e.g. `"fw"`. */
  readonly keyTag: string;
  /** Units admitted per window (or the capacity). */
  readonly limit: number;
  /** Policy version, part of the key. */
  readonly version: string;
  /** The largest cost this policy can ever admit. */
  readonly maxCost: number;
  /**
   * The time over which `limit` units are allotted, in ms: the window, or for a token
   * bucket / GCRA the time a full burst takes to come back. Advertised as the `w` of the
   * `RateLimit-Policy` header.
   */
  readonly quotaWindowMs: number;
  /** @internal The script that decides. */
  readonly script: LuaScript;
  /** @internal ARGV for one take of `cost` units. */
  readonly args: (cost: number) => readonly string[];
  /**
   * @internal For the local denial cache: how long after the request was sent *every* take
   * on this key is certain to be denied, given `decision` for a take of `cost`, and whether
   * `decision.retryAfterMs` then holds for every cost (else only for a cost of 1);
   * `undefined` when nothing is certain.
   */
  readonly denialHold: (decision: Decision, cost: number) => DenialHold | undefined;
  /** @internal The policy's block (`blockMs`, `escalate`), if any. */
  readonly block?: BlockSpec;
  /**
   * The policy's `prefetch` option (a fixed window's; see `docs/prefetch.md`), if any: a
   * replica takes grants of up to `maxUnits` units of a hot scope's quota and admits from
   * them without a Redis call.
   */
  readonly prefetch?: PrefetchSpec;
}

/** A policy's `prefetch` option, as its builder read it (see `docs/prefetch.md`). */
export interface PrefetchSpec {
  /** Most units one grant takes besides the take that asks for it: 1 to 65,536. */
  readonly maxUnits: number;
}

/**
 * A policy's block, as its builder read `blockMs` and `escalate` (see `docs/priced.md`): a
 * refusal blocks for `blockMs` × `factor`^n, at most `maxMs`, n the blocks within `withinMs`
 * of each other (`factor` 1 and `withinMs` 0: a fixed block). All in ms but `factor`.
 */
export interface BlockSpec {
  readonly blockMs: number;
  readonly factor: number;
  readonly maxMs: number;
  readonly withinMs: number;
}

/** @internal See `Policy.denialHold`. */
export interface DenialHold {
  readonly ms: number;
  readonly anyCost: boolean;
}
