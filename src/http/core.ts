/**
 * Framework-free HTTP mapping: a decision or a limiter failure → `{ status, headers, body }`.
 * Adapters only apply what these functions return.
 *
 * - Denied: `429 Too Many Requests` with `Retry-After` in whole seconds (RFC 9110 §10.2.3),
 *   rounded *up* so a client that waits exactly that long is not refused again, and never
 *   below 1. A cost that can never fit gets `429` without `Retry-After` (no wait helps).
 * - Limiter failure in fail-closed mode: `503 Service Unavailable` with `Retry-After: 1`,
 *   never a fake `429`: the client has not used up its quota (S16).
 */
import type { Decision } from '../types.js';

/** What an adapter writes. */
export interface HttpResponseSpec {
  readonly status: number;
  readonly headers: Readonly<Record<string, string>>;
  /** JSON text. */
  readonly body: string;
}

/** How a route answers when the limiter fails (timeout, Redis unreachable, overload…). */
export type FailureMode = 'fail-closed' | 'fail-open';

/**
 * `Retry-After` delta-seconds for a delay in milliseconds: `ceil(ms / 1000)`, at least 1
 * (1 → 1, 1000 → 1, 1001 → 2). Non-finite or non-positive input gives 1.
 */
export function retryAfterSeconds(delayMs: number): number {
  if (!Number.isFinite(delayMs) || delayMs <= 0) return 1;
  return Math.max(1, Math.ceil(delayMs / 1000));
}

const JSON_TYPE = 'application/json; charset=utf-8';

/** The `429` response for a denial. */
export function limitedResponse(decision: Decision): HttpResponseSpec {
  if (!Number.isFinite(decision.retryAfterMs)) {
    return {
      status: 429,
      headers: { 'content-type': JSON_TYPE },
      body: JSON.stringify({
        error: 'cost_exceeds_limit',
        message: 'this request costs more than the rate limit can ever admit',
        limit: decision.limit,
      }),
    };
  }
  const seconds = retryAfterSeconds(decision.retryAfterMs);
  return {
    status: 429,
    headers: { 'content-type': JSON_TYPE, 'retry-after': String(seconds) },
    body: JSON.stringify({
      error: 'rate_limited',
      message: 'rate limit exceeded',
      retryAfterSeconds: seconds,
    }),
  };
}

/** The `503` response for a limiter failure on a fail-closed route. */
export function unavailableResponse(): HttpResponseSpec {
  return {
    status: 503,
    headers: { 'content-type': JSON_TYPE, 'retry-after': '1' },
    body: JSON.stringify({
      error: 'rate_limiter_unavailable',
      message: 'the rate limiter could not decide; try again shortly',
    }),
  };
}

/** The `401` response when `identify` found no verified identity. */
export function unidentifiedResponse(): HttpResponseSpec {
  return {
    status: 401,
    headers: { 'content-type': JSON_TYPE },
    body: JSON.stringify({ error: 'unauthenticated', message: 'no verified identity' }),
  };
}

/** Which rate-limit header sets a route sends (see {@link rateLimitHeaders}). */
export interface HeaderOptions {
  /**
   * The IETF `RateLimit-Policy` and `RateLimit` fields, in the syntax of
   * draft-ietf-httpapi-ratelimit-headers-08 (Structured Field items: a quoted policy name
   * with `q` quota units per `w` seconds; `r` remaining and `t` seconds to reset). Default
   * `true`.
   */
  readonly standard?: boolean;
  /**
   * The legacy `X-RateLimit-Limit`, `X-RateLimit-Remaining` and `X-RateLimit-Reset`
   * (`Reset` in delta seconds, never an epoch), which many clients still read. Default
   * `false`.
   */
  readonly legacy?: boolean;
}

/**
 * The rate-limit headers of a decision, for any policy: the quota is `decision.limit` per
 * `quotaWindowMs` (rounded up to seconds); `r` is `remaining`; `t` / `Reset` is the delta in
 * seconds until the scope is clean again — on a denial, the same instant as `Retry-After`.
 * Sent only with a real decision: a limiter failure never invents values.
 */
export function rateLimitHeaders(
  decision: Decision,
  policyName: string,
  quotaWindowMs: number,
  options: HeaderOptions = {},
): Record<string, string> {
  const headers: Record<string, string> = {};
  const resetSeconds =
    !decision.allowed && Number.isFinite(decision.retryAfterMs)
      ? retryAfterSeconds(decision.retryAfterMs)
      : Math.ceil(Math.max(decision.resetMs, 0) / 1000);
  if (options.standard ?? true) {
    const name = JSON.stringify(policyName.replace(/[^\x20-\x7e]|["\\]/g, '_'));
    headers['ratelimit-policy'] =
      `${name};q=${decision.limit};w=${Math.max(1, Math.ceil(quotaWindowMs / 1000))}`;
    headers.ratelimit = `${name};r=${decision.remaining};t=${resetSeconds}`;
  }
  if (options.legacy === true) {
    headers['x-ratelimit-limit'] = String(decision.limit);
    headers['x-ratelimit-remaining'] = String(decision.remaining);
    headers['x-ratelimit-reset'] = String(resetSeconds);
  }
  return headers;
}
