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
 * (expired while this process was paused), or a tick more than `leaseMs` after the last
 * renewal that was answered, means the lease is lost: the renewals stop and `onLost` is
 * called (once). The timer does not keep the process alive.
 */
export function keepLease(lease: Lease, leaseMs: number, onLost?: () => void): () => void {
  let stopped = false;
  let keptAt = performance.now();
  const lost = (): void => {
    if (stopped) return;
    stop();
    onLost?.();
  };
  const timer = setInterval(
    () => {
      if (performance.now() - keptAt > leaseMs) {
        lost(); // not renewed in time (Redis unreachable, the event loop blocked)
        return;
      }
      const askedAt = performance.now();
      lease.renew().then(
        (decision) => {
          if (!decision.allowed) lost();
          else keptAt = askedAt;
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
