/**
 * A tenant's limits on a route of a valid policy file, and where in the file they come
 * from: its own override, else its plan's (its own plan, else `defaultPlan`), else the
 * route's.
 */

import { MAX_SCOPE_PART_LENGTH } from '../bounds.js';
import { InvalidInputError } from '../errors.js';
import { limitNames } from '../http/limits.js';
import { fieldPath } from './paths.js';
import type { PolicyConfig, RouteLimits } from './types.js';

/**
 * The plan of `tenant`: its own (`tenants.<t>.plan`), else `defaultPlan`, else undefined.
 */
export function planOf(config: PolicyConfig, tenant: string): string | undefined {
  return config.tenants.get(tenant)?.plan ?? config.defaultPlan;
}

/**
 * The limits of `tenant` on `route` — what the route's guard decides for that tenant — and
 * where in the file they come from: the tenant's own override, else its plan's (its own
 * plan, else `defaultPlan`), else the route's.
 *
 * @throws {InvalidInputError} `route` when the file has no such route, `tenant` when it is
 *   not a non-empty string of at most 65,536 characters.
 */
export function routeLimits(config: PolicyConfig, route: string, tenant: string): RouteLimits {
  const settings = config.routes.get(route);
  if (settings === undefined) {
    const known = [...config.routes.keys()];
    throw new InvalidInputError(
      'route',
      `a route of the policy file (${known.map((r) => `"${r}"`).join(', ')}), not "${route}"`,
      route,
    );
  }
  if (typeof tenant !== 'string' || tenant.length === 0 || tenant.length > MAX_SCOPE_PART_LENGTH) {
    throw new InvalidInputError(
      'tenant',
      `a non-empty string of at most ${MAX_SCOPE_PART_LENGTH} characters`,
      tenant,
    );
  }
  const found = resolve(config, route, tenant);
  return { route, tenant, ...found, names: limitNames(found.limits, route, 'limits'), settings };
}

/** The limits of a tenant on a route of a valid config (see {@link routeLimits}). */
export function resolve(
  config: PolicyConfig,
  route: string,
  tenant: string,
): Pick<RouteLimits, 'plan' | 'planFrom' | 'source' | 'limits'> {
  const own = config.tenants.get(tenant);
  const plan = own?.plan ?? config.defaultPlan;
  const planFrom =
    own?.plan !== undefined
      ? fieldPath(['tenants', tenant, 'plan'])
      : plan === undefined
        ? undefined
        : 'defaultPlan';
  const override = own?.routes.get(route);
  if (override !== undefined) {
    return {
      plan,
      planFrom,
      source: fieldPath(['tenants', tenant, 'routes', route]),
      limits: override,
    };
  }
  const planned = plan === undefined ? undefined : config.plans.get(plan)?.get(route);
  if (planned !== undefined) {
    return { plan, planFrom, source: fieldPath(['plans', plan as string, route]), limits: planned };
  }
  // A valid config has a route's own limits wherever no plan lists it.
  const limits = config.defaults.get(route) ?? [];
  return { plan, planFrom, source: fieldPath(['routes', route]), limits };
}
