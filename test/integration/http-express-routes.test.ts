/**
 * The Express adapter names a quota only from route and mount PATTERNS, never from text the
 * client sends: case variants of a mount path, values of a mount parameter, HEAD for a GET
 * route and aliases of an array mount all share one quota; routers nested in routers and
 * sub-apps are named by their full template; where no template exists the middleware
 * errors instead of guessing. Real Express 5 servers on loopback, a private real Redis.
 */
import assert from 'node:assert/strict';
import type { Server } from 'node:http';
import { after, describe, it } from 'node:test';
import express from 'express';
import { fixedWindow, isSluiceError, RateLimiter } from 'sluice';
import { type ExpressRequestLike, expressRateLimit, expressRoute } from 'sluice/express';
import { issueToken, verifiedTenant } from '../../src/demo/identity.js';
import { randomTenant, TEST_TIMEOUT_MS, useRedis } from '../helpers/redis.js';

const redis = useRedis();
const secret = 'express-routes-secret';
const servers: Server[] = [];
let shared: Promise<RateLimiter> | undefined;
/** One limiter for the file, made in the first test that needs it (the server starts first). */
const limiterOf = () => {
  shared ??= redis
    .client()
    .then((client) => new RateLimiter({ timeoutMs: TEST_TIMEOUT_MS, client }));
  return shared;
};
after(() => {
  for (const server of servers) server.close();
});

/** A limit of 2 per minute that records the quota name of every outcome. */
async function limitOf2() {
  const routes: string[] = [];
  const limit = expressRateLimit({
    limiter: await limiterOf(),
    policy: fixedWindow({ limit: 2, windowMs: 60_000 }),
    identify: (req) => verifiedTenant(secret, req),
    onOutcome: (event) => routes.push(event.route),
  });
  return { limit, routes };
}

/** A handler that counts its calls and answers 201. */
function counted() {
  const handler = (_req: express.Request, res: express.Response) => {
    handler.calls++;
    res.status(201).json({ ok: true });
  };
  handler.calls = 0;
  return handler;
}

/** Answers the quota name `expressRoute` gives the request, in a header (HEAD has no body). */
const nameIt = (req: express.Request, res: express.Response) => {
  res.set('x-route', expressRoute(req)).status(200).end();
};

/** Listens on loopback with a final error handler that records the errors (answered 500). */
async function serve(app: express.Express) {
  const errors: unknown[] = [];
  app.use(
    (error: unknown, _req: express.Request, res: express.Response, _next: express.NextFunction) => {
      errors.push(error);
      res.status(500).json({ error: 'internal_error' });
    },
  );
  const server = app.listen(0, '127.0.0.1');
  servers.push(server);
  await new Promise<void>((resolve) => server.once('listening', () => resolve()));
  const address = server.address();
  const base = `http://127.0.0.1:${typeof address === 'object' && address ? address.port : 0}`;
  const tenant = randomTenant();
  const send = async (method: string, path: string) => {
    const res = await fetch(`${base}${path}`, {
      method,
      headers: { authorization: `Bearer ${issueToken(secret, tenant)}` },
    });
    await res.arrayBuffer();
    return res;
  };
  /** The statuses of `method` requests to each path, in order. */
  const statuses = async (method: string, paths: readonly string[]) => {
    const out: number[] = [];
    for (const path of paths) out.push((await send(method, path)).status);
    return out;
  };
  return { send, statuses, errors };
}

describe('Express quota names: patterns only, never the URL', () => {
  it('case variants of a mount path share one quota (/api, /API, /Api)', async () => {
    const { limit, routes } = await limitOf2();
    const handler = counted();
    const app = express();
    const router = express.Router();
    router.post('/orders', limit, handler);
    app.use('/api', router);
    const s = await serve(app);
    const paths = ['/api/orders', '/API/orders', '/Api/orders', '/api/orders', '/API/orders'];
    assert.deepEqual(await s.statuses('POST', paths), [201, 201, 429, 429, 429]);
    assert.equal(handler.calls, 2);
    assert.deepEqual(new Set(routes), new Set(['POST/api/orders']));
  });

  it('every value of a mount parameter shares one quota named "POST/t/:account/orders"', async () => {
    const { limit, routes } = await limitOf2();
    const handler = counted();
    const app = express();
    const router = express.Router();
    router.post('/orders', limit, handler);
    app.use('/t/:account', router);
    const s = await serve(app);
    const first = await s.send('POST', '/t/acme/orders');
    assert.equal(first.status, 201);
    assert.equal(first.headers.get('ratelimit-policy'), '"POST/t/:account/orders";q=2;w=60');
    const rest = ['/t/globex/orders', '/t/x1/orders', '/t/%61cme/orders', '/T/ACME/orders'];
    assert.deepEqual(await s.statuses('POST', rest), [201, 429, 429, 429]);
    assert.equal(handler.calls, 2);
    assert.deepEqual(new Set(routes), new Set(['POST/t/:account/orders']));
  });

  it('routers nested two levels deep: one quota for the full template', async () => {
    const { limit, routes } = await limitOf2();
    const handler = counted();
    const app = express();
    const outer = express.Router();
    const inner = express.Router();
    inner.post('/orders/:id', limit, handler);
    outer.use('/shops/:shop', inner);
    app.use('/v1', outer);
    const s = await serve(app);
    const paths = ['/v1/shops/a/orders/1', '/V1/shops/b/orders/2', '/v1/SHOPS/c/orders/3'];
    assert.deepEqual(await s.statuses('POST', paths), [201, 201, 429]);
    assert.equal(handler.calls, 2);
    assert.deepEqual(new Set(routes), new Set(['POST/v1/shops/:shop/orders/:id']));
  });

  it('a sub-app (app.use(path, express())) with a router inside: one quota', async () => {
    const { limit, routes } = await limitOf2();
    const handler = counted();
    const app = express();
    const sub = express();
    const router = express.Router();
    router.post('/orders', limit, handler);
    sub.use('/t/:account', router);
    app.use('/v2', sub);
    const s = await serve(app);
    const paths = ['/v2/t/a/orders', '/V2/t/b/orders', '/v2/T/c/orders', '/v2/t/d/orders'];
    assert.deepEqual(await s.statuses('POST', paths), [201, 201, 429, 429]);
    assert.equal(handler.calls, 2);
    assert.deepEqual(new Set(routes), new Set(['POST/v2/t/:account/orders']));
  });

  it('percent-encoded variants: not routed (404) and spend nothing; encoded params share', async () => {
    const { limit, routes } = await limitOf2();
    const handler = counted();
    const app = express();
    const router = express.Router();
    router.post('/orders', limit, handler);
    app.use('/api', router);
    app.use('/t/:account', router);
    const s = await serve(app);
    const encoded = ['/%61pi/orders', '/api/%6Frders', '/api%2Forders', '/%41PI/orders'];
    assert.deepEqual(await s.statuses('POST', encoded), [404, 404, 404, 404]);
    assert.equal(handler.calls, 0);
    assert.deepEqual(
      await s.statuses('POST', ['/api/orders', '/API/orders', '/api/orders']),
      [201, 201, 429],
    );
    const params = ['/t/acme/orders', '/t/%61cme/orders', '/t/%41CME/orders', '/t/acme/orders'];
    assert.deepEqual(await s.statuses('POST', params), [201, 201, 429, 429]);
    assert.equal(handler.calls, 4);
    assert.deepEqual(new Set(routes), new Set(['POST/api/orders', 'POST/t/:account/orders']));
  });

  it('HEAD to a GET route shares the GET quota (the GET handler runs exactly twice)', async () => {
    const { limit, routes } = await limitOf2();
    const handler = counted();
    const app = express();
    app.get('/items/:id', limit, handler);
    const s = await serve(app);
    const heads = await s.statuses('HEAD', ['/items/1', '/items/2', '/items/3']);
    const gets = await s.statuses('GET', ['/items/4', '/items/5']);
    assert.deepEqual([...heads, ...gets], [201, 201, 429, 429, 429]);
    assert.equal(handler.calls, 2);
    assert.deepEqual(new Set(routes), new Set(['GET/items/:id']));
  });

  it('app.head() routes are named GET too: HEAD never gets a quota of its own', async () => {
    const { limit, routes } = await limitOf2();
    const handler = counted();
    const app = express();
    app.head('/probe', limit, handler);
    app.get('/probe', limit, handler);
    const s = await serve(app);
    const statuses = [
      ...(await s.statuses('HEAD', ['/probe', '/probe'])),
      ...(await s.statuses('GET', ['/probe'])),
    ];
    assert.deepEqual(statuses, [201, 201, 429]);
    assert.equal(handler.calls, 2);
    assert.deepEqual(new Set(routes), new Set(['GET/probe']));
  });

  it('app.use(limit) with no route → 500 through next(error), the handler never runs', async () => {
    const { limit } = await limitOf2();
    const handler = counted();
    const app = express();
    app.use('/api', limit);
    app.post('/api/orders', handler);
    const s = await serve(app);
    const res = await s.send('POST', '/api/orders');
    assert.equal(res.status, 500);
    assert.equal(handler.calls, 0);
    assert.equal(s.errors.length, 1);
    assert.ok(isSluiceError(s.errors[0], 'SLUICE_INVALID_INPUT'));
    assert.match(String((s.errors[0] as Error).message), /app\.post\(path, limit, handler\)/);
  });

  it('an array mount path: every alias shares one quota named by the whole array', async () => {
    const { limit, routes } = await limitOf2();
    const handler = counted();
    const app = express();
    const router = express.Router();
    router.post('/orders', limit, handler);
    app.use(['/a', '/b/:x'], router);
    const s = await serve(app);
    assert.deepEqual(
      await s.statuses('POST', ['/a/orders', '/b/1/orders', '/B/2/orders']),
      [201, 201, 429],
    );
    assert.equal(handler.calls, 2);
    assert.deepEqual(new Set(routes), new Set(['POST["/a","/b/:x"]/orders']));
  });

  it('a router mounted twice: each mount is named by its own pattern, as Express dispatched', async () => {
    const { limit, routes } = await limitOf2();
    const handler = counted();
    const app = express();
    const router = express.Router();
    router.post('/orders', limit, handler);
    app.use('/one', router);
    app.use('/two/:n', router);
    const s = await serve(app);
    assert.deepEqual(
      await s.statuses('POST', ['/one/orders', '/ONE/orders', '/one/orders']),
      [201, 201, 429],
    );
    assert.deepEqual(
      await s.statuses('POST', ['/two/1/orders', '/two/2/orders', '/TWO/3/orders']),
      [201, 201, 429],
    );
    assert.deepEqual(routes, [
      'POST/one/orders',
      'POST/one/orders',
      'POST/one/orders',
      'POST/two/:n/orders',
      'POST/two/:n/orders',
      'POST/two/:n/orders',
    ]);
  });

  it('a mount added after the first request is named by its own pattern', async () => {
    const { limit, routes } = await limitOf2();
    const handler = counted();
    const app = express();
    const router = express.Router();
    router.post('/orders', limit, handler);
    app.use('/early', router);
    const s = await serve(app);
    assert.equal((await s.send('POST', '/early/orders')).status, 201);
    app.use('/late/:id', router); // after the error handler: only reached when nothing failed
    assert.equal((await s.send('POST', '/late/7/orders')).status, 201);
    assert.equal((await s.send('POST', '/early/orders')).status, 201);
    assert.deepEqual(routes, ['POST/early/orders', 'POST/late/:id/orders', 'POST/early/orders']);
  });

  it('app.all(): the client chooses the method, so every method shares "ALL<template>"', async () => {
    const { limit, routes } = await limitOf2();
    const handler = counted();
    const app = express();
    app.all('/any', limit, handler);
    app
      .route('/mixed')
      .all((_req, _res, next) => next())
      .post(limit, handler);
    const s = await serve(app);
    const statuses: number[] = [];
    for (const method of ['GET', 'POST', 'PUT', 'DELETE', 'PATCH']) {
      statuses.push((await s.send(method, '/any')).status);
    }
    assert.deepEqual(statuses, [201, 201, 429, 429, 429]);
    // Only the POST layer holds the limit on /mixed: it is named by its method.
    assert.equal((await s.send('POST', '/mixed')).status, 201);
    assert.deepEqual(new Set(routes), new Set(['ALL/any', 'POST/mixed']));
  });

  it('one middleware on several methods of one route: one quota for all, named by them', async () => {
    const { limit, routes } = await limitOf2();
    const handler = counted();
    const app = express();
    app
      .route('/x')
      .get(limit, handler)
      .post(limit, handler)
      .put(limit, handler)
      .delete(limit, handler);
    app.route('/y').get(limit, handler).head(limit, handler).post(limit, handler);
    const s = await serve(app);
    const statuses: number[] = [];
    for (const method of ['GET', 'POST', 'PUT', 'DELETE', 'HEAD']) {
      statuses.push((await s.send(method, '/x')).status);
    }
    // A limit of 2 on the route, not 2 per method.
    assert.deepEqual(statuses, [201, 201, 429, 429, 429]);
    assert.equal(handler.calls, 2);
    assert.deepEqual(new Set(routes), new Set(['DELETE,GET,POST,PUT/x']));
    // HEAD is named GET, also where the middleware is registered with .head().
    routes.length = 0;
    assert.deepEqual(await s.statuses('HEAD', ['/y']), [201]);
    assert.deepEqual(await s.statuses('POST', ['/y', '/y']), [201, 429]);
    assert.deepEqual(routes, ['GET,POST/y', 'GET,POST/y', 'GET,POST/y']);
  });

  it('a quota per method where one is asked for: a middleware per method, or a route option', async () => {
    const get = await limitOf2();
    const post = await limitOf2();
    const routes: string[] = [];
    const own = expressRateLimit({
      limiter: await limiterOf(),
      policy: fixedWindow({ limit: 2, windowMs: 60_000 }),
      identify: (req) => verifiedTenant(secret, req),
      route: (req) => `${req.method}/z`,
      onOutcome: (event) => routes.push(event.route),
    });
    const handler = counted();
    const app = express();
    app.route('/y').get(get.limit, handler).post(post.limit, handler);
    app.route('/z').get(own, handler).post(own, handler);
    const s = await serve(app);
    for (const path of ['/y', '/z']) {
      assert.deepEqual(await s.statuses('GET', [path, path, path]), [201, 201, 429]);
      assert.deepEqual(await s.statuses('POST', [path, path, path]), [201, 201, 429]);
    }
    assert.deepEqual(new Set(get.routes), new Set(['GET/y']));
    assert.deepEqual(new Set(post.routes), new Set(['POST/y']));
    assert.deepEqual(new Set(routes), new Set(['GET/z', 'POST/z']));
  });
});

describe('expressRoute: the names of each mount kind', () => {
  it('names each route by its full pattern template, whatever the URL', async () => {
    const app = express();
    app.post('/orders/:id', nameIt);
    app.get('/items/:id', nameIt);
    app.head('/probe', nameIt);
    app.post(['/x', '/y/:z'], nameIt);
    app.post(/^\/re\/\d+$/, nameIt);
    app.all('/any', nameIt);
    app
      .route('/mixed')
      .all((_req, _res, next) => next())
      .post(nameIt);
    const api = express.Router();
    api.post('/orders', nameIt);
    api.post('/', nameIt);
    app.use('/api', api);
    app.use('/slash/', api);
    app.use('/t/:account', api);
    app.use(['/a', '/b'], api);
    app.use(/^\/rx\d/, api);
    const plain = express.Router();
    plain.post('/plain', nameIt);
    app.use(plain);
    const outer = express.Router();
    const inner = express.Router();
    inner.post('/orders/:id', nameIt);
    outer.use('/shops/:shop', inner);
    app.use('/v1', outer);
    const sub = express();
    const subRouter = express.Router();
    subRouter.post('/orders', nameIt);
    sub.use('/t/:account', subRouter);
    sub.get('/items', nameIt);
    const deep = express();
    deep.post('/x/:id', nameIt);
    sub.use('/deep/:d', deep);
    app.use('/v2', sub);
    const s = await serve(app);
    const cases: [string, string, string][] = [
      ['POST', '/orders/7?x=1', 'POST/orders/:id'],
      ['GET', '/ITEMS/9', 'GET/items/:id'],
      ['HEAD', '/items/9', 'GET/items/:id'],
      ['HEAD', '/probe', 'GET/probe'],
      ['POST', '/Y/1', 'POST["/x","/y/:z"]'],
      ['POST', '/re/42', `POST${String(/^\/re\/\d+$/)}`],
      ['PUT', '/any', 'ALL/any'],
      ['HEAD', '/any', 'ALL/any'],
      ['POST', '/mixed', 'ALL/mixed'], // expressRoute cannot tell an .all() handler apart
      ['POST', '/API/orders', 'POST/api/orders'],
      ['POST', '/api', 'POST/api/'],
      ['POST', '/slash/orders', 'POST/slash/orders'],
      ['POST', '/t/acme/orders', 'POST/t/:account/orders'],
      ['POST', '/B/orders', 'POST["/a","/b"]/orders'],
      ['POST', '/rx1/orders', `POST${String(/^\/rx\d/)}/orders`],
      ['POST', '/plain', 'POST/plain'],
      ['POST', '/v1/shops/s1/orders/3', 'POST/v1/shops/:shop/orders/:id'],
      ['POST', '/V2/t/x/orders', 'POST/v2/t/:account/orders'],
      ['HEAD', '/v2/items', 'GET/v2/items'],
      ['POST', '/v2/deep/9/x/1', 'POST/v2/deep/:d/x/:id'],
    ];
    for (const [method, path, name] of cases) {
      const res = await s.send(method, path);
      assert.equal(res.status, 200, `${method} ${path}`);
      assert.equal(res.headers.get('x-route'), name, `${method} ${path}`);
    }
    assert.deepEqual(s.errors, []);
  });

  it('sub-apps: mounted twice, or behind an earlier parameter mount, named as dispatched', async () => {
    const app = express();
    const other = express(); // mounted first, at a parameter: matches /b too, has no /orders
    other.post('/else', nameIt);
    app.use('/:tenant', other);
    const sub = express();
    sub.post('/orders', nameIt);
    app.use('/b', sub);
    const rewritten = express.Router();
    rewritten.post('/orders', nameIt);
    app.use((req, _res, next) => {
      // A rewrite before routing: Express dispatches the new path.
      if (req.url.startsWith('/old/')) req.url = `/new/${req.url.slice('/old/'.length)}`;
      next();
    });
    app.use('/new', rewritten);
    const viaRouter = express.Router();
    const plainSub = express();
    plainSub.post('/orders', nameIt);
    viaRouter.use('/app', plainSub); // router.use: plainSub.parent is not set
    app.use('/raw/:x', viaRouter);
    const alone = express();
    const twice = express();
    twice.post('/orders', nameIt);
    alone.use('/one', twice);
    alone.use('/two', twice); // twice.mountpath is now '/two'
    const s = await serve(app);
    const t = await serve(alone);
    for (const [server, path, name] of [
      [s, '/B/orders', 'POST/b/orders'],
      [s, '/b/else', 'POST/:tenant/else'],
      [s, '/old/orders', 'POST/new/orders'],
      // No parent link: named from the sub-app down (fixed, never from the URL).
      [s, '/raw/1/app/orders', 'POST/orders'],
      [t, '/ONE/orders', 'POST/one/orders'],
      [t, '/two/orders', 'POST/two/orders'],
    ] as const) {
      const res = await server.send('POST', path);
      assert.equal(res.status, 200, path);
      assert.equal(res.headers.get('x-route'), name, path);
    }
    assert.deepEqual([...s.errors, ...t.errors], []);
  });

  it('a sub-app mounted twice where another sub-app mount also matches → an error, no guess', async () => {
    const app = express();
    const other = express();
    app.use('/:tenant', other);
    const twice = express();
    twice.post('/orders', nameIt);
    app.use('/one', twice);
    app.use('/two', twice);
    const s = await serve(app);
    assert.equal((await s.send('POST', '/two/orders')).status, 200); // its own mountpath
    assert.equal((await s.send('POST', '/one/orders')).status, 500);
    assert.ok(isSluiceError(s.errors[0], 'SLUICE_INVALID_INPUT'));
    assert.match(String((s.errors[0] as Error).message), /mount it once/);
  });

  it('a route reached through no mount it can see (a router called from a handler) → an error', async () => {
    const app = express();
    const hidden = express.Router();
    hidden.post('/orders', nameIt);
    app.use('/hidden', (req, res, next) => {
      hidden(req, res, next);
    });
    const s = await serve(app);
    assert.equal((await s.send('POST', '/hidden/orders')).status, 500);
    assert.ok(isSluiceError(s.errors[0], 'SLUICE_INVALID_INPUT'));
    assert.match(String((s.errors[0] as Error).message), /options\.route/);
  });

  it('without a route, or without the app that holds it, there is no template: it throws', () => {
    const fake = (fields: Record<string, unknown>) =>
      ({ method: 'POST', ...fields }) as unknown as ExpressRequestLike;
    assert.throws(() => expressRoute(fake({})), { code: 'SLUICE_INVALID_INPUT' });
    assert.throws(() => expressRoute(fake({ route: { path: '/x' }, baseUrl: '/API' })), {
      code: 'SLUICE_INVALID_INPUT',
    });
    // No app and nothing mounted above the route: the route's pattern is the whole template.
    assert.equal(expressRoute(fake({ route: { path: '/x' }, baseUrl: '' })), 'POST/x');
    assert.equal(expressRoute(fake({ method: 'HEAD', route: { path: '/x' } })), 'GET/x');
  });
});
