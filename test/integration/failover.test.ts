/**
 * Failovers under load with the configuration the docs require (`min-replicas-to-write 1`,
 * `min-replicas-max-lag 1` on every node, `waitForReplicas: 1` on the limiters): a planned
 * Sentinel failover and a forced Cluster failover — the two that over-admit with Redis's
 * defaults (bench/failover/RESULTS.md) — admit no decision the new primary does not count,
 * and the scope is decided again on the new primary. Callers get typed errors meanwhile.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { type FailoverFigures, measureFailover } from '../helpers/failover.js';

const TYPED = new Set(['SLUICE_UNAVAILABLE', 'SLUICE_TIMEOUT']);

function assertExact(figures: FailoverFigures): void {
  console.log(JSON.stringify({ failover: figures }));
  assert.equal(figures.overAdmitted, 0, `admitted ${figures.admitted} of ${figures.limit}`);
  assert.ok(figures.decidedAgain, 'the scope is decided again on the new primary');
  assert.equal(figures.counted, figures.limit, 'the new primary counts the whole quota');
  for (const code of Object.keys(figures.errors)) {
    assert.ok(TYPED.has(code), `${code}: ${figures.messages[code]}`);
  }
}

describe('failover under load with the safe configuration: no over-admission', {
  timeout: 120_000,
}, () => {
  it('Sentinel, planned (SENTINEL FAILOVER)', async () => {
    assertExact(await measureFailover({ trigger: 'sentinel-failover', safe: true }));
  });

  it('Cluster, forced (CLUSTER FAILOVER FORCE)', async () => {
    assertExact(await measureFailover({ trigger: 'cluster-force', safe: true }));
  });
});
