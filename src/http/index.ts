/**
 * `sluice/http`: the framework-free HTTP layer — the guard of one route (skip → verified
 * identity → limits → one atomic decision → `429`/`503`/`401` or pass), the pure mapping of
 * a decision to a response and RateLimit headers, stacked and scoped limits, client
 * addresses for IP-keyed outer limits, and the local fallback window of fail-open routes.
 * The adapters have their own entries: `sluice/node`, `sluice/express`, `sluice/fastify`,
 * `sluice/fetch`.
 *
 * @packageDocumentation
 */

export { type ClientAddressOptions, clientAddressOf, foldAddress } from './client-address.js';
export {
  ABNORMAL_USAGE_DETECTED_TYPE,
  type FailureMode,
  type HeaderOptions,
  type HttpResponseSpec,
  limitedResponse,
  QUOTA_EXCEEDED_TYPE,
  type QuotaReport,
  rateLimitHeaderList,
  rateLimitHeaders,
  retryAfterSeconds,
  TEMPORARY_REDUCED_CAPACITY_TYPE,
  unavailableResponse,
  unidentifiedResponse,
} from './core.js';
export type {
  NodeResponseLike,
  SettledResponse,
  SettleInfo,
  SettleOption,
  VerdictSettle,
} from './guard/settle.js';
export {
  createGuard,
  type Guard,
  type GuardOptions,
  type GuardVerdict,
  type HttpOutcome,
  type HttpOutcomeEvent,
  type LimitedResponseContext,
  type ResponseChange,
  type ResponseHooks,
  type RouteLimitSettings,
  type UnavailableResponseContext,
  type UnidentifiedResponseContext,
} from './guard.js';
export type {
  Limit,
  LimitScope,
  Limits,
  LimitsOption,
  ResolvedLimit,
  ScopedLimit,
} from './limits.js';
export { LocalWindow } from './local-window.js';
