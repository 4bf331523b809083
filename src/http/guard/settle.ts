/**
 * The guard's `settle` option: costs known when the response ends. The guard reserves the
 * route's cost on every limit before the handler (all or nothing, in one atomic script call:
 * a refused request consumes nothing on any limit), and
 * the adapter calls the verdict's `settle` once when the response finishes or the connection
 * closes: the option's answer is the actual cost, settled on every reservation (0 gives all
 * back). A login route that counts only failures: `settle: (req, res) => (res.statusCode < 400
 * ? 0 : 1)` — at most the limit of attempts in flight or failed, under any concurrency.
 */
import type { Reservation } from '../../limiter/priced.js';
import type { RateLimiter } from '../../limiter/rate-limiter.js';
import type { Decision } from '../../types.js';
import { type ResolvedLimit, scopeOf } from '../limits.js';

/** What a `settle` option sees of the response: its status code at the end. */
export interface SettledResponse {
  readonly statusCode: number;
}

/** The guard's `settle` option. */
export type SettleOption<Req> = (req: Req, res: SettledResponse) => number | Promise<number>;

/**
 * Reserves `cost` on every limit, all or nothing, in one atomic script call
 * (`limiter.reserveAll`): a refused request consumes nothing on any limit, so it never
 * refuses a concurrent request with units it then gives back.
 */
export async function reserveAll(
  limiter: RateLimiter,
  limits: readonly ResolvedLimit[],
  tenant: string,
  route: string,
  user: string | undefined,
  cost: number,
  requestId: string | undefined,
  id: string | undefined,
): Promise<{ decisions: readonly Decision[]; reservations: readonly Reservation[] }> {
  const { reservations } = await limiter.reserveAll(
    limits.map((limit) => ({
      scope: scopeOf(limit.per, tenant, route, user),
      policy: limit.policy,
      cost,
    })),
    { requestId, id },
  );
  return { decisions: reservations, reservations };
}

/**
 * The verdict's `settle(res)`: runs once (the first of "finish" and "close"), asks the option
 * for the actual cost and settles every admitted reservation with it. A failing option or
 * settle leaves the reservations consumed (as if the whole cost was used), never throws.
 */
export function settleOnce<Req>(
  settle: SettleOption<Req>,
  req: Req,
  reservations: readonly Reservation[],
): (res: SettledResponse) => Promise<void> {
  let done = false;
  return async (res) => {
    if (done) return;
    done = true;
    try {
      const actual = await settle(req, res);
      await Promise.all(reservations.filter((r) => r.allowed).map((r) => r.settle(actual)));
    } catch {
      // Consumed, as reserved: a failure here never gives units back.
    }
  };
}

/** The part of a Node.js `ServerResponse` that settling reads. */
export interface NodeResponseLike extends SettledResponse {
  once(event: 'finish' | 'close', listener: () => void): unknown;
}

/** Calls `settle(res)` once `res` (a Node.js response) finishes or its connection closes. */
export function settleWhenDone(
  res: NodeResponseLike | undefined,
  settle: ((res: SettledResponse) => Promise<void>) | undefined,
  answer: SettledResponse | undefined = res,
): void {
  if (settle === undefined || res === undefined || answer === undefined) return;
  const done = () => {
    void settle(answer);
  };
  res.once('finish', done);
  res.once('close', done);
}
