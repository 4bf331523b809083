/**
 * Policy files, format 2: named policies, stacked limits, scopes (`per`), plans with a
 * default plan, per-tenant plans and overrides — built into guard settings (checked here by
 * a real guard on MemoryStore) and into `routeLimits`, the resolution the CLI shows. Every
 * problem is an InvalidInputError naming its path in the file, and all of them are
 * collected.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { InvalidInputError, MemoryStore, RateLimiter } from 'sluice';
import {
  checkPolicies,
  fieldPath,
  PolicyFileError,
  planOf,
  policiesFrom,
  policyConfigFrom,
  routeLimits,
} from 'sluice/config';
import { createGuard, type GuardVerdict } from 'sluice/http';
import { resolveLimits } from '../../src/http/limits.js';

const plansFile = {
  policies: {
    'api-calls': { algorithm: 'token-bucket', capacity: 100, refillIntervalMs: 600 },
    'orders-free': { algorithm: 'fixed-window', limit: 2, windowMs: 60_000 },
    'orders-pro': { algorithm: 'fixed-window', limit: 5, windowMs: 60_000 },
    'per-user': { algorithm: 'sliding-window-log', limit: 3, windowMs: 60_000 },
  },
  routes: {
    'POST/orders': {
      policy: ['orders-free', { policy: 'api-calls', per: 'tenant' }],
      failureMode: 'fail-open',
      failOpenLimit: 50,
    },
    'GET/search': 'api-calls',
    'GET/items/:id': { algorithm: 'gcra', limit: 5, periodMs: 1000 },
    'POST/reports': 'orders-free',
  },
  plans: {
    free: {},
    pro: {
      'POST/orders': ['orders-pro', { policy: 'api-calls', per: 'tenant' }],
      'POST/reports': [
        { algorithm: 'fixed-window', name: 'reports-pro', limit: 9, windowMs: 1000 },
      ],
    },
  },
  defaultPlan: 'free',
  tenants: {
    acme: { plan: 'pro' },
    globex: { routes: { 'POST/orders': [{ policy: 'per-user', per: 'route-user' }] } },
  },
};

interface Req {
  readonly tenant: string;
  readonly user?: string;
}

function guardFor(route: string, file: unknown = plansFile) {
  const settings = policiesFrom(file).get(route);
  assert.ok(settings, route);
  return createGuard<Req>({
    limiter: new RateLimiter({ store: new MemoryStore() }),
    identify: (req) => req.tenant,
    user: (req) => req.user,
    ...settings,
  });
}

async function statuses(guard: (req: Req) => Promise<GuardVerdict>, req: Req, n: number) {
  const out: number[] = [];
  for (let i = 0; i < n; i++) {
    const verdict = await guard(req);
    out.push(verdict.pass ? 200 : verdict.response.status);
  }
  return out;
}

describe('policy files, format 2', () => {
  it('named policies, stacked limits and scopes become guard settings', () => {
    const config = policyConfigFrom({
      policies: {
        burst: { algorithm: 'fixed-window', limit: 2, windowMs: 10_000 },
        hourly: { algorithm: 'fixed-window', limit: 3, windowMs: 3_600_000 },
      },
      routes: {
        'POST/orders': { policy: ['burst', { policy: 'hourly', per: 'route-user' }], cost: 2 },
        'GET/a': 'burst',
        'GET/b': { policy: 'hourly', per: 'tenant', shadow: true },
        'GET/c': [{ policy: { algorithm: 'gcra', limit: 1, periodMs: 1000 }, per: 'user' }],
      },
    });
    assert.equal(config.format, 2);
    assert.deepEqual([...config.policies.keys()], ['burst', 'hourly']);
    const orders = config.routes.get('POST/orders');
    assert.equal(orders?.cost, 2);
    const limits = resolveLimits(orders?.policy, 'policy');
    assert.deepEqual(
      limits.map((l) => [l.policy.name, l.per]),
      [
        ['burst', 'route'],
        ['hourly', 'route-user'],
      ],
    );
    // One limit on the route's scope is the policy itself, as in format 1.
    assert.equal(config.routes.get('GET/a')?.policy, config.policies.get('burst'));
    assert.deepEqual(resolveLimits(config.routes.get('GET/b')?.policy, 'p')[0]?.per, 'tenant');
    assert.equal(config.routes.get('GET/b')?.shadow, true);
    assert.equal(resolveLimits(config.routes.get('GET/c')?.policy, 'p')[0]?.per, 'user');
    // A named policy is one policy wherever it is used: one quota per scope.
    assert.equal(
      routeLimits(config, 'GET/a', 't').limits[0]?.policy,
      routeLimits(config, 'POST/orders', 't').limits[0]?.policy,
    );
  });

  it('plans: each tenant gets its own, its plan’s, the default plan’s or the route’s limits', () => {
    const config = policyConfigFrom(plansFile);
    assert.deepEqual(
      [...config.routes.keys()],
      ['POST/orders', 'GET/search', 'GET/items/:id', 'POST/reports'],
    );
    assert.deepEqual([...config.plans.keys()], ['free', 'pro']);
    assert.equal(planOf(config, 'acme'), 'pro');
    assert.equal(planOf(config, 'anyone'), 'free');
    const of = (route: string, tenant: string) => {
      const r = routeLimits(config, route, tenant);
      return [r.plan, r.planFrom, r.source, r.names.join(' + ')];
    };
    assert.deepEqual(of('POST/orders', 'acme'), [
      'pro',
      'tenants.acme.plan',
      'plans.pro["POST/orders"]',
      'orders-pro + api-calls',
    ]);
    assert.deepEqual(of('POST/orders', 'initech'), [
      'free',
      'defaultPlan',
      'routes["POST/orders"]',
      'orders-free + api-calls',
    ]);
    assert.deepEqual(of('POST/orders', 'globex'), [
      'free',
      'defaultPlan',
      'tenants.globex.routes["POST/orders"]',
      'per-user',
    ]);
    assert.deepEqual(of('GET/search', 'acme'), [
      'pro',
      'tenants.acme.plan',
      'routes["GET/search"]',
      'api-calls', // a named policy is called by its name
    ]);
    // A route no plan or tenant changes keeps fixed limits; the others choose per tenant.
    assert.equal(typeof config.routes.get('GET/search')?.policy, 'object');
    assert.equal(typeof config.routes.get('POST/orders')?.policy, 'function');
    assert.equal(config.routes.get('POST/orders')?.failureMode, 'fail-open');
    assert.throws(() => routeLimits(config, 'GET/nope', 'acme'), { field: 'route' });
  });

  it('a plan-only route needs its limits in every plan (or the default plan and its own)', () => {
    const file = {
      plans: {
        free: { 'POST/x': { algorithm: 'fixed-window', limit: 1, windowMs: 1000 } },
        pro: { 'POST/x': { algorithm: 'fixed-window', limit: 9, windowMs: 1000 } },
      },
      defaultPlan: 'free',
      tenants: { acme: { plan: 'pro' } },
    };
    const config = policyConfigFrom(file);
    assert.deepEqual([...config.routes.keys()], ['POST/x']);
    assert.equal(routeLimits(config, 'POST/x', 'acme').limits[0]?.policy.limit, 9);
    assert.equal(routeLimits(config, 'POST/x', 'other').limits[0]?.policy.limit, 1);
    // Without defaultPlan, tenants without a plan would have no limits.
    const { defaultPlan: _, ...noDefault } = file;
    assert.deepEqual(
      checkPolicies(noDefault).map((e) => e.field),
      ['routes["POST/x"]'],
    );
    // A route object with settings only takes its limits from the plans.
    const withSettings = policyConfigFrom({ ...file, routes: { 'POST/x': { cost: 3 } } });
    assert.equal(withSettings.routes.get('POST/x')?.cost, 3);
  });

  it('the settings drive a real guard: plans, overrides and the default plan per tenant', async () => {
    const orders = guardFor('POST/orders');
    assert.deepEqual(await statuses(orders, { tenant: 'initech' }, 3), [200, 200, 429]);
    assert.deepEqual(await statuses(orders, { tenant: 'acme' }, 6), [200, 200, 200, 200, 200, 429]);
    // globex counts per user on this route only.
    assert.deepEqual(
      await statuses(orders, { tenant: 'globex', user: 'u1' }, 4),
      [200, 200, 200, 429],
    );
    assert.deepEqual(await statuses(orders, { tenant: 'globex', user: 'u2' }, 1), [200]);
    // The pro plan's own policy on POST/reports; the default plan (free) lists none there,
    // so others get the route's.
    const reports = guardFor('POST/reports');
    assert.deepEqual(
      await statuses(reports, { tenant: 'acme' }, 10),
      [200, 200, 200, 200, 200, 200, 200, 200, 200, 429],
    );
    assert.deepEqual(await statuses(reports, { tenant: 'someone' }, 3), [200, 200, 429]);
  });

  it('format-1 routes mix with format-2 files', () => {
    const config = policyConfigFrom({
      policies: { a: { algorithm: 'fixed-window', limit: 1, windowMs: 1000 } },
      routes: {
        'POST/orders': { algorithm: 'fixed-window', limit: 10, windowMs: 1000, cost: 2 },
        'GET/a': 'a',
      },
    });
    assert.equal(config.routes.get('POST/orders')?.cost, 2);
    assert.equal(config.format, 2);
  });

  it('a tenant id of any text, "__proto__" included, is a tenant like any other', () => {
    const config = policyConfigFrom(
      JSON.parse(
        '{"plans":{"p":{"GET/a":{"algorithm":"fixed-window","limit":7,"windowMs":1}}},"routes":{"GET/a":{"algorithm":"fixed-window","limit":1,"windowMs":1}},"tenants":{"__proto__":{"plan":"p"},"a b":{"plan":"p"}}}',
      ),
    );
    assert.equal(routeLimits(config, 'GET/a', '__proto__').limits[0]?.policy.limit, 7);
    assert.equal(routeLimits(config, 'GET/a', 'a b').plan, 'p');
    assert.equal(routeLimits(config, 'GET/a', 'toString').limits[0]?.policy.limit, 1);
  });

  it('paths as errors write them', () => {
    assert.equal(
      fieldPath(['routes', 'POST/orders', 'policy', 1, 'limit']),
      'routes["POST/orders"].policy[1].limit',
    );
    assert.equal(fieldPath(['plans', 'pro', 'GET/search']), 'plans.pro["GET/search"]');
    assert.equal(fieldPath(['tenants', 'acme-corp', 'plan']), 'tenants["acme-corp"].plan');
  });
});

describe('policy file problems show what the file says', () => {
  const fw = { algorithm: 'fixed-window', limit: 1, windowMs: 1000 };
  it('a string value as written (the operator wrote it); what the route is where it lacks a value', () => {
    const issues = checkPolicies({
      plans: { pro: { 'GET/z': fw } },
      routes: { 'GET/z': {}, 'GET/x': { policy: fw, per: 'users' } },
    });
    const messages = issues.map((issue) => issue.message);
    assert.ok(
      messages.includes(
        'routes["GET/x"].per must be one of "route", "tenant", "user", "route-user"; received string "users"',
      ),
      messages.join('\n'),
    );
    const plan = messages.find((m) => m.startsWith('routes["GET/z"] '));
    assert.ok(plan?.includes('tenants without a plan'), messages.join('\n'));
    assert.match(plan ?? '', /; received a route object without "policy"$/);
  });
});

describe('policy files, format 2: every problem named by its path', () => {
  const fw = { algorithm: 'fixed-window', limit: 1, windowMs: 1000 };
  const bad: [string, unknown, string][] = [
    [
      'a bad limit in a stacked list',
      { routes: { 'POST/orders': { policy: [fw, { ...fw, limit: 0 }] } } },
      'routes["POST/orders"].policy[1].limit',
    ],
    [
      'an unknown policy name',
      { policies: { a: fw }, routes: { 'POST/orders': ['a', 'b'] } },
      'routes["POST/orders"][1]',
    ],
    [
      'a bad per',
      { policies: { a: fw }, routes: { 'GET/x': { policy: 'a', per: 'everyone' } } },
      'routes["GET/x"].per',
    ],
    [
      'per inside an inline policy',
      { routes: { 'GET/x': [{ ...fw, per: 'tenant' }] } },
      'routes["GET/x"][0].per',
    ],
    [
      'a plan with a bad policy',
      { routes: { 'GET/search': fw }, plans: { pro: { 'GET/search': { ...fw, windowMs: -1 } } } },
      'plans.pro["GET/search"].windowMs',
    ],
    [
      'a plan that lacks a route with no limits of its own',
      { routes: { 'GET/search': { cost: 1 } }, plans: { pro: {} }, defaultPlan: 'pro' },
      'plans.pro["GET/search"]',
    ],
    [
      'a tenant on an unknown plan',
      { routes: { 'GET/a': fw }, plans: { pro: {} }, tenants: { acme: { plan: 'gold' } } },
      'tenants.acme.plan',
    ],
    [
      'an unknown default plan',
      { routes: { 'GET/a': fw }, plans: { pro: {} }, defaultPlan: 'gold' },
      'defaultPlan',
    ],
    [
      'a tenant override of an unknown route',
      { routes: { 'GET/a': fw }, tenants: { acme: { routes: { 'GET/b': fw } } } },
      'tenants.acme.routes["GET/b"]',
    ],
    [
      'a raw URL in a plan',
      { routes: { 'GET/a': fw }, plans: { pro: { '/a?x=1': fw } } },
      'plans.pro["/a?x=1"]',
    ],
    [
      'one policy twice on one scope',
      { policies: { a: fw }, routes: { 'GET/a': ['a', 'a'] } },
      'routes["GET/a"][1]',
    ],
    [
      'more than 16 limits',
      { routes: { 'GET/a': Array.from({ length: 17 }, (_, i) => ({ ...fw, name: `p${i}` })) } },
      'routes["GET/a"]',
    ],
    ['an empty list', { routes: { 'GET/a': [] } }, 'routes["GET/a"]'],
    [
      'two policies with one name',
      { policies: { a: fw }, routes: { 'GET/a': { ...fw, limit: 2, name: 'a' } } },
      'routes["GET/a"].name',
    ],
    [
      'a name inside the policies map',
      { policies: { a: { ...fw, name: 'b' } }, routes: { 'GET/a': 'a' } },
      'policies.a.name',
    ],
    [
      'per with a list',
      { routes: { 'GET/a': { policy: [fw], per: 'tenant' } } },
      'routes["GET/a"].per',
    ],
    ['a misspelled top-level field', { routes: { 'GET/a': fw }, tenant: {} }, 'tenant'],
    [
      'a misspelled route setting',
      { routes: { 'GET/a': { policy: fw, cots: 2 } } },
      'routes["GET/a"].cots',
    ],
    [
      'fail-open without a local limit',
      { routes: { 'GET/a': { policy: fw, failureMode: 'fail-open' } } },
      'routes["GET/a"].failOpenLimit',
    ],
    ['not an object', [], 'config'],
  ];
  for (const [label, file, field] of bad) {
    it(`${label} → ${field}`, () => {
      assert.throws(
        () => policiesFrom(file),
        (error: unknown) =>
          error instanceof InvalidInputError && error.field === field ? true : (error as Error),
      );
    });
  }

  it('a route key with a query or a fragment is refused, in routes, plans and tenant overrides', () => {
    const fields = (file: unknown) => checkPolicies(file).map((e) => e.field);
    assert.deepEqual(fields({ routes: { 'POST/orders?x=1': fw, 'GET/a#b': fw, 'GET/a': fw } }), [
      'routes["POST/orders?x=1"]',
      'routes["GET/a#b"]',
    ]);
    assert.deepEqual(fields({ routes: { 'GET/a': fw }, plans: { pro: { 'GET/a?x': fw } } }), [
      'plans.pro["GET/a?x"]',
    ]);
    assert.deepEqual(
      fields({ routes: { 'GET/a#b': fw }, tenants: { acme: { routes: { 'GET/a#b': fw } } } }),
      ['routes["GET/a#b"]', 'tenants.acme.routes["GET/a#b"]'],
    );
    assert.match(checkPolicies({ routes: { 'GET/a?': fw } })[0]?.message ?? '', /no query/);
    // "?" and "#" are refused only in keys: a path with ":" or "*" is a template as before.
    assert.deepEqual(checkPolicies({ routes: { 'GET/a/:id/*': fw } }), []);
  });

  it('every problem is collected, in the order of the file', () => {
    const file = {
      policies: { a: { ...fw, limit: 0 } },
      routes: {
        'POST/orders': { policy: ['a', { ...fw, limit: 1.5 }, 'nope'], cots: 2 },
        '/raw?x': 'a',
      },
      plans: { pro: { 'GET/search': [{ algorithm: 'gcra', limit: 1, periodMs: 1, burts: 2 }] } },
      defaultPlan: 'pro',
      tenants: { acme: { plan: 'enterprise' } },
      extra: 1,
    };
    const fields = checkPolicies(file).map((e) => e.field);
    assert.deepEqual(fields, [
      'extra',
      'policies.a.limit',
      'routes["POST/orders"].cots',
      'routes["POST/orders"].policy[1].limit',
      'routes["POST/orders"].policy[2]',
      'routes["/raw?x"]',
      'plans.pro["GET/search"][0].burts',
      'tenants.acme.plan',
    ]);
    const error = (() => {
      try {
        policyConfigFrom(file);
      } catch (e) {
        return e;
      }
    })();
    assert.ok(error instanceof PolicyFileError && error instanceof InvalidInputError);
    assert.equal(error.code, 'SLUICE_INVALID_INPUT');
    assert.equal(error.field, 'extra');
    assert.deepEqual(
      error.issues.map((e) => e.field),
      fields,
    );
    assert.match(error.message, /and 7 more/);
    const messages = checkPolicies(file).map((e) => e.message);
    assert.match(messages[6] ?? '', /did you mean "burst"/);
    assert.match(messages[7] ?? '', /"pro".*not "enterprise"/);
    assert.deepEqual(checkPolicies(plansFile), []);
  });
});
