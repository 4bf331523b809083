/**
 * `sluice/fastify`: the Fastify 5 plugin with Fastify's own types, and `config.rateLimit`
 * declared on Fastify's route config. Needs `fastify` installed (an optional peer
 * dependency); the plugin itself is typed structurally (`fastify-plugin.ts`).
 *
 * ```ts
 * import { fastifyRateLimit } from 'sluice/fastify';
 * await app.register(fastifyRateLimit, { limiter, identify: (request) => request.user?.tenantId });
 * app.post('/orders/:id', { config: { rateLimit: { policy: orders } } }, createOrder);
 * ```
 */
import type { FastifyPluginAsync, FastifyRequest } from 'fastify';
import {
  type FastifyRateLimitOptions as Options,
  fastifyRateLimit as plugin,
  type FastifyRouteRateLimit as RouteOptions,
} from './fastify-plugin.js';

export type { FastifyRequestLike } from './fastify-plugin.js';

/** Options of {@link fastifyRateLimit}, for Fastify's request type. */
export type FastifyRateLimitOptions = Options<FastifyRequest>;

/** What a route puts in `config.rateLimit`, for Fastify's request type. */
export type FastifyRouteRateLimit = RouteOptions<FastifyRequest>;

declare module 'fastify' {
  interface FastifyContextConfig {
    /** sluice: limit this route (see `fastifyRateLimit`). */
    rateLimit?: FastifyRouteRateLimit;
  }
}

/** The Fastify plugin (see `fastify-plugin.ts`), with Fastify's types. */
export const fastifyRateLimit = plugin as unknown as FastifyPluginAsync<FastifyRateLimitOptions>;
