import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { describe, it } from 'node:test';
import { fixedWindow, MemoryStore, RateLimiter } from 'sluice';
import { scopeKey, tenantTag } from '../../src/key.js';

const sha = (text: string) => createHash('sha256').update(text).digest('hex').slice(0, 32);
const policy = fixedWindow({ limit: 10, windowMs: 60_000 });
const key = (tenant: string, route?: string, user?: string) =>
  scopeKey('rate', policy.id, tenant, route, user);

describe('scope → key, scheme v2', () => {
  it('is <namespace>:{sha256(JSON [tenant])}:<policy id>:sha256(JSON [route, user])', () => {
    assert.equal(
      key('acme', 'POST/orders'),
      `rate:{${sha('["acme"]')}}:${policy.id}:${sha('["POST/orders",null]')}`,
    );
    assert.equal(key('acme'), `rate:{${sha('["acme"]')}}:${policy.id}`);
    assert.equal(
      key('acme', 'POST/orders', 'u1'),
      `rate:{${sha('["acme"]')}}:${policy.id}:${sha('["POST/orders","u1"]')}`,
    );
    assert.equal(
      key('acme', undefined, 'u1'),
      `rate:{${sha('["acme"]')}}:${policy.id}:${sha('[null,"u1"]')}`,
    );
  });

  it('the README example key is what the limiter builds', () => {
    assert.equal(
      key('acme', 'POST/orders'),
      'rate:{07fad54f7446269afc481e306a48f046}:fw.17b030aa42ef23f5:1966b0d8b8c859e1eca065c53cd5f4dd',
    );
    // The longest: a 64-character namespace and the longest algorithm tag.
    const longest = scopeKey('n'.repeat(64), 'gcra.0123456789abcdef', 't', 'r', 'u');
    assert.equal(longest.length, 154);
  });

  it('case C02 (item 3): every key of one takeAll has the same hash tag, braces in ids or not', () => {
    // Redis Cluster hashes what lies between the key's first `{` and the next `}`.
    const hashTag = (k: string) => {
      const open = k.indexOf('{');
      const close = k.indexOf('}', open + 1);
      return close > open + 1 ? k.slice(open + 1, close) : k;
    };
    for (const tenant of ['ten{ant}x', '{}', '}{', 'plain']) {
      const keys = [
        key(tenant),
        key(tenant, '{route}'),
        key(tenant, 'r', '{user}'),
        scopeKey('rate', fixedWindow({ limit: 1, windowMs: 1, name: 'x' }).id, tenant, '}', '{'),
      ];
      assert.equal(new Set(keys.map(hashTag)).size, 1, tenant);
      assert.equal(hashTag(keys[0] as string), tenantTag(tenant).slice(1, -1));
    }
  });

  it('every key of one tenant carries the same hash tag (one Cluster slot)', () => {
    const tag = tenantTag('acme');
    const other = fixedWindow({ limit: 5, windowMs: 1000, name: 'other' });
    for (const k of [
      key('acme'),
      key('acme', 'r'),
      key('acme', 'r', 'u'),
      scopeKey('rate', other.id, 'acme', 'x', undefined),
    ]) {
      assert.equal(/\{[^}]*\}/.exec(k)?.[0], tag);
    }
    assert.notEqual(tenantTag('acme2'), tag);
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
      assert.notEqual(key(...a), key(...b), JSON.stringify([a, b]));
    }
    // Route and user never stand in for each other; a tenant-wide key is not a route's.
    assert.notEqual(key('t', 'x'), key('t', undefined, 'x'));
    assert.notEqual(key('t'), key('t', 'x'));
  });

  it('case C10: braces, globs and huge ids never reach the key; the key length is bounded', () => {
    const lengths = new Set<number>();
    for (const tenant of ['x', '{}', 'ten{ant}x', '*', '?', '[a-z]', 'x'.repeat(10_240)]) {
      const k = key(tenant, 'POST/orders', '{user}');
      assert.match(k, /^rate:\{[0-9a-f]{32}\}:fw\.[0-9a-f]{16}:[0-9a-f]{32}$/);
      lengths.add(k.length);
    }
    assert.equal(lengths.size, 1);
  });

  it('policy identity: any parameter, the version or the name gives another key', () => {
    const ids = new Set(
      [
        fixedWindow({ limit: 10, windowMs: 60_000 }),
        fixedWindow({ limit: 11, windowMs: 60_000 }),
        fixedWindow({ limit: 10, windowMs: 60_001 }),
        fixedWindow({ limit: 10, windowMs: 60_000, version: 2 }),
        fixedWindow({ limit: 10, windowMs: 60_000, name: 'orders' }),
      ].map((p) => p.id),
    );
    assert.equal(ids.size, 5);
    // The same options give the same identity (replicas agree without coordination).
    assert.equal(fixedWindow({ limit: 10, windowMs: 60_000 }).id, policy.id);
    assert.equal(policy.name, 'fixed-window-10-per-60000ms');
  });

  it('limiter.keyOf gives the key the limiter writes, in its namespace', async () => {
    const store = new MemoryStore();
    const limiter = new RateLimiter({ store, namespace: 'ns' });
    assert.equal(
      limiter.keyOf({ tenant: 'acme', route: 'r' }, policy),
      scopeKey('ns', policy.id, 'acme', 'r', undefined),
    );
  });
});
