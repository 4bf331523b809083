/**
 * `sluice/koa`: a Koa 3 middleware for one route. Mount it on a `@koa/router` route, so
 * that the quota is named by the route's template, never the raw URL:
 *
 * ```ts
 * router.post('/orders/:id', koaRateLimit({ limiter, policy, identify: (ctx) => ctx.state.tenantId }), createOrder);
 * // quota "POST/orders/:id": /orders/1?x=1 and /ORDERS/2/ share it
 * ```
 *
 * The name is the path of the `@koa/router` layer the middleware runs in: the pattern it was
 * registered with, with the prefixes of every router it is nested in (`@koa/router` copies a
 * nested router's layers into its parent with the mount path prefixed), never `ctx.path`,
 * `ctx.url` or `ctx.originalUrl`, which hold the text the client sent — the router matches
 * case-insensitively, ignores a trailing slash and fills in parameters, so `/ORDERS/` or
 * `/t/<any account>/orders` would otherwise each mint a fresh quota.
 *
 * Refused requests are answered here (`429`, `503`, `401`: `ctx.status`, the headers, the
 * problem-details body) and `next()` is not called, so the handler never runs; admitted ones
 * get the RateLimit headers and go on with `next()`. An error (from `identify`, `cost`, or a
 * middleware mounted where there is no route) rejects the middleware's promise, which Koa's
 * error handling answers (`500` with Koa's default handler). Types are structural: this
 * module imports nothing from Koa or `@koa/router`.
 */

import { METHODS } from 'node:http';
import { InvalidInputError } from '../errors.js';
import type { HttpResponseSpec } from './core.js';
import { releaseWhenDone } from './guard/leases.js';
import { type NodeResponseLike, settleAfterAbort, settleWhenDone } from './guard/settle.js';
import type { GuardOptions, HttpOutcome } from './guard/types.js';
import { createGuard } from './guard.js';

/** The part of a Koa context this middleware reads and writes. */
export interface KoaContextLike {
  readonly method: string;
  status: number;
  body: unknown;
  /** Whether the response head was written already (then nothing is set). */
  readonly headerSent?: boolean;
  set(field: string, value: string): unknown;
  /** Node.js's response (the guard's `settle` option listens to its end). */
  readonly res?: NodeResponseLike;
  /** `@koa/router`: the path of the layer running now (its template, prefixes included). */
  readonly _matchedRoute?: unknown;
  /** `@koa/router`: every layer whose path matched the request. */
  readonly matched?: unknown;
}

/** Options of {@link koaRateLimit}: `GuardOptions`, with `route` optional. */
export type KoaRateLimitOptions<Ctx extends KoaContextLike = KoaContextLike> = Omit<
  GuardOptions<Ctx>,
  'route'
> & {
  /**
   * Default: {@link koaRoute} — `<METHOD><layer path>`, e.g. `"POST/t/:account/orders"`,
   * with `HEAD` named `GET`. Given, it names the quota whatever the route is mounted under.
   */
  readonly route?: GuardOptions<Ctx>['route'];
};

/** A Koa middleware, with the route's outcome counts. */
export type KoaRateLimit<Ctx extends KoaContextLike = KoaContextLike> = ((
  ctx: Ctx,
  next: () => Promise<unknown>,
) => Promise<void>) & { readonly counts: Readonly<Record<HttpOutcome, number>> };

/** A `@koa/router` layer, as far as this module reads it. */
interface LayerLike {
  readonly path?: unknown;
  readonly methods?: unknown;
  readonly stack?: unknown;
}

const isObject = (value: unknown): value is Record<string, unknown> =>
  typeof value === 'object' && value !== null;

const NOT_ON_A_ROUTE =
  'known from the @koa/router route the middleware is mounted on — mount it on a route ' +
  '(router.post(path, limit, handler)), not with app.use() or router.use() — or set ' +
  'options.route to a fixed template';

/**
 * The quota's name of a Koa request: `<METHOD><template>`, where the template is the path of
 * the `@koa/router` route layer running now (`ctx._matchedRoute`, prefixes included).
 *
 * - Nested routers: `api.use('/t/:account', orders.routes())` with `orders.post('/orders',
 *   …)` and `new Router({ prefix: '/v1' })` above is `"POST/v1/t/:account/orders"`, for every
 *   account and every spelling the router accepts (`/V1/T/ACME/orders/`).
 * - A route registered with an array of paths is one layer per path, so one quota per path;
 *   a RegExp path is written as `String(regexp)`.
 * - The method is the route's: `HEAD` is named `GET` (`@koa/router` serves HEAD from the GET
 *   route, also for `router.head()`); a route that takes every method (`router.all()`) is
 *   `ALL`; a route registered for several (`router.register(path, ['GET', 'POST'], …)`) is
 *   its methods sorted and joined by `,` (`"GET,POST/x"`): one quota for all of them.
 *
 * @throws {InvalidInputError} (`route`) where no template can be known: no `@koa/router`
 *   route matched (the middleware is on `app.use()`, or runs before the router), or it runs
 *   in a `router.use()` layer rather than a route; or several routes of different names
 *   match the request and the running one cannot be told apart. Mount the middleware on the
 *   route or set `options.route`.
 */
export function koaRoute(ctx: KoaContextLike): string {
  return routeName(ctx, undefined);
}

/**
 * `<METHOD><template>` of a request; `middleware` is the sluice middleware asking (the layer
 * that holds it is the one running), or undefined.
 */
function routeName(ctx: KoaContextLike, middleware: unknown): string {
  const current = ctx._matchedRoute;
  const matched = ctx.matched;
  if ((typeof current !== 'string' && !(current instanceof RegExp)) || !Array.isArray(matched)) {
    throw new InvalidInputError('route', NOT_ON_A_ROUTE, current);
  }
  const method = typeof ctx.method === 'string' ? ctx.method.toUpperCase() : '';
  const names = new Set<string>();
  let inUseLayer = false;
  for (const item of matched as unknown[]) {
    if (!isObject(item)) continue;
    const layer = item as LayerLike;
    if (layer.path !== current || !Array.isArray(layer.methods)) continue;
    if (middleware !== undefined) {
      if (!Array.isArray(layer.stack) || !layer.stack.includes(middleware)) continue;
      if (layer.methods.length === 0) {
        inUseLayer = true; // router.use(limit): a prefix, not a route
        continue;
      }
    }
    if (layer.methods.length === 0 || !layer.methods.includes(method)) continue;
    names.add(`${methodPart(layer.methods)}${render(current)}`);
  }
  if (names.size === 1) return [...names][0] as string;
  throw new InvalidInputError(
    'route',
    names.size === 0 || inUseLayer
      ? NOT_ON_A_ROUTE
      : 'known from one @koa/router route; several routes of different names match this ' +
          'request at this path and hold this middleware: set options.route',
    render(current),
    '',
  );
}

/** Every method Node knows, as `router.all()` registers them, `HEAD` named `GET`. */
const EVERY_METHOD = [...new Set(METHODS.map((m) => (m === 'HEAD' ? 'GET' : m)))];

/** Per layer's methods array: its method part, computed once. */
const methodParts = new WeakMap<readonly unknown[], string>();

/**
 * The method part of a route layer's name: `ALL` for a route on every method; its methods
 * sorted and joined by `,` for several; else its one method — `HEAD` named `GET` throughout.
 */
function methodPart(methods: readonly unknown[]): string {
  let part = methodParts.get(methods);
  if (part === undefined) {
    const names = new Set(
      methods.map((m) => {
        const upper = String(m).toUpperCase();
        return upper === 'HEAD' ? 'GET' : upper;
      }),
    );
    part = EVERY_METHOD.every((m) => names.has(m)) ? 'ALL' : [...names].sort().join(',');
    methodParts.set(methods, part);
  }
  return part;
}

/** A layer path as text: a string as is, a RegExp as `String(re)`. */
const render = (path: string | RegExp): string => (typeof path === 'string' ? path : String(path));

/** Answers a refusal: status, headers (the content type among them), then the body. */
function respond(ctx: KoaContextLike, { status, headers, body }: HttpResponseSpec): void {
  if (ctx.headerSent === true) return;
  ctx.status = status;
  for (const [name, value] of Object.entries(headers)) ctx.set(name, value);
  ctx.body = body;
}

/**
 * Makes the Koa middleware of one route; its quota is named by `options.route` when given,
 * else by {@link koaRoute} (the method part from the route layer that holds this middleware).
 *
 * ```ts
 * const limitOrders = koaRateLimit<Context>({ limiter, policy: orders, identify: (ctx) => ctx.state.tenant });
 * router.post('/orders/:id', limitOrders, createOrder);
 * app.use(router.routes());
 * ```
 *
 * @throws {InvalidInputError} as `createGuard`. Per request, the errors of {@link koaRoute},
 *   of `identify` and the other functions, and an invalid answer of theirs reject the
 *   middleware's promise (the handler does not run): Koa's error handling answers them.
 */
export function koaRateLimit<Ctx extends KoaContextLike = KoaContextLike>(
  options: KoaRateLimitOptions<Ctx>,
): KoaRateLimit<Ctx> {
  const guard = createGuard<Ctx>({
    ...options,
    route: options.route ?? ((ctx: Ctx) => routeName(ctx, middleware)),
  });
  const middleware = async (ctx: Ctx, next: () => Promise<unknown>): Promise<void> => {
    const verdict = await guard(ctx);
    if (!verdict.pass) return respond(ctx, verdict.response);
    releaseWhenDone((ctx as { res?: unknown }).res, verdict);
    if (ctx.headerSent !== true) {
      for (const [name, value] of Object.entries(verdict.headers)) ctx.set(name, value);
    }
    const res = ctx.res as (NodeResponseLike & { destroyed?: boolean }) | undefined;
    settleWhenDone(res, verdict.settle);
    await next();
    // Koa never ends a response whose connection closed: settle with the handler's status.
    if (res?.destroyed === true) settleAfterAbort(res, verdict.settle, { statusCode: ctx.status });
  };
  return Object.assign(middleware, { counts: guard.counts });
}
