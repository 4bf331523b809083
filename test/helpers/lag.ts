/**
 * Bounds on "answered at once" and "answered close to its deadline" that hold on a loaded
 * machine. Such a bound holds on a quiet machine, but a run of the suite (four files at once
 * on two cores, each with its own Redis) now and then stalls a whole test process, and every
 * answer due in the stall comes late by it. So a timed assertion watches this process's event
 * loop while its work runs and widens its bound by the worst lateness seen: a stall this
 * process did not see (the limiter's own wait) still fails it.
 */
import { monitorEventLoopDelay } from 'node:perf_hooks';

/** A watch on this process's event loop, from its creation to `stop()`. */
export interface LoopLag {
  /**
   * Stops watching (later calls return the same): the worst delay seen between two of the
   * watch's 10-ms ticks, in milliseconds (a quiet loop: about 10; a stall of 300 ms: about 310).
   */
  stop(): number;
}

/** Starts watching this process's event loop. */
export function watchLoop(): LoopLag {
  const histogram = monitorEventLoopDelay({ resolution: 10 });
  histogram.enable();
  let worstMs: number | undefined;
  return {
    stop() {
      if (worstMs === undefined) {
        histogram.disable();
        worstMs = histogram.max / 1e6;
      }
      return worstMs;
    },
  };
}
