/**
 * The default work bound of a script call (`BOUND_US`, about 0.5 ms of estimated Redis
 * time), through a limiter built with every default: a script call holds Redis while it
 * runs, so heavy items go alone whatever `maxBatchSize` allows, and light ones are cut at
 * the bound. (A unit: a `MemoryStore` behind a store that records each call's items.)
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { fixedWindow, MemoryStore, RateLimiter, slidingWindowLog } from 'sluice';
import type { ScriptStore } from 'sluice/store';
import { batchWork } from '../../src/algorithms/batch.js';

/** The documented bound: about 0.5 ms of estimated Redis time per script call, in µs. */
const BOUND_US = 500;

/** A MemoryStore that records the number of keys of every script call. */
function recording(): { store: ScriptStore; calls: number[] } {
  const memory = new MemoryStore();
  const calls: number[] = [];
  return {
    calls,
    store: {
      evalScript(script, keys, args) {
        if (script.name !== 'reset-epoch') calls.push(keys.length);
        return memory.evalScript(script, keys, args);
      },
    },
  };
}

describe('the default work bound of a script call', () => {
  it('sliding window logs of limit 10,000 (each heavier than the bound): one per script call', async () => {
    const policy = slidingWindowLog({ limit: 10_000, windowMs: 60_000 });
    assert.ok(batchWork(3, policy.limit) > BOUND_US, 'each item is heavier than the bound');
    const { store, calls } = recording();
    const limiter = new RateLimiter({ store });
    await Promise.all(
      Array.from({ length: 64 }, (_, i) => limiter.take({ tenant: `t${i}` }, policy)),
    );
    assert.equal(calls.length, 64);
    assert.deepEqual([...new Set(calls)], [1]);
  });

  it('fixed windows: no script call holds more items than the bound allows', async () => {
    const policy = fixedWindow({ limit: 10, windowMs: 60_000 });
    const perItem = batchWork(1, policy.limit);
    const { store, calls } = recording();
    // Shares never cut a batch: each call answers before the next is needed.
    const limiter = new RateLimiter({ store, maxBatchSize: 1024 });
    await Promise.all(
      Array.from({ length: 1000 }, (_, i) => limiter.take({ tenant: `t${i}` }, policy)),
    );
    assert.equal(
      calls.reduce((a, b) => a + b, 0),
      1000,
    );
    assert.ok(Math.max(...calls) <= Math.floor(BOUND_US / perItem), `${Math.max(...calls)}`);
    assert.ok(Math.max(...calls) >= Math.floor(BOUND_US / perItem) / 2, 'batches do fill');
  });
});
