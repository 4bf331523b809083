/** HTTP integration: the framework-free mapping and guard; `node:http`, Express, Fastify and Fetch-API adapters. */

export { type ClientAddressOptions, clientAddressOf, foldAddress } from './client-address.js';
export {
  type FailureMode,
  type HeaderOptions,
  type HttpResponseSpec,
  limitedResponse,
  QUOTA_EXCEEDED_TYPE,
  type QuotaReport,
  rateLimitHeaderList,
  rateLimitHeaders,
  retryAfterSeconds,
  unavailableResponse,
  unidentifiedResponse,
} from './core.js';
export {
  type ExpressRateLimit,
  type ExpressRateLimitOptions,
  type ExpressRequestLike,
  expressRateLimit,
  expressRoute,
} from './express.js';
export {
  type FastifyInstanceLike,
  type FastifyRateLimitOptions,
  type FastifyRateLimitPlugin,
  type FastifyReplyLike,
  type FastifyRequestLike,
  type FastifyRouteRateLimit,
  fastifyRateLimit,
} from './fastify-plugin.js';
export {
  type FetchRateLimit,
  type FetchRateLimitOptions,
  type FetchVerdict,
  fetchRateLimit,
} from './fetch.js';
export {
  createGuard,
  type Guard,
  type GuardOptions,
  type GuardVerdict,
  type LimitedResponseContext,
  type ResponseChange,
  type ResponseHooks,
  type UnavailableResponseContext,
  type UnidentifiedResponseContext,
} from './guard.js';
export type {
  Limit,
  LimitScope,
  Limits,
  LimitsOption,
  ScopedLimit,
} from './limits.js';
export { LocalWindow } from './local-window.js';
export {
  type HttpOutcome,
  type HttpOutcomeEvent,
  type NodeRateLimitGuard,
  type NodeRateLimitOptions,
  nodeRateLimit,
  send,
  withRateLimit,
} from './node.js';
