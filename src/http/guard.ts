/**
 * The framework-free guard of one route: skip? → verified identity → the route's limits
 * (one policy, stacked policies, or a plan chosen per tenant) → one `take` or one atomic
 * `takeAll` → outcome, with fail-closed / fail-open, shadow mode, outcome counts, events and
 * shaped refusals. Adapters only turn its verdict into their framework's response.
 */
import { InvalidInputError, isSluiceError } from '../errors.js';
import { observe, observerFailed } from '../observer.js';
import type { Decision, TakeAllItem } from '../types.js';
import {
  type HttpResponseSpec,
  limitedResponse,
  type QuotaReport,
  rateLimitHeaderList,
  retryAfterSeconds,
  unavailableResponse,
  unidentifiedResponse,
} from './core.js';
import { guardConfig } from './guard/options.js';
import type {
  Guard,
  GuardOptions,
  GuardVerdict,
  HttpOutcome,
  HttpOutcomeEvent,
  ResponseChange,
  ResponseHooks,
} from './guard/types.js';
import { limitNames, needsUser, type ResolvedLimit, resolveLimits, scopeOf } from './limits.js';

export { GUARD_OPTION_KEYS } from './guard/options.js';
export type {
  Guard,
  GuardOptions,
  GuardVerdict,
  HttpOutcome,
  HttpOutcomeEvent,
  LimitedResponseContext,
  ResponseChange,
  ResponseHooks,
  UnavailableResponseContext,
  UnidentifiedResponseContext,
} from './guard/types.js';

/**
 * Makes the guard of one route. Answers before any handler work: `429` when limited, `503`
 * when the limiter failed on a fail-closed route, `401` without an identity.
 *
 * @throws {InvalidInputError} for an unknown option, a missing limiter, route or identify,
 *   invalid fixed limits (see `resolveLimits`), per-user limits without `user`, a numeric
 *   `cost` that is not a positive safe integer, `"fail-open"` without a valid
 *   `failOpenLimit` / with an invalid `failOpenWindowMs`, a malformed `shadowHeader` or
 *   `wwwAuthenticate`, or a hook that is not a function. At request time, an invalid answer of
 *   a `policy`, `route` or `cost` function rejects the guard's promise with an
 *   `InvalidInputError` (the adapters pass it to the framework's error handling: `500`).
 */
export function createGuard<Req>(options: GuardOptions<Req>): Guard<Req> {
  const config = guardConfig(options);
  const { limiter, identify, onOutcome, skip, fixedLimits, fallback, shadow, shadowHeader } =
    config;
  const { route: routeOf, user: userOf, plan: policyOption, cost: costOf, challenge } = config;
  const { hooks, headers: headerOptions, metrics, requestId: requestIdOf } = config;
  // Fixed limits' names depend only on the route template (a fixed set): named once per
  // route, not on every request.
  const fixedNames = new Map<string, readonly string[]>();
  const namesOf = (limits: readonly ResolvedLimit[], route: string): readonly string[] => {
    if (limits !== fixedLimits) return limitNames(limits, route, 'policy');
    let names = fixedNames.get(route);
    if (names === undefined) {
      // Frozen: every request's event shares it.
      names = Object.freeze(limitNames(limits, route, 'policy'));
      if (fixedNames.size < 10_000) fixedNames.set(route, names);
    }
    return names;
  };
  const counts: Record<HttpOutcome, number> = {
    allowed: 0,
    limited: 0,
    'fail-closed': 0,
    'fail-open': 0,
    'fail-open-limited': 0,
    unidentified: 0,
    skipped: 0,
  };
  // Shared by every request: frozen, so one request's code cannot add a header to another's.
  const PASS: GuardVerdict = Object.freeze({ pass: true, headers: Object.freeze({}) });
  /** In shadow mode: let the request through, marked with the would-be decision. */
  const passInShadow = (wouldBe: 'allowed' | 'limited' | 'unavailable'): GuardVerdict =>
    shadowHeader === undefined ? PASS : { pass: true, headers: { [shadowHeader]: wouldBe } };
  const warn = observerFailed;
  const record = (event: HttpOutcomeEvent) => {
    counts[event.outcome]++;
    if (metrics !== undefined) {
      const request = { outcome: event.outcome, route: event.route, shadow };
      observe('metrics.request', () => metrics.request(request));
    }
    // A broken observer must not change the answer (the quota is already spent).
    if (onOutcome !== undefined) observe('onOutcome', () => onOutcome(event));
  };
  /** Applies a hook's change to a refusal; the status and `keep` headers stay the guard's. */
  const shape = <C extends { response: HttpResponseSpec }>(
    name: keyof ResponseHooks<Req>,
    context: C,
    keep: readonly string[],
  ): HttpResponseSpec => {
    const hook = hooks[name] as ((context: C) => ResponseChange | undefined) | undefined;
    const { response } = context;
    if (hook === undefined) return response;
    let change: ResponseChange | undefined;
    try {
      change = hook(context);
    } catch (error) {
      warn(`responses.${name}`, error);
      return response;
    }
    if (change === undefined || change === null) return response;
    const problem = invalidChange(change);
    if (problem !== undefined) {
      warn(`responses.${name}`, new Error(`${problem}; the guard's own response was sent`));
      return response;
    }
    const headers: Record<string, string> = { ...response.headers };
    for (const [header, value] of Object.entries(change.headers ?? {})) {
      const lower = header.toLowerCase();
      if (!keep.includes(lower)) headers[lower] = value;
    }
    return {
      status: response.status,
      headers,
      body: typeof change.body === 'string' ? change.body : response.body,
    };
  };
  const unidentified = (req: Req, route: string, policies: readonly string[]): GuardVerdict => {
    record({ outcome: 'unidentified', route, policy: policies[0] ?? '', policies });
    const response = shape(
      'unidentified',
      { req, route, response: unidentifiedResponse(challenge) },
      [],
    );
    return { pass: false, response };
  };

  const guard = async (req: Req): Promise<GuardVerdict> => {
    if (skip !== undefined && (await skip(req)) === true) {
      let route = '';
      try {
        route = routeText(req);
      } catch {
        // A skipped request needs no route; an unknowable one is left out of its event.
      }
      record({ outcome: 'skipped', route, policy: '', policies: [] });
      return PASS;
    }
    const route = routeText(req);
    const tenant = identity(await identify(req), 'identify');
    if (tenant === undefined) {
      // Fixed limits are named without a tenant; a plan is not known before one.
      const known = fixedLimits && namesOf(fixedLimits, route);
      return unidentified(req, route, known ?? []);
    }
    const limits =
      fixedLimits ??
      resolveLimits(
        await (policyOption as (req: Req, tenant: string) => unknown)(req, tenant),
        'policy (the answer of the policy function)',
      );
    const names = namesOf(limits, route);
    let user: string | undefined;
    if (needsUser(limits)) {
      if (userOf === undefined) {
        throw new InvalidInputError(
          'user',
          'a function of the request, for limits with per "user" or "route-user"',
          undefined,
        );
      }
      user = identity(await userOf(req), 'user');
      if (user === undefined) return unidentified(req, route, names);
    }
    const cost = typeof costOf === 'function' ? costOf(req) : costOf;
    // An id the client may have written (a request header): one that does not fit is left
    // out of the events, never a reason to fail the request.
    const requestId = fittingRequestId(requestIdOf?.(req));
    let decisions: readonly Decision[];
    let cached = false;
    try {
      if (limits.length === 1) {
        const only = limits[0] as ResolvedLimit;
        decisions = [
          await limiter.take(
            scopeOf(only.per, tenant, route, user),
            only.policy,
            requestId === undefined ? { cost } : { cost, requestId },
          ),
        ];
      } else {
        const items: TakeAllItem[] = limits.map((limit) => ({
          scope: scopeOf(limit.per, tenant, route, user),
          policy: limit.policy,
          cost,
        }));
        const result = await limiter.takeAll(
          items,
          requestId === undefined ? undefined : { requestId },
        );
        decisions = result.decisions;
        cached = result.cached;
      }
    } catch (error) {
      // Bad input is a programming error, not an outage: never mask it as fail-open.
      if (isSluiceError(error, 'SLUICE_INVALID_INPUT')) throw error;
      const failure = { route, policy: names[0] ?? '', policies: names, error, shadow };
      if (fallback?.take(`${tenant}\u0000${route}`, cost)) {
        record({ outcome: 'fail-open', ...failure });
        return shadow ? passInShadow('unavailable') : PASS;
      }
      record({ outcome: fallback ? 'fail-open-limited' : 'fail-closed', ...failure });
      if (shadow) return passInShadow('unavailable');
      const response = shape(
        'unavailable',
        { req, route, error, response: unavailableResponse() },
        ['retry-after'],
      );
      return { pass: false, response };
    }
    const allowed = decisions.every((decision) => decision.allowed);
    // The binding policy: on a refusal the one with the longest wait, else the first.
    let bound = 0;
    if (!allowed) {
      for (let i = 1; i < decisions.length; i++) {
        if ((decisions[i] as Decision).retryAfterMs > (decisions[bound] as Decision).retryAfterMs)
          bound = i;
      }
    }
    const outcome = {
      route,
      policy: names[bound] as string,
      policies: names,
      decision: decisions[bound] as Decision,
      decisions,
      shadow,
    };
    if (allowed) {
      record({ outcome: 'allowed', ...outcome });
      if (shadow) return passInShadow('allowed');
      if (headerOptions === false) return PASS;
      return { pass: true, headers: headersOf(limits, names, decisions, cached) };
    }
    record({ outcome: 'limited', ...outcome });
    if (shadow) return passInShadow('limited');
    // A refusal's violators: every policy that must wait (a refused takeAll reports the
    // policies that would have fitted with no wait).
    const violated = names.filter((_, i) => (decisions[i] as Decision).retryAfterMs > 0);
    const binding = decisions[bound] as Decision;
    const own = limitedResponse(binding, violated);
    const rateLimit = headerOptions === false ? {} : headersOf(limits, names, decisions, cached);
    const response = shape(
      'limited',
      {
        req,
        route,
        retryAfterSeconds: Number.isFinite(binding.retryAfterMs)
          ? retryAfterSeconds(binding.retryAfterMs)
          : undefined,
        violatedPolicies: violated,
        decisions,
        response: { ...own, headers: { ...own.headers, ...rateLimit } },
      },
      ['retry-after', ...Object.keys(rateLimit)],
    );
    return { pass: false, response };
  };

  /** The route template of a request, checked: a function's answer may be anything. */
  function routeText(req: Req): string {
    const route = typeof routeOf === 'function' ? routeOf(req) : routeOf;
    if (typeof route !== 'string' || route.length === 0) {
      throw new InvalidInputError('route', 'a non-empty route template from options.route', route);
    }
    return route;
  }

  /** The RateLimit fields: every policy advertised; a decision only where one was made. */
  function headersOf(
    limits: readonly ResolvedLimit[],
    names: readonly string[],
    decisions: readonly Decision[],
    cached: boolean,
  ): Record<string, string> {
    if (headerOptions === false) return {};
    const reports: QuotaReport[] = limits.map((limit, i) => {
      const decision = decisions[i] as Decision;
      return {
        name: names[i] as string,
        limit: limit.policy.limit,
        quotaWindowMs: limit.policy.quotaWindowMs,
        // A cached refusal evaluated only the policies it held (those that must wait).
        ...(cached && decision.retryAfterMs === 0 ? {} : { decision }),
      };
    });
    return rateLimitHeaderList(reports, headerOptions);
  }

  return Object.assign(guard, { counts });
}

/**
 * An `identify` / `user` answer: a non-empty string, or `undefined` (also `null` or `""`)
 * for "none" (answered `401`). Anything else is a programming error — a numeric id, an
 * object — never a silent `401`.
 */
function identity(value: unknown, field: 'identify' | 'user'): string | undefined {
  if (typeof value === 'string') return value.length > 0 ? value : undefined;
  if (value === undefined || value === null) return undefined;
  throw new InvalidInputError(
    `${field} (its answer)`,
    'a string id, or undefined when there is none (turn numeric ids into strings)',
    value,
  );
}

/** A header field name (RFC 9110 §5.1: a token). */
const HEADER_NAME = /^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$/;
/** A header field value without control characters (no CR/LF: no injection). */
const HEADER_TEXT = /^[\t\x20-\x7e\x80-\xff]*$/;

/** Why a hook's answer cannot be used, or undefined when it can. */
function invalidChange(change: unknown): string | undefined {
  if (typeof change !== 'object') return `it returned ${typeof change}, not { body, headers }`;
  if (typeof (change as { then?: unknown }).then === 'function') {
    return 'it returned a promise: hooks are synchronous';
  }
  const { body, headers } = change as { body?: unknown; headers?: unknown };
  if (body !== undefined && typeof body !== 'string') return 'its body is not a string';
  if (headers === undefined) return undefined;
  if (typeof headers !== 'object' || headers === null) return 'its headers are not an object';
  for (const [name, value] of Object.entries(headers)) {
    if (!HEADER_NAME.test(name)) return `header name ${JSON.stringify(name)} is not a token`;
    if (typeof value !== 'string' || !HEADER_TEXT.test(value)) {
      return `header ${name} has a value that is not printable text`;
    }
  }
  return undefined;
}

/** A request id the limiter takes (1–256 characters, cut to 256), else undefined. */
function fittingRequestId(id: unknown): string | undefined {
  if (typeof id !== 'string' || id.length === 0) return undefined;
  return id.length > 256 ? id.slice(0, 256) : id;
}
