/**
 * Express 5 adapter: a middleware for one route. Mount it on the route itself, so that the
 * quota is named by Express's route template, never the raw URL:
 *
 * ```ts
 * app.post('/orders/:id', expressRateLimit({ limiter, policy, identify: (req) => req.user?.tenantId }), createOrder);
 * // quota "POST/orders/:id": /orders/1?x=1 and /orders/2?x=2 share it
 * ```
 *
 * The name is made only of the PATTERNS the app was built with — the mount paths of the
 * routers and sub-apps above the route, then the route's path — and never of `req.baseUrl`,
 * `req.url` or `req.originalUrl`, which hold the text the client sent: Express matches
 * case-insensitively and fills in parameters, so `/API/orders` or `/t/<any account>/orders`
 * would otherwise each mint a fresh quota.
 *
 * Refused requests are answered here (`429`, `503`, `401`) and never reach the handler;
 * an error (from `identify`, `cost`, or a middleware mounted where there is no route)
 * goes to Express's error handling through `next(error)`. Types are structural, so this
 * module needs no Express types at build time.
 */

import type { ServerResponse } from 'node:http';
import { type ExpressRequestLike, routeName } from './express-route.js';
import { releaseWhenDone } from './guard/leases.js';
import { settleWhenDone } from './guard/settle.js';
import type { GuardOptions, HttpOutcome } from './guard/types.js';
import { createGuard } from './guard.js';
import { send } from './node.js';

export type { ExpressRequestLike } from './express-route.js';

/** Options of {@link expressRateLimit}: `GuardOptions`, with `route` optional. */
export type ExpressRateLimitOptions<Req extends ExpressRequestLike = ExpressRequestLike> = Omit<
  GuardOptions<Req>,
  'route'
> & {
  /**
   * Default: {@link expressRoute} — `<METHOD><mount patterns><route pattern>`, e.g.
   * `"POST/t/:account/orders"`, with `HEAD` named `GET`.
   */
  readonly route?: GuardOptions<Req>['route'];
};

/** An Express middleware, with the route's outcome counts. */
export type ExpressRateLimit<Req extends ExpressRequestLike = ExpressRequestLike> = ((
  req: Req,
  res: ServerResponse,
  next: (error?: unknown) => void,
) => void) & { readonly counts: Readonly<Record<HttpOutcome, number>> };

/**
 * The quota's name of an Express request: `<METHOD><template>`, built only from patterns.
 *
 * - The template is the mount path of every router and sub-app above the route (outermost
 *   first; `/` and trailing slashes add nothing), then the route's own path:
 *   `app.use('/t/:account', router)` + `router.post('/orders', …)` → `"POST/t/:account/orders"`,
 *   for `/t/acme/orders`, `/T/ACME/orders` and every other account alike. Nested routers and
 *   sub-apps mounted with `app.use(path, express())` are found without options. An array of
 *   paths is written as its JSON (`app.use(['/a', '/b'], r)` → `["/a","/b"]`, one quota for
 *   all of its aliases) and a RegExp as `String(regexp)`.
 * - The method is the request's, except that `HEAD` is always named `GET` — also on a
 *   route registered with `app.head()` — so HEAD never has a quota of its own (Express
 *   serves HEAD from the GET route). Where the client chooses the method — `app.all()`
 *   (which registers the handler for every method) or a route with a `route.all()`
 *   handler — the method is `ALL`: one quota for every method (see
 *   {@link expressRateLimit} for the finer rule it applies to its own middleware).
 * - When the same route is reachable through several mounts (a router or sub-app mounted
 *   twice), the chain Express dispatched through is picked by matching the mounts' own
 *   layers against the request's `baseUrl` and path, in Express's order; the name is still
 *   made of patterns only (`app.use('/one', r)` and `app.use('/two/:n', r)` are two
 *   quotas, `"POST/one/orders"` and `"POST/two/:n/orders"`). If no chain explains the path
 *   (`req.url` rewritten after routing), the template every candidate chain agrees on is
 *   used.
 * - A sub-app mounted with `router.use(path, subApp)` rather than `app.use(path, subApp)`
 *   has no `parent`, so the mounts above it cannot be seen: its routes are named from the
 *   sub-app down (a fixed name, shared more widely than it could be, never per URL).
 *
 * The chain of mounts is searched once per route and top app (a `WeakMap`), and searched
 * again when a request matches none of the cached chains and a router stack seen by the
 * search has changed size since (mounts added after the first request).
 *
 * @throws {InvalidInputError} (`route`) where no template can be known: the middleware is
 *   not on a route (`app.use(limit)`, `router.use(limit)`); the route is not reachable
 *   through mounts Express recorded (e.g. a router called from inside a handler); several
 *   chains reach the route, none explains the path and they disagree; a sub-app mounted
 *   more than once is reached through a mount Express cannot attribute to it; or the
 *   request has no `app` although a prefix was mounted above the route. Mount the
 *   middleware on the route (`app.post(path, limit, handler)`) or set `options.route`.
 */
export function expressRoute(req: ExpressRequestLike): string {
  return routeName(req, undefined);
}

/**
 * Makes the Express middleware of one route. Its quota is named by {@link expressRoute},
 * except that the method part follows where this middleware itself is registered on the
 * route (the `Route` object Express made for it):
 *
 * - `ALL` when it runs for any method (`app.all(p, limit, h)`, `app.route(p).all(limit)`):
 *   every method shares one quota;
 * - when it is registered on several methods of the same route
 *   (`app.route('/x').get(limit).post(limit).put(limit).delete(limit)`), those methods share
 *   one quota, named by them sorted and joined by `,` — `"DELETE,GET,POST,PUT/x"` — with
 *   `HEAD` named `GET` (`.get(limit).head(limit)` is `"GET/x"`);
 * - else the request's method with `HEAD` as `GET` — also on a route that has an `.all()`
 *   handler besides (`app.route(p).all(auth).post(limit, h)` → `"POST…"`).
 *
 * For a quota per method, give each method its own middleware (`.get(limitGet)
 * .post(limitPost)`, named `"GET/x"` and `"POST/x"`) or set `route`. `app.get(p, limit)`
 * and `app.post(p, limit)` make two routes, each with one method: two quotas.
 *
 * @throws {InvalidInputError} as `createGuard`. Per request, the errors of
 *   {@link expressRoute} go to `next(error)` (the handler does not run).
 */
export function expressRateLimit<Req extends ExpressRequestLike = ExpressRequestLike>(
  options: ExpressRateLimitOptions<Req>,
): ExpressRateLimit<Req> {
  const guard = createGuard<Req>({
    ...options,
    route: options.route ?? ((req: Req) => routeName(req, middleware)),
  });
  const middleware = (req: Req, res: ServerResponse, next: (error?: unknown) => void): void => {
    guard(req)
      .then((verdict) => {
        if (!verdict.pass) return send(res, verdict.response);
        releaseWhenDone(res, verdict);
        if (!res.headersSent)
          for (const [name, value] of Object.entries(verdict.headers)) res.setHeader(name, value);
        settleWhenDone(res, verdict.settle);
        next();
      })
      .catch(next);
  };
  return Object.assign(middleware, { counts: guard.counts });
}
