/**
 * The compiler of policy documents: a parsed document (format 1 is first upgraded to
 * format 2) into a {@link PolicyConfig}, or every problem with its path in the file.
 */
import type { InvalidInputError } from '../errors.js';
import type { Limits } from '../http/limits.js';
import { asLimits, LimitBuilder } from './limit-builder.js';
import { type Issue, isObject, issueError, PolicyFileError, Problems } from './problems.js';
import { resolve } from './resolve.js';
import { documentObject } from './schema.js';
import {
  checkFallbacks,
  compilePlans,
  compilePolicies,
  compileRoutes,
  compileTenants,
  DEFAULT_SETTINGS,
  freezeTable,
  knownPlan,
  type Plans,
  type Routes,
  type Tenant,
} from './sections.js';
import type { PolicyConfig, RouteSettings } from './types.js';
import { upgradeFormatOne } from './upgrade.js';

type Compiled = { config: PolicyConfig } | { issues: readonly Issue[] };

/** What the sections of a valid document compiled into. */
interface Sections {
  readonly format: 1 | 2;
  readonly builder: LimitBuilder;
  readonly routes: Routes;
  readonly plans: Plans;
  readonly defaultPlan: string | undefined;
  readonly tenants: Map<string, Tenant>;
  readonly allRoutes: readonly string[];
}

function compile(input: unknown): Compiled {
  const upgraded = upgradeFormatOne(input);
  const doc = upgraded.document;
  const problems = new Problems(upgraded.origin);
  if (!isObject(doc)) {
    problems.add([], 'a JSON object with "routes"', doc);
    return { issues: problems.list };
  }
  // Unknown or mistyped top-level fields are reported; the rest is still checked.
  problems.parse(documentObject, doc, []);
  const builder = new LimitBuilder(problems);
  // Named policies first: everything else may refer to them.
  compilePolicies(builder, doc.policies);
  const routes = compileRoutes(builder, doc.routes, upgraded.issues);
  const plans = compilePlans(builder, doc.plans, routes);
  const defaultPlan = typeof doc.defaultPlan === 'string' ? doc.defaultPlan : undefined;
  const defaultOk =
    defaultPlan === undefined || knownPlan(problems, plans, defaultPlan, ['defaultPlan']);
  const allRoutes = [...routes.keys, ...plans.routes];
  const tenants = compileTenants(builder, doc.tenants, plans, allRoutes);
  if (defaultOk) checkFallbacks(problems, allRoutes, routes, plans, defaultPlan);
  if (allRoutes.length === 0 && problems.list.length === 0) {
    if (doc.routes === undefined) problems.missing(['routes'], 'at least one route');
    else problems.add(['routes'], 'at least one route', doc.routes);
  }
  if (problems.list.length > 0) return { issues: problems.list };
  const format = upgraded.format;
  return { config: assemble({ format, builder, routes, plans, defaultPlan, tenants, allRoutes }) };
}

/** The config of a valid document, with the guard's settings for each route. */
function assemble(s: Sections): PolicyConfig {
  const routes = new Map<string, RouteSettings>();
  const config: PolicyConfig = {
    format: s.format,
    routes,
    // The map's policies first (they were built first), then inline names.
    policies: new Map([...s.builder.names].map(([name, { policy }]) => [name, policy])),
    defaults: freezeTable(s.routes.defaults),
    plans: new Map([...s.plans.tables].map(([p, table]) => [p, freezeTable(table)])),
    defaultPlan: s.defaultPlan,
    tenants: new Map(
      [...s.tenants].map(([t, tenant]) => [
        t,
        Object.freeze({ plan: tenant.plan, routes: freezeTable(tenant.routes) }),
      ]),
    ),
  };
  for (const route of s.allRoutes) {
    const settings = s.routes.settings.get(route) ?? DEFAULT_SETTINGS;
    routes.set(route, Object.freeze({ route, policy: guardLimits(config, route), ...settings }));
  }
  return Object.freeze(config);
}

/**
 * A route's limits as the guard takes them: fixed limits, or — when a plan or a tenant
 * changes them — a function of the tenant.
 */
function guardLimits(config: PolicyConfig, route: string): RouteSettings['policy'] {
  const planAware =
    [...config.plans.values()].some((table) => table.has(route)) ||
    [...config.tenants.values()].some((t) => t.routes.has(route));
  if (!planAware) return asLimits(config.defaults.get(route) ?? []);
  // Precomputed per tenant of the file, one Map lookup per request; every other tenant has
  // the default plan's limits, else the route's.
  const byTenant = new Map<string, Limits>();
  for (const tenant of config.tenants.keys()) {
    byTenant.set(tenant, asLimits(resolve(config, route, tenant).limits));
  }
  const { defaultPlan } = config;
  const planned = defaultPlan === undefined ? undefined : config.plans.get(defaultPlan)?.get(route);
  const others = asLimits(planned ?? config.defaults.get(route) ?? []);
  return (_req: unknown, tenant: string) => byTenant.get(tenant) ?? others;
}

/**
 * Validates a parsed policy document and builds every route's settings, named policies,
 * plans and tenant overrides.
 *
 * @throws {PolicyFileError} (an `InvalidInputError`) naming the path of the first problem,
 *   e.g. `routes["POST/orders"].policy[1].limit`, with every problem in `issues`.
 */
export function policyConfigFrom(config: unknown): PolicyConfig {
  const result = compile(config);
  if ('issues' in result) throw new PolicyFileError(result.issues);
  return result.config;
}

/**
 * Every problem of a parsed policy document, each an `InvalidInputError` whose `field` is
 * its path in the file; empty when the document is valid.
 */
export function checkPolicies(config: unknown): readonly InvalidInputError[] {
  const result = compile(config);
  return 'issues' in result ? result.issues.map(issueError) : [];
}

/**
 * Validates a parsed policy document (format 1 or 2) and builds every route's settings.
 *
 * @throws {PolicyFileError} (an `InvalidInputError`) naming the path of the first bad field,
 *   e.g. `routes["POST/orders"].limit`; `issues` holds every problem.
 */
export function policiesFrom(config: unknown): ReadonlyMap<string, RouteSettings> {
  return policyConfigFrom(config).routes;
}
