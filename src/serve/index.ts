/**
 * `sluice/serve`: Envoy's global rate limit service (`envoy.service.ratelimit.v3`), decided
 * by sluice — a drop-in for envoyproxy/ratelimit that reads its YAML configuration and its
 * environment. `sluice serve` runs it from the command line; `createRateLimitService` embeds
 * it. See docs/serve.md.
 *
 * Its peer dependencies — `@grpc/grpc-js`, `@grpc/proto-loader` and `yaml` — are loaded only
 * when the service starts; the root entry loads none of them.
 *
 * @example
 * ```ts
 * import { connectRedis } from 'sluice/node-redis';
 * import { createRateLimitService } from 'sluice/serve';
 *
 * const client = await connectRedis({ url: 'redis://127.0.0.1:6379' });
 * const service = await createRateLimitService({ client, config: '/etc/ratelimit/config' });
 * process.on('SIGTERM', async () => {
 *   await service.close();
 *   await client.close();
 * });
 * ```
 *
 * @packageDocumentation
 */
import { loadPeer } from './peer.js';
import type { RateLimitService, RateLimitServiceOptions } from './types.js';

export { MissingPeerError } from './peer.js';
export { RuleFileError } from './rules/errors.js';
export type { Compat } from './settings.js';
export type { RateLimitService, RateLimitServiceOptions } from './types.js';

/**
 * Starts the service: loads the rules (a bad file is logged and reported; the service then
 * answers `UNAVAILABLE` until a good one loads), connects the limiter, binds the gRPC and
 * HTTP servers, and resolves once both listen.
 *
 * @throws {MissingPeerError} `@grpc/grpc-js`, `@grpc/proto-loader` or `yaml` is not installed.
 * @throws {InvalidInputError} a bad option or environment variable.
 * @throws the error of a port that cannot be bound.
 */
export async function createRateLimitService(
  options: RateLimitServiceOptions,
): Promise<RateLimitService> {
  await loadPeer('@grpc/grpc-js', () => import('@grpc/grpc-js'));
  await loadPeer('@grpc/proto-loader', () => import('@grpc/proto-loader'));
  await loadPeer('yaml', () => import('yaml'));
  const { startService } = await import('./service.js');
  return startService(options);
}
