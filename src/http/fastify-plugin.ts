/**
 * The Fastify 5 plugin, typed structurally: this module imports nothing from Fastify, so the
 * root entry (`sluice`) loads and type-checks without Fastify installed. `sluice/fastify`
 * re-exports it with Fastify's own types and the `config.rateLimit` route option.
 *
 * The plugin is not encapsulated (`Symbol.for('skip-override')`, Fastify's documented
 * marker, the one `fastify-plugin` sets), so its hook applies to every route of the
 * instance it is registered on. A route opts in with `config.rateLimit`; the quota is named
 * by its `route` when it has one (as in every adapter: a policy file's settings carry the
 * file's route key), else by the route's method and URL template (`routeOptions.url`,
 * prefixes included), never the raw URL — `HEAD` is named `GET`, as Fastify serves `HEAD`
 * from the `GET` route, and a route taking several methods (`app.all`) is one quota (`ALL`).
 * It is decided in `onRequest`, before the body is parsed or any handler work. Without a
 * `route`, each route (its methods and URL template) is its own quota, also where routes
 * share one `config.rateLimit` object.
 *
 * Options are checked when the plugin is registered (a bad one rejects `app.register()`) and
 * each route's `config.rateLimit` when the route is added, by an `onRoute` hook: a bad one
 * makes `app.post()` (or `app.route()`…) throw the `InvalidInputError` at once — inside a
 * plugin, that plugin's registration fails and `app.ready()` rejects — never a request.
 */

import type { IncomingHttpHeaders } from 'node:http';
import { fixedWindow } from '../algorithms/fixed-window.js';
import { InvalidInputError } from '../errors.js';
import { releaseWhenDone } from './guard/leases.js';
import { type NodeResponseLike, settleWhenDone } from './guard/settle.js';
import type { Guard, GuardOptions, RouteLimitSettings } from './guard/types.js';
import { createGuard } from './guard.js';

/** The part of a Fastify request this plugin reads. */
export interface FastifyRequestLike {
  readonly method: string;
  readonly headers: IncomingHttpHeaders;
  readonly routeOptions: {
    readonly url?: string;
    readonly config?: unknown;
    /** The route's method, or its methods (`app.all`, `method: [...]`). */
    readonly method?: string | readonly string[];
  };
}

/** The part of a Fastify reply this plugin uses. */
export interface FastifyReplyLike {
  code(status: number): FastifyReplyLike;
  headers(values: Record<string, string>): FastifyReplyLike;
  header(name: string, value: string): unknown;
  send(body: string): unknown;
  /** Node.js's response (the guard's `settle` option listens to its end). */
  readonly raw?: NodeResponseLike;
  /** The status code sent (what the `settle` option reads). */
  readonly statusCode?: number;
}

/** The part of a Fastify instance this plugin uses. */
export interface FastifyInstanceLike {
  // biome-ignore lint/suspicious/noExplicitAny: Fastify's hook types are generic per instance; any lets every FastifyInstance pass.
  addHook(name: 'onRequest', hook: (request: any, reply: any) => Promise<unknown>): unknown;
  // biome-ignore lint/suspicious/noExplicitAny: as above, for the route options.
  addHook(name: 'onRoute', hook: (routeOptions: any) => void): unknown;
  hasDecorator(name: string): boolean;
  decorate(name: string, value: unknown): unknown;
}

/**
 * What a route puts in `config.rateLimit`: its `policy` (required: a policy, a list, or a
 * plan function — see `GuardOptions.policy`) and overrides of the plugin's options. A `route`
 * given here names the quota instead of the route's method and URL template, as in every
 * adapter: the settings of a policy file (`loadPolicies`) carry the file's route key, so
 * `config: { rateLimit: routes.get('POST/orders') }` is the quota `"POST/orders"` that
 * `sluice inspect --route POST/orders` reads, whatever prefix the route is mounted under.
 */
export type FastifyRouteRateLimit<Req = FastifyRequestLike> = RouteLimitSettings<Req>;

/**
 * Options of the plugin: `GuardOptions` shared by every limited route, without `policy`
 * (each route's own) and `route` (the route template).
 */
export type FastifyRateLimitOptions<Req = FastifyRequestLike> = Omit<
  GuardOptions<Req>,
  'policy' | 'route'
>;

/** The decorator that marks an instance the plugin is registered on. */
const DECORATOR = 'sluiceRateLimit';

/** Options Fastify's `register` itself reads, never the plugin's. */
const REGISTER_OPTIONS = new Set(['prefix', 'logLevel', 'logSerializers']);

/**
 * The method part of a quota's name. A route that takes one method (and `HEAD` from a `GET`
 * route) is named by it, `HEAD` as `GET`; a route that takes several — `app.all()`,
 * `method: ['GET', 'POST']` — is one quota whatever method the client picks: `ALL` when it
 * takes every common method, else its methods sorted and joined (`GET,POST`).
 */
function methodPart(method: string, routeMethods: string | readonly string[] | undefined): string {
  const methods = new Set(
    (Array.isArray(routeMethods) ? routeMethods : [routeMethods ?? method]).map((m: string) =>
      m.toUpperCase() === 'HEAD' ? 'GET' : m.toUpperCase(),
    ),
  );
  if (methods.size <= 1) return method === 'HEAD' ? 'GET' : method;
  if (['GET', 'POST', 'PUT', 'DELETE', 'PATCH'].every((m) => methods.has(m))) return 'ALL';
  return [...methods].sort().join(',');
}

/**
 * The quota's name: the route's method part and its URL template — made of the route alone
 * (its method or methods, and its URL), never of the options object it was given. A `HEAD`
 * route — the one Fastify adds for a `GET` route, or one declared with `app.head()` — is
 * named like the route that takes `GET` at its URL (`getRoutes`: `GET`, or `GET,POST` for a
 * route with `method: ['GET', 'POST']`), as that is the route whose `HEAD` it serves.
 */
function routeOf(
  method: string,
  route: FastifyRequestLike['routeOptions'],
  getRoutes: ReadonlyMap<string, string>,
): string {
  const url = route.url;
  if (typeof url !== 'string' || url.length === 0) {
    throw new InvalidInputError('route', 'a request matched to a route with a URL template', url);
  }
  const part =
    route.method === 'HEAD' ? (getRoutes.get(url) ?? 'GET') : methodPart(method, route.method);
  return `${part}${url}`;
}

/** Whether a route takes `GET` (`method` as Fastify passes it to `onRoute`). */
const takesGet = (method: unknown): boolean =>
  (Array.isArray(method) ? method : [method]).some(
    (m) => typeof m === 'string' && m.toUpperCase() === 'GET',
  );

/** A placeholder policy, to check the shared options when the plugin is registered. */
const CHECK_POLICY = fixedWindow({ name: 'options-check', limit: 1, windowMs: 1000 });

/** `config.rateLimit`: an object, or `undefined`/`false` for a route that is not limited. */
function routeConfig(value: unknown, where: string): FastifyRouteRateLimit | undefined {
  if (value === undefined || value === false) return undefined;
  if (typeof value !== 'object' || value === null) {
    throw new InvalidInputError(
      `${where} config.rateLimit`,
      '{ policy, … }, or false for a route without a limit',
      value,
    );
  }
  return value as FastifyRouteRateLimit;
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
  // Registered twice, every request would be counted twice.
  if (instance.hasDecorator(DECORATOR)) {
    throw new InvalidInputError(
      'fastifyRateLimit',
      'registered once per Fastify instance (it applies to every route of it and its children)',
      'a second registration',
    );
  }
  if ((options as { route?: unknown } | undefined)?.route !== undefined) {
    // One name for every route of the instance would merge their quotas.
    throw new InvalidInputError(
      'route',
      "absent from the plugin's options: each route is named by its own template, or by the route option of its config.rateLimit",
      (options as { route?: unknown }).route,
    );
  }
  instance.decorate(DECORATOR, true);
  // Misspelled or invalid options fail registration (app.ready()), not the first request.
  createGuard({ ...shared, policy: CHECK_POLICY, route: 'options-check' });
  // The method part of the route that takes GET at each URL (limited or not), to name the
  // HEAD route there.
  const getRoutes = new Map<string, string>();
  instance.addHook(
    'onRoute',
    (routeOptions: { method?: string | string[]; url?: unknown; config?: unknown }) => {
      const where = `${String(routeOptions.method)} ${String(routeOptions.url)}`;
      const config = routeConfig(
        (routeOptions.config as { rateLimit?: unknown } | undefined)?.rateLimit,
        where,
      );
      if (config !== undefined) {
        createGuard({ ...shared, ...config, route: config.route ?? 'options-check' });
      }
      const { method, url } = routeOptions;
      if (typeof url === 'string' && takesGet(method)) {
        getRoutes.set(url, methodPart('GET', method));
      }
    },
  );
  // One guard per route options object and route name, made on its first request. The
  // name alone decides the quota: routes of one name share it in Redis whatever their options
  // objects, and routes of different names never do, even with one options object. An
  // explicit `route` in the options is the name (one guard per options object).
  const guards = new WeakMap<object, Map<string, Guard<FastifyRequestLike>>>();
  const guardOf = (
    request: FastifyRequestLike,
    route: FastifyRequestLike['routeOptions'],
    config: FastifyRouteRateLimit,
  ): Guard<FastifyRequestLike> => {
    const explicit = config.route;
    const name = explicit === undefined ? routeOf(request.method, route, getRoutes) : '';
    let byName = guards.get(config);
    if (byName === undefined) {
      byName = new Map();
      guards.set(config, byName);
    }
    let guard = byName.get(name);
    if (guard === undefined) {
      guard = createGuard<FastifyRequestLike>({
        ...shared,
        ...config,
        route: explicit ?? name,
      });
      byName.set(name, guard);
    }
    return guard;
  };
  instance.addHook('onRequest', async (request: FastifyRequestLike, reply: FastifyReplyLike) => {
    // Fastify makes a new routeOptions object on every read: read it once.
    const route = request.routeOptions;
    const config = routeConfig(
      (route.config as { rateLimit?: unknown } | undefined)?.rateLimit,
      `${request.method} ${route.url}`,
    );
    if (config === undefined) return;
    const verdict = await guardOf(request, route, config)(request);
    if (!verdict.pass) {
      const { status, headers, body } = verdict.response;
      return reply
        .code(status)
        .headers({ ...headers })
        .send(body);
    }
    releaseWhenDone(reply.raw, verdict);
    for (const [name, value] of Object.entries(verdict.headers)) reply.header(name, value);
    settleWhenDone(reply.raw, verdict.settle, reply.raw);
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
 * The plugin's options are checked when it is registered; a route's `config.rateLimit` when
 * the route is added, so `app.post()` throws an `InvalidInputError` naming the field (see the
 * module's description). At request time, an error of `identify`, a `cost`, `route` or
 * `policy` function, or an invalid answer of theirs, goes to Fastify's error handling (`500`).
 */
export const fastifyRateLimit = plugin as FastifyRateLimitPlugin;
