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
 * With a `concurrency` limit, use `check` and call the verdict's `release()` once the
 * response is sent: its lease is renewed until then, for at most `maxHoldMs`. The plain
 * form cannot tell when the handler is done, so it never renews: its lease ends when the
 * request's signal aborts, else `leaseMs` after admission.
 *
 * This shape cannot add headers to the handler's response: admitted responses then carry no
 * RateLimit fields and, in shadow mode, no would-be decision. `check(request)` gives the same
 * decision with those headers, for a middleware that adds them after the handler ran:
 *
 * ```ts
 * app.post('/orders', async (c, next) => {
 *   const verdict = await limit.check(c.req.raw);
 *   if (!verdict.pass) return verdict.response;
 *   await next();
 *   for (const [name, value] of Object.entries(verdict.headers)) c.res.headers.set(name, value);
 * }, createOrder); // Hono
 * ```
 */
import { InvalidInputError } from '../errors.js';
import type { HttpResponseSpec } from './core.js';
import type { GuardOptions, HttpOutcome } from './guard/types.js';
import { createGuard } from './guard.js';

/** Options of {@link fetchRateLimit}: see `GuardOptions`; `identify` gets the `Request`. */
export type FetchRateLimitOptions = GuardOptions<Request> & {
  /**
   * With a `concurrency` limit: how long, in ms, `check()` renews a lease whose `release()`
   * was not called; after it the lease expires `leaseMs` after its last renewal, so a
   * forgotten `release()` frees its slot. An integer from 1 to 2,147,483,647; default
   * 600,000 (10 minutes).
   */
  readonly maxHoldMs?: number;
};

const DEFAULT_MAX_HOLD_MS = 600_000;
const MAX_HOLD_MS = 2_147_483_647;

/** The decision on one request, for handlers that add headers to their own response. */
export type FetchVerdict =
  /**
   * Run the handler, then add `headers` (RateLimit fields, the shadow header) to its
   * response. With a `concurrency` limit, `release` is present: call it once the response is
   * sent. With the guard's `settle` option, call `settle(response)` once the handler's
   * response is sent (`settle()` when the handler failed: status 500); the hook's
   * `aborted` is whether the request's signal aborted by then.
   */
  | {
      readonly pass: true;
      readonly headers: Readonly<Record<string, string>>;
      readonly release?: () => void;
      readonly settle?: (response?: Response) => Promise<void>;
    }
  /** Send `response` (`429`, `503` or `401`) now; the handler must not run. */
  | { readonly pass: false; readonly response: Response };

/**
 * `(request) => Promise<Response | undefined>`, with the route's outcome counts, and
 * `check(request)`, the same decision with the headers for an admitted request's response.
 */
export type FetchRateLimit = ((request: Request) => Promise<Response | undefined>) & {
  readonly counts: Readonly<Record<HttpOutcome, number>>;
  check(request: Request): Promise<FetchVerdict>;
};

/**
 * Makes the Fetch-API guard of one route.
 *
 * @throws {InvalidInputError} as `createGuard`.
 */
export function fetchRateLimit(options: FetchRateLimitOptions): FetchRateLimit {
  const { maxHoldMs = DEFAULT_MAX_HOLD_MS, ...guardOptions } = options ?? {};
  if (!Number.isInteger(maxHoldMs) || maxHoldMs < 1 || maxHoldMs > MAX_HOLD_MS) {
    throw new InvalidInputError(
      'options.maxHoldMs',
      `an integer from 1 to ${MAX_HOLD_MS}`,
      maxHoldMs,
    );
  }
  const guard = createGuard(guardOptions as GuardOptions<Request>);
  const toResponse = ({ status, headers, body }: HttpResponseSpec) =>
    new Response(body, { status, headers });
  const check = async (request: Request): Promise<FetchVerdict> => {
    const verdict = await guard(request);
    // A fresh object per request: the caller may add to it before setting the headers.
    if (verdict.pass) {
      const { settle } = verdict;
      const release = verdict.release === undefined ? undefined : bounded(verdict, maxHoldMs);
      if (release !== undefined) request.signal?.addEventListener('abort', release, { once: true });
      return {
        pass: true,
        headers: { ...verdict.headers },
        ...(release === undefined ? {} : { release }),
        // Call it with the handler's Response once it is sent (or with none when it failed).
        ...(settle === undefined
          ? {}
          : {
              settle: (response?: Response) =>
                settle(
                  { statusCode: response?.status ?? 500 },
                  { aborted: request.signal?.aborted === true },
                ),
            }),
      };
    }
    return { pass: false, response: toResponse(verdict.response) };
  };
  // The plain form needs no headers object for an admitted request.
  const fetchGuard = async (request: Request): Promise<Response | undefined> => {
    const verdict = await guard(request);
    if (verdict.pass) {
      // No end of the response to wait for: a lease goes with the client, or expires
      // leaseMs after admission (never renewed: nobody could tell it to stop).
      if (verdict.release !== undefined) {
        verdict.abandon?.();
        request.signal?.addEventListener('abort', verdict.release, { once: true });
      }
      return undefined;
    }
    return toResponse(verdict.response);
  };
  return Object.assign(fetchGuard, { counts: guard.counts, check });
}

/** `verdict`'s release, its renewals stopped after `maxHoldMs` when it was not called. */
function bounded(verdict: { release?: () => void; abandon?: () => void }, maxHoldMs: number) {
  const { release, abandon } = verdict as { release: () => void; abandon?: () => void };
  const timer = setTimeout(() => abandon?.(), maxHoldMs);
  timer.unref();
  return (): void => {
    clearTimeout(timer);
    release();
  };
}
