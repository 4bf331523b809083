/**
 * The shapes shared by every part of sluice. Every duration is in milliseconds and its
 * name ends in `Ms`.
 */
import type { Policy } from './algorithms/policy.js';

/**
 * Who is limited, for what. Every part comes from the server, never from the request:
 * `tenant` from the verified session (S2), `route` from a fixed business route template such
 * as `"POST/orders"`, never the raw URL with its query string (S1), `user` from the session.
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
 * - `limit`: the policy's limit (the capacity of a token bucket, the burst of a GCRA).
 * - `resetMs`: ms until the scope is back to a clean state: the window ends (fixed window;
 *   0 when there is none, e.g. a denied oversize cost on a fresh scope), the window holds
 *   nothing (log), both windows are empty (counter), the bucket is full (token bucket), the
 *   full burst is available (GCRA).
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
}

/** Options of one `takeAll` call. */
export interface TakeAllOptions {
  /** As in {@link TakeOptions}: passed through to every item's decision event. */
  readonly requestId?: string;
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
}
