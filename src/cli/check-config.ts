/**
 * `sluice check-config FILE`: validates a policy file as the library loads it; prints a
 * summary (routes, policies, plans, tenants) when it is valid, else every problem with its
 * path in the file.
 */

import { policyBlock, policyParameters } from '../config/describe.js';
import {
  checkPolicies,
  describePolicy,
  fieldPath,
  type PolicyConfig,
  PolicyFileError,
  policyConfigFrom,
  type RouteLimits,
  routeLimits,
} from '../config/index.js';
import { parsePolicyText } from '../config/load.js';
import type { InvalidInputError } from '../errors.js';
import { limitNames, type ResolvedLimit } from '../http/limits.js';
import { EXIT, issueJson, table } from './common.js';
import { print, printError, printJson } from './output.js';

/** Options of `sluice check-config`. */
export interface CheckConfigOptions {
  readonly json?: boolean;
}

/** A tenant id the file does not name: it has the default plan's limits, else the route's. */
function unnamedTenant(config: PolicyConfig): string {
  let tenant = '*';
  while (config.tenants.has(tenant)) tenant += '*';
  return tenant;
}

interface Summary {
  readonly source: string;
  readonly limits: readonly { name: string; policy: string; per: string }[];
  readonly text: string;
}

function summary(
  source: string,
  limits: readonly ResolvedLimit[],
  names: readonly string[],
): Summary {
  return {
    source,
    limits: limits.map((l, i) => ({ name: names[i] as string, policy: l.policy.name, per: l.per })),
    text: limits
      .map((l, i) => {
        const name = l.policy.named ? names[i] : `${names[i]} (${describePolicy(l.policy)})`;
        return l.per === 'route' ? name : `${name} per ${l.per}`;
      })
      .join(' + '),
  };
}

/** The limits of a route for tenants the file does not name, and where plans or tenants change them. */
function routeSummary(config: PolicyConfig, route: string) {
  const of = (r: RouteLimits) => summary(r.source, r.limits, r.names);
  const anyone = of(routeLimits(config, route, unnamedTenant(config)));
  const plans: Record<string, Summary> = {};
  for (const [plan, table] of config.plans) {
    const limits = table.get(route);
    if (limits !== undefined) {
      plans[plan] = summary(
        fieldPath(['plans', plan, route]),
        limits,
        limitNames(limits, route, 'limits'),
      );
    }
  }
  const tenants: Record<string, Summary> = {};
  for (const [tenant, settings] of config.tenants) {
    if (settings.routes.has(route)) tenants[tenant] = of(routeLimits(config, route, tenant));
  }
  return { anyone, plans, tenants };
}

/** The file's content and its problems: its repeated keys, else those of the document. */
function read(text: string): { parsed: unknown; issues: readonly InvalidInputError[] } {
  try {
    const parsed = parsePolicyText(text);
    return { parsed, issues: checkPolicies(parsed) };
  } catch (error) {
    if (error instanceof PolicyFileError) return { parsed: undefined, issues: error.issues };
    throw error;
  }
}

/** `sluice check-config FILE`, given the file's text (JSON). */
export async function checkConfig(
  file: string,
  text: string,
  options: CheckConfigOptions,
): Promise<number> {
  const { parsed, issues } = read(text);
  if (issues.length > 0) {
    printProblems(file, issues, options);
    return EXIT.failed;
  }
  const config = policyConfigFrom(parsed);
  const routes = routeReports(config);
  if (options.json) printSummaryJson(file, config, routes);
  else printSummaryText(file, config, routes);
  return EXIT.ok;
}

/** One route of the file: its settings and its limits, for anyone and per plan and tenant. */
type RouteReport = ReturnType<typeof routeReports>[number];

function routeReports(config: PolicyConfig) {
  return [...config.routes.values()].map((settings) => ({
    route: settings.route,
    cost: settings.cost,
    failureMode: settings.failureMode,
    ...(settings.failOpenLimit === undefined ? {} : { failOpenLimit: settings.failOpenLimit }),
    shadow: settings.shadow,
    perTenant: typeof settings.policy === 'function',
    ...routeSummary(config, settings.route),
  }));
}

function printProblems(
  file: string,
  issues: readonly InvalidInputError[],
  options: CheckConfigOptions,
): void {
  if (options.json) {
    printJson({ ok: false, file, valid: false, errors: issues.map(issueJson) }, null, 2);
    return;
  }
  printError(`${file}: invalid, ${issues.length} problem${issues.length === 1 ? '' : 's'}:`);
  for (const issue of issues) printError(`  ${issue.message}`);
}

function printSummaryJson(
  file: string,
  config: PolicyConfig,
  routes: readonly RouteReport[],
): void {
  printJson(
    {
      ok: true,
      file,
      valid: true,
      format: config.format,
      routes: routes.map(({ anyone, plans, tenants, ...r }) => ({
        ...r,
        limits: anyone.limits,
        source: anyone.source,
        plans: Object.fromEntries(Object.entries(plans).map(([p, v]) => [p, v.limits])),
        tenants: Object.fromEntries(Object.entries(tenants).map(([t, v]) => [t, v.limits])),
      })),
      // Each policy's parameters as the file names them, never the internal burst and
      // refill time of a token bucket or GCRA.
      policies: [...config.policies].map(([name, p]) => ({
        name,
        algorithm: p.algorithm,
        ...policyParameters(p),
        ...policyBlock(p),
        description: describePolicy(p),
        version: p.version,
        id: p.id,
      })),
      plans: [...config.plans.keys()],
      defaultPlan: config.defaultPlan ?? null,
      tenants: Object.fromEntries(
        [...config.tenants].map(([t, s]) => [
          t,
          { plan: s.plan ?? null, routes: [...s.routes.keys()] },
        ]),
      ),
    },
    null,
    2,
  );
}

function printSummaryText(
  file: string,
  config: PolicyConfig,
  routes: readonly RouteReport[],
): void {
  print(`${file}: valid (format ${config.format}): ${counts(config, routes.length)}`);
  print('');
  print(
    'routes (the limits of a tenant the file does not name, then what plans and tenants change):',
  );
  for (const r of routes) printRoute(r);
  if (config.policies.size > 0) {
    print('');
    print('named policies:');
    for (const line of table([...config.policies].map(([name, p]) => [name, describePolicy(p)]))) {
      print(`  ${line}`);
    }
  }
  if (config.plans.size > 0) {
    print('');
    print(
      `plans: ${[...config.plans.keys()].map((p) => (p === config.defaultPlan ? `${p} (default)` : p)).join(', ')}`,
    );
  }
  if (config.tenants.size > 0) print(`tenants: ${tenantWords(config)}`);
}

/** `2 routes, 6 named policies, 1 plan, 1 tenant with settings of their own`. */
function counts(config: PolicyConfig, routes: number): string {
  const plural = (n: number, word: string) => `${n} ${word}${n === 1 ? '' : 's'}`;
  const policies = plural(config.policies.size, 'named polic')
    .replace(/polics$/, 'policies')
    .replace(/polic$/, 'policy');
  return `${plural(routes, 'route')}, ${policies}, ${plural(config.plans.size, 'plan')}, ${plural(config.tenants.size, 'tenant')} with settings of their own`;
}

/** A route's limits and settings, then those of each plan and tenant that changes them. */
function printRoute(r: RouteReport): void {
  const settings = [
    r.cost === 1 ? '' : `cost ${r.cost}`,
    r.failureMode === 'fail-open' ? `fail-open (local limit ${r.failOpenLimit})` : '',
    r.shadow ? 'shadow' : '',
  ].filter(Boolean);
  print(`  ${r.route}  ${r.anyone.text}${settings.length > 0 ? `  [${settings.join(', ')}]` : ''}`);
  for (const [plan, v] of Object.entries(r.plans)) print(`    plan ${plan}: ${v.text}`);
  for (const [tenant, v] of Object.entries(r.tenants)) print(`    tenant ${tenant}: ${v.text}`);
}

/** `acme (plan pro), globex (2 route overrides)`. */
function tenantWords(config: PolicyConfig): string {
  return [...config.tenants]
    .map(([t, s]) => {
      const parts = [
        s.plan === undefined ? '' : `plan ${s.plan}`,
        s.routes.size === 0
          ? ''
          : `${s.routes.size} route override${s.routes.size === 1 ? '' : 's'}`,
      ].filter(Boolean);
      return `${t} (${parts.join(', ')})`;
    })
    .join(', ');
}
