/**
 * Keeps a lease alive while its work runs: renews it every half lease (a holder running
 * longer than `leaseMs` keeps its slot; a crashed one stops renewing and loses it within
 * `leaseMs`). Used by `schedule` and the HTTP guard.
 */
import { MAX_TIMER_MS } from '../bounds.js';
import type { Lease } from '../types.js';

/**
 * Renews `lease` every `leaseMs / 2` until the returned function is called. A renewal that
 * fails (Redis unreachable) is tried again at the next tick; one that finds the lease gone
 * (expired while this process was paused) stops the renewals. The timer does not keep the
 * process alive.
 */
export function keepLease(lease: Lease, leaseMs: number): () => void {
  let stopped = false;
  const timer = setInterval(
    () => {
      lease.renew().then(
        (decision) => {
          if (!decision.allowed) stop();
        },
        () => {},
      );
    },
    // A lease of years renews at the timer's longest interval (about 24.8 days).
    Math.min(MAX_TIMER_MS, Math.max(1, Math.floor(leaseMs / 2))),
  );
  timer.unref();
  function stop(): void {
    if (stopped) return;
    stopped = true;
    clearInterval(timer);
  }
  return stop;
}
