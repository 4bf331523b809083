/**
 * The steps of one request through a guard: skip? → route template → verified tenant → the
 * route's limits (fixed, or the plan function's answer for this tenant) → verified user,
 * where a limit needs one → one `take` or one atomic `takeAll` → outcome (`outcome.ts`).
 *
 * Every await of a request is in the one async function that {@link requestSteps} returns;
 * the steps around it are synchronous, so the split adds no promise to a request. What
 * does not change between requests (the config's functions, fixed limits' names per route)
 * is read or computed once per guard.
 */

import { randomUUID } from 'node:crypto';
import { isConcurrency } from '../../algorithms/concurrency.js';
import { InvalidInputError, isSluiceError } from '../../errors.js';
import type { Reservation } from '../../limiter/priced.js';
import type { Decision, Lease, TakeAllItem } from '../../types.js';
import { limitNames, needsUser, type ResolvedLimit, resolveLimits, scopeOf } from '../limits.js';
import { holdingLeases } from './leases.js';
import type { GuardConfig } from './options.js';
import {
  decided,
  duplicate,
  failed,
  type OutcomeCounts,
  PASS,
  record,
  unidentified,
} from './outcome.js';
import { cancelUnknown, reserveAll, settleOnce } from './settle.js';
import type { GuardVerdict } from './types.js';

/** The guard's function: each request's verdict, recorded on `counts`. */
export function requestSteps<Req>(
  config: GuardConfig<Req>,
  counts: OutcomeCounts,
): (req: Req) => Promise<GuardVerdict> {
  const { limiter, identify, skip, fixedLimits, plan, cost: costOf } = config;
  const { user: userOf, requestId: requestIdOf, route: routeOf } = config;
  const namesOf = limitNamer(fixedLimits);
  return async (req: Req): Promise<GuardVerdict> => {
    if (skip !== undefined && (await skip(req)) === true) {
      record(config, counts, {
        outcome: 'skipped',
        route: skippedRoute(routeOf, req),
        policy: '',
        policies: [],
      });
      return PASS;
    }
    const route = routeText(routeOf, req);
    const tenant = identity(await identify(req), 'identify');
    if (tenant === undefined) {
      // Fixed limits are named without a tenant; a plan is not known before one.
      const known = fixedLimits && namesOf(fixedLimits, route);
      return unidentified(config, counts, req, route, known ?? []);
    }
    const limits =
      fixedLimits ??
      resolveLimits(
        await (plan as (req: Req, tenant: string) => unknown)(req, tenant),
        'policy (the answer of the policy function)',
      );
    const names = namesOf(limits, route);
    let user: string | undefined;
    if (needsUser(limits)) {
      user = identity(await required(userOf)(req), 'user');
      if (user === undefined) return unidentified(config, counts, req, route, names);
    }
    const cost = typeof costOf === 'function' ? costOf(req) : costOf;
    // An id the client may have written (a request header): one that does not fit is left
    // out of the events, never a reason to fail the request.
    const requestId = fittingRequestId(requestIdOf?.(req));
    // The client's idempotency key, when the route reads one (retry-safe takes): one that
    // does not fit is no key, never a reason to fail the request.
    const id = retryIdOf(config.retryId, req);
    let decisions: readonly Decision[];
    let cached = false;
    let leases: readonly Lease[] | undefined;
    let reserved: readonly Reservation[] | undefined;
    let reserveId: string | undefined;
    // The id the limiter call carries (none on a lease's acquire or a takeAll with leases).
    let claimId = id;
    try {
      if (limits.length === 1 && isConcurrency((limits[0] as ResolvedLimit).policy)) {
        const only = limits[0] as ResolvedLimit;
        if (cost !== 1) {
          throw new InvalidInputError(
            'cost',
            '1 on a concurrency limit (a lease holds one slot)',
            cost,
          );
        }
        const lease = await limiter.acquire(
          scopeOf(only.per, tenant, route, user),
          only.policy,
          requestId === undefined ? undefined : { requestId },
        );
        decisions = [lease];
        if (lease.allowed) leases = [lease];
        claimId = undefined;
      } else if (config.settle !== undefined) {
        // Priced at the end: reserved now, settled when the response ends (settle.ts). Under
        // the retry key when there is one (a retry, or a concurrent copy, replays the
        // reservation: counted once, its handler run once); else under a fresh random id,
        // by which a reserve whose reply was lost to a timeout is cancelled below.
        if (id === undefined) reserveId = randomUUID();
        ({ decisions, reservations: reserved } = await reserveAll(
          limiter,
          takeAllItems(limits, tenant, route, user, cost),
          requestId,
          reserveId ?? (id as string),
        ));
      } else if (limits.length === 1) {
        const only = limits[0] as ResolvedLimit;
        decisions = [
          await limiter.take(
            scopeOf(only.per, tenant, route, user),
            only.policy,
            id === undefined
              ? requestId === undefined
                ? { cost }
                : { cost, requestId }
              : { cost, requestId, id },
          ),
        ];
      } else {
        // A takeAll holding leases takes no id: its leases get fresh ids on every call.
        const takeId = limits.some((limit) => isConcurrency(limit.policy)) ? undefined : id;
        claimId = takeId;
        const result = await limiter.takeAll(
          takeAllItems(limits, tenant, route, user, cost),
          requestId === undefined && takeId === undefined ? undefined : { requestId, id: takeId },
        );
        decisions = result.decisions;
        cached = result.cached;
        leases = result.leases;
      }
      // A retry-safe admission runs the handler once: a repeat of its id (a replay, or a
      // concurrent copy) is refused once the id was claimed (serve-claim.ts).
      if (
        claimId !== undefined &&
        !config.shadow &&
        decisions.every((decision) => decision.allowed) &&
        !(await limiter.claimServe(takeAllItems(limits, tenant, route, user, cost), claimId))
      ) {
        return duplicate(config, counts, route, names);
      }
    } catch (error) {
      if (
        reserveId !== undefined &&
        reserved === undefined &&
        (isSluiceError(error, 'SLUICE_TIMEOUT') || isSluiceError(error, 'SLUICE_UNAVAILABLE'))
      ) {
        // The reserve's outcome is unknown: cancel it by its id (a tombstone if it has not
        // arrived yet), so it never stays consumed for a request that never ran. (Under a
        // retry key, the client's retry replays it instead.)
        cancelUnknown(limiter, takeAllItems(limits, tenant, route, user, cost), reserveId);
      }
      // The retry key was used for another request (other limits or cost): a duplicate key.
      if (
        isSluiceError(error, 'SLUICE_INVALID_INPUT') &&
        error.field === 'id' &&
        id !== undefined
      ) {
        return duplicate(config, counts, route, names);
      }
      // Bad input is a programming error and a refused configuration (a wrong password, a
      // missing permission) a mistake to fix, not an outage: never masked as fail-open,
      // never a 503 that says "try again"; the framework's error handling answers it (500).
      if (
        isSluiceError(error, 'SLUICE_INVALID_INPUT') ||
        isSluiceError(error, 'SLUICE_REDIS_CONFIG')
      ) {
        throw error;
      }
      return failed(config, counts, req, route, names, tenant, cost, error);
    }
    const verdict = decided(config, counts, req, route, limits, names, decisions, cached);
    const held = leases === undefined ? verdict : holdingLeases(verdict, leases);
    if (reserved === undefined || !held.pass || config.settle === undefined) return held;
    return { ...held, settle: settleOnce(config.settle, req, reserved) };
  };
}

/**
 * The names of a request's limits (see `limitNames`). Fixed limits' names depend only on
 * the route template (a fixed set): named once per route, not on every request, and frozen,
 * as every request's event shares them. A plan's answer is named on every request.
 */
function limitNamer(
  fixedLimits: readonly ResolvedLimit[] | undefined,
): (limits: readonly ResolvedLimit[], route: string) => readonly string[] {
  const fixedNames = new Map<string, readonly string[]>();
  return (limits, route) => {
    if (limits !== fixedLimits) return limitNames(limits, route, 'policy');
    let names = fixedNames.get(route);
    if (names === undefined) {
      names = Object.freeze(limitNames(limits, route, 'policy'));
      if (fixedNames.size < 10_000) fixedNames.set(route, names);
    }
    return names;
  };
}

/** The route template of a request, checked: a function's answer may be anything. */
function routeText<Req>(routeOf: string | ((req: Req) => string), req: Req): string {
  const route = typeof routeOf === 'function' ? routeOf(req) : routeOf;
  if (typeof route !== 'string' || route.length === 0) {
    throw new InvalidInputError('route', 'a non-empty route template from options.route', route);
  }
  return route;
}

/** The route of a skipped request's event, or `""`: a skipped request needs no route. */
function skippedRoute<Req>(routeOf: string | ((req: Req) => string), req: Req): string {
  try {
    return routeText(routeOf, req);
  } catch {
    // An unknowable route is left out of the event.
    return '';
  }
}

/** The `user` function, which limits with `per: "user"` or `"route-user"` need. */
function required<F>(userOf: F | undefined): F {
  if (userOf === undefined) {
    throw new InvalidInputError(
      'user',
      'a function of the request, for limits with per "user" or "route-user"',
      undefined,
    );
  }
  return userOf;
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

/** The items of one atomic `takeAll`: every limit, on its scope, at the request's cost. */
function takeAllItems(
  limits: readonly ResolvedLimit[],
  tenant: string,
  route: string,
  user: string | undefined,
  cost: number,
): TakeAllItem[] {
  return limits.map((limit) => ({
    scope: scopeOf(limit.per, tenant, route, user),
    policy: limit.policy,
    cost,
  }));
}

/** The `retryId` option's answer when it is an id the limiter takes (1–128 characters). */
function retryIdOf<Req>(
  retryId: ((req: Req) => string | undefined) | undefined,
  req: Req,
): string | undefined {
  if (retryId === undefined) return undefined;
  let id: unknown;
  try {
    id = retryId(req);
  } catch {
    return undefined; // a throwing option is no key, never a failed request
  }
  // A promise is no key (retryId is synchronous); its rejection must not go unhandled.
  if (id instanceof Promise) id.catch(() => {});
  return typeof id === 'string' && id.length > 0 && id.length <= 128 ? id : undefined;
}

/** A request id the limiter takes (1–256 characters, cut to 256), else undefined. */
function fittingRequestId(id: unknown): string | undefined {
  if (typeof id !== 'string' || id.length === 0) return undefined;
  return id.length > 256 ? id.slice(0, 256) : id;
}
