/**
 * Route policies from configuration (S3, S16, S21, S24): one JSON document maps route
 * templates to their limits, cost, failure mode and shadow flag, validated with zod when
 * loaded (once, at start). Every error names the path of the bad field in the document.
 *
 * Format 1 (still read unchanged): each route is one inline policy with its settings.
 *
 * ```json
 * { "routes": { "POST/orders": { "algorithm": "fixed-window", "limit": 10, "windowMs": 1000 } } }
 * ```
 *
 * Format 2 adds named policies, stacked limits, scopes, plans and per-tenant overrides:
 *
 * ```json
 * {
 *   "policies": {
 *     "api-calls": { "algorithm": "token-bucket", "capacity": 100, "refillIntervalMs": 600 },
 *     "orders-free": { "algorithm": "fixed-window", "limit": 10, "windowMs": 60000 },
 *     "orders-pro": { "algorithm": "fixed-window", "limit": 1000, "windowMs": 60000 }
 *   },
 *   "routes": {
 *     "POST/orders": { "policy": ["orders-free", { "policy": "api-calls", "per": "tenant" }], "cost": 1 },
 *     "GET/search": "api-calls"
 *   },
 *   "plans": { "pro": { "POST/orders": ["orders-pro", { "policy": "api-calls", "per": "tenant" }] } },
 *   "tenants": { "acme": { "plan": "pro" } }
 * }
 * ```
 *
 * A route's value is one limit, a list of limits (stacked: decided at once, all or
 * nothing), an object `{ policy, cost, failureMode, failOpenLimit, shadow }`, or a format-1
 * inline policy. A limit is a name from `policies`, an inline policy `{ algorithm, … }`
 * (optionally with `name`), or `{ policy, per }` with `per` one of `route` (the default),
 * `tenant`, `user`, `route-user` (see `LimitScope`). For a tenant on a route the limits are,
 * first found: the tenant's own (`tenants.<t>.routes`), its plan's (`tenants.<t>.plan`,
 * else `defaultPlan`), the route's (`routes`).
 */
import { readFileSync } from 'node:fs';
import { z } from 'zod';
import { fixedWindow } from '../algorithms/fixed-window.js';
import { gcra } from '../algorithms/gcra.js';
import { slidingWindowCounter } from '../algorithms/sliding-window-counter.js';
import { slidingWindowLog } from '../algorithms/sliding-window-log.js';
import { tokenBucket } from '../algorithms/token-bucket.js';
import { MAX_SCOPE_PART_LENGTH, MAX_TAKE_ALL_ITEMS } from '../bounds.js';
import { InvalidInputError } from '../errors.js';
import type { FailureMode } from '../http/core.js';
import {
  type Limit,
  type LimitScope,
  type Limits,
  limitNames,
  type ResolvedLimit,
  resolveLimits,
} from '../http/limits.js';
import type { Policy } from '../types.js';

// ---------------------------------------------------------------------------------------
// Public types

/**
 * A route's limits for every tenant of a plan-aware route: called by the guard for every
 * request with the verified tenant, it answers that tenant's limits (its own override, its
 * plan's, or the route's). The request is not read.
 */
export type PlanLimits = (req: unknown, tenant: string) => Limits;

/**
 * One route's settings, ready to spread into a guard's options:
 * `withRateLimit({ limiter, identify, ...routes.get('POST/orders') }, handler)`.
 */
export interface RouteSettings {
  /** The route template, e.g. `POST/orders`: it names the quota. */
  readonly route: string;
  /**
   * The route's limits: a policy (one limit on the route's scope: every format-1 route),
   * a `{ policy, per }`, a list of limits (stacked), or — when plans or per-tenant
   * overrides apply to the route — a {@link PlanLimits} function of the tenant.
   */
  readonly policy: Policy | Limit | readonly Limit[] | PlanLimits;
  /** Units each request spends on every limit (`cost`, default 1). */
  readonly cost: number;
  /** `fail-closed` (default: `503` when the limiter fails) or `fail-open`. */
  readonly failureMode: FailureMode;
  /** The per-replica local limit of a `fail-open` route. */
  readonly failOpenLimit?: number;
  /** Record-only: decide and count, never block (`shadow`, default false). */
  readonly shadow: boolean;
}

/** A tenant named in the file's `tenants`. */
export interface TenantSettings {
  /** Its plan (`tenants.<t>.plan`), when set; else `defaultPlan` applies. */
  readonly plan: string | undefined;
  /** Its own limits per route (`tenants.<t>.routes`), overriding its plan's. */
  readonly routes: ReadonlyMap<string, readonly ResolvedLimit[]>;
}

/** A validated policy file: everything the guard and the `sluice` command need. */
export interface PolicyConfig {
  /** 1 when the file uses only format-1 features, else 2. */
  readonly format: 1 | 2;
  /** Every route's guard settings, in the order of the file (`routes`, then plan-only routes). */
  readonly routes: ReadonlyMap<string, RouteSettings>;
  /** Named policies: the `policies` map, then inline policies with a `name`. */
  readonly policies: ReadonlyMap<string, Policy>;
  /** The routes' own limits (`routes`): for tenants whose plan does not list the route. */
  readonly defaults: ReadonlyMap<string, readonly ResolvedLimit[]>;
  /** Plan → route → limits. */
  readonly plans: ReadonlyMap<string, ReadonlyMap<string, readonly ResolvedLimit[]>>;
  /** The plan of tenants without one of their own. */
  readonly defaultPlan: string | undefined;
  /** Tenants with a plan or overrides of their own. */
  readonly tenants: ReadonlyMap<string, TenantSettings>;
}

/** The limits of one tenant on one route, and where they came from. */
export interface RouteLimits {
  readonly route: string;
  readonly tenant: string;
  /** The tenant's plan (its own, else `defaultPlan`), or undefined. */
  readonly plan: string | undefined;
  /** Where the plan came from: `tenants.<t>.plan`, `defaultPlan`, or undefined. */
  readonly planFrom: string | undefined;
  /** The path in the file of the limits that apply, e.g. `plans.pro["POST/orders"]`. */
  readonly source: string;
  /** Each limit's policy and scope, in order. */
  readonly limits: readonly ResolvedLimit[];
  /** Each limit's name in headers and events (see `limitNames`). */
  readonly names: readonly string[];
  /** The route's other settings. */
  readonly settings: RouteSettings;
}

/**
 * A policy file with problems: an {@link InvalidInputError} naming the first problem's path
 * (its `field`), carrying every problem found in `issues`.
 */
export class PolicyFileError extends InvalidInputError {
  /** Every problem, in the order of the file; each `field` is a path in the file. */
  readonly issues: readonly InvalidInputError[];

  constructor(issues: readonly Issue[]) {
    const first = issues[0] as Issue;
    super(first.field, first.expected, first.value);
    this.issues = issues.map((i) => new InvalidInputError(i.field, i.expected, i.value));
    if (issues.length > 1) {
      this.message = `${this.message} (and ${issues.length - 1} more: ${this.issues
        .slice(1)
        .map((issue) => issue.field)
        .join(', ')})`;
    }
  }
}

// ---------------------------------------------------------------------------------------
// Schemas (zod): the leaves of the document; maps and unions are walked by hand below so
// that each error names its exact path and "__proto__" keys are never dropped silently.

const positive = z
  .number({ error: 'a positive integer' })
  .int({ error: 'a positive integer' })
  .positive({ error: 'a positive integer' });
const identity = {
  name: z.string({ error: 'a string of 1–64 characters of [A-Za-z0-9._:/-]' }).optional(),
  version: z
    .union([z.number().int().nonnegative(), z.string()], {
      error: 'a non-negative integer or a string',
    })
    .optional(),
};
const settings = {
  cost: positive.optional(),
  failureMode: z
    .enum(['fail-closed', 'fail-open'], { error: '"fail-closed" or "fail-open"' })
    .optional(),
  failOpenLimit: positive.optional(),
  shadow: z.boolean({ error: 'true or false' }).optional(),
};
const SCOPES = ['route', 'tenant', 'user', 'route-user'] as const;
const per = z.enum(SCOPES, { error: 'one of "route", "tenant", "user", "route-user"' });

const PARAMETERS = {
  'fixed-window': { limit: positive, windowMs: positive },
  'sliding-window-log': { limit: positive, windowMs: positive },
  'sliding-window-counter': { limit: positive, windowMs: positive },
  'token-bucket': {
    capacity: positive,
    refillTokens: positive.optional(),
    refillIntervalMs: positive,
  },
  gcra: { limit: positive, periodMs: positive, burst: positive.optional() },
} as const;
type Algorithm = keyof typeof PARAMETERS;
const ALGORITHMS = Object.keys(PARAMETERS) as Algorithm[];

function definitions<S extends z.ZodRawShape>(extra: S) {
  return z.discriminatedUnion('algorithm', [
    z.strictObject({
      algorithm: z.literal('fixed-window'),
      ...PARAMETERS['fixed-window'],
      ...extra,
    }),
    z.strictObject({
      algorithm: z.literal('sliding-window-log'),
      ...PARAMETERS['sliding-window-log'],
      ...extra,
    }),
    z.strictObject({
      algorithm: z.literal('sliding-window-counter'),
      ...PARAMETERS['sliding-window-counter'],
      ...extra,
    }),
    z.strictObject({
      algorithm: z.literal('token-bucket'),
      ...PARAMETERS['token-bucket'],
      ...extra,
    }),
    z.strictObject({ algorithm: z.literal('gcra'), ...PARAMETERS.gcra, ...extra }),
  ]);
}

/** An inline policy (in a route, a plan, a tenant override, or the `policies` map). */
const definition = definitions(identity);
/** A format-1 route: an inline policy with the route's settings. */
const formatOneRoute = definitions({ ...identity, ...settings });
type Definition = z.infer<typeof definition>;

/** A route as an object with settings (format 2). */
const routeObject = z.strictObject({
  policy: z.unknown().optional(),
  per: per.optional(),
  ...settings,
});
/** `{ policy, per }`. */
const scopedLimit = z.strictObject({ policy: z.unknown().optional(), per: per.optional() });
const tenantObject = z.strictObject({
  plan: z.string({ error: 'the name of a plan' }).optional(),
  routes: z.unknown().optional(),
});
const documentObject = z.strictObject({
  policies: z.unknown().optional(),
  routes: z.unknown().optional(),
  plans: z.unknown().optional(),
  defaultPlan: z.string({ error: 'the name of a plan' }).optional(),
  tenants: z.unknown().optional(),
});

/** A route template: a method and a path, e.g. `POST/orders/:id`. */
const ROUTE = /^[A-Z]{3,7}\/[\x21-\x7e]*$/;
const ROUTE_EXPECTED = 'a route template such as "POST/orders" (a method, then the path, no query)';
/** Policy and plan names. */
const NAME = /^[A-Za-z0-9._:/-]{1,64}$/;

// ---------------------------------------------------------------------------------------
// Paths and problems

type Segment = string | number;
type Path = readonly Segment[];

interface Issue {
  readonly field: string;
  readonly expected: string;
  readonly value: unknown;
}

const IDENTIFIER = /^[A-Za-z_$][A-Za-z0-9_$]*$/;

/**
 * A path in the document as written in errors: `routes["POST/orders"].policy[1].limit`,
 * `plans.pro["GET/search"]`, `tenants.acme.plan`.
 */
export function fieldPath(path: Path): string {
  let text = '';
  for (const segment of path) {
    if (typeof segment === 'number') text += `[${segment}]`;
    else if (IDENTIFIER.test(segment)) text += text === '' ? segment : `.${segment}`;
    else text += `[${JSON.stringify(segment)}]`;
  }
  return text === '' ? 'config' : text;
}

class Problems {
  readonly list: Issue[] = [];

  add(path: Path, expected: string, value: unknown): void {
    this.list.push({ field: fieldPath(path), expected, value });
  }

  /** Adds zod's issues for `input` (parsed at `path`); returns the data when valid. */
  parse<T>(schema: z.ZodType<T>, input: unknown, path: Path): T | undefined {
    const parsed = schema.safeParse(input);
    if (parsed.success) return parsed.data;
    for (const issue of parsed.error.issues) {
      const at = [...path, ...(issue.path as Segment[])];
      const value = valueAt(input, issue.path as Segment[]);
      if (issue.code === 'unrecognized_keys') {
        const known = knownKeys(schema, value);
        for (const key of issue.keys) {
          this.add(
            [...at, key],
            `absent (not a field here${suggestion(key, known)})`,
            valueAt(value, [key]),
          );
        }
      } else if (issue.code === 'invalid_union' && 'discriminator' in issue) {
        this.add(at, `one of ${ALGORITHMS.map((a) => `"${a}"`).join(', ')}`, value);
      } else {
        this.add(at, issue.message, value);
      }
    }
    return undefined;
  }
}

function valueAt(input: unknown, path: readonly PropertyKey[]): unknown {
  let value = input;
  for (const segment of path) {
    if (typeof value !== 'object' || value === null) return undefined;
    value = Object.hasOwn(value, segment)
      ? (value as Record<PropertyKey, unknown>)[segment]
      : undefined;
  }
  return value;
}

/** The fields an object of `schema` may have (a discriminated union: `value`'s option's). */
function knownKeys(schema: z.ZodType, value: unknown): readonly string[] {
  const shapeKeys = (s: unknown) => Object.keys((s as { shape?: object }).shape ?? {});
  const options = (schema as { options?: readonly unknown[] }).options;
  if (options === undefined) return shapeKeys(schema);
  const algorithm = (value as { algorithm?: unknown } | undefined)?.algorithm;
  const option = options.find(
    (o) => (o as { shape: { algorithm: { value: unknown } } }).shape.algorithm.value === algorithm,
  );
  return option === undefined ? [] : shapeKeys(option);
}

/** `; did you mean "burst"?` for a key one or two edits from a known field. */
function suggestion(key: string, known: readonly string[]): string {
  const close = known.find((k) => distance(k.toLowerCase(), key.toLowerCase()) <= 2);
  if (close !== undefined) return `; did you mean "${close}"?`;
  if (key === 'per') return '; to count a policy on another scope, write { "policy": …, "per": … }';
  return known.length === 0 ? '' : `; known: ${known.join(', ')}`;
}

function distance(a: string, b: string): number {
  let row = Array.from({ length: b.length + 1 }, (_, i) => i);
  for (let i = 1; i <= a.length; i++) {
    const next = [i];
    for (let j = 1; j <= b.length; j++) {
      next[j] = Math.min(
        (row[j] as number) + 1,
        (next[j - 1] as number) + 1,
        (row[j - 1] as number) + (a[i - 1] === b[j - 1] ? 0 : 1),
      );
    }
    row = next;
  }
  return row[b.length] as number;
}

const isObject = (value: unknown): value is Record<string, unknown> =>
  typeof value === 'object' && value !== null && !Array.isArray(value);

/** The own entries of a map in the document, or a problem when it is not an object. */
function entriesOf(
  problems: Problems,
  value: unknown,
  path: Path,
  expected: string,
): [string, unknown][] {
  if (value === undefined) return [];
  if (!isObject(value)) {
    problems.add(path, expected, value);
    return [];
  }
  return Object.keys(value).map((key) => [key, value[key]]);
}

// ---------------------------------------------------------------------------------------
// Building

/** What a limit spec in the file becomes before the guard's own checks. */
interface Built {
  readonly limits: ResolvedLimit[];
  /** False when a problem was found in it (then `limits` may be partial). */
  readonly ok: boolean;
}

class Compiler {
  readonly problems = new Problems();
  /** The `policies` map. */
  readonly named = new Map<string, Policy>();
  /** Every key of the `policies` map, valid or not (a reference to a bad one is no new problem). */
  readonly declared = new Set<string>();
  /** Every named policy (map and inline), by name, with where it was defined. */
  readonly names = new Map<string, { policy: Policy; at: string }>();
  usesFormatTwo = false;

  /** Builds an inline definition at `path`; `name` given for entries of the map. */
  policy(input: unknown, path: Path, mapName?: string): Policy | undefined {
    if (mapName !== undefined && isObject(input) && Object.hasOwn(input, 'name')) {
      this.problems.add(
        [...path, 'name'],
        'absent (the key in "policies" names the policy)',
        input.name,
      );
      const { name: _, ...rest } = input;
      this.problems.parse(definition, rest, path); // its other problems too
      return undefined;
    }
    const parsed = this.problems.parse(definition, input, path);
    if (parsed === undefined) return undefined;
    const policy = this.build(mapName === undefined ? parsed : { ...parsed, name: mapName }, path);
    if (policy === undefined) return undefined;
    if (policy.named) {
      const seen = this.names.get(policy.name);
      if (seen !== undefined && seen.policy.id !== policy.id) {
        this.problems.add(
          mapName === undefined ? [...path, 'name'] : path,
          `a name not given to another policy ("${policy.name}" is defined at ${seen.at}; refer to it from "policies" by name, or name this one differently)`,
          policy.name,
        );
        return undefined;
      }
      if (seen === undefined) this.names.set(policy.name, { policy, at: fieldPath(path) });
    }
    return policy;
  }

  /** Runs the builder; its errors (`policy.limit`) become problems at `path.limit`. */
  build(d: Definition, path: Path): Policy | undefined {
    try {
      return build(d);
    } catch (error) {
      if (!(error instanceof InvalidInputError)) throw error;
      const rest = error.field.replace(/^policy\.?/, '');
      const at = rest === '' ? [] : rest.split('.');
      this.problems.add([...path, ...at], error.expected, valueAt(d, at));
      return undefined;
    }
  }

  /** One limit: a name, an inline policy, or `{ policy, per }`. */
  limit(input: unknown, path: Path): ResolvedLimit | undefined {
    if (typeof input === 'string') {
      const policy = this.named.get(input);
      if (policy === undefined && this.declared.has(input)) return undefined;
      if (policy === undefined) {
        const known = [...this.declared];
        this.problems.add(
          path,
          known.length === 0
            ? `a policy defined in "policies" (there is none; "${input}" is not defined)`
            : `the name of a policy in "policies" (${known.map((n) => `"${n}"`).join(', ')}), not "${input}"`,
          input,
        );
        return undefined;
      }
      this.usesFormatTwo = true;
      return { policy, per: 'route' };
    }
    if (isObject(input) && Object.hasOwn(input, 'algorithm')) {
      const policy = this.policy(input, path);
      return policy === undefined ? undefined : { policy, per: 'route' };
    }
    if (isObject(input) && Object.hasOwn(input, 'policy')) {
      this.usesFormatTwo = true;
      const parsed = this.problems.parse(scopedLimit, input, path);
      if (parsed === undefined) return undefined;
      if (
        Array.isArray(parsed.policy) ||
        (isObject(parsed.policy) && Object.hasOwn(parsed.policy, 'policy'))
      ) {
        this.problems.add(
          [...path, 'policy'],
          'a policy name or an inline policy { algorithm, … }',
          parsed.policy,
        );
        return undefined;
      }
      const inner = this.limit(parsed.policy, [...path, 'policy']);
      return inner === undefined ? undefined : { policy: inner.policy, per: parsed.per ?? 'route' };
    }
    this.problems.add(
      path,
      'a policy name, an inline policy { algorithm, … }, or { policy, per }',
      input,
    );
    return undefined;
  }

  /**
   * One limit or a list of 1–16, checked as the guard checks them; `per` (a route's own
   * `per`) sets the scope of a single limit.
   */
  limits(input: unknown, path: Path, route: string, per?: LimitScope): Built {
    const list = Array.isArray(input) ? input : [input];
    if (Array.isArray(input)) {
      this.usesFormatTwo = true;
      if (per !== undefined) {
        this.problems.add(
          [...path.slice(0, -1), 'per'],
          'absent when policy is a list (give each item its own per)',
          per,
        );
        return { limits: [], ok: false };
      }
      if (input.length < 1 || input.length > MAX_TAKE_ALL_ITEMS) {
        this.problems.add(path, `a list of 1–${MAX_TAKE_ALL_ITEMS} limits`, input);
        return { limits: [], ok: false };
      }
    }
    const limits: ResolvedLimit[] = [];
    let ok = true;
    list.forEach((item, i) => {
      const limit = this.limit(item, Array.isArray(input) ? [...path, i] : path);
      if (limit === undefined) ok = false;
      else limits.push(per === undefined ? limit : { policy: limit.policy, per });
    });
    if (!ok) return { limits, ok };
    // The guard's own checks, named by their place in the file.
    const field = fieldPath(path);
    try {
      const resolved = resolveLimits(asLimits(limits), field);
      limitNames(resolved, route, field);
    } catch (error) {
      if (!(error instanceof InvalidInputError)) throw error;
      this.problems.list.push({ field: error.field, expected: error.expected, value: undefined });
      return { limits, ok: false };
    }
    return { limits, ok: true };
  }
}

/** Limits as the guard takes them: a policy alone for the route's scope. */
function asLimits(limits: readonly ResolvedLimit[]): Limits {
  const out = limits.map((l) => (l.per === 'route' ? l.policy : Object.freeze({ ...l })));
  return Object.freeze(out.length === 1 ? (out[0] as Limit) : out);
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
  return 'issues' in result
    ? result.issues.map((i) => new InvalidInputError(i.field, i.expected, i.value))
    : [];
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

/**
 * Reads a JSON policy file (once, at start) into a {@link PolicyConfig}.
 *
 * @throws {InvalidInputError} `config` when the file cannot be read or is not JSON; a
 *   {@link PolicyFileError} when its content is invalid.
 */
export function loadPolicyConfig(path: string | URL): PolicyConfig {
  return policyConfigFrom(readPolicyFile(path));
}

/**
 * Reads and validates a JSON policy file (once, at start): each route's settings, ready
 * for a guard.
 *
 * @throws {InvalidInputError} see {@link loadPolicyConfig}.
 */
export function loadPolicies(path: string | URL): ReadonlyMap<string, RouteSettings> {
  return loadPolicyConfig(path).routes;
}

/**
 * The parsed JSON of a policy file.
 *
 * @throws {InvalidInputError} `config` when it cannot be read or is not JSON.
 */
export function readPolicyFile(path: string | URL): unknown {
  try {
    return JSON.parse(readFileSync(path, 'utf8'));
  } catch (error) {
    const invalid = new InvalidInputError(
      'config',
      `a readable JSON file (${String(path)}: ${(error as Error).message})`,
      undefined,
    );
    (invalid as { cause?: unknown }).cause = error;
    throw invalid;
  }
}

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
 *   not a non-empty string.
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
    throw new InvalidInputError('tenant', 'a non-empty string', tenant);
  }
  const found = resolve(config, route, tenant);
  return { route, tenant, ...found, names: limitNames(found.limits, route, 'limits'), settings };
}

/** The limits of a tenant on a route of a valid config (see {@link routeLimits}). */
function resolve(
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

// ---------------------------------------------------------------------------------------

type Compiled = { config: PolicyConfig } | { issues: readonly Issue[] };
type Settings = Omit<RouteSettings, 'policy' | 'route'>;
const DEFAULT_SETTINGS: Settings = Object.freeze({
  cost: 1,
  failureMode: 'fail-closed',
  shadow: false,
});

function compile(input: unknown): Compiled {
  const c = new Compiler();
  const problems = c.problems;
  if (!isObject(input)) {
    problems.add([], 'a JSON object with "routes"', input);
    return { issues: problems.list };
  }
  // Unknown or mistyped top-level fields are reported; the rest is still checked.
  problems.parse(documentObject, input, []);
  const doc = {
    policies: input.policies,
    routes: input.routes,
    plans: input.plans,
    defaultPlan: typeof input.defaultPlan === 'string' ? input.defaultPlan : undefined,
    tenants: input.tenants,
  };
  if (
    doc.policies !== undefined ||
    doc.plans !== undefined ||
    doc.defaultPlan !== undefined ||
    doc.tenants !== undefined
  ) {
    c.usesFormatTwo = true;
  }

  // Named policies first: everything else may refer to them.
  for (const [name, value] of entriesOf(
    problems,
    doc.policies,
    ['policies'],
    'an object of named policies',
  )) {
    if (!NAME.test(name)) {
      problems.add(['policies', name], 'named with 1–64 characters of [A-Za-z0-9._:/-]', name);
      continue;
    }
    c.declared.add(name);
    const policy = c.policy(value, ['policies', name], name);
    if (policy !== undefined) c.named.set(name, policy);
  }

  // Routes: their own limits and settings.
  const defaults = new Map<string, ResolvedLimit[]>();
  const routeSettings = new Map<string, Settings>();
  const broken = new Set<string>();
  const routeEntries = entriesOf(problems, doc.routes, ['routes'], 'an object of route templates');
  for (const [route, value] of routeEntries) {
    const path = ['routes', route];
    if (!ROUTE.test(route)) {
      problems.add(path, ROUTE_EXPECTED, route);
      continue;
    }
    let settings: Settings | undefined = DEFAULT_SETTINGS;
    let built: Built | undefined;
    if (isObject(value) && Object.hasOwn(value, 'algorithm')) {
      // Format 1: an inline policy with the route's settings.
      const r = problems.parse(formatOneRoute, value, path);
      if (r !== undefined) {
        const { cost, failureMode, failOpenLimit, shadow, ...d } = r;
        settings = routeOptions(problems, path, { cost, failureMode, failOpenLimit, shadow });
        const policy = c.policy(d, path);
        built = { limits: policy ? [{ policy, per: 'route' }] : [], ok: policy !== undefined };
      } else built = { limits: [], ok: false };
    } else if (isObject(value)) {
      // { policy, per?, cost?, failureMode?, failOpenLimit?, shadow? }; without policy, the
      // plans give the limits.
      c.usesFormatTwo = true;
      const r = problems.parse(routeObject, value, path);
      settings = r && routeOptions(problems, path, r);
      // The limits are checked even when a setting is wrong, to report every problem.
      const per = r === undefined ? undefined : r.per;
      if (value.policy !== undefined) {
        built = c.limits(value.policy, [...path, 'policy'], route, per);
        if (r === undefined) built = { limits: built.limits, ok: false };
      } else if (r === undefined) built = { limits: [], ok: false };
      else if (per !== undefined) {
        problems.add([...path, 'policy'], 'the policy that "per" applies to', undefined);
        built = { limits: [], ok: false };
      }
    } else {
      // A policy name, or a list of limits.
      built = c.limits(value, path, route);
    }
    if (settings === undefined || built?.ok === false) {
      broken.add(route);
      continue;
    }
    routeSettings.set(route, settings);
    if (built !== undefined) defaults.set(route, built.limits);
  }

  // Plans: plan → route → limits.
  const plans = new Map<string, Map<string, ResolvedLimit[]>>();
  const planRoutes: string[] = [];
  for (const [plan, routes] of entriesOf(problems, doc.plans, ['plans'], 'an object of plans')) {
    if (!NAME.test(plan)) {
      problems.add(['plans', plan], 'a plan named with 1–64 characters of [A-Za-z0-9._:/-]', plan);
      continue;
    }
    const table = new Map<string, ResolvedLimit[]>();
    plans.set(plan, table);
    for (const [route, spec] of entriesOf(
      problems,
      routes,
      ['plans', plan],
      'an object of route templates and their limits',
    )) {
      const path = ['plans', plan, route];
      if (!ROUTE.test(route)) {
        problems.add(path, ROUTE_EXPECTED, route);
        continue;
      }
      if (!routeEntries.some(([r]) => r === route) && !planRoutes.includes(route)) {
        planRoutes.push(route);
      }
      const built = c.limits(spec, path, route);
      if (built.ok) table.set(route, built.limits);
      else broken.add(route);
    }
  }
  const planList = () => [...plans.keys()].map((p) => `"${p}"`).join(', ');
  const knownPlan = (plan: string, path: Path): boolean => {
    if (plans.has(plan)) return true;
    problems.add(
      path,
      plans.size === 0
        ? `the name of a plan in "plans" (there is none; "${plan}" is not defined)`
        : `the name of a plan in "plans" (${planList()}), not "${plan}"`,
      plan,
    );
    return false;
  };
  const defaultPlan = doc.defaultPlan;
  const defaultOk = defaultPlan === undefined || knownPlan(defaultPlan, ['defaultPlan']);

  const allRoutes = [...routeEntries.map(([r]) => r).filter((r) => ROUTE.test(r)), ...planRoutes];

  // Tenants: their plan and their own limits per route.
  const tenants = new Map<
    string,
    { plan: string | undefined; routes: Map<string, ResolvedLimit[]> }
  >();
  for (const [tenant, value] of entriesOf(
    problems,
    doc.tenants,
    ['tenants'],
    'an object of tenants',
  )) {
    const path = ['tenants', tenant];
    if (tenant.length > MAX_SCOPE_PART_LENGTH || tenant.length === 0) {
      problems.add(path, 'a tenant id of 1 to 65,536 characters', tenant);
      continue;
    }
    // Its problems are reported; its plan and routes are still checked when readable.
    if (problems.parse(tenantObject, value, path) === undefined && !isObject(value)) continue;
    const t = value as { plan?: unknown; routes?: unknown };
    if (t.plan !== undefined && typeof t.plan !== 'string') continue;
    if (t.plan !== undefined && !knownPlan(t.plan, [...path, 'plan'])) continue;
    const routes = new Map<string, ResolvedLimit[]>();
    for (const [route, spec] of entriesOf(
      problems,
      t.routes,
      [...path, 'routes'],
      'an object of route templates and their limits',
    )) {
      const at = [...path, 'routes', route];
      if (!allRoutes.includes(route)) {
        problems.add(
          at,
          `a route of "routes" or "plans" (${allRoutes.map((r) => `"${r}"`).join(', ')})`,
          route,
        );
        continue;
      }
      const built = c.limits(spec, at, route);
      if (built.ok) routes.set(route, built.limits);
    }
    tenants.set(tenant, { plan: t.plan, routes });
  }

  // Every tenant has limits on every route: a plan that does not list a route falls back
  // to the route's own limits, which must then exist.
  if (defaultOk) {
    for (const route of allRoutes) {
      if (broken.has(route) || defaults.has(route)) continue;
      for (const [plan, table] of plans) {
        if (!table.has(route)) {
          problems.add(
            ['plans', plan, route],
            `the limits of plan "${plan}" on ${route} (the route has none of its own in "routes" to fall back on)`,
            undefined,
          );
        }
      }
      if (defaultPlan === undefined) {
        problems.add(
          ['routes', route],
          'the limits of tenants without a plan: give the route its own policy, or set "defaultPlan"',
          undefined,
        );
      }
    }
  }

  if (allRoutes.length === 0 && problems.list.length === 0) {
    problems.add(['routes'], 'at least one route', doc.routes);
  }
  if (problems.list.length > 0) return { issues: problems.list };

  // Everything is valid: the guard's settings for each route.
  const planAware = (route: string) =>
    [...plans.values()].some((table) => table.has(route)) ||
    [...tenants.values()].some((t) => t.routes.has(route));
  const routes = new Map<string, RouteSettings>();
  const config: PolicyConfig = {
    format: c.usesFormatTwo ? 2 : 1,
    routes,
    // The map's policies first (they were built first), then inline names.
    policies: new Map([...c.names].map(([name, { policy }]) => [name, policy])),
    defaults: freezeTable(defaults),
    plans: new Map([...plans].map(([p, table]) => [p, freezeTable(table)])),
    defaultPlan,
    tenants: new Map(
      [...tenants].map(([t, s]) => [
        t,
        Object.freeze({ plan: s.plan, routes: freezeTable(s.routes) }),
      ]),
    ),
  };
  for (const route of allRoutes) {
    const settings = routeSettings.get(route) ?? DEFAULT_SETTINGS;
    let policy: RouteSettings['policy'];
    if (planAware(route)) {
      // Precomputed per tenant of the file, one Map lookup per request; every other
      // tenant has the default plan's limits, else the route's.
      const byTenant = new Map<string, Limits>();
      for (const tenant of config.tenants.keys()) {
        byTenant.set(tenant, asLimits(resolve(config, route, tenant).limits));
      }
      const planned =
        defaultPlan === undefined ? undefined : config.plans.get(defaultPlan)?.get(route);
      const others = asLimits(planned ?? config.defaults.get(route) ?? []);
      policy = (_req: unknown, tenant: string) => byTenant.get(tenant) ?? others;
    } else {
      policy = asLimits(config.defaults.get(route) ?? []);
    }
    routes.set(route, Object.freeze({ route, policy, ...settings }));
  }
  return { config: Object.freeze(config) };
}

function freezeTable(
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

/** The route's settings with defaults; a fail-open route needs its local limit. */
function routeOptions(
  problems: Problems,
  path: Path,
  r: { cost?: number; failureMode?: FailureMode; failOpenLimit?: number; shadow?: boolean },
): Settings | undefined {
  if (r.failureMode === 'fail-open' && r.failOpenLimit === undefined) {
    problems.add([...path, 'failOpenLimit'], 'a positive integer with "fail-open"', undefined);
    return undefined;
  }
  return {
    cost: r.cost ?? DEFAULT_SETTINGS.cost,
    failureMode: r.failureMode ?? DEFAULT_SETTINGS.failureMode,
    ...(r.failOpenLimit === undefined ? {} : { failOpenLimit: r.failOpenLimit }),
    shadow: r.shadow ?? DEFAULT_SETTINGS.shadow,
  };
}

function build(r: Definition): Policy {
  const identity = { name: r.name, version: r.version };
  switch (r.algorithm) {
    case 'fixed-window':
      return fixedWindow({ limit: r.limit, windowMs: r.windowMs, ...identity });
    case 'sliding-window-log':
      return slidingWindowLog({ limit: r.limit, windowMs: r.windowMs, ...identity });
    case 'sliding-window-counter':
      return slidingWindowCounter({ limit: r.limit, windowMs: r.windowMs, ...identity });
    case 'token-bucket':
      return tokenBucket({
        capacity: r.capacity,
        refillTokens: r.refillTokens,
        refillIntervalMs: r.refillIntervalMs,
        ...identity,
      });
    case 'gcra':
      return gcra({ limit: r.limit, periodMs: r.periodMs, burst: r.burst, ...identity });
  }
}

/** A time span in the largest unit that states it exactly: `500 ms`, `90 s`, `5 min`, `1 h`. */
function span(ms: number): string {
  if (ms % 3_600_000 === 0) return `${ms / 3_600_000} h`;
  if (ms % 60_000 === 0 && ms >= 120_000) return `${ms / 60_000} min`;
  if (ms % 1000 === 0) return `${ms / 1000} s`;
  return `${ms} ms`;
}

/**
 * A policy in words, from its own parameters: `fixed-window, 10 per 60 s`,
 * `token-bucket, 20 tokens, 5 more every 1 s`, `gcra, 10 per 1 s, bursts of 5`.
 */
export function describePolicy(policy: Policy): string {
  const p = policy as Policy & Record<string, number | undefined>;
  const version = policy.version === '1' ? '' : `, version ${policy.version}`;
  if (typeof p.windowMs === 'number') {
    return `${policy.algorithm}, ${policy.limit} per ${span(p.windowMs)}${version}`;
  }
  if (typeof p.refillIntervalMs === 'number') {
    return `${policy.algorithm}, ${p.capacity} tokens, ${p.refillTokens} more every ${span(p.refillIntervalMs)}${version}`;
  }
  if (typeof p.periodMs === 'number' && typeof p.emissionIntervalUs === 'number') {
    const rate = Math.round((p.periodMs * 1000) / p.emissionIntervalUs);
    return `${policy.algorithm}, ${rate} per ${span(p.periodMs)}, bursts of ${p.burst}${version}`;
  }
  return `${policy.algorithm}, ${policy.limit} per ${span(policy.quotaWindowMs)}${version}`;
}
