/**
 * Leases an admitted request holds (a `concurrency` limit of its route): renewed while the
 * handler runs (every half lease), released once when the response finishes or its
 * connection closes — an aborted client frees its slot at once. A release that fails
 * (Redis unreachable) leaves the lease to expire by itself, `leaseMs` after its last renewal.
 */
import { keepLease } from '../../limiter/lease-keeper.js';
import type { Lease } from '../../types.js';
import type { GuardVerdict } from './types.js';

/** `verdict` holding `leases`: a pass gets `release`; anything else releases them at once. */
export function holdingLeases(verdict: GuardVerdict, leases: readonly Lease[]): GuardVerdict {
  // An admitted lease's `resetMs` is its own life, `leaseMs`.
  const stops = leases.map((lease) => keepLease(lease, lease.resetMs));
  let released = false;
  const release = (): void => {
    if (released) return;
    released = true;
    for (const stop of stops) stop();
    for (const lease of leases) lease.release().catch(() => false);
  };
  if (!verdict.pass) {
    release();
    return verdict;
  }
  return { ...verdict, release };
}

/** What {@link releaseWhenDone} listens to: a Node `ServerResponse` (or its look-alike). */
interface ResponseEvents {
  once(event: 'finish' | 'close', listener: () => void): unknown;
  readonly writableFinished?: boolean;
  readonly destroyed?: boolean;
}

/**
 * Releases the leases of `verdict` (if any) when `res` finishes or closes. A response
 * without events (not a Node response) leaves them to expire.
 */
export function releaseWhenDone(res: unknown, verdict: GuardVerdict): void {
  const release = verdict.pass ? verdict.release : undefined;
  if (release === undefined) return;
  const events = res as Partial<ResponseEvents> | null | undefined;
  if (typeof events?.once !== 'function') return;
  events.once('finish', release);
  events.once('close', release);
  if (events.writableFinished === true || events.destroyed === true) release();
}
