/**
 * Case C03 — read-then-write races across replicas: 4 processes × 50 callers released
 * together on a pub/sub "go", 200 takes on one scope, capacity 20 per 60 s, 20 runs per
 * policy on fresh scopes: every run admits exactly 20, with remaining 19…0 each once.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { randomTenant, useRedis } from '../helpers/redis.js';
import { useTakers } from '../helpers/takers.js';

const redis = useRedis();
const takers = useTakers(new URL('../fixtures/race-taker.ts', import.meta.url), 4, redis);
const RUNS = 20;
const POLICIES = [
  'fixed-window',
  'sliding-window-log',
  'sliding-window-counter',
  'token-bucket',
  'gcra',
];

async function race(policy: string): Promise<number[]> {
  const tenant = randomTenant();
  const reports = await takers.race<number[]>(`${tenant} ${policy}`, tenant);
  return reports.flat().sort((a, b) => a - b);
}

describe('case C03: 4 processes × 50 callers released together', () => {
  for (const policy of POLICIES) {
    it(`${policy}: ${RUNS} runs each admit exactly 20, remaining 19…0 once each`, async () => {
      for (let run = 0; run < RUNS; run++) {
        assert.deepEqual(
          await race(policy),
          Array.from({ length: 20 }, (_, i) => i),
          `run ${run + 1}`,
        );
      }
    });
  }
});
