/**
 * What a validated policy file becomes: the settings of each route's guard, the named
 * policies, the plans and the tenants, as the guard and the `sluice` command read them.
 */

import type { FailureMode } from '../http/core.js';
import type { Limit, Limits, ResolvedLimit } from '../http/limits.js';
import type { Policy } from '../types.js';

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
  /**
   * The file's route key, e.g. `POST/orders`: it names the quota in every adapter, which
   * honours an explicit `route` over its own template (Express's mounted path, Fastify's
   * prefixed URL) — the name `sluice inspect --route` and `sluice reset` use.
   */
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
