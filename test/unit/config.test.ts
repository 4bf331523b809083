import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { isPolicy, type Policy } from '../../src/algorithms/policy.js';
import {
  loadPolicies,
  policiesFrom,
  policyConfigFrom,
  type RouteSettings,
} from '../../src/config/index.js';
import { InvalidInputError } from '../../src/errors.js';

/** A format-1 route's policy: always one policy, as before format 2. */
function policyOf(settings: RouteSettings | undefined): Policy {
  assert.ok(settings !== undefined && isPolicy(settings.policy), 'a policy');
  return settings.policy;
}

describe('policies from configuration (zod), format 1', () => {
  it('builds every route’s policy and settings', () => {
    const routes = policiesFrom({
      routes: {
        'POST/orders': { algorithm: 'fixed-window', limit: 10, windowMs: 1000 },
        'GET/search/:q': {
          algorithm: 'token-bucket',
          capacity: 20,
          refillTokens: 5,
          refillIntervalMs: 1000,
          failureMode: 'fail-open',
          failOpenLimit: 10,
          shadow: true,
          version: 2,
        },
        'PUT/items': { algorithm: 'gcra', limit: 5, periodMs: 1000, burst: 2, cost: 2 },
      },
    });
    assert.deepEqual([...routes.keys()], ['POST/orders', 'GET/search/:q', 'PUT/items']);
    const search = routes.get('GET/search/:q');
    assert.equal(policyOf(search).algorithm, 'token-bucket');
    assert.equal(policyOf(search).version, '2');
    assert.deepEqual(
      [search?.failureMode, search?.failOpenLimit, search?.shadow],
      ['fail-open', 10, true],
    );
    assert.deepEqual(
      [routes.get('PUT/items')?.cost, routes.get('POST/orders')?.failureMode],
      [2, 'fail-closed'],
    );
  });

  const bad: [string, unknown, string][] = [
    [
      'a non-integer limit',
      { routes: { 'POST/orders': { algorithm: 'fixed-window', limit: 1.5, windowMs: 1000 } } },
      'routes["POST/orders"].limit',
    ],
    [
      'an unknown algorithm',
      { routes: { 'POST/orders': { algorithm: 'leaky', limit: 1 } } },
      'routes["POST/orders"].algorithm',
    ],
    [
      'an unknown field',
      { routes: { 'POST/orders': { algorithm: 'gcra', limit: 1, periodMs: 1, burts: 2 } } },
      'routes["POST/orders"]',
    ],
    [
      'a raw URL as route',
      { routes: { '/orders?x=1': { algorithm: 'fixed-window', limit: 1, windowMs: 1 } } },
      'routes',
    ],
    [
      'a __proto__ route',
      JSON.parse('{"routes":{"__proto__":{"algorithm":"fixed-window","limit":1,"windowMs":1}}}'),
      'routes',
    ],
    [
      'fail-open without a local limit',
      {
        routes: {
          'POST/orders': {
            algorithm: 'fixed-window',
            limit: 1,
            windowMs: 1,
            failureMode: 'fail-open',
          },
        },
      },
      'routes["POST/orders"].failOpenLimit',
    ],
    [
      'a log limit over its cap',
      {
        routes: { 'POST/orders': { algorithm: 'sliding-window-log', limit: 20_000, windowMs: 1 } },
      },
      'routes["POST/orders"].limit',
    ],
    ['no routes at all', {}, 'routes'],
    [
      'a policy name with a space',
      {
        routes: {
          'POST/orders': { algorithm: 'fixed-window', limit: 1, windowMs: 1, name: 'a b' },
        },
      },
      'routes["POST/orders"].name',
    ],
  ];
  for (const [label, config, field] of bad) {
    it(`${label} → InvalidInputError naming ${field}`, () => {
      assert.throws(
        () => policiesFrom(config),
        (error: unknown) => error instanceof InvalidInputError && error.field.startsWith(field),
      );
    });
  }

  it('a policy may be named; the name is part of its identity', () => {
    const routes = policiesFrom({
      routes: {
        'POST/orders': { algorithm: 'gcra', limit: 5, periodMs: 1000, name: 'orders-5ps' },
        'GET/orders': { algorithm: 'gcra', limit: 5, periodMs: 1000 },
      },
    });
    const named = policyOf(routes.get('POST/orders'));
    const derived = policyOf(routes.get('GET/orders'));
    assert.equal(named.name, 'orders-5ps');
    assert.equal(derived.name, 'gcra-5-per-1000ms-burst-5');
    assert.notEqual(named.id, derived.id);
  });

  it('the demo’s policy file loads', () => {
    const routes = loadPolicies(new URL('../../examples/demo-policies.json', import.meta.url));
    assert.equal(policyOf(routes.get('POST/orders')).limit, 10);
    assert.throws(() => loadPolicies('/nonexistent/policies.json'), { field: 'config' });
  });

  it('a format-1 file is format 1, and its settings are exactly the guard options', () => {
    const config = policyConfigFrom({
      routes: { 'POST/orders': { algorithm: 'fixed-window', limit: 10, windowMs: 1000 } },
    });
    assert.equal(config.format, 1);
    const orders = config.routes.get('POST/orders');
    assert.deepEqual(Object.keys(orders ?? {}).sort(), [
      'cost',
      'failureMode',
      'policy',
      'route',
      'shadow',
    ]);
    assert.equal(orders?.route, 'POST/orders');
  });
});
