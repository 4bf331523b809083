/**
 * The guard's `settle` option: costs known when the response ends. The guard reserves the
 * route's cost on every limit before the handler (all or nothing, in one atomic script call:
 * a refused request consumes nothing on any limit), and the adapter calls the verdict's
 * `settle` once when the handler's response ends: the option's answer is the actual cost,
 * settled on every reservation (0 gives all back). A login route that counts only failures:
 * `settle: (req, res) => (res.statusCode < 400 ? 0 : 1)` — at most the limit of attempts in
 * flight or failed, under any concurrency.
 *
 * A client that disconnects before the handler answers gets nothing back for it: the status
 * code is read when the handler ends its response (`res.end()`), not when the connection
 * closes (a Node.js response's status is still 200 then), and the hook is told
 * `{ aborted: true }`. A response that never ends after its connection closed is never
 * settled: the reservation stays consumed, as reserved.
 */
import { isSluiceError } from '../../errors.js';
import type { Reservation } from '../../limiter/priced.js';
import type { RateLimiter } from '../../limiter/rate-limiter.js';
import type { Decision, TakeAllItem } from '../../types.js';

/** What a `settle` option sees of the response: its status code at the end. */
export interface SettledResponse {
  readonly statusCode: number;
}

/** How the response ended, the third argument of a `settle` option. */
export interface SettleInfo {
  /**
   * The client's connection closed before the response was sent in full: the handler ended
   * its response (so `statusCode` is its answer) but the client did not get all of it.
   */
  readonly aborted: boolean;
}

/**
 * The guard's `settle` option: the actual cost of a request whose response ended, a
 * non-negative safe integer. Called once, when the handler ends its response, with its
 * status code, and `{ aborted }`, whether the client's connection closed before that.
 */
export type SettleOption<Req> = (
  req: Req,
  res: SettledResponse,
  info: SettleInfo,
) => number | Promise<number>;

/** The verdict's `settle`: call it once with the response's end status. */
export type VerdictSettle = (res: SettledResponse, info?: SettleInfo) => Promise<void>;

/**
 * Reserves `cost` on every limit, all or nothing, in one atomic script call
 * (`limiter.reserveAll`): a refused request consumes nothing on any limit, so it never
 * refuses a concurrent request with units it then gives back. `id` is the reservation's:
 * the request's retry key, else a fresh random one (see {@link cancelUnknown}).
 */
export async function reserveAll(
  limiter: RateLimiter,
  items: readonly TakeAllItem[],
  requestId: string | undefined,
  id: string,
): Promise<{ decisions: readonly Decision[]; reservations: readonly Reservation[] }> {
  const { reservations } = await limiter.reserveAll(items, { requestId, id });
  return { decisions: reservations, reservations };
}

/** Attempts of a cancel whose reservation's outcome is unknown (each has the deadline). */
const CANCEL_ATTEMPTS = 3;

/**
 * Cancels the reservations of `id` on `items`, whose `reserveAll` failed with an unknown
 * outcome (a `TimeoutError`, or a connection lost after the call was sent): it may still
 * have been applied in Redis, and would stay consumed. A cancel that finds the reservation
 * gives it back; one that finds none leaves a tombstone for the policy's horizon, so the
 * reserve, if it arrives later, is refused and takes nothing (see docs/priced.md). A
 * cancel applies at most once, so one that times out is sent again (up to 3 times); in the
 * background, never failing the request.
 */
export function cancelUnknown(limiter: RateLimiter, items: readonly TakeAllItem[], id: string) {
  const cancel = async (item: TakeAllItem) => {
    for (let attempt = 1; attempt <= CANCEL_ATTEMPTS; attempt++) {
      try {
        await limiter.settle(item.scope, item.policy, id, 0);
        return;
      } catch (error) {
        if (
          !isSluiceError(error, 'SLUICE_TIMEOUT') &&
          !isSluiceError(error, 'SLUICE_UNAVAILABLE')
        ) {
          return;
        }
      }
    }
  };
  for (const item of items) void cancel(item);
}

/**
 * The verdict's `settle(res, info)`: runs once (when the response ended), asks the option
 * for the actual cost and settles every admitted reservation with it. A failing option or
 * settle leaves the reservations consumed (as if the whole cost was used), never throws.
 */
export function settleOnce<Req>(
  settle: SettleOption<Req>,
  req: Req,
  reservations: readonly Reservation[],
): VerdictSettle {
  let done = false;
  return async (res, info = { aborted: false }) => {
    if (done) return;
    done = true;
    try {
      const actual = await settle(req, res, { aborted: info.aborted === true });
      await Promise.all(reservations.filter((r) => r.allowed).map((r) => r.settle(actual)));
    } catch {
      // Consumed, as reserved: a failure here never gives units back.
    }
  };
}

/** The part of a Node.js `ServerResponse` that settling reads. */
export interface NodeResponseLike extends SettledResponse {
  once(event: 'finish' | 'close', listener: () => void): unknown;
  /** Node.js's `ServerResponse.end`: wrapped, after a close, to settle when the handler ends. */
  end?: (...args: never[]) => unknown;
  readonly writableEnded?: boolean;
  readonly writableFinished?: boolean;
}

/**
 * Calls `settle(res)` once the handler ended `res` (a Node.js response): on "finish" (sent
 * in full, `{ aborted: false }`); on a "close" before that, with the status of the end the
 * handler makes (`{ aborted: true }`: already ended, or when it calls `res.end()`). A
 * response never ended is never settled (the reservation stays consumed).
 */
export function settleWhenDone(
  res: NodeResponseLike | undefined,
  settle: VerdictSettle | undefined,
  answer: SettledResponse | undefined = res,
): void {
  if (settle === undefined || res === undefined || answer === undefined) return;
  const aborted = { aborted: true };
  res.once('finish', () => {
    void settle(answer, { aborted: false });
  });
  res.once('close', () => {
    if (res.writableFinished === true) {
      void settle(answer, { aborted: false });
    } else if (res.writableEnded === true || typeof res.end !== 'function') {
      // Ended but not sent in full, or a response we cannot watch: its status is final.
      if (res.writableEnded === true) void settle(answer, aborted);
    } else {
      const end = res.end;
      res.end = function (this: unknown, ...args: never[]) {
        res.end = end;
        const result = end.apply(this, args);
        void settle(answer, aborted);
        return result;
      };
    }
  });
}

/** Settles `settle` after a handler returned when its connection had closed before. */
export function settleAfterAbort(
  res: NodeResponseLike | undefined,
  settle: VerdictSettle | undefined,
  answer: SettledResponse,
): void {
  if (settle === undefined || res === undefined || res.writableFinished === true) return;
  void settle(answer, { aborted: true });
}
