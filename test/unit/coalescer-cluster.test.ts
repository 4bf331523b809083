/**
 * The coalescer in front of a store of several nodes, with a stand-in store (a unit that
 * never touches Redis; the real cluster runs in test/integration/cluster.test.ts): one batch
 * per node; a request that failed with "non local key" (its slot is served elsewhere; it
 * failed at its first read, before writing) is sent again alone; a batch refused as a whole
 * before it ran (`RerouteError`) is sent again call by call; anything else is never resent.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { fixedWindow, RateLimiter, StoreError, UnavailableError } from 'sluice';
import type { ScriptStore } from 'sluice/store';
import { batchScript } from '../../src/algorithms/batch.js';
import type { LuaScript } from '../../src/algorithms/script.js';
import { RerouteError } from '../../src/stores/store.js';

const policy = fixedWindow({ limit: 5, windowMs: 60_000 });
const ADMITTED = [1, 4, 60_000, 0];
const NOT_LOCAL = 'ERR Script attempted to access a non local key in a cluster node script';

interface Sent {
  readonly batch: boolean;
  readonly keys: readonly string[];
}

/**
 * A store of two "nodes" (keys of tenants starting with `a` on one, others on the other);
 * `answerBatch` answers a batch of `n` keys.
 */
function twoNodes(answerBatch: (keys: readonly string[], call: number) => Promise<unknown>) {
  const sent: Sent[] = [];
  const tenantOf = new Map<string, string>();
  const store: ScriptStore & { groupOf(key: string): string } = {
    groupOf: (key) => (tenantOf.get(key)?.startsWith('a') ? 'node-a' : 'node-b'),
    evalScript(script: LuaScript, keys: readonly string[]) {
      const batch = script === batchScript;
      sent.push({ batch, keys });
      if (!batch) return Promise.resolve(ADMITTED);
      return answerBatch(keys, sent.length);
    },
  };
  const limiter = new RateLimiter({ store, denialCache: false });
  const take = (tenant: string) => {
    const scope = { tenant };
    tenantOf.set(limiter.keyOf(scope, policy), tenant);
    return limiter.take(scope, policy);
  };
  return { sent, take };
}

/** A batch reply: every item admitted, but item `failing` failed with `message`. */
const reply = (items: number, failing: number, message: string) => {
  const out: unknown[] = [];
  for (let i = 0; i < items; i++) out.push(...(i === failing ? [-1, 1, 0, 0] : ADMITTED));
  out.push(message);
  return out;
};

describe('the coalescer before a store of several nodes', () => {
  it('one batch per node; a “non local key” request is sent again alone and decided', async () => {
    const { sent, take } = twoNodes((keys) => Promise.resolve(reply(keys.length, 1, NOT_LOCAL)));
    const decisions = await Promise.all(['a1', 'a2', 'a3', 'b1', 'b2'].map(take));
    assert.ok(decisions.every((d) => d.allowed));
    const batches = sent.filter((s) => s.batch);
    assert.equal(batches.length, 2, 'one batch per node');
    assert.deepEqual(batches.map((b) => b.keys.length).sort(), [2, 3]);
    // The second item of each batch went again, alone (as its algorithm's own script).
    assert.equal(sent.filter((s) => !s.batch).length, 2);
  });

  it('a batch refused as a whole before it ran (RerouteError): each call again, alone', async () => {
    const { sent, take } = twoNodes(() =>
      Promise.reject(new RerouteError(new UnavailableError('Redis is not serving: MOVED 1 x'))),
    );
    const decisions = await Promise.all(['a1', 'a2', 'a3'].map(take));
    assert.ok(decisions.every((d) => d.allowed));
    assert.equal(sent.filter((s) => s.batch).length, 1);
    assert.equal(sent.filter((s) => !s.batch).length, 3);
  });

  it('any other failure is never resent: a call that may have run is not replayed', async () => {
    const { sent, take } = twoNodes((keys) =>
      Promise.resolve(reply(keys.length, 0, 'WRONGTYPE Operation against a key')),
    );
    const results = await Promise.allSettled(['a1', 'a2'].map(take));
    assert.ok((results[0] as PromiseRejectedResult).reason instanceof StoreError);
    assert.equal(results[1]?.status, 'fulfilled');
    const lost = twoNodes(() => Promise.reject(new UnavailableError('Socket closed unexpectedly')));
    const settled = await Promise.allSettled(['a1', 'a2'].map(lost.take));
    assert.ok(settled.every((r) => r.status === 'rejected'));
    assert.equal(lost.sent.length, 1, 'sent once, never again');
    assert.equal(sent.length, 1);
  });
});
