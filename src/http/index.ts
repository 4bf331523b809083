/** HTTP integration: the framework-free mapping and guard; `node:http`, Express, Fastify and Fetch-API adapters. */

export { type ClientAddressOptions, clientAddressOf, foldAddress } from './client-address.js';
export {
  type FailureMode,
  type HeaderOptions,
  type HttpResponseSpec,
  limitedResponse,
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
  type FastifyRateLimitOptions,
  type FastifyRouteRateLimit,
  fastifyRateLimit,
} from './fastify.js';
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
} from './guard.js';
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
