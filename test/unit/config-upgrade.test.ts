/**
 * The format-1 → format-2 upgrade of policy documents: format-1 routes become route
 * objects, everything else is left for the compiler, and paths inside an upgraded route's
 * policy map back to the route itself.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { upgradeFormatOne } from '../../src/config/upgrade.js';

describe('format 1 → format 2', () => {
  it('a format-1 route becomes { policy, …settings }; the file is still format 1', () => {
    const input = {
      routes: {
        'POST/orders': { algorithm: 'fixed-window', limit: 10, windowMs: 1000, cost: 2 },
        'GET/a': { algorithm: 'gcra', limit: 5, periodMs: 1000, name: 'a', shadow: true },
      },
    };
    const upgraded = upgradeFormatOne(input);
    assert.deepEqual(upgraded.document, {
      routes: {
        'POST/orders': {
          policy: { algorithm: 'fixed-window', limit: 10, windowMs: 1000 },
          cost: 2,
        },
        'GET/a': {
          policy: { algorithm: 'gcra', limit: 5, periodMs: 1000, name: 'a' },
          shadow: true,
        },
      },
    });
    assert.equal(upgraded.format, 1);
    assert.equal(upgraded.issues.size, 0);
    assert.equal(input.routes['POST/orders'].algorithm, 'fixed-window', 'the input is unchanged');
  });

  it('paths inside an upgraded route’s policy are the route’s own in the file', () => {
    const { origin } = upgradeFormatOne({
      routes: { 'POST/orders': { algorithm: 'fixed-window', limit: 10, windowMs: 1000 } },
      plans: { pro: {} },
    });
    assert.deepEqual(origin(['routes', 'POST/orders', 'policy', 'limit']), [
      'routes',
      'POST/orders',
      'limit',
    ]);
    assert.deepEqual(origin(['routes', 'POST/orders', 'failOpenLimit']), [
      'routes',
      'POST/orders',
      'failOpenLimit',
    ]);
    assert.deepEqual(origin(['plans', 'pro', 'policy']), ['plans', 'pro', 'policy']);
  });

  it('format-2 routes and fields are left as they are, and make the file format 2', () => {
    const routes = { 'GET/a': 'a', 'GET/b': { policy: 'a', cost: 2 } };
    const upgraded = upgradeFormatOne({ policies: {}, routes });
    assert.deepEqual(upgraded.document, { policies: {}, routes });
    assert.equal(upgraded.format, 2);
    assert.equal(upgradeFormatOne({ routes: { 'GET/b': { policy: 'a' } } }).format, 2);
    assert.equal(upgradeFormatOne({ routes: {}, defaultPlan: 'p' }).format, 2);
  });

  it('an invalid format-1 route keeps its value; its problems name the file’s paths', () => {
    const value = { algorithm: 'fixed-window', limit: 0, windowMs: 1000, cots: 2 };
    const upgraded = upgradeFormatOne({ routes: { 'POST/orders': value } });
    assert.deepEqual(upgraded.document, { routes: { 'POST/orders': value } });
    assert.deepEqual(
      upgraded.issues.get('POST/orders')?.map((i) => [i.field, i.expected]),
      [
        ['routes["POST/orders"].limit', 'a positive integer'],
        ['routes["POST/orders"].cots', 'absent (not a field here; did you mean "cost"?)'],
      ],
    );
    // A key that is no route template is the compiler's to report.
    assert.equal(upgradeFormatOne({ routes: { '/x': value } }).issues.size, 0);
  });

  it('a "__proto__" key stays an own key of the upgraded routes', () => {
    const upgraded = upgradeFormatOne(
      JSON.parse('{"routes":{"__proto__":{"algorithm":"fixed-window","limit":1,"windowMs":1}}}'),
    );
    const routes = (upgraded.document as { routes: object }).routes;
    assert.ok(Object.hasOwn(routes, '__proto__'));
    assert.equal(Object.getPrototypeOf(routes), Object.prototype);
  });
});
