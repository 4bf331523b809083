/**
 * Format 1 → format 2. In format 1 each route's value is one inline policy with the
 * route's settings among its fields:
 *
 * ```json
 * { "routes": { "POST/orders": { "algorithm": "fixed-window", "limit": 10, "windowMs": 1000, "cost": 2 } } }
 * ```
 *
 * In format 2 the same route is a route object whose `policy` is that inline policy:
 *
 * ```json
 * { "routes": { "POST/orders": { "policy": { "algorithm": "fixed-window", "limit": 10, "windowMs": 1000 }, "cost": 2 } } }
 * ```
 *
 * The upgrade rewrites every format-1 route so; the compiler then knows format 2 only.
 */
import type { Path } from './paths.js';
import { type Issue, isObject, Problems } from './problems.js';
import { identity, inlinePolicy, ROUTE, routeSettings } from './schema.js';

/** A format-1 route: an inline policy with the route's settings. */
const formatOneRoute = inlinePolicy({ ...identity, ...routeSettings });

/** The fields of a format-1 route that are the route's, not its policy's. */
const SETTINGS = Object.keys(routeSettings);

/** A document in format 2, and how it relates to the file it came from. */
export interface Upgraded {
  /** The document in format 2: the input with each format-1 route rewritten. */
  readonly document: unknown;
  /** 1 when the input uses only format-1 features, else 2 (meaningful for a valid file). */
  readonly format: 1 | 2;
  /**
   * The problems of format-1 routes that cannot be rewritten, by route: their flat object
   * is not a valid inline policy with settings, so which field is the policy's is unknown.
   * Such a route is left as it is; the compiler reports these problems in its place.
   */
  readonly issues: ReadonlyMap<string, readonly Issue[]>;
  /** Maps a path in `document` to the path of the same field in the input. */
  readonly origin: (path: Path) => Path;
}

/** True for a route value of format 1: an object with an `algorithm`. */
const isFormatOne = (value: unknown): value is Record<string, unknown> =>
  isObject(value) && Object.hasOwn(value, 'algorithm');

/**
 * Rewrites a parsed policy document's format-1 routes into format 2 (see the module's
 * comment). Anything else, valid or not, is left as it is for the compiler to check; so are
 * routes whose key is not a route template (the compiler reports the key).
 */
export function upgradeFormatOne(input: unknown): Upgraded {
  const issues = new Map<string, readonly Issue[]>();
  const upgraded = new Set<string>();
  const origin = (path: Path): Path =>
    path[0] === 'routes' && upgraded.has(path[1] as string) && path[2] === 'policy'
      ? ['routes', path[1] as string, ...path.slice(3)]
      : path;
  if (!isObject(input) || !isObject(input.routes)) {
    return { document: input, format: formatOf(input), issues, origin };
  }
  const routes = Object.entries(input.routes).map(([route, value]): [string, unknown] => {
    if (!ROUTE.test(route) || !isFormatOne(value)) return [route, value];
    const problems = new Problems();
    if (problems.parse(formatOneRoute, value, ['routes', route]) === undefined) {
      issues.set(route, problems.list);
      return [route, value];
    }
    upgraded.add(route);
    return [route, routeObjectOf(value)];
  });
  // fromEntries, not assignment: a "__proto__" key stays an own key, as in the input.
  const document = { ...input, routes: Object.fromEntries(routes) };
  return { document, format: formatOf(input), issues, origin };
}

/** `{ policy: { algorithm, … }, cost, failureMode, failOpenLimit, shadow }`. */
function routeObjectOf(value: Record<string, unknown>): Record<string, unknown> {
  const policy: Record<string, unknown> = {};
  const route: Record<string, unknown> = { policy };
  for (const [key, field] of Object.entries(value)) {
    if (SETTINGS.includes(key)) route[key] = field;
    else policy[key] = field;
  }
  return route;
}

/** 2 when the document has any field or route value that format 1 does not have. */
function formatOf(input: unknown): 1 | 2 {
  if (!isObject(input)) return 1;
  const { policies, plans, defaultPlan, tenants, routes } = input;
  if (policies !== undefined || plans !== undefined || tenants !== undefined) return 2;
  if (typeof defaultPlan === 'string') return 2;
  return isObject(routes) && !Object.values(routes).every(isFormatOne) ? 2 : 1;
}
