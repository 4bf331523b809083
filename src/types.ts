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
 * The answer to one `take`. A denial is a value, not an error.
 *
 * For the fixed window:
 * - `allowed`: the cost was admitted and counted.
 * - `remaining`: units still admissible in the current window after this decision, an
 *   integer in `[0, limit]`.
 * - `limit`: the policy's limit.
 * - `resetMs`: milliseconds until the current window ends and the counter is gone (0 when
 *   there is no window, e.g. a denied oversize cost on a fresh scope).
 * - `retryAfterMs`: 0 when allowed; when denied, the milliseconds after which the same cost
 *   succeeds absent other traffic: `resetMs + 1`, since Redis expires a key only once its
 *   expiry time has passed; `Infinity` when the cost is larger than the limit and can
 *   never be admitted.
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
