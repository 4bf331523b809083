/**
 * The Koa adapter names a quota only from `@koa/router` layer paths — the route's pattern
 * with the prefixes of the routers it is nested in — never from the text the client sends:
 * case, `%`-encoding, a trailing slash, `;`, a query, the absolute form and the values of
 * mount parameters all spend one quota or match no route at all. HEAD shares GET's quota,
 * `router.all()` is `ALL`, a route on several methods is one quota; where no template exists
 * the middleware rejects with an `InvalidInputError` (Koa answers `500`) instead of guessing;
 * an explicit `route` names the quota. Real Koa 3 servers on loopback, a private real Redis.
 */
import assert from 'node:assert/strict';
import { createServer, request as httpRequest, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, describe, it } from 'node:test';
import Router from '@koa/router';
import Koa from 'koa';
import { fixedWindow, InvalidInputError, RateLimiter } from 'sluice';
import type { HttpOutcomeEvent } from 'sluice/http';
import { koaRateLimit, koaRoute } from 'sluice/koa';
import { issueToken, tenantFromAuthorization } from '../../src/demo/identity.js';
import { randomTenant, TEST_TIMEOUT_MS, useRedis } from '../helpers/redis.js';

const redis = useRedis();
const secret = 'koa-secret';
const servers: Server[] = [];
let shared: Promise<RateLimiter> | undefined;
const limiterOf = () => {
  shared ??= redis
    .client()
    .then((client) => new RateLimiter({ timeoutMs: TEST_TIMEOUT_MS, client }));
  return shared;
};
after(() => {
  for (const server of servers) server.close();
});

const policy = fixedWindow({ limit: 3, windowMs: 60_000 });

/** A limit of 3 per minute that records every outcome. */
async function limitOf3(extra: Partial<Parameters<typeof koaRateLimit<Koa.Context>>[0]> = {}) {
  const events: HttpOutcomeEvent[] = [];
  const limit = koaRateLimit<Koa.Context>({
    limiter: await limiterOf(),
    policy,
    identify: (ctx) => tenantFromAuthorization(secret, ctx.get('authorization')),
    onOutcome: (event) => events.push(event),
    ...extra,
  });
  return { limit, events };
}

/** A handler that counts its calls and answers 201 with `koaRoute(ctx)` in a header. */
function counted() {
  const handler = (ctx: Koa.Context) => {
    handler.calls++;
    ctx.set('x-route', koaRoute(ctx));
    ctx.status = 201;
    ctx.body = { ok: true };
  };
  handler.calls = 0;
  return handler;
}

/** Listens on loopback; Koa's errors are recorded (and answered 500 by Koa). */
async function serve(app: Koa) {
  const errors: unknown[] = [];
  app.silent = true;
  app.on('error', (error: unknown) => errors.push(error));
  const server = createServer(app.callback());
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  servers.push(server);
  const { port } = server.address() as AddressInfo;
  return { url: `http://127.0.0.1:${port}`, port, errors };
}

/** One request with a raw request target (absolute form, `;`, `%`…), as a client may send. */
function raw(port: number, method: string, target: string, tenant: string) {
  return new Promise<{ status: number; route: string | undefined }>((resolve, reject) => {
    const req = httpRequest(
      {
        host: '127.0.0.1',
        port,
        method,
        path: target,
        headers: { authorization: `Bearer ${issueToken(secret, tenant)}` },
      },
      (res) => {
        res.resume();
        res.on('end', () => {
          const route = res.headers['x-route'];
          resolve({
            status: res.statusCode ?? 0,
            route: typeof route === 'string' ? route : undefined,
          });
        });
      },
    );
    req.on('error', reject);
    req.end();
  });
}

describe('Koa: the quota is named by the router layer, never by the URL', () => {
  it('nested routers with prefixes and a mount parameter: every spelling spends one quota or matches nothing', async () => {
    const { limit, events } = await limitOf3();
    const handler = counted();
    const orders = new Router();
    orders.post('/orders/:id', limit, handler);
    const api = new Router({ prefix: '/api' });
    api.use('/t/:account', orders.routes());
    const app = new Koa();
    app.use(api.routes());
    const { port } = await serve(app);
    const tenant = randomTenant();
    const template = 'POST/api/t/:account/orders/:id';
    const targets = [
      '/api/t/acme/orders/1?x=1',
      '/API/T/GLOBEX/ORDERS/2/',
      '/api/t/acme/orders/%31',
      '/api/t/acme/orders/1;x=1',
      'http://evil.example/api/t/initech/orders/3',
      '/api/t/acme/orders/1/',
      '/api/t/%61cme/orders/1',
      '/%61pi/t/acme/orders/1',
      '/api/t/acme/or%64ers/1',
      '/api//t/acme/orders/1',
      '/api/t/acme/orders/1%2Fx',
    ];
    const results = [];
    for (const target of targets) results.push(await raw(port, 'POST', target, tenant));
    const statuses = results.map((r) => r.status);
    // A %-encoded letter of a fixed segment, or an empty segment, matches no route (404,
    // nothing spent, no handler); every other spelling is the one route and its one quota.
    assert.deepEqual(statuses, [201, 201, 201, 429, 429, 429, 429, 404, 404, 404, 429]);
    assert.deepEqual(
      results.filter((r) => r.status === 201).map((r) => r.route),
      [template, template, template],
    );
    assert.equal(handler.calls, 3);
    assert.deepEqual(new Set(events.map((e) => e.route)), new Set([template]));
    assert.equal(events.length, 8);
    const admin = await redis.admin();
    const key = (await limiterOf()).keyOf({ tenant, route: template }, policy);
    assert.equal(await admin.client.get(key), '3');
  });

  it('HEAD is named GET; router.all() is ALL; a route on several methods is one quota', async () => {
    const get = await limitOf3();
    const all = await limitOf3();
    const several = await limitOf3();
    const router = new Router();
    const handler = counted();
    router.get('/search', get.limit, handler);
    router.all('/any', all.limit, handler);
    router.register('/both', ['GET', 'POST'], [several.limit, handler]);
    const app = new Koa();
    app.use(router.routes());
    const { port } = await serve(app);
    const tenant = randomTenant();
    const statuses = async (method: string, path: string, n: number) => {
      const out: number[] = [];
      for (let i = 0; i < n; i++) out.push((await raw(port, method, path, tenant)).status);
      return out;
    };
    assert.deepEqual(
      [...(await statuses('HEAD', '/search', 2)), ...(await statuses('GET', '/search', 2))],
      [201, 201, 201, 429],
    );
    assert.deepEqual(
      [
        ...(await statuses('PUT', '/any', 1)),
        ...(await statuses('DELETE', '/any', 1)),
        ...(await statuses('PATCH', '/any', 2)),
      ],
      [201, 201, 201, 429],
    );
    assert.deepEqual(
      [...(await statuses('GET', '/both', 2)), ...(await statuses('POST', '/both', 2))],
      [201, 201, 201, 429],
    );
    assert.deepEqual(new Set(get.events.map((e) => e.route)), new Set(['GET/search']));
    assert.deepEqual(new Set(all.events.map((e) => e.route)), new Set(['ALL/any']));
    assert.deepEqual(new Set(several.events.map((e) => e.route)), new Set(['GET,POST/both']));
    assert.equal(handler.calls, 9);
  });

  it('one middleware on two routes is two quotas; a RegExp route is named by its pattern', async () => {
    const { limit, events } = await limitOf3();
    const router = new Router();
    const handler = counted();
    router.post('/a', limit, handler);
    router.post('/b', limit, handler);
    router.get(/^\/re\/\d+$/, limit, handler);
    const app = new Koa();
    app.use(router.routes());
    const { port } = await serve(app);
    const tenant = randomTenant();
    for (let i = 0; i < 3; i++) assert.equal((await raw(port, 'POST', '/a', tenant)).status, 201);
    assert.equal((await raw(port, 'POST', '/a', tenant)).status, 429);
    assert.equal((await raw(port, 'POST', '/b', tenant)).status, 201);
    assert.equal((await raw(port, 'GET', '/re/1', tenant)).status, 201);
    assert.equal((await raw(port, 'GET', '/re/2', tenant)).status, 201);
    assert.deepEqual(
      events.map((e) => e.route),
      [
        'POST/a',
        'POST/a',
        'POST/a',
        'POST/a',
        'POST/b',
        'GET/^\\/re\\/\\d+$/',
        'GET/^\\/re\\/\\d+$/',
      ],
    );
  });

  it('no template (app.use, router.use, before the router): 500 with an InvalidInputError for route, the handler never runs, nothing spent', async () => {
    for (const mount of ['app.use', 'router.use', 'app.use after a route that calls next']) {
      const { limit, events } = await limitOf3();
      const handler = counted();
      const router = new Router();
      const app = new Koa();
      if (mount === 'app.use') app.use(limit);
      if (mount === 'router.use') router.use(limit);
      if (mount === 'app.use after a route that calls next') {
        router.post('/orders', async (_ctx, next) => next());
        app.use(router.routes());
        app.use(limit);
        app.use(handler);
      } else {
        router.post('/orders', handler);
        app.use(router.routes());
      }
      const { port, errors } = await serve(app);
      const res = await raw(port, 'POST', '/orders', randomTenant());
      assert.equal(res.status, 500, mount);
      assert.equal(handler.calls, 0, mount);
      assert.equal(errors.length, 1, mount);
      const error = errors[0];
      assert.ok(error instanceof InvalidInputError, mount);
      assert.equal(error.field, 'route');
      assert.match(error.message, /mount it on a route/);
      assert.deepEqual(events, [], `${mount}: no outcome, nothing taken`);
    }
  });

  it('an explicit route names the quota, also on app.use', async () => {
    const { limit, events } = await limitOf3({ route: 'POST/orders' });
    const app = new Koa();
    app.use(limit);
    app.use((ctx) => {
      ctx.status = 201; // no router: koaRoute(ctx) would throw here
    });
    const { port } = await serve(app);
    const tenant = randomTenant();
    const statuses = [];
    for (const path of ['/orders', '/ORDERS/', '/orders?x=1', '/anything']) {
      statuses.push((await raw(port, 'POST', path, tenant)).status);
    }
    assert.deepEqual(statuses, [201, 201, 201, 429]);
    assert.deepEqual(new Set(events.map((e) => e.route)), new Set(['POST/orders']));
  });

  it('responses hooks shape the 429, metrics and onOutcome see every outcome, an identify error is a 500', async () => {
    const seen: string[] = [];
    const { limit, events } = await limitOf3({
      identify: (ctx) => {
        if (ctx.get('x-break') !== '') throw new Error('session store down');
        return tenantFromAuthorization(secret, ctx.get('authorization'));
      },
      responses: {
        limited: ({ route, retryAfterSeconds }) => ({
          body: JSON.stringify({ code: 'SLOW_DOWN', route, retryAfterSeconds }),
          headers: { 'content-type': 'application/vnd.api+json' },
        }),
      },
      metrics: { request: (event) => seen.push(`${event.outcome} ${event.route}`) },
    });
    const handler = counted();
    const router = new Router();
    router.post('/orders', limit, handler);
    const app = new Koa();
    app.use(router.routes());
    const { url, errors } = await serve(app);
    const tenant = randomTenant();
    const post = (headers: Record<string, string> = {}) =>
      fetch(`${url}/orders`, {
        method: 'POST',
        headers: { authorization: `Bearer ${issueToken(secret, tenant)}`, ...headers },
      });
    for (let i = 0; i < 3; i++) assert.equal((await post()).status, 201);
    const limited = await post();
    assert.equal(limited.status, 429);
    assert.equal(limited.headers.get('content-type'), 'application/vnd.api+json');
    assert.ok(['60', '61'].includes(limited.headers.get('retry-after') ?? ''));
    assert.match(limited.headers.get('ratelimit') ?? '', /^"POST\/orders";r=0;t=\d+$/);
    const body = (await limited.json()) as { code: string; route: string };
    assert.deepEqual([body.code, body.route], ['SLOW_DOWN', 'POST/orders']);
    const broken = await post({ 'x-break': '1' });
    assert.equal(broken.status, 500);
    assert.equal((errors[0] as Error).message, 'session store down');
    assert.equal(handler.calls, 3);
    assert.deepEqual(seen, [
      'allowed POST/orders',
      'allowed POST/orders',
      'allowed POST/orders',
      'limited POST/orders',
    ]);
    assert.deepEqual(
      events.map((e) => e.outcome),
      ['allowed', 'allowed', 'allowed', 'limited'],
    );
  });

  it('koaRoute outside a route throws the typed error', () => {
    const ctx = { method: 'GET', status: 404, body: undefined, set: () => undefined };
    assert.throws(() => koaRoute(ctx), InvalidInputError);
  });
});
