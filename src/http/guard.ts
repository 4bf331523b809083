/**
 * The framework-free guard of one route: verified identity → `take` → outcome, with
 * fail-closed / fail-open, shadow mode, outcome counts and events. Adapters (`node.ts`,
 * `fetch.ts`) only turn its verdict into their framework's response.
 */
import { isPolicy, MAX_WINDOW_MS, type Policy } from '../algorithms/policy.js';
import { InvalidInputError, isSluiceError } from '../errors.js';
import type { RateLimiter } from '../limiter.js';
import type { Decision } from '../types.js';
import { optionalPositiveInteger, positiveSafeInteger } from '../validate.js';
import {
  type FailureMode,
  type HeaderOptions,
  type HttpResponseSpec,
  limitedResponse,
  rateLimitHeaders,
  unavailableResponse,
  unidentifiedResponse,
} from './core.js';
import { LocalWindow } from './local-window.js';

/** What happened to one request at the limiter; every outcome is counted. */
export type HttpOutcome =
  /** Admitted by the shared limit. */
  | 'allowed'
  /** Denied by the shared limit: 429. */
  | 'limited'
  /** Limiter failed, route is fail-closed: 503. */
  | 'fail-closed'
  /** Limiter failed, route is fail-open, admitted by the local fallback limit. */
  | 'fail-open'
  /** Limiter failed, route is fail-open, and the local fallback limit was reached: 503. */
  | 'fail-open-limited'
  /** `identify` found no verified identity: 401. */
  | 'unidentified';

/** One outcome, for logs and metrics. Carries no tenant id: log it only where allowed. */
export interface HttpOutcomeEvent {
  readonly outcome: HttpOutcome;
  readonly route: string;
  /** The policy's name (see `Policy.name`). */
  readonly policy: string;
  /** The decision, for `allowed` and `limited`. */
  readonly decision?: Decision;
  /** The limiter's error, for the failure outcomes. */
  readonly error?: unknown;
  /** True on a shadow (record-only) route: the request went through whatever the outcome. */
  readonly shadow?: boolean;
}

/** Options of a route's guard, for a framework's request type `Req`. */
export interface GuardOptions<Req> {
  readonly limiter: RateLimiter;
  /** The server-side policy of this route (S3). */
  readonly policy: Policy;
  /**
   * The route template that names the quota, e.g. `"POST/orders"` — never the raw URL
   * (S1): a string, or a function of the request that returns the framework's route
   * template (as the Express adapter does with `req.route.path`).
   */
  readonly route: string | ((req: Req) => string);
  /**
   * The verified tenant of the request, from the authenticated session (S2), or
   * `undefined` when there is none (answered `401`). Never a header or field the client
   * writes. May be async.
   */
  readonly identify: (req: Req) => string | undefined | Promise<string | undefined>;
  /** Units this request costs: a number or a function of the request. Default 1. */
  readonly cost?: number | ((req: Req) => number);
  /**
   * When the limiter fails: `"fail-closed"` (default) answers `503` + `Retry-After: 1`;
   * `"fail-open"` admits within `failOpenLimit`.
   */
  readonly failureMode?: FailureMode;
  /**
   * Required with `"fail-open"`: units per tenant per policy window that this replica
   * admits on its own while the limiter fails (a positive safe integer). Over it: `503`.
   */
  readonly failOpenLimit?: number;
  /**
   * Window of the local fallback in ms: an integer from 1 to 315,360,000,000. Default: the
   * policy's `windowMs`, else 1000.
   */
  readonly failOpenWindowMs?: number;
  /**
   * Called once per request with its outcome. An error it throws is reported as a process
   * warning and never changes the response.
   */
  readonly onOutcome?: (event: HttpOutcomeEvent) => void;
  /**
   * Shadow (record-only) mode (S24): decide, count and report every outcome as usual, but
   * never block — the handler runs even when the request would have been limited or the
   * limiter failed. For trying a policy on live traffic before enforcing it; roll out by
   * turning this off. A request without a verified identity is still answered `401`.
   * Default `false`.
   */
  readonly shadow?: boolean;
  /**
   * With `shadow`, the name of a response header that carries the decision the route would
   * have taken: `allowed`, `limited` or `unavailable` (e.g. `"x-ratelimit-shadow"`). Unset:
   * no header.
   */
  readonly shadowHeader?: string;
  /**
   * Rate-limit headers on decided responses (admitted and `429`): `HeaderOptions`, or
   * `false` for none. Default: the IETF `RateLimit-Policy` / `RateLimit` fields. Never sent
   * when the limiter failed (no invented values) nor in shadow mode.
   */
  readonly headers?: HeaderOptions | false;
}

/** What the guard decided for one request. */
export type GuardVerdict =
  /** Run the handler; add `headers` to its response (the shadow header, when set). */
  | { readonly pass: true; readonly headers: Readonly<Record<string, string>> }
  /** Answer `response` now; the handler must not run. */
  | { readonly pass: false; readonly response: HttpResponseSpec };

/** A route's guard: `(req) => Promise<GuardVerdict>`, with its outcome counts. */
export type Guard<Req> = ((req: Req) => Promise<GuardVerdict>) & {
  /** Counts of outcomes since the guard was made. */
  readonly counts: Readonly<Record<HttpOutcome, number>>;
};

/**
 * Makes the guard of one route. Answers before any handler work: `429` when limited, `503`
 * when the limiter failed on a fail-closed route, `401` without an identity.
 *
 * @throws {InvalidInputError} for a missing limiter, policy, route or identify, a numeric
 *   `cost` that is not a positive safe integer, `"fail-open"` without a valid
 *   `failOpenLimit` / with an invalid `failOpenWindowMs`, or a malformed `shadowHeader`.
 */
export function createGuard<Req>(options: GuardOptions<Req>): Guard<Req> {
  const { limiter, policy, identify, onOutcome } = options;
  const routeOf = options.route;
  if (typeof limiter?.take !== 'function') {
    throw new InvalidInputError('limiter', 'a RateLimiter', limiter);
  }
  if (typeof routeOf !== 'function' && (typeof routeOf !== 'string' || routeOf.length === 0)) {
    throw new InvalidInputError(
      'route',
      'a non-empty route template such as "POST/orders", or a function of the request',
      routeOf,
    );
  }
  if (typeof identify !== 'function') {
    throw new InvalidInputError('identify', 'a function', identify);
  }
  if (!isPolicy(policy)) {
    throw new InvalidInputError('policy', 'a policy from a builder such as fixedWindow()', policy);
  }
  const costOf = options.cost ?? 1;
  if (typeof costOf !== 'function') positiveSafeInteger('cost', costOf);
  const failureMode = options.failureMode ?? 'fail-closed';
  if (failureMode !== 'fail-closed' && failureMode !== 'fail-open') {
    throw new InvalidInputError('failureMode', '"fail-closed" or "fail-open"', failureMode);
  }
  let fallback: LocalWindow | undefined;
  if (failureMode === 'fail-open') {
    const limit = options.failOpenLimit;
    if (typeof limit !== 'number' || !Number.isSafeInteger(limit) || limit < 1) {
      throw new InvalidInputError(
        'failOpenLimit',
        'a positive safe integer with "fail-open"',
        limit,
      );
    }
    const windowMs = optionalPositiveInteger(
      'failOpenWindowMs',
      options.failOpenWindowMs,
      (policy as { windowMs?: number }).windowMs ?? 1000,
      MAX_WINDOW_MS,
    );
    fallback = new LocalWindow(limit, windowMs);
  }
  const counts: Record<HttpOutcome, number> = {
    allowed: 0,
    limited: 0,
    'fail-closed': 0,
    'fail-open': 0,
    'fail-open-limited': 0,
    unidentified: 0,
  };
  const shadow = options.shadow === true;
  const shadowHeader = options.shadowHeader;
  if (
    shadowHeader !== undefined &&
    (typeof shadowHeader !== 'string' || !/^[A-Za-z0-9-]{1,64}$/.test(shadowHeader))
  ) {
    throw new InvalidInputError(
      'shadowHeader',
      'a header name of 1–64 letters, digits or hyphens',
      shadowHeader,
    );
  }
  // Shared by every request: frozen, so one request's code cannot add a header to another's.
  const PASS: GuardVerdict = Object.freeze({ pass: true, headers: Object.freeze({}) });
  const headerOptions = options.headers ?? {};
  // The quota's name in the headers: the policy's own name when it was given one, else the
  // route template (a derived name describes parameters, not the quota).
  const headersOf = (decision: Decision, route: string): Record<string, string> =>
    headerOptions === false
      ? {}
      : rateLimitHeaders(
          decision,
          policy.named ? policy.name : route,
          policy.quotaWindowMs,
          headerOptions,
        );
  const withHeaders = (decision: Decision, route: string): GuardVerdict =>
    headerOptions === false ? PASS : { pass: true, headers: headersOf(decision, route) };
  /** In shadow mode: let the request through, marked with the would-be decision. */
  const passInShadow = (wouldBe: 'allowed' | 'limited' | 'unavailable'): GuardVerdict =>
    shadowHeader === undefined ? PASS : { pass: true, headers: { [shadowHeader]: wouldBe } };
  const record = (event: Omit<HttpOutcomeEvent, 'policy'>) => {
    counts[event.outcome]++;
    if (onOutcome === undefined) return;
    try {
      onOutcome({ ...event, policy: policy.name });
    } catch (error) {
      // A broken observer must not change the answer (the quota is already spent).
      process.emitWarning(`sluice onOutcome threw: ${String(error)}`, {
        code: 'SLUICE_OBSERVER_ERROR',
      });
    }
  };

  const guard = async (req: Req): Promise<GuardVerdict> => {
    const route = typeof routeOf === 'function' ? routeOf(req) : routeOf;
    const tenant = await identify(req);
    if (typeof tenant !== 'string' || tenant.length === 0) {
      record({ outcome: 'unidentified', route });
      return { pass: false, response: unidentifiedResponse() };
    }
    const cost = typeof costOf === 'function' ? costOf(req) : costOf;
    let decision: Decision;
    try {
      decision = await limiter.take({ tenant, route }, policy, { cost });
    } catch (error) {
      // Bad input is a programming error, not an outage: never mask it as fail-open.
      if (isSluiceError(error, 'SLUICE_INVALID_INPUT')) throw error;
      if (fallback?.take(`${tenant}\u0000${route}`, cost)) {
        record({ outcome: 'fail-open', route, error, shadow });
        return shadow ? passInShadow('unavailable') : PASS;
      }
      record({ outcome: fallback ? 'fail-open-limited' : 'fail-closed', route, error, shadow });
      return shadow
        ? passInShadow('unavailable')
        : { pass: false, response: unavailableResponse() };
    }
    if (decision.allowed) {
      record({ outcome: 'allowed', route, decision, shadow });
      return shadow ? passInShadow('allowed') : withHeaders(decision, route);
    }
    record({ outcome: 'limited', route, decision, shadow });
    if (shadow) return passInShadow('limited');
    const response = limitedResponse(decision);
    return {
      pass: false,
      response: { ...response, headers: { ...response.headers, ...headersOf(decision, route) } },
    };
  };
  return Object.assign(guard, { counts });
}
