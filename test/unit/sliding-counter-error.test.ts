/**
 * The sliding window counter's worst-case error against the exact log, measured on the
 * in-memory twins under a controlled clock (the model tests hold each twin to its Redis
 * script, so this bound holds on Redis too).
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { Policy } from 'sluice';
import { MemoryStore, RateLimiter, slidingWindowCounter, slidingWindowLog } from 'sluice';

/** Greedy traffic: 10 takes at the last ms of window 0, then one take every ms. Returns admission times. */
async function admissions(policy: Policy): Promise<number[]> {
  let now = 999;
  const limiter = new RateLimiter({
    store: new MemoryStore({ clock: () => now }),
    maxBatchSize: 1,
    denialCache: false,
  });
  const times: number[] = [];
  const scope = { tenant: 't', route: 'r' };
  for (let i = 0; i < 10; i++) if ((await limiter.take(scope, policy)).allowed) times.push(now);
  for (now = 1000; now < 3000; now++)
    if ((await limiter.take(scope, policy)).allowed) times.push(now);
  return times;
}

function maxInAnyWindow(times: number[], windowMs: number): number {
  let best = 0;
  for (let i = 0, j = 0; i < times.length; i++) {
    while ((times[i] as number) - (times[j] as number) >= windowMs) j++;
    best = Math.max(best, i - j + 1);
  }
  return best;
}

describe('sliding window counter vs the exact log (limit 10 per 1000 ms)', () => {
  it('the log never admits more than the limit in any window; the counter’s worst case stays within 2 × limit', async () => {
    const log = maxInAnyWindow(
      await admissions(slidingWindowLog({ limit: 10, windowMs: 1000 })),
      1000,
    );
    const counter = maxInAnyWindow(
      await admissions(slidingWindowCounter({ limit: 10, windowMs: 1000 })),
      1000,
    );
    assert.equal(log, 10);
    console.log(`sliding window counter: at most ${counter} in a 1000 ms window (log: ${log})`);
    assert.ok(counter > 10, `the counter approximation shows (${counter})`);
    assert.ok(counter <= 20, `worst case ${counter} ≤ 2 × limit`);
  });
});
