/**
 * Bounds on awaits in fault tests: a call that should settle (usually by rejecting) within
 * its deadline fails the test with a clear assertion once a generous bound has passed,
 * instead of hanging until the file's 120 s timeout.
 */
import { AssertionError } from 'node:assert';

/** A generous bound for a call with deadline `deadlineMs`: 10 × it, never less than 2 s. */
export function boundFor(deadlineMs: number): number {
  return Math.max(2000, 10 * deadlineMs);
}

/**
 * `promise`, or a rejection with an `AssertionError` naming `what` if it has not settled
 * within `ms`. The timer is cleared as soon as `promise` settles.
 */
export function within<T>(promise: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const bound = new Promise<never>((_, reject) => {
    timer = setTimeout(() => {
      reject(
        new AssertionError({
          message: `not settled within ${ms} ms: ${what}`,
          actual: 'pending',
          expected: `settled within ${ms} ms`,
          operator: 'within',
        }),
      );
    }, ms);
  });
  return Promise.race([promise, bound]).finally(() => clearTimeout(timer));
}
