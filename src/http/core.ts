/**
 * Framework-free HTTP mapping: a decision or a limiter failure → `{ status, headers, body }`.
 * Adapters only apply what these functions return.
 *
 * - Denied: `429 Too Many Requests` with `Retry-After` in whole seconds (RFC 9110 §10.2.3),
 *   rounded *up* so a client that waits exactly that long is not refused again, and never
 *   below 1. A cost that can never fit gets `429` without `Retry-After` (no wait helps).
 * - Limiter failure in fail-closed mode: `503 Service Unavailable` with `Retry-After: 1`,
 *   never a fake `429`: the client has not used up its quota.
 * - No verified identity: `401 Unauthorized` with a `WWW-Authenticate` challenge.
 *
 * Bodies are RFC 9457 problem details (`application/problem+json`); a `429` uses the
 * `quota-exceeded` problem type and a fail-closed `503` the `temporary-reduced-capacity` one
 * of draft-ietf-httpapi-ratelimit-headers-10 (§5.1, §5.2).
 */
import { refused } from '../refused.js';
import type { Decision, Policy } from '../types.js';
import { resetParameterSeconds } from './quota-reset.js';

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
 * (1 → 1, 1000 → 1, 1001 → 2). Non-finite or non-positive input gives 1: `Infinity` (a cost
 * above what the policy can ever admit) gives 1 too, so check `Number.isFinite` first and send
 * no `Retry-After` for it, as the guard does (no wait helps).
 */
export function retryAfterSeconds(delayMs: number): number {
  if (!Number.isFinite(delayMs) || delayMs <= 0) return 1;
  return Math.max(1, Math.ceil(delayMs / 1000));
}

/** RFC 9457 problem details: the media type of every refusal body. */
const PROBLEM_TYPE = 'application/problem+json';

/**
 * The problem type of draft-ietf-httpapi-ratelimit-headers (§ "Problem Types") for a request
 * refused because it exceeds one or more quota policies; its extension member
 * `violated-policies` lists their names.
 */
export const QUOTA_EXCEEDED_TYPE = 'https://iana.org/assignments/http-problem-types#quota-exceeded';

/**
 * The problem type of draft-ietf-httpapi-ratelimit-headers-10 §5.2 for a request that cannot
 * be satisfied now because of a temporary reduction in the server's capacity: the `503` of a
 * limiter failure on a fail-closed route (or past a fail-open route's local limit). Its
 * `violated-policies` member is empty: no quota was exceeded, the limiter could not decide.
 */
export const TEMPORARY_REDUCED_CAPACITY_TYPE =
  'https://iana.org/assignments/http-problem-types#temporary-reduced-capacity';

/**
 * The problem type of draft-ietf-httpapi-ratelimit-headers (§ "Problem Types") for a request
 * refused because the client's usage was judged abnormal: sluice answers it for a blocked
 * scope (a policy with `blockMs`, refused less than a block ago). `violated-policies` names
 * the policies, as for `quota-exceeded`.
 */
export const ABNORMAL_USAGE_DETECTED_TYPE =
  'https://iana.org/assignments/http-problem-types#abnormal-usage-detected';

/**
 * An RFC 9457 problem details body, as JSON text. `type` defaults to `"about:blank"` (the
 * status code says it all, RFC 9457 §4.2.1). `error` is sluice's stable machine code for
 * the same outcome, kept for clients that read it.
 */
function problem(fields: {
  type?: string;
  title: string;
  status: number;
  detail: string;
  error: string;
  [extension: string]: unknown;
}): string {
  return JSON.stringify({ type: 'about:blank', ...fields });
}

/**
 * The `429` response for a denial: `Retry-After` and an RFC 9457 body of the draft's
 * `quota-exceeded` type naming the violated policies (`abnormal-usage-detected` when the
 * binding denial is a block, `error: "blocked"`). A cost that can never fit gets no
 * `Retry-After` (no wait helps) and `error: "cost_exceeds_limit"`.
 *
 * @param decision The binding denial (for several limits, the one with the longest wait).
 * @param violatedPolicies The names of the policies that refused (`violated-policies`).
 */
export function limitedResponse(
  decision: Decision,
  violatedPolicies: readonly string[] = [],
): HttpResponseSpec {
  const violated = { 'violated-policies': violatedPolicies };
  if (!Number.isFinite(decision.retryAfterMs)) {
    return {
      status: 429,
      headers: { 'content-type': PROBLEM_TYPE },
      body: problem({
        type: QUOTA_EXCEEDED_TYPE,
        title: 'Request cannot be satisfied as assigned quota has been exceeded',
        status: 429,
        detail: 'this request costs more than the rate limit can ever admit',
        error: 'cost_exceeds_limit',
        limit: decision.limit,
        ...violated,
      }),
    };
  }
  const seconds = retryAfterSeconds(decision.retryAfterMs);
  if (decision.blocked === true) {
    return {
      status: 429,
      headers: { 'content-type': PROBLEM_TYPE, 'retry-after': String(seconds) },
      body: problem({
        type: ABNORMAL_USAGE_DETECTED_TYPE,
        title: 'Request not satisfied due to detection of abnormal request pattern',
        status: 429,
        detail: `blocked after repeated refusals; retry in ${seconds} s`,
        error: 'blocked',
        retryAfterSeconds: seconds,
        ...violated,
      }),
    };
  }
  return {
    status: 429,
    headers: { 'content-type': PROBLEM_TYPE, 'retry-after': String(seconds) },
    body: problem({
      type: QUOTA_EXCEEDED_TYPE,
      title: 'Request cannot be satisfied as assigned quota has been exceeded',
      status: 429,
      detail: `rate limit exceeded; retry in ${seconds} s`,
      error: 'rate_limited',
      retryAfterSeconds: seconds,
      ...violated,
    }),
  };
}

/**
 * The `503` response for a limiter failure on a fail-closed route (never a `429`):
 * `Retry-After: 1` and an RFC 9457 body of the draft's `temporary-reduced-capacity` type
 * ({@link TEMPORARY_REDUCED_CAPACITY_TYPE}), with an empty `violated-policies`.
 */
export function unavailableResponse(): HttpResponseSpec {
  return {
    status: 503,
    headers: { 'content-type': PROBLEM_TYPE, 'retry-after': '1' },
    body: problem({
      type: TEMPORARY_REDUCED_CAPACITY_TYPE,
      title: 'Request cannot be satisfied due to temporary server capacity constraints',
      status: 503,
      detail: 'the rate limiter could not decide; try again shortly',
      error: 'rate_limiter_unavailable',
      'violated-policies': [],
    }),
  };
}

/**
 * The `401` response when `identify` found no verified identity, with the
 * `WWW-Authenticate` challenge that RFC 9110 §15.5.2 requires on every `401`.
 *
 * @param challenge The challenge, e.g. `"Bearer"` (RFC 6750) or `'Basic realm="api"'`.
 *   Default `"Bearer"`.
 */
export function unidentifiedResponse(challenge = 'Bearer'): HttpResponseSpec {
  return {
    status: 401,
    headers: { 'content-type': PROBLEM_TYPE, 'www-authenticate': challenge },
    body: problem({
      title: 'Unauthorized',
      status: 401,
      detail: 'no verified identity',
      error: 'unauthenticated',
    }),
  };
}

/**
 * The `409` of a repeated retry id (the guard's `retryId`) whose first admission already
 * went to a handler: the request is not run again (RFC 9110 §15.5.10).
 */
export function duplicateResponse(): HttpResponseSpec {
  return {
    status: 409,
    headers: { 'content-type': PROBLEM_TYPE },
    body: problem({
      title: 'Conflict',
      status: 409,
      detail: 'a request with this idempotency key was already admitted and handed to the server',
      error: 'duplicate-request',
    }),
  };
}

/** Which rate-limit header sets a route sends (see {@link rateLimitHeaders}). */
export interface HeaderOptions {
  /**
   * The IETF `RateLimit-Policy` and `RateLimit` fields, in the syntax of
   * draft-ietf-httpapi-ratelimit-headers-08 to -10 (Structured Field items: a quoted policy
   * name with `q` quota units per `w` seconds; `r` remaining and `t` seconds until additional
   * quota is made available, §4.1.2). Default `true`.
   */
  readonly standard?: boolean;
  /**
   * The legacy `X-RateLimit-Limit`, `X-RateLimit-Remaining` and `X-RateLimit-Reset`
   * (`Reset` in delta seconds, never an epoch), which many clients still read. Default
   * `false`.
   */
  readonly legacy?: boolean;
}

/** One policy's part of the rate-limit headers (see {@link rateLimitHeaderList}). */
export interface QuotaReport {
  /** The policy's name in the headers (a Structured Field string). */
  readonly name: string;
  /** The quota `q`: units per `quotaWindowMs`. */
  readonly limit: number;
  /** The time over which `limit` is allotted, in ms (`w`, rounded up to seconds). */
  readonly quotaWindowMs: number;
  /**
   * The decision for this policy; absent when it was not evaluated (a refusal from the
   * local denial cache): the policy is then advertised in `RateLimit-Policy` only.
   */
  readonly decision?: Decision;
  /**
   * The policy itself, so that `t` is the time to its next unit (a token bucket or GCRA
   * frees quota a unit at a time); without it, `t` is the time to a clean state, an upper
   * bound. See `resetParameterSeconds`.
   */
  readonly policy?: Policy;
}

/** The largest Structured Field integer (RFC 8941 §3.3.1: at most 15 digits). */
const MAX_SF_INTEGER = 999_999_999_999_999;

/** An integer as a Structured Field integer: never above 15 digits, never negative. */
const sfInteger = (value: number): number =>
  Math.min(MAX_SF_INTEGER, Math.max(0, Math.floor(value)));

/** A name as a Structured Field string, with characters it cannot hold replaced by `_`. */
const sfString = (name: string): string => JSON.stringify(name.replace(/[^\x20-\x7e]|["\\]/g, '_'));

/**
 * Delta seconds to a clean state: on a denial the `Retry-After` instant; else (or when no
 * wait helps) when the scope is back to its full quota.
 */
function resetSecondsOf(decision: Decision): number {
  return refused(decision) && Number.isFinite(decision.retryAfterMs)
    ? retryAfterSeconds(decision.retryAfterMs)
    : Math.ceil(Math.max(decision.resetMs, 0) / 1000);
}

/**
 * The rate-limit headers of one or more policies, in the List syntax of
 * draft-ietf-httpapi-ratelimit-headers-08 and later: every policy in `RateLimit-Policy`
 * (`"name";q=…;w=…, "other";q=…;w=…`) and each decided one in `RateLimit`
 * (`"name";r=…;t=…, …`) — `q` the quota, `w` its window in seconds, `r` the units left,
 * `t` the seconds until additional quota is made available (draft-ietf-httpapi-ratelimit-
 * headers-10 §4.1.2; see `resetParameterSeconds`: for a token bucket or GCRA the next unit,
 * for a fixed window its end, for a sliding window an upper bound; on a denial never later
 * than `Retry-After`, §6). A quota
 * window that is not a whole number of seconds is advertised at its rate over `w` (rounded
 * up): `q` = ⌊limit × w × 1000 / windowMs⌋. Every value is a valid Structured Field item:
 * names are quoted strings, integers have at most 15 digits (policy builders refuse limits
 * above that; only a sub-second window's scaled `q` of such a limit could reach the cap).
 *
 * The legacy `X-RateLimit-*` fields hold one policy: the most restrictive decided one (the
 * longest wait when refused, else the fewest units left); their `Reset` keeps its usual
 * meaning, the delta seconds to a clean state (on a denial, the `Retry-After` instant).
 */
export function rateLimitHeaderList(
  reports: readonly QuotaReport[],
  options: HeaderOptions = {},
): Record<string, string> {
  const headers: Record<string, string> = {};
  if (options.standard ?? true) {
    const policies: string[] = [];
    const states: string[] = [];
    for (const report of reports) {
      const name = sfString(report.name);
      const w = Math.max(1, Math.ceil(report.quotaWindowMs / 1000));
      // `w` is whole seconds: a window that is not is advertised at its rate over `w`
      // (3 per 100 ms → q=30;w=1; 3 per 1500 ms → q=4;w=2), never as 3 per second.
      const q =
        report.quotaWindowMs === w * 1000
          ? report.limit
          : Math.floor((report.limit * w * 1000) / report.quotaWindowMs);
      // A concurrency limit has no window: its quota unit is the request in flight (the
      // draft's `qu="concurrent-requests"`).
      policies.push(
        report.policy?.algorithm === 'concurrency'
          ? `${name};q=${sfInteger(report.limit)};qu="concurrent-requests"`
          : `${name};q=${sfInteger(q)};w=${sfInteger(w)}`,
      );
      if (report.decision !== undefined) {
        const { remaining } = report.decision;
        const t = resetParameterSeconds(report.decision, report.policy);
        states.push(`${name};r=${sfInteger(remaining)};t=${sfInteger(t)}`);
      }
    }
    if (policies.length > 0) headers['ratelimit-policy'] = policies.join(', ');
    if (states.length > 0) headers.ratelimit = states.join(', ');
  }
  if (options.legacy === true) {
    const binding = mostRestrictive(reports);
    if (binding?.decision !== undefined) {
      headers['x-ratelimit-limit'] = String(sfInteger(binding.limit));
      headers['x-ratelimit-remaining'] = String(sfInteger(binding.decision.remaining));
      headers['x-ratelimit-reset'] = String(sfInteger(resetSecondsOf(binding.decision)));
    }
  }
  return headers;
}

/** The decided report that binds hardest: the longest wait, else the fewest units left. */
function mostRestrictive(reports: readonly QuotaReport[]): QuotaReport | undefined {
  let best: QuotaReport | undefined;
  for (const report of reports) {
    const d = report.decision;
    if (d === undefined) continue;
    const b = best?.decision;
    if (
      b === undefined ||
      d.retryAfterMs > b.retryAfterMs ||
      (d.retryAfterMs === b.retryAfterMs && d.remaining < b.remaining)
    ) {
      best = report;
    }
  }
  return best;
}

/**
 * The rate-limit headers of one decision (see {@link rateLimitHeaderList}): the quota is
 * `decision.limit` per `quotaWindowMs`. Without the policy, `t` is the time to a clean
 * state, an upper bound: give `rateLimitHeaderList` the `policy` for a token bucket's or
 * GCRA's next unit. Sent only with a real decision: a limiter failure
 * never invents values.
 */
export function rateLimitHeaders(
  decision: Decision,
  policyName: string,
  quotaWindowMs: number,
  options: HeaderOptions = {},
): Record<string, string> {
  return rateLimitHeaderList(
    [{ name: policyName, limit: decision.limit, quotaWindowMs, decision }],
    options,
  );
}
