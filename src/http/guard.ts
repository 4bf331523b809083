/**
 * The framework-free guard of one route: skip? → verified identity → the route's limits
 * (one policy, stacked policies, or a plan chosen per tenant) → one `take` or one atomic
 * `takeAll` → outcome, with fail-closed / fail-open, shadow mode, outcome counts, events and
 * shaped refusals. Adapters only turn its verdict into their framework's response.
 *
 * This module wires the parts, each in `guard/`: the public types (`types.ts`), the option
 * checks (`options.ts`), a request's steps (`steps.ts`), its outcome (`outcome.ts`) and the
 * refusals the `responses` hooks may shape (`refusals.ts`).
 */
import { guardConfig } from './guard/options.js';
import { noCounts } from './guard/outcome.js';
import { requestSteps } from './guard/steps.js';
import type { Guard, GuardOptions } from './guard/types.js';

export { GUARD_OPTION_KEYS } from './guard/options.js';
export type {
  Guard,
  GuardOptions,
  GuardVerdict,
  HttpOutcome,
  HttpOutcomeEvent,
  LimitedResponseContext,
  ResponseChange,
  ResponseHooks,
  RouteLimitSettings,
  UnavailableResponseContext,
  UnidentifiedResponseContext,
} from './guard/types.js';

/**
 * Makes the guard of one route. Answers before any handler work: `429` when limited, `503`
 * when the limiter failed on a fail-closed route, `401` without an identity.
 *
 * @throws {InvalidInputError} for an unknown option, a missing limiter, route or identify,
 *   invalid fixed limits (see `resolveLimits`), per-user limits without `user`, a numeric
 *   `cost` that is not a positive safe integer, `"fail-open"` without a valid
 *   `failOpenLimit` / with an invalid `failOpenWindowMs`, a malformed `shadowHeader` or
 *   `wwwAuthenticate`, a hook that is not a function, or, with `settle`, a fixed sliding
 *   window log limit above `MAX_PRICED_LOG_LIMIT` (500; `policy.limit`, `policy[i].limit`).
 *   At request time, an invalid answer of
 *   a `policy`, `route` or `cost` function rejects the guard's promise with an
 *   `InvalidInputError` (the adapters pass it to the framework's error handling: `500`).
 * @throws {RedisConfigError} at request time, when Redis refuses the limiter's
 *   configuration (a wrong password, a missing permission): a mistake to fix, passed to the
 *   framework's error handling like bad input — never answered as fail-open or as a `503`.
 */
export function createGuard<Req>(options: GuardOptions<Req>): Guard<Req> {
  const counts = noCounts();
  return Object.assign(requestSteps(guardConfig(options), counts), { counts });
}
