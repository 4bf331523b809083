/**
 * `node:http` adapter.
 *
 * ```ts
 * const guard = nodeRateLimit({
 *   limiter, policy: fixedWindow({ limit: 10, windowMs: 1000 }), route: 'POST/orders',
 *   identify: (req) => verifiedTenantOf(req), // from the session, never a client header
 * });
 * http.createServer(async (req, res) => {
 *   if (!(await guard(req, res))) return; // 429 / 503 / 401 already sent
 *   // … the expensive handler
 * });
 * ```
 */

import type { IncomingMessage, ServerResponse } from 'node:http';
import { observe } from '../observer.js';
import type { HttpResponseSpec } from './core.js';
import { releaseWhenDone } from './guard/leases.js';
import { settleWhenDone } from './guard/settle.js';
import type { GuardOptions, HttpOutcome } from './guard/types.js';
import { createGuard } from './guard.js';

export type { HttpOutcome, HttpOutcomeEvent } from './guard/types.js';

/** Options of {@link nodeRateLimit}: see `GuardOptions`. */
export type NodeRateLimitOptions = GuardOptions<IncomingMessage>;

/** `(req, res) => Promise<boolean>`: `true` lets the handler run; `false` means a response was sent. */
export type NodeRateLimitGuard = ((
  req: IncomingMessage,
  res: ServerResponse,
) => Promise<boolean>) & {
  /** Counts of outcomes since the guard was made. */
  readonly counts: Readonly<Record<HttpOutcome, number>>;
};

/**
 * Makes a guard for one route (see `createGuard`): it sends the `429` / `503` / `401`
 * itself and resolves `false`, or resolves `true` to let the handler run.
 *
 * @throws {InvalidInputError} as `createGuard`.
 */
export function nodeRateLimit(options: NodeRateLimitOptions): NodeRateLimitGuard {
  const guard = createGuard(options);
  const nodeGuard = async (req: IncomingMessage, res: ServerResponse): Promise<boolean> => {
    const verdict = await guard(req);
    if (!verdict.pass) {
      send(res, verdict.response);
      return false;
    }
    releaseWhenDone(res, verdict);
    if (!res.headersSent)
      for (const [name, value] of Object.entries(verdict.headers)) res.setHeader(name, value);
    settleWhenDone(res, verdict.settle);
    return true;
  };
  return Object.assign(nodeGuard, { counts: guard.counts });
}

/**
 * Wraps a request handler: the handler runs only for admitted requests. An error thrown
 * (or a promise rejected) by `identify`, a `cost` function (or the cost it returns, when
 * invalid), the guard or the handler answers `500` when no response was sent yet, and is
 * passed to `onError` when given. The returned listener carries the guard's `counts`.
 */
export function withRateLimit(
  options: NodeRateLimitOptions & { readonly onError?: (error: unknown) => void },
  handler: (req: IncomingMessage, res: ServerResponse) => unknown,
): ((req: IncomingMessage, res: ServerResponse) => void) & {
  readonly counts: Readonly<Record<HttpOutcome, number>>;
} {
  const { onError, ...guardOptions } = options;
  const guard = nodeRateLimit(guardOptions);
  const listener = (req: IncomingMessage, res: ServerResponse): void => {
    guard(req, res)
      .then((admitted) => (admitted ? handler(req, res) : undefined))
      .catch((error: unknown) => {
        // Reported if it throws; the 500 below is the answer either way.
        if (onError !== undefined) observe('withRateLimit onError', () => onError(error));
        if (res.headersSent) {
          // Too late for a status: end the exchange rather than leave the client hanging.
          if (!res.writableEnded) res.destroy();
          return;
        }
        send(res, {
          status: 500,
          headers: { 'content-type': 'application/json; charset=utf-8' },
          body: JSON.stringify({ error: 'internal_error' }),
        });
      });
  };
  return Object.assign(listener, { counts: guard.counts });
}

/** Writes a response spec, unless headers were already sent. */
export function send(res: ServerResponse, spec: HttpResponseSpec): void {
  if (res.headersSent) return;
  res.writeHead(spec.status, spec.headers);
  res.end(spec.body);
}
