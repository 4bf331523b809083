/**
 * Fastify 5 plugin (wrapped with `fastify-plugin`, so its hook applies to every route of
 * the instance it is registered on). A route opts in with `config.rateLimit`; the quota is
 * named by the route's method and URL template (`routeOptions.url`), never the raw URL
 * (S1), and is decided in `onRequest`, before the body is parsed or any handler work.
 *
 * ```ts
 * await app.register(fastifyRateLimit, { limiter, identify: (request) => request.user?.tenantId });
 * app.post('/orders/:id', { config: { rateLimit: { policy: orders } } }, createOrder);
 * ```
 */
import type { FastifyInstance, FastifyPluginAsync, FastifyRequest } from 'fastify';
import fp from 'fastify-plugin';
import type { Policy } from '../algorithms/policy.js';
import { createGuard, type Guard, type GuardOptions } from './guard.js';

/** What a route puts in `config.rateLimit`. */
export interface FastifyRouteRateLimit {
  /** The route's server-side policy (S3). */
  readonly policy: Policy;
  /** Overrides of the plugin's options for this route. */
  readonly cost?: GuardOptions<FastifyRequest>['cost'];
  readonly failureMode?: GuardOptions<FastifyRequest>['failureMode'];
  readonly failOpenLimit?: number;
  readonly failOpenWindowMs?: number;
  readonly shadow?: boolean;
  readonly shadowHeader?: string;
}

/** Options of {@link fastifyRateLimit}: `GuardOptions` shared by every route, without `policy` and `route`. */
export type FastifyRateLimitOptions = Omit<GuardOptions<FastifyRequest>, 'policy' | 'route'>;

declare module 'fastify' {
  interface FastifyContextConfig {
    /** sluice: limit this route (see `fastifyRateLimit`). */
    rateLimit?: FastifyRouteRateLimit;
  }
}

const plugin: FastifyPluginAsync<FastifyRateLimitOptions> = async (
  fastify: FastifyInstance,
  options: FastifyRateLimitOptions,
) => {
  // One guard per route, made on its first request (a route's options complete the shared ones).
  const guards = new Map<string, Guard<FastifyRequest>>();
  const guardOf = (
    request: FastifyRequest,
    config: FastifyRouteRateLimit,
  ): Guard<FastifyRequest> => {
    const route = `${request.method}${request.routeOptions.url ?? ''}`;
    let guard = guards.get(route);
    if (guard === undefined) {
      guard = createGuard<FastifyRequest>({ ...options, ...config, route });
      guards.set(route, guard);
    }
    return guard;
  };
  fastify.addHook('onRequest', async (request, reply) => {
    const config = request.routeOptions.config?.rateLimit;
    if (config === undefined) return;
    const verdict = await guardOf(request, config)(request);
    if (!verdict.pass) {
      const { status, headers, body } = verdict.response;
      return reply.code(status).headers(headers).send(body);
    }
    for (const [name, value] of Object.entries(verdict.headers)) reply.header(name, value);
  });
};

/**
 * The Fastify plugin: `app.register(fastifyRateLimit, { limiter, identify })`, then
 * `config: { rateLimit: { policy } }` on each limited route.
 *
 * A route's guard is made on its first request; bad route options answer that request
 * `500` through Fastify's error handling (`InvalidInputError` naming the field).
 */
export const fastifyRateLimit = fp(plugin, { fastify: '5.x', name: 'sluice' });
