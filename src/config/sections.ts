/**
 * The sections of a format-2 policy document, compiled in the order they may refer to each
 * other: named policies, routes, plans, tenants; then the check that every tenant has
 * limits on every route. Each adds its problems at their paths and goes on, so that every
 * problem of the file is reported at once.
 */

import { MAX_SCOPE_PART_LENGTH } from '../bounds.js';
import type { FailureMode } from '../http/core.js';
import type { LimitScope, ResolvedLimit } from '../http/limits.js';
import type { Built, LimitBuilder } from './limit-builder.js';
import type { Path } from './paths.js';
import { entriesOf, type Issue, isObject, MISSING, type Problems } from './problems.js';
import { NAME, ROUTE, ROUTE_EXPECTED, routeObject, tenantObject } from './schema.js';
import type { RouteSettings } from './types.js';

/** A route's settings besides its route and limits. */
export type Settings = Omit<RouteSettings, 'policy' | 'route'>;
export const DEFAULT_SETTINGS: Settings = Object.freeze({
  cost: 1,
  failureMode: 'fail-closed',
  shadow: false,
});

/** Route → limits. */
export type Table = Map<string, ResolvedLimit[]>;

/** The `policies` map: each valid entry becomes a named policy that others may refer to. */
export function compilePolicies(b: LimitBuilder, policies: unknown): void {
  for (const [name, value] of entriesOf(
    b.problems,
    policies,
    ['policies'],
    'an object of named policies',
  )) {
    if (!NAME.test(name)) {
      b.problems.add(['policies', name], 'named with 1–64 characters of [A-Za-z0-9._:/-]', name);
      continue;
    }
    b.declared.add(name);
    const policy = b.policy(value, ['policies', name], name);
    if (policy !== undefined) b.named.set(name, policy);
  }
}

/** The `routes` section: each route's own limits and settings. */
export interface Routes {
  /** Every route whose key is a route template, valid or not, in the order of the file. */
  readonly keys: readonly string[];
  /** The routes' own limits. */
  readonly defaults: Table;
  /** The settings of each valid route. */
  readonly settings: Map<string, Settings>;
  /** Routes with a problem (in `routes` or in a plan): no fallback problem is added for them. */
  readonly broken: Set<string>;
}

/**
 * The `routes` section. `upgradeIssues` are the problems of format-1 routes that could not
 * be upgraded (see `upgradeFormatOne`): they are reported in their route's place.
 */
export function compileRoutes(
  b: LimitBuilder,
  routes: unknown,
  upgradeIssues: ReadonlyMap<string, readonly Issue[]>,
): Routes {
  const result: Routes = { keys: [], defaults: new Map(), settings: new Map(), broken: new Set() };
  for (const [route, value] of entriesOf(
    b.problems,
    routes,
    ['routes'],
    'an object of route templates',
  )) {
    const path = ['routes', route];
    if (!ROUTE.test(route)) {
      b.problems.add(path, ROUTE_EXPECTED, route);
      continue;
    }
    (result.keys as string[]).push(route);
    const issues = upgradeIssues.get(route);
    if (issues !== undefined) b.problems.list.push(...issues);
    const { settings, built } =
      issues !== undefined
        ? { settings: undefined, built: undefined }
        : isObject(value)
          ? routeObjectOf(b, value, path, route)
          : { settings: DEFAULT_SETTINGS, built: b.limits(value, path, route) };
    if (settings === undefined || built?.ok === false) {
      result.broken.add(route);
      continue;
    }
    result.settings.set(route, settings);
    if (built !== undefined) result.defaults.set(route, built.limits);
  }
  return result;
}

/**
 * A route object `{ policy, per?, cost?, failureMode?, failOpenLimit?, shadow? }`; without
 * `policy` (and `per`), the plans give the route's limits (`built` is then undefined).
 */
function routeObjectOf(
  b: LimitBuilder,
  value: Record<string, unknown>,
  path: Path,
  route: string,
): { settings: Settings | undefined; built: Built | undefined } {
  const r = b.problems.parse(routeObject, value, path);
  const settings = r && routeOptions(b.problems, path, r);
  // The limits are checked even when a setting is wrong, to report every problem.
  const per = r === undefined ? undefined : r.per;
  if (value.policy !== undefined) {
    const built = b.limits(value.policy, [...path, 'policy'], route, per);
    if (settings !== undefined && settings.cost !== 1 && built.limits.some(isLeased)) {
      b.problems.add([...path, 'cost'], '1 on a route with a concurrency limit', settings.cost);
    }
    return { settings, built: r === undefined ? { limits: built.limits, ok: false } : built };
  }
  if (r === undefined) return { settings, built: { limits: [], ok: false } };
  if (per !== undefined) {
    b.problems.missing([...path, 'policy'], 'the policy that "per" applies to');
    return { settings, built: { limits: [], ok: false } };
  }
  return { settings, built: undefined };
}

/** Whether `limit` is a concurrency limit (a lease holds one slot: a cost of 1 only). */
function isLeased(limit: ResolvedLimit): boolean {
  return limit.policy.algorithm === 'concurrency';
}

/** The route's settings with defaults; a fail-open route needs its local limit. */
function routeOptions(
  problems: Problems,
  path: Path,
  r: { cost?: number; failureMode?: FailureMode; failOpenLimit?: number; shadow?: boolean },
): Settings | undefined {
  if (r.failureMode === 'fail-open' && r.failOpenLimit === undefined) {
    problems.missing([...path, 'failOpenLimit'], 'a positive integer with "fail-open"');
    return undefined;
  }
  return {
    cost: r.cost ?? DEFAULT_SETTINGS.cost,
    failureMode: r.failureMode ?? DEFAULT_SETTINGS.failureMode,
    ...(r.failOpenLimit === undefined ? {} : { failOpenLimit: r.failOpenLimit }),
    shadow: r.shadow ?? DEFAULT_SETTINGS.shadow,
  };
}

/** The `plans` section: plan → route → limits. */
export interface Plans {
  readonly tables: Map<string, Table>;
  /** Routes that only plans list (not `routes`), in the order of the file. */
  readonly routes: readonly string[];
}

/** The `plans` section; a route with a problem in a plan is added to `routes.broken`. */
export function compilePlans(b: LimitBuilder, plans: unknown, routes: Routes): Plans {
  const result: Plans = { tables: new Map(), routes: [] };
  for (const [plan, entries] of entriesOf(b.problems, plans, ['plans'], 'an object of plans')) {
    if (!NAME.test(plan)) {
      b.problems.add(
        ['plans', plan],
        'a plan named with 1–64 characters of [A-Za-z0-9._:/-]',
        plan,
      );
      continue;
    }
    const table: Table = new Map();
    result.tables.set(plan, table);
    for (const [route, spec] of entriesOf(
      b.problems,
      entries,
      ['plans', plan],
      'an object of route templates and their limits',
    )) {
      const path = ['plans', plan, route];
      if (!ROUTE.test(route)) {
        b.problems.add(path, ROUTE_EXPECTED, route);
        continue;
      }
      if (!routes.keys.includes(route) && !result.routes.includes(route)) {
        (result.routes as string[]).push(route);
      }
      const built = b.limits(spec, path, route);
      if (built.ok) table.set(route, built.limits);
      else routes.broken.add(route);
    }
  }
  return result;
}

/** True when `plan` is a plan of the file; else adds a problem at `path`. */
export function knownPlan(problems: Problems, plans: Plans, plan: string, path: Path): boolean {
  if (plans.tables.has(plan)) return true;
  const list = [...plans.tables.keys()].map((p) => `"${p}"`).join(', ');
  problems.add(
    path,
    plans.tables.size === 0
      ? `the name of a plan in "plans" (there is none; "${plan}" is not defined)`
      : `the name of a plan in "plans" (${list}), not "${plan}"`,
    plan,
  );
  return false;
}

/** A tenant of the `tenants` section. */
export interface Tenant {
  readonly plan: string | undefined;
  readonly routes: Table;
}

/** The `tenants` section: each tenant's plan and its own limits per route of the file. */
export function compileTenants(
  b: LimitBuilder,
  tenants: unknown,
  plans: Plans,
  allRoutes: readonly string[],
): Map<string, Tenant> {
  const result = new Map<string, Tenant>();
  for (const [tenant, value] of entriesOf(
    b.problems,
    tenants,
    ['tenants'],
    'an object of tenants',
  )) {
    const path = ['tenants', tenant];
    if (tenant.length > MAX_SCOPE_PART_LENGTH || tenant.length === 0) {
      b.problems.add(path, 'a tenant id of 1 to 65,536 characters', tenant);
      continue;
    }
    // Its problems are reported; its plan and routes are still checked when readable.
    if (b.problems.parse(tenantObject, value, path) === undefined && !isObject(value)) continue;
    const t = value as { plan?: unknown; routes?: unknown };
    if (t.plan !== undefined && typeof t.plan !== 'string') continue;
    if (t.plan !== undefined && !knownPlan(b.problems, plans, t.plan, [...path, 'plan'])) continue;
    result.set(tenant, { plan: t.plan, routes: tenantRoutes(b, t.routes, path, allRoutes) });
  }
  return result;
}

/** A tenant's `routes`: its own limits on routes of `routes` or `plans`. */
function tenantRoutes(
  b: LimitBuilder,
  routes: unknown,
  path: Path,
  allRoutes: readonly string[],
): Table {
  const table: Table = new Map();
  for (const [route, spec] of entriesOf(
    b.problems,
    routes,
    [...path, 'routes'],
    'an object of route templates and their limits',
  )) {
    const at = [...path, 'routes', route];
    if (!allRoutes.includes(route)) {
      b.problems.add(
        at,
        `a route of "routes" or "plans" (${allRoutes.map((r) => `"${r}"`).join(', ')})`,
        route,
      );
      continue;
    }
    const built = b.limits(spec, at, route);
    if (built.ok) table.set(route, built.limits);
  }
  return table;
}

/**
 * Every tenant has limits on every route: a plan that does not list a route falls back to
 * the route's own limits, which must then exist.
 */
export function checkFallbacks(
  problems: Problems,
  allRoutes: readonly string[],
  routes: Routes,
  plans: Plans,
  defaultPlan: string | undefined,
): void {
  for (const route of allRoutes) {
    if (routes.broken.has(route) || routes.defaults.has(route)) continue;
    for (const [plan, table] of plans.tables) {
      if (!table.has(route)) {
        problems.missing(
          ['plans', plan, route],
          `the limits of plan "${plan}" on ${route} (the route has none of its own in "routes" to fall back on)`,
        );
      }
    }
    if (defaultPlan === undefined) {
      // The route is in "routes" without a "policy", or only in plans.
      problems.add(
        ['routes', route],
        `given limits for tenants without a plan (the plans give ${route} limits for their own tenants only): give the route its own "policy", or set "defaultPlan"`,
        undefined,
        routes.keys.includes(route) ? 'a route object without "policy"' : MISSING,
      );
    }
  }
}

/** Freezes a table and each of its limits, for the compiled config. */
export function freezeTable(
  table: ReadonlyMap<string, readonly ResolvedLimit[]>,
): ReadonlyMap<string, readonly ResolvedLimit[]> {
  return new Map(
    [...table].map(([route, limits]) => [
      route,
      Object.freeze(
        limits.map((l) => Object.freeze({ policy: l.policy, per: l.per as LimitScope })),
      ),
    ]),
  );
}
