/**
 * The Fetch-API adapter inside Hono (its `app.request` runs the real app in process),
 * against a real Redis: allowed, limited with headers, fail-closed, fail-open, shadow,
 * unidentified — and the handler never runs when the request is refused.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { Hono } from 'hono';
import { fixedWindow, RateLimiter } from 'sluice';
import { type FetchRateLimitOptions, fetchRateLimit } from 'sluice/fetch';
import { issueToken, tenantFromAuthorization } from '../../src/demo/identity.js';
import { randomTenant, TEST_TIMEOUT_MS, useRedis } from '../helpers/redis.js';

const redis = useRedis();
const secret = 'fetch-secret';

function app(limiter: RateLimiter, limit: number, extra: Partial<FetchRateLimitOptions> = {}) {
  const guard = fetchRateLimit({
    limiter,
    policy: fixedWindow({ limit, windowMs: 60_000 }),
    route: 'POST/orders',
    identify: (request) => tenantFromAuthorization(secret, request.headers.get('authorization')),
    ...extra,
  });
  let handled = 0;
  const hono = new Hono();
  hono.post(
    '/orders',
    async (c, next) => (await guard(c.req.raw)) ?? next(),
    (c) => {
      handled++;
      return c.json({ ok: true }, 201);
    },
  );
  const post = (tenant: string | undefined, query = '') =>
    hono.request(`/orders${query}`, {
      method: 'POST',
      headers:
        tenant === undefined ? {} : { authorization: `Bearer ${issueToken(secret, tenant)}` },
    });
  return { post, handled: () => handled, counts: guard.counts };
}

describe('Fetch-API adapter (in Hono)', () => {
  it('allowed → the handler; limited → 429 + Retry-After + JSON; query strings share the quota', async () => {
    const a = app(new RateLimiter({ timeoutMs: TEST_TIMEOUT_MS, client: await redis.client() }), 2);
    const tenant = randomTenant();
    const statuses: number[] = [];
    let limited: Response | undefined;
    for (const q of ['?a=1', '?a=2', '?a=3']) {
      const res = await a.post(tenant, q);
      statuses.push(res.status);
      if (res.status === 429) limited = res;
    }
    assert.deepEqual(statuses, [201, 201, 429]);
    assert.ok(limited);
    assert.ok(['60', '61'].includes(limited.headers.get('retry-after') ?? ''));
    assert.equal(((await limited.json()) as { error: string }).error, 'rate_limited');
    assert.equal(a.handled(), 2);
  });

  it('no verified identity → 401; Redis unreachable → 503 + Retry-After: 1, handler never run', async () => {
    const client = await redis.client();
    const a = app(new RateLimiter({ timeoutMs: TEST_TIMEOUT_MS, client }), 5);
    assert.equal((await a.post(undefined)).status, 401);
    client.destroy();
    const res = await a.post(randomTenant());
    assert.equal(res.status, 503);
    assert.equal(res.headers.get('retry-after'), '1');
    assert.equal(a.handled(), 0);
    assert.equal(a.counts['fail-closed'], 1);
  });

  it('fail-open admits within the local limit; shadow mode never blocks', async () => {
    const client = await redis.client();
    const limiter = new RateLimiter({ timeoutMs: TEST_TIMEOUT_MS, client });
    const open = app(limiter, 5, { failureMode: 'fail-open', failOpenLimit: 1 });
    const shadow = app(limiter, 1, { shadow: true });
    const tenant = randomTenant();
    assert.deepEqual(
      [(await shadow.post(tenant)).status, (await shadow.post(tenant)).status],
      [201, 201],
    );
    assert.deepEqual(shadow.counts.limited, 1);
    client.destroy();
    assert.deepEqual(
      [(await open.post(tenant)).status, (await open.post(tenant)).status],
      [201, 503],
    );
  });

  it('check(): admitted responses carry the RateLimit fields and a shadow route its would-be decision', async () => {
    const limiter = new RateLimiter({ timeoutMs: TEST_TIMEOUT_MS, client: await redis.client() });
    const tenant = randomTenant();
    const make = (extra: Partial<FetchRateLimitOptions>) => {
      const limit = fetchRateLimit({
        limiter,
        policy: fixedWindow({ limit: 2, windowMs: 60_000 }),
        route: 'POST/orders',
        identify: () => tenant,
        ...extra,
      });
      const hono = new Hono();
      let handled = 0;
      hono.post(
        '/orders',
        async (c, next) => {
          const verdict = await limit.check(c.req.raw);
          if (!verdict.pass) return verdict.response;
          await next();
          for (const [name, value] of Object.entries(verdict.headers)) {
            c.res.headers.set(name, value);
          }
        },
        (c) => {
          handled++;
          return c.json({}, 201);
        },
      );
      return { post: () => hono.request('/orders', { method: 'POST' }), handled: () => handled };
    };
    const enforced = make({});
    const first = await enforced.post();
    assert.equal(first.status, 201);
    assert.equal(first.headers.get('ratelimit-policy'), '"POST/orders";q=2;w=60');
    assert.match(first.headers.get('ratelimit') ?? '', /^"POST\/orders";r=1;t=60$/);
    assert.equal((await enforced.post()).status, 201);
    const limited = await enforced.post();
    assert.equal(limited.status, 429);
    assert.match(limited.headers.get('ratelimit') ?? '', /;r=0;t=(60|61)$/);
    assert.equal(enforced.handled(), 2);
    const shadow = make({ shadow: true, shadowHeader: 'x-ratelimit-shadow' });
    const passed = await shadow.post();
    assert.equal(passed.status, 201, 'shadow mode never blocks');
    assert.equal(passed.headers.get('x-ratelimit-shadow'), 'limited');
  });

  it('check() gives each request its own headers object', async () => {
    const limit = fetchRateLimit({
      limiter: new RateLimiter({ timeoutMs: TEST_TIMEOUT_MS, client: await redis.client() }),
      policy: fixedWindow({ limit: 5, windowMs: 60_000 }),
      route: 'POST/orders',
      identify: () => randomTenant(),
      headers: false,
    });
    const request = () => new Request('http://127.0.0.1/orders', { method: 'POST' });
    const a = await limit.check(request());
    const b = await limit.check(request());
    assert.ok(a.pass && b.pass);
    (a.headers as Record<string, string>)['set-cookie'] = 'for tenant a only';
    assert.deepEqual(b.headers, {}, "one request's header never reaches another");
  });
});
