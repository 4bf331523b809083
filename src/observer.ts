/**
 * Calling code the application gave sluice to observe it (`onDecision`, `onOutcome`,
 * `onWarning`, a metrics sink, response hooks): whatever it does — throw, return a promise
 * that rejects — it never changes a decision and never crashes the process. Its failures are
 * reported as process warnings (`SLUICE_OBSERVER_ERROR`), at most one per 10 s per observer,
 * with the count of those not reported since.
 */

const QUIET_MS = 10_000;
const last = new Map<string, { at: number; suppressed: number }>();

/** Reports an observer's failure (throttled per `what`). */
export function observerFailed(what: string, error: unknown): void {
  const now = Date.now();
  const seen = last.get(what);
  if (seen !== undefined && now - seen.at < QUIET_MS) {
    seen.suppressed++;
    return;
  }
  const more =
    seen !== undefined && seen.suppressed > 0
      ? ` (+${seen.suppressed} more since the last warning)`
      : '';
  last.set(what, { at: now, suppressed: 0 });
  process.emitWarning(`sluice ${what} failed: ${String(error)}${more}`, {
    code: 'SLUICE_OBSERVER_ERROR',
  });
}

/**
 * Calls `fn()` as an observer: a throw, or a rejection of the promise it returns, is
 * reported by {@link observerFailed} and goes no further.
 */
export function observe(what: string, fn: () => unknown): void {
  try {
    const result = fn();
    if (
      result !== null &&
      (typeof result === 'object' || typeof result === 'function') &&
      typeof (result as { then?: unknown }).then === 'function'
    ) {
      (result as PromiseLike<unknown>).then(undefined, (error: unknown) =>
        observerFailed(what, error),
      );
    }
  } catch (error) {
    observerFailed(what, error);
  }
}
