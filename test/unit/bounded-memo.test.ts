/**
 * The bounded memo behind the key digests (`key.ts`): an input seen again is not computed
 * again, the memo never holds more than its bound, and the keys are the digests they were
 * (pinned in key.test.ts).
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { boundedMemo, boundedPairMemo } from '../../src/bounded-memo.js';
import { digest, scopeKey, tenantTag } from '../../src/key.js';

describe('boundedMemo', () => {
  it('computes an input once while it is held, and again once the memo was emptied', () => {
    const calls: string[] = [];
    const memo = boundedMemo((text: string) => {
      calls.push(text);
      return text.toUpperCase();
    }, 3);
    assert.equal(memo('a'), 'A');
    assert.equal(memo('a'), 'A');
    assert.equal(memo('b'), 'B');
    assert.equal(memo('c'), 'C');
    assert.deepEqual(calls, ['a', 'b', 'c']);
    // A fourth input finds the memo full: it is emptied, so 'a' is computed again.
    assert.equal(memo('d'), 'D');
    assert.equal(memo('a'), 'A');
    assert.deepEqual(calls, ['a', 'b', 'c', 'd', 'a']);
  });

  it('a pair memo tells (a, undefined) from (a, b) and holds at most its bound in all', () => {
    const calls: string[] = [];
    const memo = boundedPairMemo((a: string, b: string | undefined) => {
      calls.push(`${a}/${b}`);
      return `${a}/${b ?? '-'}`;
    }, 3);
    assert.equal(memo('r', undefined), 'r/-');
    assert.equal(memo('r', 'u'), 'r/u');
    assert.equal(memo('s', 'u'), 's/u');
    assert.equal(memo('r', undefined), 'r/-');
    assert.deepEqual(calls, ['r/undefined', 'r/u', 's/u']);
    assert.equal(memo('s', 'v'), 's/v'); // full: emptied first
    assert.equal(memo('r', 'u'), 'r/u');
    assert.deepEqual(calls, ['r/undefined', 'r/u', 's/u', 's/v', 'r/u']);
  });

  it('the memoized key digests are the digests of the key scheme', () => {
    for (let i = 0; i < 3000; i++) {
      const tenant = `t${i % 1500}`;
      assert.equal(tenantTag(tenant), `{${digest([tenant])}}`);
      const user = i % 3 === 0 ? undefined : `u${i}`;
      assert.equal(
        scopeKey('rate', 'fw.0', tenant, 'GET/x', user),
        `rate:{${digest([tenant])}}:fw.0:${digest(['GET/x', user ?? null])}`,
      );
    }
  });
});
