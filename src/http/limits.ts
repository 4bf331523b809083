/**
 * What a route's guard decides: one policy, stacked policies, or a function of the request
 * and tenant (plans, per-tenant overrides) — each on the route's scope or on a wider or
 * narrower one (the whole tenant, one user). Everything here only checks and normalises;
 * the decision is one `take` or one atomic `takeAll` in `guard/steps.ts`.
 */
import { isPolicy } from '../algorithms/policy.js';
import { MAX_TAKE_ALL_ITEMS } from '../bounds.js';
import { InvalidInputError } from '../errors.js';
import type { Policy, Scope } from '../types.js';
import { readProperty, rejectUnknownKeys } from '../validate.js';

/**
 * The scope a limit counts on, for a request of tenant T on route R by user U:
 *
 * - `"route"` (the default): T on R — `{ tenant, route }`;
 * - `"tenant"`: T over every route — `{ tenant }` (every route that lists the same policy
 *   with `per: "tenant"` shares one quota);
 * - `"user"`: U over every route of T — `{ tenant, user }`;
 * - `"route-user"`: U on R — `{ tenant, route, user }`.
 *
 * `"user"` and `"route-user"` need the guard's `user` option.
 */
export type LimitScope = 'route' | 'tenant' | 'user' | 'route-user';

/** A policy counted on a scope other than the route's (see {@link LimitScope}). */
export interface ScopedLimit {
  readonly policy: Policy;
  readonly per: LimitScope;
}

/** One limit: a policy on the route's scope, or a {@link ScopedLimit}. */
export type Limit = Policy | ScopedLimit;

/**
 * One limit, or several decided at once, all or nothing (stacked limits: a request is
 * admitted only when every one of them admits it, and a refusal spends nothing). At most
 * `MAX_TAKE_ALL_ITEMS` (16); no policy twice on the same scope.
 */
export type Limits = Limit | readonly Limit[];

/**
 * The `policy` option of a guard: fixed {@link Limits}, or a function of the request and its
 * verified tenant that returns them (plans, per-tenant overrides). A function's answer is
 * checked on every request; a wrong answer is an `InvalidInputError` for that request (a
 * programming error, never counted as an outage).
 */
export type LimitsOption<Req> = Limits | ((req: Req, tenant: string) => Limits | Promise<Limits>);

/** A checked limit. */
export interface ResolvedLimit {
  readonly policy: Policy;
  readonly per: LimitScope;
}

const SCOPES: readonly LimitScope[] = ['route', 'tenant', 'user', 'route-user'];
const EXPECTED =
  'a policy from a builder such as fixedWindow(), { policy, per }, or an array of 1–16 of them';

/**
 * Checks and normalises a `Limits` value.
 *
 * @throws {InvalidInputError} naming `field` (and the index in a list) for anything but 1–16
 *   policies or `{ policy, per }` objects, an unknown `per`, or one policy twice on one scope.
 */
export function resolveLimits(value: unknown, field: string): readonly ResolvedLimit[] {
  if (!Array.isArray(value)) return [resolveLimit(value, field)];
  const length = value.length;
  if (length < 1 || length > MAX_TAKE_ALL_ITEMS) {
    throw new InvalidInputError(field, EXPECTED, `an array of ${length}`);
  }
  const limits: ResolvedLimit[] = [];
  const seen = new Set<string>();
  for (let i = 0; i < length; i++) {
    const limit = resolveLimit(value[i], `${field}[${i}]`);
    const identity = `${limit.per} ${limit.policy.id}`;
    if (seen.has(identity)) {
      throw new InvalidInputError(
        `${field}[${i}]`,
        `a policy not already listed on the same scope ("${limit.policy.name}" per ${limit.per} is listed twice)`,
        undefined,
      );
    }
    seen.add(identity);
    limits.push(limit);
  }
  return limits;
}

function resolveLimit(value: unknown, field: string): ResolvedLimit {
  if (isPolicy(value)) return { policy: value, per: 'route' };
  if (typeof value !== 'object' || value === null || !('policy' in value)) {
    // Also a plain object of policy options: policies come from builders, never literals.
    throw new InvalidInputError(field, EXPECTED, value);
  }
  rejectUnknownKeys(value, ['policy', 'per'], field);
  const policy = readProperty(value, 'policy', field);
  if (!isPolicy(policy)) {
    throw new InvalidInputError(`${field}.policy`, 'a policy from a builder', policy);
  }
  const per = readProperty(value, 'per', field) ?? 'route';
  if (!SCOPES.includes(per as LimitScope)) {
    throw new InvalidInputError(`${field}.per`, `one of ${SCOPES.join(', ')}`, per);
  }
  return { policy, per: per as LimitScope };
}

/**
 * The names of limits in headers, events and `violated-policies`: a policy's own name when
 * it was given one; the route template for a route's only, unnamed limit (what the quota
 * is for); else the policy's derived name, with `@<per>` for a scope other than the route's.
 *
 * @throws {InvalidInputError} when two limits would share a name (give them distinct names).
 */
export function limitNames(
  limits: readonly ResolvedLimit[],
  route: string,
  field: string,
): readonly string[] {
  const names = limits.map(({ policy, per }) => {
    if (policy.named) return policy.name;
    if (limits.length === 1 && per === 'route') return route;
    return per === 'route' ? policy.name : `${policy.name}@${per}`;
  });
  if (new Set(names).size !== names.length) {
    const twice = names.find((name, i) => names.indexOf(name) !== i);
    throw new InvalidInputError(
      field,
      `limits with distinct names (clients tell them apart in RateLimit headers; "${twice}" is used twice): give each policy its own name`,
      undefined,
    );
  }
  return names;
}

/**
 * The scope a limit counts on for this tenant, route and user (see {@link LimitScope});
 * `user` must be given for `"user"` and `"route-user"`.
 */
export function scopeOf(
  per: LimitScope,
  tenant: string,
  route: string,
  user: string | undefined,
): Scope {
  switch (per) {
    case 'tenant':
      return { tenant };
    case 'user':
      return { tenant, user: user as string };
    case 'route-user':
      return { tenant, route, user: user as string };
    default:
      return { tenant, route };
  }
}

/** True when a limit needs the request's user. */
export const needsUser = (limits: readonly ResolvedLimit[]): boolean =>
  limits.some((limit) => limit.per === 'user' || limit.per === 'route-user');
