/**
 * The shapes shared by every part of sluice. Every duration is in milliseconds and its
 * name ends in `Ms`.
 */

/**
 * Who is limited, for what. Both parts come from the server, never from the request:
 * `tenant` from the verified session (S2), `route` from a fixed business route template such
 * as `"POST/orders"`, never the raw URL with its query string (S1).
 */
export interface Scope {
  /** The authenticated tenant (or API key, user…): a non-empty string of at most 65,536 UTF-16 code units. */
  readonly tenant: string;
  /** The business route template, e.g. `"POST/orders"`: a non-empty string of at most 65,536 UTF-16 code units. */
  readonly route: string;
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
}
