/**
 * Leases an admitted request holds (a `concurrency` limit of its route): renewed while the
 * handler runs (every half lease) and released once when the handler's response ends
 * (`res.end()`, or `'finish'`). A connection that closes first (the client hung up) does
 * not free the slot, since the handler is still running and costs as much as before: the
 * renewals stop instead, so the lease ends `leaseMs` after its last renewal at the latest,
 * or when the response ends, if sooner. Releasing at the hang-up would let a client run any
 * number of handlers at once by connecting and hanging up. A release that fails (Redis
 * unreachable) leaves the lease to expire by itself.
 */
import { keepLease } from '../../limiter/lease-keeper.js';
import type { Lease } from '../../types.js';
import type { GuardVerdict } from './types.js';

/** `verdict` holding `leases`: a pass gets `release`; anything else releases them at once. */
export function holdingLeases(verdict: GuardVerdict, leases: readonly Lease[]): GuardVerdict {
  // An admitted lease's `resetMs` is its own life, `leaseMs`.
  const stops = leases.map((lease) => keepLease(lease, lease.resetMs));
  const abandon = (): void => {
    for (const stop of stops) stop();
  };
  let released = false;
  const release = (): void => {
    if (released) return;
    released = true;
    abandon();
    for (const lease of leases) lease.release().catch(() => false);
  };
  if (!verdict.pass) {
    release();
    return verdict;
  }
  return { ...verdict, release, abandon };
}

/** What {@link releaseWhenDone} listens to: a Node `ServerResponse` (or its look-alike). */
interface ResponseEvents {
  once(event: 'finish' | 'close', listener: () => void): unknown;
  end(...args: unknown[]): unknown;
  readonly writableFinished?: boolean;
  readonly writableEnded?: boolean;
  readonly destroyed?: boolean;
}

/**
 * Releases the leases of `verdict` (if any) when the handler ends `res` (its `end()` is
 * wrapped; `'finish'` too); a `'close'` before that stops their renewals. A response
 * without events (not a Node response) leaves them to expire.
 */
export function releaseWhenDone(res: unknown, verdict: GuardVerdict): void {
  if (!verdict.pass || verdict.release === undefined) return;
  const { release, abandon } = verdict;
  const events = res as Partial<ResponseEvents> | null | undefined;
  if (typeof events?.once !== 'function' || typeof events.end !== 'function') return;
  const response = events as ResponseEvents;
  const end = response.end;
  // Ended even on a closed socket (where no 'finish' follows): the handler is done.
  response.end = function (this: unknown, ...args: unknown[]) {
    release();
    return end.apply(this, args);
  };
  response.once('finish', release);
  response.once('close', () => {
    if (response.writableEnded === true) release();
    else abandon?.();
  });
  if (response.writableEnded === true) release();
  else if (response.destroyed === true) abandon?.();
}
