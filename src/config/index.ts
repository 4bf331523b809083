/**
 * Route policies from configuration: one JSON document maps route templates to their
 * limits, cost, failure mode and shadow flag, validated with zod when loaded (once, at
 * start). Every error names the path of the bad field in the document.
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
 *
 * The modules: `schema` (the document's zod schemas), `upgrade` (format 1 → format 2),
 * `compile`, `sections` and `limit-builder` (the compiler), `problems` and `paths` (errors
 * and their paths), `resolve` (a tenant's limits on a route), `describe` (policies in
 * words), `load` (files), `types` (what a file compiles into).
 */
export { checkPolicies, policiesFrom, policyConfigFrom } from './compile.js';
export { describePolicy } from './describe.js';
export { loadPolicies, loadPolicyConfig, readPolicyFile } from './load.js';
export { fieldPath, type Path, type Segment } from './paths.js';
export { type Issue, PolicyFileError } from './problems.js';
export { planOf, routeLimits } from './resolve.js';
export type {
  PlanLimits,
  PolicyConfig,
  RouteLimits,
  RouteSettings,
  TenantSettings,
} from './types.js';
