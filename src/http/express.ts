/**
 * Express 5 adapter: a middleware for one route. Mount it on the route itself, so that the
 * quota is named by Express's route template (`req.route.path`), never the raw URL (S1):
 *
 * ```ts
 * app.post('/orders/:id', expressRateLimit({ limiter, policy, identify: (req) => req.user?.tenantId }), createOrder);
 * // quota "POST/orders/:id": /orders/1?x=1 and /orders/2?x=2 share it
 * ```
 *
 * Refused requests are answered here (`429`, `503`, `401`) and never reach the handler;
 * an error (from `identify`, `cost`, or a middleware mounted where there is no route)
 * goes to Express's error handling through `next(error)`. Types are structural, so this
 * module needs no Express types at build time.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import { InvalidInputError } from '../errors.js';
import { createGuard, type GuardOptions, type HttpOutcome } from './guard.js';
import { send } from './node.js';

/** The part of an Express request this adapter reads. */
export interface ExpressRequestLike extends IncomingMessage {
  readonly baseUrl?: string;
  readonly route?: { readonly path?: unknown };
}

/** Options of {@link expressRateLimit}: `GuardOptions`, with `route` optional. */
export type ExpressRateLimitOptions<Req extends ExpressRequestLike = ExpressRequestLike> = Omit<
  GuardOptions<Req>,
  'route'
> & {
  /** Default: `<METHOD><baseUrl><route.path>`, e.g. `"POST/api/orders/:id"`. */
  readonly route?: GuardOptions<Req>['route'];
};

/** An Express middleware, with the route's outcome counts. */
export type ExpressRateLimit<Req extends ExpressRequestLike = ExpressRequestLike> = ((
  req: Req,
  res: ServerResponse,
  next: (error?: unknown) => void,
) => void) & { readonly counts: Readonly<Record<HttpOutcome, number>> };

/** The quota's name from Express's route template; throws where there is no route. */
export function expressRoute(req: ExpressRequestLike): string {
  const path = req.route?.path;
  if (typeof path !== 'string') {
    throw new InvalidInputError(
      'route',
      'a middleware mounted on a route (app.post(path, limit, handler)), or options.route',
      path,
    );
  }
  return `${req.method ?? ''}${req.baseUrl ?? ''}${path}`;
}

/**
 * Makes the Express middleware of one route.
 *
 * @throws {InvalidInputError} as `createGuard`.
 */
export function expressRateLimit<Req extends ExpressRequestLike = ExpressRequestLike>(
  options: ExpressRateLimitOptions<Req>,
): ExpressRateLimit<Req> {
  const guard = createGuard<Req>({ ...options, route: options.route ?? expressRoute });
  const middleware = (req: Req, res: ServerResponse, next: (error?: unknown) => void): void => {
    guard(req)
      .then((verdict) => {
        if (!verdict.pass) return send(res, verdict.response);
        if (!res.headersSent)
          for (const [name, value] of Object.entries(verdict.headers)) res.setHeader(name, value);
        next();
      })
      .catch(next);
  };
  return Object.assign(middleware, { counts: guard.counts });
}
