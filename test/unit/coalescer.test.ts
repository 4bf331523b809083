/**
 * How the coalescer cuts the requests of a node into script calls, with a stand-in store (a
 * unit that never touches Redis; the real batches run in test/integration/coalescing.test.ts
 * and script-time.test.ts): a few requests go together at the end of their turn; a burst
 * goes in batches sent during the turn, each holding its share of what the node has in
 * flight (so that Redis works on one while this process prepares the next); no batch passes
 * `maxBatchSize` or the work bound, and a request is never split.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { ScriptStore } from 'sluice/store';
import type { LuaScript } from '../../src/algorithms/script.js';
import {
  type BatchRequest,
  Coalescer,
  MAX_BATCH_WORK,
  MIN_EARLY_BATCH,
  PIPELINE_DEPTH,
} from '../../src/limiter/coalescer.js';

interface Sent {
  readonly items: number;
  readonly work: number;
  /** Answers the call (every item admitted). */
  answer(): void;
}

/** A store that records each script call and answers it when told. */
function recordingStore() {
  const sent: Sent[] = [];
  let works: number[] = [];
  const store: ScriptStore = {
    evalScript(_script: LuaScript, keys: readonly string[]) {
      const work = works.reduce((a, b) => a + b, 0);
      works = [];
      return new Promise((resolve) => {
        const reply: number[] = [];
        for (let i = 0; i < keys.length; i++) reply.push(1, 0, 1000, 0);
        sent.push({ items: keys.length, work, answer: () => resolve(reply) });
      });
    },
  };
  const request = (size = 1, work = 4): BatchRequest & { settled: boolean } => {
    const r = {
      op: 't' as const,
      size,
      work,
      script: undefined,
      key: '',
      args: [],
      firstKey: 'k',
      settled: false,
      item(j: number) {
        if (j === 0) works.push(work);
        return { key: `k${j}`, batchId: 1, args: [] };
      },
      done() {
        r.settled = true;
      },
      fail(error: unknown) {
        throw error;
      },
    };
    return r;
  };
  return { store, sent, request };
}

const endOfTurn = () => new Promise<void>((resolve) => setImmediate(resolve));

describe('the coalescer cuts script calls', () => {
  it(`fewer than ${MIN_EARLY_BATCH} requests in a turn go together, at the end of the turn`, async () => {
    const { store, sent, request } = recordingStore();
    const coalescer = new Coalescer(store, 128, () => 0);
    for (let i = 0; i < MIN_EARLY_BATCH - 1; i++) coalescer.add(request());
    assert.equal(sent.length, 0, 'nothing sent before the turn ends');
    await endOfTurn();
    assert.deepEqual(
      sent.map((s) => s.items),
      [MIN_EARLY_BATCH - 1],
    );
  });

  it('a burst goes during its turn, each batch its share of the load in flight, none over maxBatchSize', async () => {
    const { store, sent, request } = recordingStore();
    const coalescer = new Coalescer(store, 128, () => 0);
    const requests = Array.from({ length: 1000 }, () => request());
    for (const r of requests) coalescer.add(r);
    const duringTurn = sent.map((s) => s.items);
    await endOfTurn();
    const all = sent.map((s) => s.items);
    // Full: no room for one more request of 1 item and work 4.
    const full = sent.map((s) => s.items === 128 || s.work + 4 > MAX_BATCH_WORK);
    assert.equal(
      all.reduce((a, b) => a + b, 0),
      1000,
    );
    assert.ok(duringTurn.length > 1, 'batches went out while the burst was still being added');
    assert.equal(duringTurn[0], MIN_EARLY_BATCH);
    let inFlight = 0;
    for (const [i, items] of all.entries()) {
      assert.ok(items <= 128, `batch ${i}: ${items} items`);
      assert.ok((sent[i]?.work ?? 0) <= MAX_BATCH_WORK, `batch ${i}: work ${sent[i]?.work}`);
      // Sent early: full, or at least its share of what was in flight with it; the last
      // one went at the end of the turn with whatever was left.
      if (i < duringTurn.length && !full[i]) {
        assert.ok(items >= MIN_EARLY_BATCH);
        assert.ok(items * PIPELINE_DEPTH >= inFlight + items, `batch ${i} of ${items}`);
      }
      inFlight += items;
    }
    // The ramp is short: a burst of 1000 does not become hundreds of calls.
    assert.ok(all.length <= 24, `${all.length} calls`);
    for (const s of sent) s.answer();
    await endOfTurn();
    assert.ok(requests.every((r) => r.settled));
  });

  it('for a client that writes once per turn (node-redis), a burst goes as full batches only', async () => {
    const { store, sent, request } = recordingStore();
    const coalescer = new Coalescer({ ...store, writesPerTurn: true }, 128, () => 0);
    const requests = Array.from({ length: 300 }, () => request(1, 1));
    for (const r of requests) coalescer.add(r);
    // Early batches would reach Redis no sooner: only full ones go before the turn ends.
    assert.deepEqual(
      sent.map((s) => s.items),
      [128, 128],
    );
    await endOfTurn();
    assert.deepEqual(
      sent.map((s) => s.items),
      [128, 128, 44],
    );
    for (const s of sent) s.answer();
    await endOfTurn();
    assert.ok(requests.every((r) => r.settled));
  });

  it("a store's pipelineDepth sets the share: fewer, larger calls at depth 2 (ioredis)", async () => {
    const sizes = async (pipelineDepth: number | undefined) => {
      const { store, sent, request } = recordingStore();
      const coalescer = new Coalescer({ ...store, pipelineDepth }, 128, () => 0);
      const requests = Array.from({ length: 16 }, () => request());
      for (const r of requests) coalescer.add(r);
      await endOfTurn();
      for (const s of sent) s.answer();
      await endOfTurn();
      assert.ok(requests.every((r) => r.settled));
      return sent.map((s) => s.items);
    };
    assert.equal(PIPELINE_DEPTH, 4);
    assert.deepEqual(await sizes(undefined), [4, 4, 4, 4]);
    assert.deepEqual(await sizes(2), [4, 4, 8]);
    assert.deepEqual(await sizes(1), [4, 12]);
    // Not an integer of at least 1: the default.
    assert.deepEqual(await sizes(0), [4, 4, 4, 4]);
    assert.deepEqual(await sizes(Number.NaN), [4, 4, 4, 4]);
  });

  it('answered calls leave the load: the next few requests go together again', async () => {
    const { store, sent, request } = recordingStore();
    const coalescer = new Coalescer(store, 128, () => 0);
    for (let i = 0; i < 200; i++) coalescer.add(request());
    await endOfTurn();
    for (const s of sent) s.answer();
    await endOfTurn();
    const before = sent.length;
    for (let i = 0; i < MIN_EARLY_BATCH - 1; i++) coalescer.add(request());
    await endOfTurn();
    assert.deepEqual(
      sent.slice(before).map((s) => s.items),
      [MIN_EARLY_BATCH - 1],
    );
  });

  it('no batch passes the work bound; a request heavier than the bound goes alone', async () => {
    const { store, sent, request } = recordingStore();
    const coalescer = new Coalescer(store, 1024, () => 0);
    const heavy = Math.floor(MAX_BATCH_WORK / 3) + 1; // three do not fit
    for (let i = 0; i < 3; i++) coalescer.add(request(1, heavy));
    coalescer.add(request(1, MAX_BATCH_WORK + 500));
    coalescer.add(request(1, 4));
    await endOfTurn();
    assert.deepEqual(
      sent.map((s) => s.work),
      [2 * heavy, heavy, MAX_BATCH_WORK + 500, 4],
    );
    for (const s of sent) assert.ok(s.work <= MAX_BATCH_WORK || s.items === 1);
  });

  it('a request of several items is never split across calls', async () => {
    const { store, sent, request } = recordingStore();
    const coalescer = new Coalescer(store, 7, () => 0);
    for (let i = 0; i < 10; i++) coalescer.add(request(3));
    await endOfTurn();
    assert.equal(
      sent.reduce((a, s) => a + s.items, 0),
      30,
    );
    for (const s of sent) {
      assert.ok(s.items <= 7);
      assert.equal(s.items % 3, 0, 'whole requests only');
    }
  });
});
