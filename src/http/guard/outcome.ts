/**
 * The end of a request's steps: its outcome (allowed, limited, fail-open, fail-open-limited,
 * fail-closed, unidentified, skipped), recorded once — on the guard's counts, the metrics
 * sink and `onOutcome` — and the verdict that goes with it: pass (with RateLimit fields, or
 * the shadow header), or a refusal.
 */
import { observe } from '../../observer.js';
import { refused } from '../../refused.js';
import type { Decision } from '../../types.js';
import {
  duplicateResponse,
  type HeaderOptions,
  type QuotaReport,
  rateLimitHeaderList,
} from '../core.js';
import type { ResolvedLimit } from '../limits.js';
import type { GuardConfig } from './options.js';
import { limitedRefusal, unavailableRefusal, unidentifiedRefusal } from './refusals.js';
import type { GuardVerdict, HttpOutcome, HttpOutcomeEvent } from './types.js';

/** Outcome counts of one guard, since it was made. */
export type OutcomeCounts = Record<HttpOutcome, number>;

/** Zero counts, for a new guard. */
export const noCounts = (): OutcomeCounts => ({
  allowed: 0,
  limited: 0,
  'fail-closed': 0,
  'fail-open': 0,
  'fail-open-limited': 0,
  unidentified: 0,
  skipped: 0,
  duplicate: 0,
});

/**
 * The verdict of every plain pass. Shared by every request of every guard: frozen, so one
 * request's code cannot add a header to another's.
 */
export const PASS: GuardVerdict = Object.freeze({ pass: true, headers: Object.freeze({}) });

/** In shadow mode: let the request through, marked with the would-be decision. */
const passInShadow = (
  shadowHeader: string | undefined,
  wouldBe: 'allowed' | 'limited' | 'unavailable',
): GuardVerdict =>
  shadowHeader === undefined ? PASS : { pass: true, headers: { [shadowHeader]: wouldBe } };

/** Counts an outcome and reports it to the metrics sink and `onOutcome`. */
export function record<Req>(
  config: GuardConfig<Req>,
  counts: OutcomeCounts,
  event: HttpOutcomeEvent,
): void {
  counts[event.outcome]++;
  const { metrics, onOutcome } = config;
  if (metrics !== undefined) {
    const request = { outcome: event.outcome, route: event.route, shadow: config.shadow };
    observe('metrics.request', () => metrics.request(request));
  }
  // A broken observer must not change the answer (the quota is already spent).
  if (onOutcome !== undefined) observe('onOutcome', () => onOutcome(event));
}

/**
 * A repeat of a retry id whose first admission already went to a handler (`retryId`): `409`,
 * the handler must not run again (see `serve-claim.ts`).
 */
export function duplicate<Req>(
  config: GuardConfig<Req>,
  counts: OutcomeCounts,
  route: string,
  policies: readonly string[],
): GuardVerdict {
  record(config, counts, { outcome: 'duplicate', route, policy: policies[0] ?? '', policies });
  return { pass: false, response: duplicateResponse() };
}

/** A request without a verified tenant or user: `401`, also in shadow mode. */
export function unidentified<Req>(
  config: GuardConfig<Req>,
  counts: OutcomeCounts,
  req: Req,
  route: string,
  policies: readonly string[],
): GuardVerdict {
  record(config, counts, { outcome: 'unidentified', route, policy: policies[0] ?? '', policies });
  const response = unidentifiedRefusal(config.hooks, req, route, config.challenge);
  return { pass: false, response };
}

/**
 * The limiter failed (an outage, never bad input): admitted by the local fallback limit on a
 * fail-open route while it has room, else `503`; in shadow mode, passed either way.
 */
export function failed<Req>(
  config: GuardConfig<Req>,
  counts: OutcomeCounts,
  req: Req,
  route: string,
  names: readonly string[],
  tenant: string,
  cost: number,
  error: unknown,
): GuardVerdict {
  const { fallback, shadow } = config;
  const failure = { route, policy: names[0] ?? '', policies: names, error, shadow };
  if (fallback?.take(`${tenant}\u0000${route}`, cost)) {
    record(config, counts, { outcome: 'fail-open', ...failure });
    return shadow ? passInShadow(config.shadowHeader, 'unavailable') : PASS;
  }
  record(config, counts, { outcome: fallback ? 'fail-open-limited' : 'fail-closed', ...failure });
  if (shadow) return passInShadow(config.shadowHeader, 'unavailable');
  return { pass: false, response: unavailableRefusal(config.hooks, req, route, error) };
}

/** The limiter decided: admitted when every limit admitted the request, else `429`. */
export function decided<Req>(
  config: GuardConfig<Req>,
  counts: OutcomeCounts,
  req: Req,
  route: string,
  limits: readonly ResolvedLimit[],
  names: readonly string[],
  decisions: readonly Decision[],
  cached: boolean,
): GuardVerdict {
  const { shadow, headers } = config;
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
    record(config, counts, { outcome: 'allowed', ...outcome });
    if (shadow) return passInShadow(config.shadowHeader, 'allowed');
    if (headers === false) return PASS;
    return { pass: true, headers: rateLimitFields(headers, limits, names, decisions, cached) };
  }
  record(config, counts, { outcome: 'limited', ...outcome });
  if (shadow) return passInShadow(config.shadowHeader, 'limited');
  const rateLimit =
    headers === false ? {} : rateLimitFields(headers, limits, names, decisions, cached);
  const response = limitedRefusal(config.hooks, req, route, names, decisions, bound, rateLimit);
  return { pass: false, response };
}

/** The RateLimit fields: every policy advertised; a decision only where one was made. */
function rateLimitFields(
  options: HeaderOptions,
  limits: readonly ResolvedLimit[],
  names: readonly string[],
  decisions: readonly Decision[],
  cached: boolean,
): Record<string, string> {
  const reports: QuotaReport[] = limits.map((limit, i) => {
    const decision = decisions[i] as Decision;
    return {
      name: names[i] as string,
      limit: limit.policy.limit,
      quotaWindowMs: limit.policy.quotaWindowMs,
      policy: limit.policy,
      // A cached refusal evaluated only the policies it held (those that refused).
      ...(cached && !refused(decision) ? {} : { decision }),
    };
  });
  return rateLimitHeaderList(reports, options);
}
