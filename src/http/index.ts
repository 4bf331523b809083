/** HTTP integration: the framework-free mapping and the `node:http` adapter. */
export {
  type FailureMode,
  type HttpResponseSpec,
  limitedResponse,
  retryAfterSeconds,
  unavailableResponse,
  unidentifiedResponse,
} from './core.js';
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
