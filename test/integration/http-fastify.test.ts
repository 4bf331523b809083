/**
 * The Fastify 5 plugin on a real Fastify instance (`inject`), against a real Redis: routes
 * opt in with `config.rateLimit`, the quota is named by the URL template, refused requests
 * never reach the handler, failures are 503, shadow mode passes with its header.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import Fastify from 'fastify';
import { fixedWindow, RateLimiter, tokenBucket } from 'sluice';
import { fastifyRateLimit } from 'sluice/fastify';
import { issueToken, tenantFromAuthorization } from '../../src/demo/identity.js';
import { randomTenant, TEST_TIMEOUT_MS, useRedis } from '../helpers/redis.js';

const redis = useRedis();
const secret = 'fastify-secret';

async function start(limiter: RateLimiter) {
  const app = Fastify();
  let handled = 0;
  await app.register(fastifyRateLimit, {
    limiter,
    identify: (request) => tenantFromAuthorization(secret, request.headers.authorization),
  });
  app.post(
    '/orders/:id',
    { config: { rateLimit: { policy: fixedWindow({ limit: 2, windowMs: 60_000 }) } } },
    async () => {
      handled++;
      return { ok: true };
    },
  );
  app.post(
    '/tokens',
    {
      config: {
        rateLimit: {
          policy: tokenBucket({ capacity: 1, refillIntervalMs: 60_000 }),
          shadow: true,
          shadowHeader: 'x-ratelimit-shadow',
        },
      },
    },
    async () => {
      handled++;
      return { ok: true };
    },
  );
  app.get('/health', async () => ({ ok: true }));
  await app.ready();
  const post = (tenant: string, url: string) =>
    app.inject({
      method: 'POST',
      url,
      headers: { authorization: `Bearer ${issueToken(secret, tenant)}` },
    });
  return { app, post, handled: () => handled };
}

describe('Fastify plugin', () => {
  it('routes opt in with config.rateLimit; the URL template names the quota; refused requests never reach the handler', async () => {
    const { app, post, handled } = await start(
      new RateLimiter({ timeoutMs: TEST_TIMEOUT_MS, client: await redis.client() }),
    );
    const tenant = randomTenant();
    const statuses: number[] = [];
    let limited: Awaited<ReturnType<typeof post>> | undefined;
    for (const url of ['/orders/1?x=1', '/orders/2?x=2', '/orders/3']) {
      const res = await post(tenant, url);
      statuses.push(res.statusCode);
      if (res.statusCode === 429) limited = res;
    }
    assert.deepEqual(statuses, [200, 200, 429]);
    assert.ok(['60', '61'].includes(String(limited?.headers['retry-after'])));
    assert.equal(JSON.parse(limited?.body ?? '{}').error, 'rate_limited');
    assert.equal(handled(), 2);
    assert.equal(
      (await app.inject({ method: 'GET', url: '/health' })).statusCode,
      200,
      'unlimited routes untouched',
    );
    assert.equal((await app.inject({ method: 'POST', url: '/orders/1' })).statusCode, 401);
    await app.close();
  });

  it('shadow route passes with the would-be decision; Redis unreachable → 503 + Retry-After: 1', async () => {
    const client = await redis.client();
    const { app, post, handled } = await start(
      new RateLimiter({ timeoutMs: TEST_TIMEOUT_MS, client }),
    );
    const tenant = randomTenant();
    const shadow = [await post(tenant, '/tokens'), await post(tenant, '/tokens')];
    assert.deepEqual(
      shadow.map((r) => [r.statusCode, r.headers['x-ratelimit-shadow']]),
      [
        [200, 'allowed'],
        [200, 'limited'],
      ],
    );
    client.destroy();
    const down = await post(tenant, '/orders/1');
    assert.equal(down.statusCode, 503);
    assert.equal(down.headers['retry-after'], '1');
    assert.equal(handled(), 2);
    await app.close();
  });

  it('the URL template names the quota: case, percent-encodings, prefixes and HEAD never mint a fresh one', async () => {
    const app = Fastify({ routerOptions: { caseSensitive: false } } as never);
    const routes: string[] = [];
    let handled = 0;
    await app.register(fastifyRateLimit, {
      limiter: new RateLimiter({ timeoutMs: TEST_TIMEOUT_MS, client: await redis.client() }),
      identify: (request) => tenantFromAuthorization(secret, request.headers.authorization),
      onOutcome: (event) => routes.push(event.route),
    });
    await app.register(
      (scoped, _options, done) => {
        scoped.get(
          '/t/:account/items',
          { config: { rateLimit: { policy: fixedWindow({ limit: 2, windowMs: 60_000 }) } } },
          async () => {
            handled++;
            return { ok: true };
          },
        );
        done();
      },
      { prefix: '/api' },
    );
    await app.ready();
    const tenant = randomTenant();
    const statuses: number[] = [];
    for (const [method, url] of [
      ['GET', '/api/t/a/items'],
      ['HEAD', '/API/t/b/items'],
      ['GET', '/Api/t/%61/ITEMS'],
      ['HEAD', '/api/t/c%2Fd/items'],
      ['GET', '/api/T/e/Items?x=1'],
    ] as const) {
      const res = await app.inject({
        method,
        url,
        headers: { authorization: `Bearer ${issueToken(secret, tenant)}` },
      });
      statuses.push(res.statusCode);
    }
    assert.deepEqual(statuses, [200, 200, 429, 429, 429]);
    assert.deepEqual([...new Set(routes)], ['GET/api/t/:account/items']);
    assert.ok(handled <= 2, `handler ran ${handled} times for a limit of 2`);
    await app.close();
  });

  it('a route taking several methods is one quota: app.all is ALL, a method list is its methods', async () => {
    const app = Fastify();
    const routes: string[] = [];
    let handled = 0;
    await app.register(fastifyRateLimit, {
      limiter: new RateLimiter({ timeoutMs: TEST_TIMEOUT_MS, client: await redis.client() }),
      identify: () => 'one-tenant-for-all',
      onOutcome: (event) => routes.push(event.route),
    });
    const rateLimit = { policy: fixedWindow({ limit: 2, windowMs: 60_000 }) };
    app.all('/any', { config: { rateLimit } }, async () => {
      handled++;
      return 'ok';
    });
    app.route({
      method: ['GET', 'POST'],
      url: '/two',
      config: { rateLimit },
      handler: async () => 'ok',
    });
    await app.ready();
    const statuses: number[] = [];
    for (const method of ['GET', 'POST', 'PUT', 'DELETE', 'PATCH', 'OPTIONS'] as const) {
      statuses.push((await app.inject({ method, url: '/any' })).statusCode);
    }
    assert.deepEqual(statuses, [200, 200, 429, 429, 429, 429]);
    assert.equal(handled, 2);
    assert.equal((await app.inject({ method: 'GET', url: '/two' })).statusCode, 200);
    assert.equal((await app.inject({ method: 'POST', url: '/two' })).statusCode, 200);
    assert.equal((await app.inject({ method: 'HEAD', url: '/two' })).statusCode, 429);
    assert.deepEqual([...new Set(routes)], ['ALL/any', 'GET,POST/two']);
    await app.close();
  });

  it('routes sharing one config.rateLimit object are still a quota each, named by their own method', async () => {
    const app = Fastify();
    const routes: string[] = [];
    const tenant = randomTenant();
    await app.register(fastifyRateLimit, {
      limiter: new RateLimiter({ timeoutMs: TEST_TIMEOUT_MS, client: await redis.client() }),
      identify: () => tenant,
      onOutcome: (event) => routes.push(event.route),
    });
    const rateLimit = { policy: fixedWindow({ limit: 2, windowMs: 60_000 }) };
    app.get('/x', { config: { rateLimit } }, async () => 'ok');
    app.post('/x', { config: { rateLimit } }, async () => 'ok');
    app.route({
      method: ['GET', 'POST'],
      url: '/y',
      config: { rateLimit },
      handler: async () => 'ok',
    });
    app.put('/y', { config: { rateLimit } }, async () => 'ok');
    await app.ready();
    const send = async (method: 'GET' | 'POST' | 'PUT' | 'HEAD', url: string) => {
      const res = await app.inject({ method, url });
      return { status: res.statusCode, policy: res.headers['ratelimit-policy'] };
    };
    const statuses = async (method: 'GET' | 'POST' | 'PUT' | 'HEAD', url: string, n: number) => {
      const out: number[] = [];
      for (let i = 0; i < n; i++) out.push((await send(method, url)).status);
      return out;
    };
    assert.deepEqual(await send('GET', '/x'), { status: 200, policy: '"GET/x";q=2;w=60' });
    assert.deepEqual(await send('POST', '/x'), { status: 200, policy: '"POST/x";q=2;w=60' });
    // GET has one unit left of its own quota (HEAD shares it), POST one of its own.
    assert.deepEqual(await statuses('HEAD', '/x', 2), [200, 429]);
    assert.deepEqual(await statuses('POST', '/x', 2), [200, 429]);
    // A route with several methods is one quota; a route of its own at the same URL is another.
    assert.deepEqual(await statuses('GET', '/y', 1), [200]);
    assert.deepEqual(await statuses('HEAD', '/y', 1), [200]);
    assert.deepEqual(await statuses('POST', '/y', 1), [429]);
    assert.deepEqual(await statuses('PUT', '/y', 3), [200, 200, 429]);
    assert.deepEqual(routes, [
      'GET/x',
      'POST/x',
      'GET/x',
      'GET/x',
      'POST/x',
      'POST/x',
      'GET,POST/y',
      'GET,POST/y',
      'GET,POST/y',
      'PUT/y',
      'PUT/y',
      'PUT/y',
    ]);
    await app.close();
  });

  it('bad options fail registration or app.post() at once, never a request; rateLimit: false is no limit; registering twice is refused', async () => {
    const limiter = new RateLimiter({ timeoutMs: TEST_TIMEOUT_MS, client: await redis.client() });
    const policy = fixedWindow({ limit: 1, windowMs: 60_000 });
    const misspelt = Fastify();
    misspelt.register(fastifyRateLimit, { limiter, identfy: () => 'a' } as never);
    await assert.rejects(async () => misspelt.ready(), { field: 'options.identfy' });
    const badRoute = Fastify();
    await badRoute.register(fastifyRateLimit, { limiter, identify: () => 'a' });
    assert.throws(
      () =>
        badRoute.get('/x', { config: { rateLimit: { polcy: policy } as never } }, async () => 'ok'),
      { field: 'options.polcy' },
    );
    // One route name on the plugin would merge every route's quota: refused.
    const shared = Fastify();
    shared.register(fastifyRateLimit, { limiter, identify: () => 'a', route: 'POST/x' } as never);
    await assert.rejects(async () => shared.ready(), { field: 'route' });
    // A route's own route is checked when the route is added, like its other options.
    const emptyRoute = Fastify();
    await emptyRoute.register(fastifyRateLimit, { limiter, identify: () => 'a' });
    assert.throws(
      () =>
        emptyRoute.get('/x', { config: { rateLimit: { policy, route: '' } } }, async () => 'ok'),
      { field: 'route' },
    );
    const twice = Fastify();
    await twice.register(fastifyRateLimit, { limiter, identify: () => 'a' });
    twice.register(fastifyRateLimit, { limiter, identify: () => 'a' });
    await assert.rejects(async () => twice.ready(), { field: 'fastifyRateLimit' });
    const off = Fastify();
    await off.register(fastifyRateLimit, { limiter, identify: () => 'a' });
    off.get('/free', { config: { rateLimit: false as never } }, async () => 'ok');
    await off.ready();
    for (let i = 0; i < 3; i++) {
      assert.equal((await off.inject({ method: 'GET', url: '/free' })).statusCode, 200);
    }
    await Promise.all(
      [misspelt, badRoute, shared, emptyRoute, twice, off].map((app) =>
        app.close().catch(() => {}),
      ),
    );
  });
});
