/**
 * The framework-free guard's decisions on MemoryStore (no Redis, no server): stacked limits
 * all or nothing, plans chosen per tenant and checked on every call, per-tenant and per-user
 * scopes, skip, the 429 naming the policy that bound, RFC 9457 bodies, WWW-Authenticate,
 * response hooks that cannot drop Retry-After, and option checks. Over real servers and a
 * real Redis, the same rows run in test/integration/adapters.test.ts.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { fixedWindow, InvalidInputError, MemoryStore, RateLimiter, tokenBucket } from 'sluice';
import {
  clientAddressOf,
  createGuard,
  type GuardOptions,
  type GuardVerdict,
  QUOTA_EXCEEDED_TYPE,
} from 'sluice/http';

interface Req {
  readonly tenant?: string;
  readonly user?: string;
  readonly path?: string;
}

const limiter = () => new RateLimiter({ store: new MemoryStore() });
const guardOf = (options: Partial<GuardOptions<Req>>) =>
  createGuard<Req>({
    limiter: limiter(),
    route: 'POST/orders',
    identify: (req) => req.tenant,
    policy: fixedWindow({ limit: 1, windowMs: 60_000 }),
    ...options,
  });
const refused = (verdict: GuardVerdict) => {
  assert.equal(verdict.pass, false);
  return (verdict as Extract<GuardVerdict, { pass: false }>).response;
};
const passed = (verdict: GuardVerdict) => {
  assert.equal(verdict.pass, true);
  return (verdict as Extract<GuardVerdict, { pass: true }>).headers;
};

describe('guard: stacked limits', () => {
  const burst = fixedWindow({ name: 'burst', limit: 2, windowMs: 10_000 });
  const hourly = fixedWindow({ name: 'hourly', limit: 3, windowMs: 3_600_000 });

  it('every policy in the headers (list syntax); the 429 names the policy that bound; a refusal spends nothing', async () => {
    const guard = guardOf({ policy: [burst, hourly] });
    const first = passed(await guard({ tenant: 'a' }));
    assert.equal(first['ratelimit-policy'], '"burst";q=2;w=10, "hourly";q=3;w=3600');
    assert.equal(first.ratelimit, '"burst";r=1;t=10, "hourly";r=2;t=3600');
    passed(await guard({ tenant: 'a' }));
    const response = refused(await guard({ tenant: 'a' }));
    assert.equal(response.status, 429);
    assert.equal(response.headers['content-type'], 'application/problem+json');
    assert.ok(Number(response.headers['retry-after']) >= 9);
    const body = JSON.parse(response.body);
    assert.equal(body.type, QUOTA_EXCEEDED_TYPE);
    assert.equal(body.status, 429);
    assert.deepEqual(body['violated-policies'], ['burst']);
    // Refused from the denial cache: only the policy it held has a fresh state to report.
    assert.match(response.headers.ratelimit ?? '', /^"burst";r=0;t=\d+$/);
    assert.equal(response.headers['ratelimit-policy'], '"burst";q=2;w=10, "hourly";q=3;w=3600');
    assert.equal(guard.counts.limited, 1);
  });

  it('without the denial cache, a policy that would have fitted reports its real, unspent state', async () => {
    const guard = guardOf({
      limiter: new RateLimiter({ store: new MemoryStore(), denialCache: false }),
      policy: [burst, hourly],
    });
    passed(await guard({ tenant: 'a' }));
    passed(await guard({ tenant: 'a' }));
    const response = refused(await guard({ tenant: 'a' }));
    assert.match(response.headers.ratelimit ?? '', /^"burst";r=0;t=\d+, "hourly";r=1;t=\d+$/);
    assert.deepEqual(JSON.parse(response.body)['violated-policies'], ['burst']);
  });

  it('per: "tenant" counts across routes; per: "route-user" counts one user', async () => {
    const shared = limiter();
    const tenantWide = fixedWindow({ name: 'tenant-wide', limit: 3, windowMs: 60_000 });
    const perUser = fixedWindow({ name: 'per-user', limit: 1, windowMs: 60_000 });
    const make = (route: string) =>
      guardOf({
        limiter: shared,
        route,
        user: (req) => req.user,
        policy: [
          fixedWindow({ limit: 10, windowMs: 60_000 }),
          { policy: tenantWide, per: 'tenant' },
          { policy: perUser, per: 'route-user' },
        ],
      });
    const orders = make('POST/orders');
    const search = make('GET/search');
    passed(await orders({ tenant: 't', user: 'u1' }));
    const again = refused(await orders({ tenant: 't', user: 'u1' }));
    assert.deepEqual(JSON.parse(again.body)['violated-policies'], ['per-user']);
    passed(await orders({ tenant: 't', user: 'u2' }));
    passed(await search({ tenant: 't', user: 'u1' }));
    const wide = refused(await search({ tenant: 't', user: 'u3' }));
    assert.deepEqual(JSON.parse(wide.body)['violated-policies'], ['tenant-wide']);
    // No user where a limit needs one: 401, nothing spent.
    assert.equal(refused(await orders({ tenant: 'other' })).status, 401);
  });

  it('per-user limits without a user option are refused at construction', () => {
    assert.throws(
      () =>
        guardOf({
          policy: { policy: fixedWindow({ limit: 1, windowMs: 1000 }), per: 'user' },
        }),
      (error: unknown) => error instanceof InvalidInputError && error.field === 'user',
    );
  });

  it('bad lists are refused naming the index: empty, > 16, duplicates, unknown per, non-policies', () => {
    const p = fixedWindow({ limit: 1, windowMs: 1000 });
    const field = (policy: unknown) => {
      try {
        guardOf({ policy: policy as GuardOptions<Req>['policy'] });
      } catch (error) {
        assert.ok(error instanceof InvalidInputError);
        return error.field;
      }
      assert.fail('accepted');
    };
    assert.equal(field([]), 'policy');
    assert.equal(
      field(Array.from({ length: 17 }, (_, i) => fixedWindow({ limit: i + 1, windowMs: 1000 }))),
      'policy',
    );
    assert.equal(field([p, p]), 'policy[1]');
    assert.equal(field([p, { policy: p, per: 'planet' }]), 'policy[1].per');
    assert.equal(field([p, { limit: 10 }]), 'policy[1]'); // policy options, not a policy
    assert.equal(field([p, { policy: { limit: 10 } }]), 'policy[1].policy');
    assert.equal(field({ limit: 10, windowMs: 1000 }), 'policy');
    assert.equal(field([p, { policy: p, per: 'route', extra: 1 }]), 'policy[1].extra');
    // Two limits the headers would call alike.
    const same = (limit: number) => fixedWindow({ name: 'same', limit, windowMs: 1000 });
    assert.equal(field([same(1), same(2)]), 'policy');
    // The same policy on two scopes is two limits, told apart in the headers.
    guardOf({ policy: [p, { policy: p, per: 'tenant' }] });
  });
});

describe('guard: plans', () => {
  const free = fixedWindow({ name: 'free', limit: 1, windowMs: 60_000 });
  const pro = [
    fixedWindow({ name: 'pro', limit: 3, windowMs: 60_000 }),
    tokenBucket({ name: 'pro-burst', capacity: 10, refillIntervalMs: 100 }),
  ];

  it('a function of the request and tenant picks the policies on every call', async () => {
    const plans = new Map<string, 'free' | 'pro'>([['acme', 'pro']]);
    const seen: string[] = [];
    const guard = guardOf({
      policy: (_req, tenant) => {
        seen.push(tenant);
        return plans.get(tenant) === 'pro' ? pro : free;
      },
    });
    passed(await guard({ tenant: 'globex' }));
    assert.equal(refused(await guard({ tenant: 'globex' })).status, 429);
    for (let i = 0; i < 3; i++) passed(await guard({ tenant: 'acme' }));
    assert.deepEqual(
      JSON.parse(refused(await guard({ tenant: 'acme' })).body)['violated-policies'],
      ['pro'],
    );
    // An upgrade takes effect on the next call (a fresh quota: a different policy).
    plans.set('globex', 'pro');
    passed(await guard({ tenant: 'globex' }));
    assert.deepEqual(seen, ['globex', 'globex', 'acme', 'acme', 'acme', 'acme', 'globex']);
  });

  it('a wrong answer is an InvalidInputError for that request, never an outage', async () => {
    const guard = guardOf({
      policy: () => ({ limit: 5 }) as never,
      failureMode: 'fail-open',
      failOpenLimit: 100,
    });
    await assert.rejects(guard({ tenant: 'a' }), InvalidInputError);
    assert.equal(guard.counts['fail-open'], 0);
  });
});

describe('guard: skip, identity and responses', () => {
  it('skip passes without a decision, before identify, counted as skipped', async () => {
    let identified = 0;
    const guard = guardOf({
      skip: (req) => req.path === '/healthz',
      identify: (req) => {
        identified++;
        return req.tenant;
      },
    });
    for (let i = 0; i < 3; i++) assert.deepEqual(passed(await guard({ path: '/healthz' })), {});
    assert.equal(identified, 0);
    assert.equal(guard.counts.skipped, 3);
    passed(await guard({ tenant: 'a', path: '/orders' }));
    assert.equal(refused(await guard({ tenant: 'a', path: '/orders' })).status, 429);
  });

  it('401 carries WWW-Authenticate (configurable) and a problem body', async () => {
    const plain = refused(await guardOf({})({}));
    assert.equal(plain.status, 401);
    assert.equal(plain.headers['www-authenticate'], 'Bearer');
    assert.equal(JSON.parse(plain.body).status, 401);
    const realm = refused(await guardOf({ wwwAuthenticate: 'Bearer realm="api"' })({}));
    assert.equal(realm.headers['www-authenticate'], 'Bearer realm="api"');
    assert.throws(() => guardOf({ wwwAuthenticate: 'Bearer\r\nX-Evil: 1' }), InvalidInputError);
  });

  it('hooks shape the bodies; status, Retry-After and RateLimit fields stay the guard’s', async () => {
    const guard = guardOf({
      responses: {
        limited: ({ retryAfterSeconds, violatedPolicies }) => ({
          body: JSON.stringify({ code: 'SLOW_DOWN', retryAfterSeconds, violatedPolicies }),
          headers: { 'content-type': 'application/json', 'Retry-After': '0', ratelimit: 'x' },
        }),
        unidentified: () => ({ body: '{"code":"LOGIN"}' }),
      },
    });
    passed(await guard({ tenant: 'a' }));
    const limited = refused(await guard({ tenant: 'a' }));
    assert.equal(limited.status, 429);
    assert.equal(limited.headers['content-type'], 'application/json');
    assert.ok(Number(limited.headers['retry-after']) >= 59);
    assert.match(limited.headers.ratelimit ?? '', /^"POST\/orders";r=0;t=\d+$/);
    assert.equal(JSON.parse(limited.body).code, 'SLOW_DOWN');
    const anonymous = refused(await guard({}));
    assert.equal(anonymous.status, 401);
    assert.equal(anonymous.body, '{"code":"LOGIN"}');
  });

  it('a hook that throws leaves the guard’s own refusal (and warns)', async () => {
    const warnings: string[] = [];
    const onWarning = (warning: Error) => warnings.push(warning.message);
    process.on('warning', onWarning);
    try {
      const guard = guardOf({
        responses: {
          limited: () => {
            throw new Error('broken hook');
          },
        },
      });
      passed(await guard({ tenant: 'a' }));
      const limited = refused(await guard({ tenant: 'a' }));
      assert.equal(limited.status, 429);
      assert.equal(JSON.parse(limited.body).type, QUOTA_EXCEEDED_TYPE);
      await new Promise((resolve) => setImmediate(resolve));
      assert.ok(warnings.some((message) => message.includes('broken hook')));
    } finally {
      process.off('warning', onWarning);
    }
  });

  it('events name the policies: the binding one on limited, every one in policies, no tenant', async () => {
    const events: Record<string, unknown>[] = [];
    const guard = guardOf({
      policy: [
        fixedWindow({ name: 'a', limit: 5, windowMs: 60_000 }),
        fixedWindow({ name: 'b', limit: 1, windowMs: 60_000 }),
      ],
      skip: (req) => req.path === '/healthz',
      onOutcome: (event) => events.push({ ...event }),
    });
    await guard({ tenant: 'secret-tenant' });
    await guard({ tenant: 'secret-tenant' });
    await guard({});
    await guard({ path: '/healthz' });
    assert.deepEqual(
      events.map((e) => [e.outcome, e.policy, e.policies]),
      [
        ['allowed', 'a', ['a', 'b']],
        ['limited', 'b', ['a', 'b']],
        ['unidentified', 'a', ['a', 'b']],
        ['skipped', '', []],
      ],
    );
    assert.ok(!JSON.stringify(events).includes('secret-tenant'));
  });

  it('an unnamed policy on a wider scope is named with its scope in the headers', async () => {
    const p = fixedWindow({ limit: 3, windowMs: 60_000 });
    const guard = guardOf({ policy: [p, { policy: p, per: 'tenant' }] });
    const headers = passed(await guard({ tenant: 'a' }));
    assert.equal(
      headers['ratelimit-policy'],
      '"fixed-window-3-per-60000ms";q=3;w=60, "fixed-window-3-per-60000ms@tenant";q=3;w=60',
    );
  });

  it('identify or user answering a non-string is a programming error, never a silent 401', async () => {
    const numeric = guardOf({ identify: () => 42 as unknown as string });
    await assert.rejects(numeric({}), (error: unknown) => {
      assert.ok(error instanceof InvalidInputError);
      assert.equal(error.field, 'identify (its answer)');
      return true;
    });
    const objectUser = guardOf({
      user: () => ({ id: 7 }) as unknown as string,
      policy: { policy: fixedWindow({ limit: 1, windowMs: 1000 }), per: 'user' },
    });
    await assert.rejects(objectUser({ tenant: 'a' }), InvalidInputError);
    assert.equal(numeric.counts.unidentified, 0);
    // null and '' mean "none": 401.
    assert.equal(refused(await guardOf({ identify: () => null as never })({})).status, 401);
    assert.equal(refused(await guardOf({ identify: () => '' })({})).status, 401);
  });

  it('a hook answer that cannot be sent (a promise, a non-string body, a CR/LF header) leaves the guard’s response', async () => {
    const warnings: string[] = [];
    const onWarning = (warning: Error) => warnings.push(warning.message);
    process.on('warning', onWarning);
    try {
      for (const change of [
        Promise.resolve({ body: 'x' }),
        { body: { code: 1 } },
        { headers: { 'x-a': 'ok\r\nx-evil: 1' } },
        { headers: { 'bad name': 'v' } },
      ]) {
        const guard = guardOf({ responses: { unidentified: () => change as never } });
        const response = refused(await guard({}));
        assert.equal(response.status, 401);
        assert.equal(JSON.parse(response.body).status, 401);
        assert.equal(response.headers['x-evil'], undefined);
      }
      await new Promise((resolve) => setImmediate(resolve));
      // Throttled: one warning per hook per 10 s (the first of the four here).
      assert.ok(warnings.filter((m) => m.includes('responses.unidentified')).length >= 1);
    } finally {
      process.off('warning', onWarning);
    }
  });

  it('a request id the client may have written never fails the request: too long is cut, empty left out', async () => {
    const ids: (string | undefined)[] = [];
    const limiter = new RateLimiter({
      store: new MemoryStore(),
      onDecision: (event) => ids.push(event.requestId),
    });
    const guard = guardOf({
      limiter,
      policy: fixedWindow({ limit: 10, windowMs: 60_000 }),
      requestId: (req) => req.path,
    });
    passed(await guard({ tenant: 'a', path: 'x'.repeat(300) }));
    passed(await guard({ tenant: 'a', path: '' }));
    passed(await guard({ tenant: 'a', path: 'req-7' }));
    assert.deepEqual(
      ids.map((id) => id?.length ?? id),
      [256, undefined, 5],
    );
  });

  it('misspelled options and hooks are refused by name', () => {
    const field = (options: Record<string, unknown>) => {
      try {
        guardOf(options as Partial<GuardOptions<Req>>);
      } catch (error) {
        assert.ok(error instanceof InvalidInputError);
        return error.field;
      }
      assert.fail('accepted');
    };
    assert.equal(field({ failOpenLimt: 3 }), 'options.failOpenLimt');
    assert.equal(field({ responses: { limted: () => undefined } }), 'responses.limted');
    assert.equal(field({ responses: { limited: 'x' } }), 'responses.limited');
    assert.equal(field({ skip: true }), 'skip');
    assert.equal(field({ headers: { legasy: true } }), 'headers.legasy');
    assert.equal(field({ headers: { standard: 'no' } }), 'headers.standard');
    assert.equal(field({ headers: 'none' }), 'headers');
    assert.equal(field({ shadow: 'true' }), 'shadow');
    // A misspelled trustProxy would key every client on the proxy's address.
    assert.throws(() => clientAddressOf({ trustproxy: ['loopback'] } as never), {
      field: 'options.trustproxy',
    });
  });
});
