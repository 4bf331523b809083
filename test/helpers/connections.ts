/**
 * Small helpers of the tests about connections: `CLIENT LIST` read as fields, a bounded wait
 * for a condition, and a take's outcome as one string.
 */
import assert from 'node:assert/strict';
import { setTimeout as sleep } from 'node:timers/promises';
import { isSluiceError } from 'sluice';

/** `CLIENT LIST`'s reply, each connection as its fields (`id`, `name`, `cmd`, `db`, …). */
export function parseClientList(reply: unknown): Record<string, string>[] {
  return String(reply)
    .trim()
    .split('\n')
    .map((line) =>
      Object.fromEntries(
        line
          .trim()
          .split(' ')
          .map((field) => {
            const at = field.indexOf('=');
            return [field.slice(0, at), field.slice(at + 1)];
          }),
      ),
    );
}

/** Waits until `condition` holds, polling every 5 ms; fails naming `what` after `withinMs`. */
export async function until(
  condition: () => boolean,
  withinMs: number,
  what: string,
): Promise<void> {
  const deadline = performance.now() + withinMs;
  while (!condition()) {
    if (performance.now() > deadline) assert.fail(`not within ${withinMs} ms: ${what}`);
    await sleep(5);
  }
}

/** The outcome of a take: `allowed`/`limited`, the error's code, or `untyped: …`. */
export function outcome(take: Promise<{ allowed: boolean }>): Promise<string> {
  return take.then(
    (d) => (d.allowed ? 'allowed' : 'limited'),
    (error: unknown) => (isSluiceError(error) ? error.code : `untyped: ${String(error)}`),
  );
}
