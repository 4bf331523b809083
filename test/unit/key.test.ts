import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { describe, it } from 'node:test';
import { keyPrefix, scopeHash, scopeKey } from '../../src/key.js';

const prefix = keyPrefix('rate', 'fw', '1');

describe('scope → key (S10, S21)', () => {
  it('is <namespace>:<algorithm>:v<version>:{sha256(JSON [tenant, route])}', () => {
    const hex = createHash('sha256').update('["acme","POST/orders"]').digest('hex');
    assert.equal(scopeKey(prefix, 'acme', 'POST/orders'), `rate:fw:v1:{${hex}}`);
  });

  it('case C10: joined texts that collide get different keys', () => {
    const pairs: [[string, string], [string, string]][] = [
      [
        ['a:b', 'c'],
        ['a', 'b:c'],
      ],
      [
        ['21', '1'],
        ['2', '11'],
      ],
      [
        ['{victim}', 'r'],
        ['victim', 'r'],
      ],
      [
        ['a","b', 'c'],
        ['a', 'b","c'],
      ],
      [
        ['\ud800', 'r'],
        ['\ud801', 'r'],
      ],
    ];
    for (const [a, b] of pairs) {
      assert.notEqual(scopeKey(prefix, ...a), scopeKey(prefix, ...b), JSON.stringify([a, b]));
    }
  });

  it('case C10: braces, globs and huge ids never reach the key; the key length is fixed', () => {
    const lengths = new Set<number>();
    for (const tenant of ['x', '{}', 'ten{ant}x', '*', '?', '[a-z]', 'x'.repeat(10_240)]) {
      const key = scopeKey(prefix, tenant, 'POST/orders');
      assert.match(key, /^rate:fw:v1:\{[0-9a-f]{64}\}$/);
      lengths.add(key.length);
    }
    assert.equal(lengths.size, 1);
  });

  it('the policy version and namespace change the key', () => {
    const hash = scopeHash('acme', 'POST/orders');
    assert.notEqual(
      scopeKey(keyPrefix('rate', 'fw', '2'), 'acme', 'POST/orders'),
      scopeKey(prefix, 'acme', 'POST/orders'),
    );
    assert.equal(
      scopeKey(keyPrefix('other', 'fw', '1'), 'acme', 'POST/orders'),
      `other:fw:v1:{${hash}}`,
    );
  });
});
