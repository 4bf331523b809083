/**
 * The soak test's checker must be able to fail: for each policy, a log that keeps the bound
 * passes and a log one admission over it is caught.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { checkAdmissions } from '../helpers/admission-check.js';
import type { LoggedAdmission } from '../helpers/decision-log.js';

const T0 = 1_700_000_000_000_000; // µs

function entry(
  tag: string,
  atMs: number,
  args: number[],
  reply: number[] = [1, 0, 0, 0],
): LoggedAdmission {
  return { key: `soak:{0a}:${tag}.0123456789abcdef:1b`, us: T0 + atMs * 1000, args, reply };
}

describe('admission checker', () => {
  it('fixed window: limit per window, and no window restarting early', () => {
    // limit 3 per 1000 ms; the creating take has remaining = limit − cost.
    const ok = [
      entry('fw', 0, [3, 1000, 1], [1, 2, 1000, 0]),
      entry('fw', 10, [3, 1000, 2], [1, 0, 990, 0]),
      entry('fw', 1001, [3, 1000, 1], [1, 2, 1000, 0]),
    ];
    assert.deepEqual(checkAdmissions(ok), []);
    const over = [...ok.slice(0, 2), entry('fw', 20, [3, 1000, 1], [1, 0, 980, 0])];
    assert.match(checkAdmissions(over)[0]?.detail ?? '', /4 admitted in one window/);
    const early = [...ok.slice(0, 2), entry('fw', 500, [3, 1000, 1], [1, 2, 1000, 0])];
    assert.match(checkAdmissions(early)[0]?.detail ?? '', /new window 500 ms after/);
  });

  it('sliding window log: limit in every window ending at an admission', () => {
    const at = (ms: number) => entry('swlw', ms, [2, 1000, 1]);
    assert.deepEqual(checkAdmissions([at(0), at(500), at(1000), at(1500)]), []);
    assert.equal(checkAdmissions([at(0), at(500), at(999)]).length, 1);
  });

  it('sliding window counter: the weighted estimate at every admission', () => {
    const at = (ms: number, cost = 1) => entry('swc', ms, [4, 1000, cost]);
    // 4 in window 0; at 1500 ms the previous window weighs 4 × 0.5 = 2: two more fit.
    const ok = [at(100, 4), at(1500), at(1500)];
    assert.deepEqual(checkAdmissions(ok), []);
    assert.equal(checkAdmissions([...ok, at(1500)]).length, 1);
  });

  it('token bucket: every take finds its cost in a continuously refilled bucket', () => {
    // capacity 2, 1 token per 100 ms.
    const at = (ms: number) => entry('tb', ms, [2, 1, 100, 1]);
    assert.deepEqual(checkAdmissions([at(0), at(0), at(100), at(200)]), []);
    assert.equal(checkAdmissions([at(0), at(0), at(99)]).length, 1);
  });

  it('GCRA: every take conforms', () => {
    // T = 100 ms, burst 2.
    const at = (ms: number) => entry('gcra', ms, [100_000, 2, 1]);
    assert.deepEqual(checkAdmissions([at(0), at(0), at(100), at(200)]), []);
    assert.equal(checkAdmissions([at(0), at(0), at(50)]).length, 1);
  });
});
