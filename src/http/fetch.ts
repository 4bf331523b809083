/**
 * Fetch-API adapter: `(request: Request) => Promise<Response | undefined>` — a `Response`
 * to return at once (`429`, `503`, `401`), or `undefined` to let the handler run. Works
 * wherever handlers take a standard `Request`: Hono, Bun, Deno, service workers.
 *
 * ```ts
 * const limit = fetchRateLimit({ limiter, policy, route: 'POST/orders', identify: verifiedTenantOf });
 * app.post('/orders', async (c, next) => (await limit(c.req.raw)) ?? next(), createOrder); // Hono
 * ```
 *
 * In shadow mode the would-be decision is not added to the handler's response (this shape
 * cannot carry it); use `createGuard` and its verdict's `headers` for that.
 */
import { createGuard, type GuardOptions, type HttpOutcome } from './guard.js';

/** Options of {@link fetchRateLimit}: see `GuardOptions`; `identify` gets the `Request`. */
export type FetchRateLimitOptions = GuardOptions<Request>;

/** `(request) => Promise<Response | undefined>`, with the route's outcome counts. */
export type FetchRateLimit = ((request: Request) => Promise<Response | undefined>) & {
  readonly counts: Readonly<Record<HttpOutcome, number>>;
};

/**
 * Makes the Fetch-API guard of one route.
 *
 * @throws {InvalidInputError} as `createGuard`.
 */
export function fetchRateLimit(options: FetchRateLimitOptions): FetchRateLimit {
  const guard = createGuard(options);
  const fetchGuard = async (request: Request): Promise<Response | undefined> => {
    const verdict = await guard(request);
    if (verdict.pass) return undefined;
    const { status, headers, body } = verdict.response;
    return new Response(body, { status, headers });
  };
  return Object.assign(fetchGuard, { counts: guard.counts });
}
