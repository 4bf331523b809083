/**
 * `--compat reference` counting: `reference-count.lua` on real Redis against its in-memory
 * twin (`ReferenceCountTwin`) over random requests, and its bounded state — every counter
 * expires at its window's end; a counter without a TTL or with a foreign value is repaired.
 */
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import { storeFor } from '../../src/redis/select.js';
import {
  type CountItem,
  countReference,
  ReferenceCountTwin,
  referenceKey,
} from '../../src/serve/reference-count.js';
import { useRedis } from '../helpers/redis.js';

const redis = useRedis();
const HOUR = 3_600_000;

describe('reference counting: the script against its twin', () => {
  it('every request: the same counts and over flags, and the reset within the window', async () => {
    const store = storeFor(await redis.client());
    const request = fc.record({
      picks: fc.uniqueArray(fc.integer({ min: 0, max: 3 }), { minLength: 1, maxLength: 3 }),
      hits: fc.array(fc.integer({ min: 0, max: 3 }), { minLength: 3, maxLength: 3 }),
      stop: fc.boolean(),
    });
    await fc.assert(
      fc.asyncProperty(fc.array(request, { minLength: 1, maxLength: 12 }), async (requests) => {
        const domain = randomUUID();
        const limits = [1, 2, 3, 5];
        const twin = new ReferenceCountTwin();
        for (const r of requests) {
          const items: CountItem[] = r.picks.map((p, i) => ({
            key: referenceKey('t:', domain, [`k_${p}`], HOUR),
            hits: r.hits[i] as number,
            limit: limits[p] as number,
            unitMs: HOUR,
          }));
          const got = await countReference(store, items, r.stop);
          const want = twin.count(Date.now(), items, r.stop);
          assert.deepEqual(
            got.map((c) => [c.count, c.over]),
            want.map((c) => [c.count, c.over]),
          );
          for (const [i, c] of got.entries()) {
            assert.ok(Math.abs(c.resetMs - (want[i]?.resetMs ?? 0)) < 2000);
          }
        }
      }),
      { numRuns: 40 },
    );
  });

  it('bounded state: a counter lives to its window’s end; no TTL or a foreign value is repaired', async () => {
    const store = storeFor(await redis.client());
    const admin = (await redis.admin()).client;
    const key = referenceKey('t:', randomUUID(), ['k_v'], 60_000);
    const item = { key, hits: 2, limit: 5, unitMs: 60_000 };
    const started = performance.now();
    const [first] = await countReference(store, [item], false);
    const pttl = await admin.pTTL(key);
    // The TTL read a moment after the count: less by that moment (more on a loaded machine).
    const tookMs = performance.now() - started;
    assert.ok(pttl > 0 && pttl <= 60_000, `PTTL ${pttl}`);
    assert.ok(
      Math.abs(pttl - (first?.resetMs ?? 0)) <= tookMs + 2,
      `PTTL ${pttl}, resetMs ${first?.resetMs}, ${tookMs.toFixed(0)} ms apart`,
    );
    await admin.set(key, '3'); // no TTL: a hand edit
    const [second] = await countReference(store, [item], false);
    assert.equal(second?.count, 5);
    assert.ok((await admin.pTTL(key)) <= 60_000 && (await admin.pTTL(key)) > 0);
    await admin.set(key, 'garbage', { PX: 60_000 });
    const [third] = await countReference(store, [item], false);
    assert.equal(third?.count, 2, 'a foreign value is deleted and counting starts afresh');
  });
});
