/**
 * The batch wire format's runs (`src/algorithms/batch-wire.ts`): consecutive lone takes of one
 * algorithm with the same arguments are written as one `u` entry, anything else as before,
 * and reading a batch back gives every take as its own request, in order.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import {
  type BatchOp,
  readRequests,
  type WireItem,
  type WireRequest,
  writeRequest,
  writeRequests,
} from '../../src/algorithms/batch-wire.js';

const UNIT = ['1000', '60000', '1'];

function request(op: BatchOp, ...items: WireItem[]): WireRequest {
  return { op, size: items.length, item: (j) => items[j] as WireItem };
}

const take = (key: string, batchId = 1, args: readonly string[] = UNIT) =>
  request('t', { key, batchId, args });

function written(requests: readonly WireRequest[]): { keys: string[]; argv: string[] } {
  const keys: string[] = [];
  const argv: string[] = [];
  writeRequests(keys, argv, requests);
  return { keys, argv };
}

/** What a request reads back as, without runs. */
function expanded(requests: readonly WireRequest[]) {
  return requests.map((r) => ({
    op: r.op,
    items: Array.from({ length: r.size }, (_, j) => {
      const { key, batchId, args } = r.item(j);
      return { key, batchId, args: [...args] };
    }),
  }));
}

describe('batch wire: runs of lone takes', () => {
  it('100 takes of one policy and cost: their arguments once, their 100 keys in order', () => {
    const requests = Array.from({ length: 100 }, (_, i) => take(`k${i}`));
    const { keys, argv } = written(requests);
    assert.deepEqual(argv, ['u', '100', '1', '3', ...UNIT]);
    assert.deepEqual(
      keys,
      requests.map((_, i) => `k${i}`),
    );
    assert.deepEqual(readRequests(keys, argv), expanded(requests));
  });

  it('equal arguments in different arrays still make one run', () => {
    const { argv } = written([take('a', 1, [...UNIT]), take('b', 1, [...UNIT])]);
    assert.deepEqual(argv, ['u', '2', '1', '3', ...UNIT]);
  });

  it('a run ends at another cost, algorithm, operation or a request of several items', () => {
    const requests = [
      take('a'),
      take('b'),
      take('c', 1, ['1000', '60000', '2']), // another cost
      take('d', 2), // another algorithm
      take('e', 2),
      request('p', { key: 'f', batchId: 1, args: UNIT }), // a peek
      take('g'),
      request('t', { key: 'h', batchId: 1, args: UNIT }, { key: 'i', batchId: 1, args: UNIT }),
      take('j'),
      request('r', { key: 'k', batchId: 0, args: [] }),
      take('l'),
    ];
    const { keys, argv } = written(requests);
    const plain = (...rs: WireRequest[]) => {
      const k: string[] = [];
      const a: string[] = [];
      for (const r of rs) writeRequest(k, a, r);
      return a;
    };
    assert.deepEqual(argv, [
      ...['u', '2', '1', '3', ...UNIT],
      ...plain(requests[2] as WireRequest),
      ...['u', '2', '2', '3', ...UNIT],
      ...plain(...(requests.slice(5) as WireRequest[])),
    ]);
    assert.deepEqual(keys, ['a', 'b', 'c', 'd', 'e', 'f', 'g', 'h', 'i', 'j', 'k', 'l']);
    assert.deepEqual(readRequests(keys, argv), expanded(requests));
  });

  it('a lone take alone is written as before', () => {
    const keys: string[] = [];
    const argv: string[] = [];
    writeRequest(keys, argv, take('a'));
    assert.deepEqual(written([take('a')]), { keys, argv });
  });
});
