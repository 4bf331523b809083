/**
 * `sluice/config`: route policies from a JSON policy file — named policies, stacked and
 * scoped limits, plans and per-tenant overrides — validated once, at start, into settings
 * ready for a guard.
 *
 * @packageDocumentation
 */
export {
  checkPolicies,
  describePolicy,
  fieldPath,
  loadPolicies,
  loadPolicyConfig,
  type PlanLimits,
  type PolicyConfig,
  PolicyFileError,
  planOf,
  policiesFrom,
  policyConfigFrom,
  type RouteLimits,
  type RouteSettings,
  routeLimits,
  type TenantSettings,
} from './policies.js';
