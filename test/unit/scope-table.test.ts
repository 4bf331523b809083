/**
 * The prefetcher's table of grants (src/limiter/scope-table.ts): scopes that differ in any
 * part, or in where a part is absent, never share an entry; policies are keyed by identity;
 * deleting the last value leaves nothing behind.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { fixedWindow } from '../../src/index.js';
import { ScopeTable } from '../../src/limiter/scope-table.js';

const policy = fixedWindow({ limit: 10, windowMs: 1000 });
const other = fixedWindow({ limit: 10, windowMs: 1000 });

describe('ScopeTable', () => {
  it('keeps scopes apart by every part, and an absent part apart from any value', () => {
    const table = new ScopeTable<string>();
    const scopes = [
      { tenant: 'a', route: undefined, user: undefined },
      { tenant: 'a', route: 'x', user: undefined },
      { tenant: 'a', route: undefined, user: 'x' },
      { tenant: 'a', route: 'x', user: 'x' },
      { tenant: 'ax', route: undefined, user: undefined },
      { tenant: 'a', route: 'xx', user: undefined },
    ];
    for (const [i, parts] of scopes.entries()) table.set(policy, parts, `v${i}`);
    assert.equal(table.size, scopes.length);
    for (const [i, parts] of scopes.entries()) assert.equal(table.get(policy, parts), `v${i}`);
    for (const parts of scopes) assert.equal(table.get(other, parts), undefined);
    assert.deepEqual([...table.values()].sort(), scopes.map((_, i) => `v${i}`).sort());
  });

  it('counts a replaced value once, and deleting the last value empties every level', () => {
    const table = new ScopeTable<number>();
    const parts = { tenant: 't', route: 'r', user: 'u' };
    table.set(policy, parts, 1);
    table.set(policy, parts, 2);
    table.set(other, parts, 3);
    assert.equal(table.size, 2);
    assert.equal(table.get(policy, parts), 2);
    assert.equal(table.delete(policy, { ...parts, user: 'v' }), false);
    assert.equal(table.delete(policy, parts), true);
    assert.equal(table.delete(policy, parts), false);
    assert.equal(table.get(policy, parts), undefined);
    assert.equal(table.delete(other, parts), true);
    assert.equal(table.size, 0);
    assert.deepEqual([...table.values()], []);
  });
});
