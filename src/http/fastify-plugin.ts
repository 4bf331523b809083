/**
 * The Fastify 5 plugin, typed structurally: this module imports nothing from Fastify, so the
 * root entry (`sluice`) loads and type-checks without Fastify installed. `sluice/fastify`
 * re-exports it with Fastify's own types and the `config.rateLimit` route option.
 *
 * The plugin is not encapsulated (`Symbol.for('skip-override')`, Fastify's documented
 * marker, the one `fastify-plugin` sets), so its hook applies to every route of the
 * instance it is registered on. A route opts in with `config.rateLimit`; the quota is named
 * by the route's method and URL template (`routeOptions.url`, prefixes included), never the
 * raw URL (S1) — `HEAD` is named `GET`, as Fastify serves `HEAD` from the `GET` route — and
 * is decided in `onRequest`, before the body is parsed or any handler work.
 */
import type { IncomingHttpHeaders } from 'node:http';
import { InvalidInputError } from '../errors.js';
import { createGuard, type Guard, type GuardOptions } from './guard.js';

/** The part of a Fastify request this plugin reads. */
export interface FastifyRequestLike {
  readonly method: string;
  readonly headers: IncomingHttpHeaders;
  readonly routeOptions: { readonly url?: string; readonly config?: unknown };
}

/** The part of a Fastify reply this plugin uses. */
export interface FastifyReplyLike {
  code(status: number): FastifyReplyLike;
  headers(values: Record<string, string>): FastifyReplyLike;
  header(name: string, value: string): unknown;
  send(body: string): unknown;
}

/** The part of a Fastify instance this plugin uses. */
export interface FastifyInstanceLike {
  // biome-ignore lint/suspicious/noExplicitAny: Fastify's hook types are generic per instance; any lets every FastifyInstance pass.
  addHook(name: 'onRequest', hook: (request: any, reply: any) => Promise<unknown>): unknown;
}

/**
 * What a route puts in `config.rateLimit`: its `policy` (required: a policy, a list, or a
 * plan function — see `GuardOptions.policy`) and overrides of the plugin's options.
 */
export type FastifyRouteRateLimit<Req = FastifyRequestLike> = Pick<GuardOptions<Req>, 'policy'> &
  Partial<
    Pick<
      GuardOptions<Req>,
      | 'cost'
      | 'failureMode'
      | 'failOpenLimit'
      | 'failOpenWindowMs'
      | 'shadow'
      | 'shadowHeader'
      | 'skip'
      | 'user'
      | 'headers'
      | 'responses'
      | 'wwwAuthenticate'
      | 'onOutcome'
    >
  >;

/**
 * Options of the plugin: `GuardOptions` shared by every limited route, without `policy`
 * (each route's own) and `route` (the route template).
 */
export type FastifyRateLimitOptions<Req = FastifyRequestLike> = Omit<
  GuardOptions<Req>,
  'policy' | 'route'
>;

/** Options Fastify's `register` itself reads, never the plugin's. */
const REGISTER_OPTIONS = new Set(['prefix', 'logLevel', 'logSerializers']);

/** The quota's name: the method (`HEAD` as `GET`) and the route's URL template. */
function routeOf(request: FastifyRequestLike): string {
  const url = request.routeOptions.url;
  if (typeof url !== 'string' || url.length === 0) {
    throw new InvalidInputError('route', 'a request matched to a route with a URL template', url);
  }
  return `${request.method === 'HEAD' ? 'GET' : request.method}${url}`;
}

/** The Fastify plugin: a function Fastify calls with the instance and the options. */
export type FastifyRateLimitPlugin = ((
  instance: FastifyInstanceLike,
  options: FastifyRateLimitOptions,
) => Promise<void>) & { readonly default: FastifyRateLimitPlugin };

const plugin = async (
  instance: FastifyInstanceLike,
  options: FastifyRateLimitOptions,
): Promise<void> => {
  const shared = Object.fromEntries(
    Object.entries(options ?? {}).filter(([key]) => !REGISTER_OPTIONS.has(key)),
  ) as FastifyRateLimitOptions;
  // One guard per route config and route name, made on its first request.
  const guards = new WeakMap<object, Map<string, Guard<FastifyRequestLike>>>();
  const guardOf = (request: FastifyRequestLike, config: object): Guard<FastifyRequestLike> => {
    const route = routeOf(request);
    let byRoute = guards.get(config);
    if (byRoute === undefined) {
      byRoute = new Map();
      guards.set(config, byRoute);
    }
    let guard = byRoute.get(route);
    if (guard === undefined) {
      guard = createGuard<FastifyRequestLike>({
        ...shared,
        ...(config as FastifyRouteRateLimit),
        route,
      });
      byRoute.set(route, guard);
    }
    return guard;
  };
  instance.addHook('onRequest', async (request: FastifyRequestLike, reply: FastifyReplyLike) => {
    const config = (request.routeOptions.config as { rateLimit?: unknown } | undefined)?.rateLimit;
    if (config === undefined) return;
    if (typeof config !== 'object' || config === null) {
      throw new InvalidInputError('config.rateLimit', 'an object with a policy', config);
    }
    const verdict = await guardOf(request, config)(request);
    if (!verdict.pass) {
      const { status, headers, body } = verdict.response;
      return reply
        .code(status)
        .headers({ ...headers })
        .send(body);
    }
    for (const [name, value] of Object.entries(verdict.headers)) reply.header(name, value);
  });
};

const meta = { fastify: '5.x', name: 'sluice' };
Object.assign(plugin, {
  [Symbol.for('skip-override')]: true,
  [Symbol.for('fastify.display-name')]: meta.name,
  [Symbol.for('plugin-meta')]: meta,
  default: plugin,
});

/**
 * The Fastify plugin: `app.register(fastifyRateLimit, { limiter, identify })`, then
 * `config: { rateLimit: { policy } }` on each limited route. Import it from
 * `sluice/fastify` for Fastify's types and a typed `config.rateLimit`.
 *
 * A route's guard is made on its first request; bad route options answer that request
 * `500` through Fastify's error handling (`InvalidInputError` naming the field).
 */
export const fastifyRateLimit = plugin as FastifyRateLimitPlugin;
