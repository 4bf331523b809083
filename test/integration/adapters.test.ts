/**
 * One table of HTTP scenarios, run against every adapter on a real server on loopback
 * (`node:http`, Express 5, Fastify 5, Hono through the Fetch adapter, Koa 3 with
 * `@koa/router`): allowed; limited
 * with every header checked; Redis down in fail-closed and fail-open; shadow mode; spoofed
 * headers; query-string variants sharing one quota; the handler never run when refused;
 * stacked limits (one 429 naming the policy that bound, every policy in the headers); plans
 * chosen per tenant; HEAD sharing GET's quota; skip.
 */
import assert from 'node:assert/strict';
import { createServer, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, describe, it } from 'node:test';
import { getRequestListener } from '@hono/node-server';
import Router from '@koa/router';
import express from 'express';
import Fastify from 'fastify';
import { Hono } from 'hono';
import Koa from 'koa';
import { fixedWindow, RateLimiter } from 'sluice';
import { expressRateLimit } from 'sluice/express';
import { fastifyRateLimit } from 'sluice/fastify';
import { fetchRateLimit } from 'sluice/fetch';
import type { GuardOptions, Limits } from 'sluice/http';
import { koaRateLimit } from 'sluice/koa';
import { withRateLimit } from 'sluice/node';
import { issueToken, tenantFromAuthorization } from '../../src/demo/identity.js';
import { randomTenant, TEST_TIMEOUT_MS, useRedis } from '../helpers/redis.js';

const redis = useRedis();
const secret = 'adapters-secret';
const closers: (() => Promise<void> | void)[] = [];
after(async () => {
  for (const close of closers) await close();
});

/** Options every adapter gets (identity from a verified token, never a client header). */
type Shared = Pick<
  GuardOptions<never>,
  'failureMode' | 'failOpenLimit' | 'shadow' | 'shadowHeader'
> & {
  readonly limiter: RateLimiter;
  readonly limit: number;
  /** Replaces the fixed window of `limit` per minute: stacked limits or a plan function. */
  readonly policy?: Limits | ((req: unknown, tenant: string) => Limits);
  /** Requests carrying this header (any value) are skipped. */
  readonly skipHeader?: string;
};

interface Running {
  readonly url: string;
  /** Runs of the `POST /orders` handler. */
  readonly handled: () => number;
  /** Runs of the `GET /search` handler (also serving `HEAD /search`). */
  readonly searched: () => number;
}

/** The guard options of both routes: the scenario's policy (or `limit` per minute), skip. */
const limitsOf = ({ limit, policy }: Shared) => policy ?? fixedWindow({ limit, windowMs: 60_000 });

const listen = async (server: Server): Promise<string> => {
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  closers.push(() => void server.close());
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
};

const ADAPTERS: Record<string, (o: Shared) => Promise<Running>> = {
  'node:http': async (shared) => {
    const { limiter, skipHeader, limit: _limit, policy: _policy, ...rest } = shared;
    let handled = 0;
    let searched = 0;
    const options = (route: string) => ({
      limiter,
      policy: limitsOf(shared),
      route,
      identify: (req: IncomingMessage) =>
        tenantFromAuthorization(secret, req.headers.authorization),
      ...(skipHeader
        ? { skip: (req: IncomingMessage) => req.headers[skipHeader] !== undefined }
        : {}),
      ...rest,
    });
    const orders = withRateLimit(options('POST/orders'), (_req, res) => {
      handled++;
      res.writeHead(201).end('{}');
    });
    const search = withRateLimit(options('GET/search'), (_req, res) => {
      searched++;
      res.writeHead(200).end('{}');
    });
    const server = createServer((req, res) => {
      const path = req.url?.split('?')[0];
      if (req.method === 'POST' && path === '/orders') return orders(req, res);
      // HEAD is GET without a body (RFC 9110 §9.3.2): the same route, the same quota.
      if ((req.method === 'GET' || req.method === 'HEAD') && path === '/search')
        return search(req, res);
      res.writeHead(404).end();
    });
    return { url: await listen(server), handled: () => handled, searched: () => searched };
  },
  'Express 5': async (shared) => {
    const { limiter, skipHeader, limit: _limit, policy: _policy, ...rest } = shared;
    let handled = 0;
    let searched = 0;
    const guard = () =>
      expressRateLimit({
        limiter,
        policy: limitsOf(shared),
        identify: (req) => tenantFromAuthorization(secret, req.headers.authorization),
        ...(skipHeader
          ? { skip: (req: IncomingMessage) => req.headers[skipHeader] !== undefined }
          : {}),
        ...rest,
      });
    const app = express();
    app.post('/orders', guard(), (_req, res) => {
      handled++;
      res.status(201).json({});
    });
    app.get('/search', guard(), (_req, res) => {
      searched++;
      res.status(200).json({});
    });
    return {
      url: await listen(createServer(app)),
      handled: () => handled,
      searched: () => searched,
    };
  },
  'Fastify 5': async (shared) => {
    const { limiter, skipHeader, limit: _limit, policy: _policy, ...rest } = shared;
    let handled = 0;
    let searched = 0;
    const app = Fastify();
    await app.register(fastifyRateLimit, {
      limiter,
      identify: (request) => tenantFromAuthorization(secret, request.headers.authorization),
      ...(skipHeader ? { skip: (request) => request.headers[skipHeader] !== undefined } : {}),
    });
    const config = { config: { rateLimit: { policy: limitsOf(shared), ...rest } } };
    app.post('/orders', config, async (_req, reply) => {
      handled++;
      return reply.code(201).send({});
    });
    app.get('/search', config, async (_req, reply) => {
      searched++;
      return reply.code(200).send({});
    });
    await app.listen({ port: 0, host: '127.0.0.1' });
    closers.push(() => app.close());
    return {
      url: `http://127.0.0.1:${(app.server.address() as AddressInfo).port}`,
      handled: () => handled,
      searched: () => searched,
    };
  },
  'Hono (Fetch)': async (shared) => {
    const { limiter, skipHeader, limit: _limit, policy: _policy, ...rest } = shared;
    let handled = 0;
    let searched = 0;
    const guard = (route: string) =>
      fetchRateLimit({
        limiter,
        policy: limitsOf(shared),
        route,
        identify: (request) =>
          tenantFromAuthorization(secret, request.headers.get('authorization')),
        ...(skipHeader ? { skip: (request: Request) => request.headers.has(skipHeader) } : {}),
        ...rest,
      });
    const orders = guard('POST/orders');
    const search = guard('GET/search');
    const app = new Hono();
    app.post(
      '/orders',
      async (c, next) => (await orders(c.req.raw)) ?? next(),
      (c) => {
        handled++;
        return c.json({}, 201);
      },
    );
    // Hono serves HEAD from the GET route.
    app.get(
      '/search',
      async (c, next) => (await search(c.req.raw)) ?? next(),
      (c) => {
        searched++;
        return c.json({}, 200);
      },
    );
    return {
      url: await listen(createServer(getRequestListener(app.fetch))),
      handled: () => handled,
      searched: () => searched,
    };
  },
  'Koa 3': async (shared) => {
    const { limiter, skipHeader, limit: _limit, policy: _policy, ...rest } = shared;
    let handled = 0;
    let searched = 0;
    const guard = () =>
      koaRateLimit<Koa.Context>({
        limiter,
        policy: limitsOf(shared),
        identify: (ctx) => tenantFromAuthorization(secret, ctx.get('authorization')),
        ...(skipHeader ? { skip: (ctx: Koa.Context) => ctx.get(skipHeader) !== '' } : {}),
        ...rest,
      });
    const router = new Router();
    router.post('/orders', guard(), (ctx) => {
      handled++;
      ctx.status = 201;
      ctx.body = {};
    });
    // @koa/router serves HEAD from the GET route.
    router.get('/search', guard(), (ctx) => {
      searched++;
      ctx.body = {};
    });
    const app = new Koa();
    app.silent = true;
    app.use(router.routes());
    return {
      url: await listen(createServer(app.callback())),
      handled: () => handled,
      searched: () => searched,
    };
  },
};

const post = async (
  url: string,
  tenant: string,
  query = '',
  headers: Record<string, string> = {},
) => {
  const res = await fetch(`${url}/orders${query}`, {
    method: 'POST',
    headers: { authorization: `Bearer ${issueToken(secret, tenant)}`, ...headers },
  });
  const body = await res.text();
  return { status: res.status, headers: res.headers, body };
};

for (const [name, start] of Object.entries(ADAPTERS)) {
  describe(`adapter scenarios: ${name}`, () => {
    it('allowed, then limited with every header; query strings and spoofed headers share one quota', async () => {
      const a = await start({
        limiter: new RateLimiter({ timeoutMs: TEST_TIMEOUT_MS, client: await redis.client() }),
        limit: 2,
      });
      const tenant = randomTenant();
      const results = [
        await post(a.url, tenant, '?x=1', { 'x-forwarded-for': '10.0.0.1', 'x-tenant': 'a' }),
        await post(a.url, tenant, '?x=2', { 'x-forwarded-for': '10.0.0.2', 'x-tenant': 'b' }),
        await post(a.url, tenant, '?x=3', { 'x-forwarded-for': '10.0.0.3', 'x-tenant': 'c' }),
      ];
      assert.deepEqual(
        results.map((r) => r.status),
        [201, 201, 429],
      );
      const limited = results[2] as (typeof results)[number];
      const retryAfter = limited.headers.get('retry-after');
      assert.ok(['60', '61'].includes(retryAfter ?? ''), `Retry-After ${retryAfter}`);
      assert.equal(limited.headers.get('ratelimit-policy'), '"POST/orders";q=2;w=60');
      assert.equal(limited.headers.get('ratelimit'), `"POST/orders";r=0;t=${retryAfter}`);
      assert.equal(JSON.parse(limited.body).error, 'rate_limited');
      assert.equal(a.handled(), 2);
    });

    it('Redis down, fail-closed → 503 + Retry-After: 1, no invented RateLimit values, handler never run', async () => {
      const client = await redis.client();
      const a = await start({
        limiter: new RateLimiter({ timeoutMs: TEST_TIMEOUT_MS, client }),
        limit: 2,
      });
      client.destroy();
      const r = await post(a.url, randomTenant());
      assert.equal(r.status, 503);
      assert.equal(r.headers.get('retry-after'), '1');
      // draft-ietf-httpapi-ratelimit-headers-10 §5.2, as the 429 carries §5.1's quota-exceeded.
      assert.match(r.headers.get('content-type') ?? '', /^application\/problem\+json\b/);
      const problem = JSON.parse(r.body);
      assert.equal(
        problem.type,
        'https://iana.org/assignments/http-problem-types#temporary-reduced-capacity',
      );
      assert.deepEqual(
        [problem.status, problem.error, problem['violated-policies']],
        [503, 'rate_limiter_unavailable', []],
      );
      assert.equal(r.headers.get('ratelimit'), null);
      assert.equal(a.handled(), 0);
    });

    it('Redis down, fail-open → admitted within the local limit, then 503', async () => {
      const client = await redis.client();
      const a = await start({
        limiter: new RateLimiter({ timeoutMs: TEST_TIMEOUT_MS, client }),
        limit: 5,
        failureMode: 'fail-open',
        failOpenLimit: 1,
      });
      client.destroy();
      const tenant = randomTenant();
      assert.deepEqual(
        [(await post(a.url, tenant)).status, (await post(a.url, tenant)).status],
        [201, 503],
      );
      assert.equal(a.handled(), 1);
    });

    it('shadow mode: never blocks, the would-be decision in its header', async () => {
      const a = await start({
        limiter: new RateLimiter({ timeoutMs: TEST_TIMEOUT_MS, client: await redis.client() }),
        limit: 1,
        shadow: true,
        shadowHeader: 'x-ratelimit-shadow',
      });
      const tenant = randomTenant();
      const results = [await post(a.url, tenant), await post(a.url, tenant)];
      assert.deepEqual(
        results.map((r) => [r.status, r.headers.get('x-ratelimit-shadow')]),
        name === 'Hono (Fetch)'
          ? [
              [201, null],
              [201, null],
            ] // the Fetch shape cannot add headers to an admitted response
          : [
              [201, 'allowed'],
              [201, 'limited'],
            ],
      );
      assert.equal(a.handled(), 2);
    });

    it('stacked limits: all or nothing, one 429 naming the policy that bound, every policy in the headers', async () => {
      const burst = fixedWindow({ name: 'burst', limit: 2, windowMs: 10_000 });
      const hourly = fixedWindow({ name: 'hourly', limit: 3, windowMs: 3_600_000 });
      const a = await start({
        limiter: new RateLimiter({ timeoutMs: TEST_TIMEOUT_MS, client: await redis.client() }),
        limit: 1,
        policy: [burst, hourly],
      });
      const tenant = randomTenant();
      const results = [
        await post(a.url, tenant),
        await post(a.url, tenant),
        await post(a.url, tenant),
      ];
      assert.deepEqual(
        results.map((r) => r.status),
        [201, 201, 429],
      );
      const limited = results[2] as (typeof results)[number];
      assert.equal(
        limited.headers.get('ratelimit-policy'),
        '"burst";q=2;w=10, "hourly";q=3;w=3600',
      );
      assert.match(limited.headers.get('ratelimit') ?? '', /^"burst";r=0;t=(9|10)\b/);
      assert.ok(['9', '10'].includes(limited.headers.get('retry-after') ?? ''));
      assert.match(limited.headers.get('content-type') ?? '', /^application\/problem\+json\b/);
      assert.deepEqual(JSON.parse(limited.body)['violated-policies'], ['burst']);
      if (name !== 'Hono (Fetch)') {
        // The plain Fetch shape adds no headers to an admitted response.
        assert.equal(
          (results[0] as (typeof results)[number]).headers.get('ratelimit'),
          '"burst";r=1;t=10, "hourly";r=2;t=3600',
        );
      }
      assert.equal(a.handled(), 2);
    });

    it('plans: a function of the tenant picks its policies on every request', async () => {
      const free = fixedWindow({ name: 'free', limit: 1, windowMs: 60_000 });
      const pro = fixedWindow({ name: 'pro', limit: 3, windowMs: 60_000 });
      const proTenants = new Set<string>();
      const a = await start({
        limiter: new RateLimiter({ timeoutMs: TEST_TIMEOUT_MS, client: await redis.client() }),
        limit: 1,
        policy: (_req, tenant) => (proTenants.has(tenant) ? pro : free),
      });
      const [freeTenant, proTenant] = [randomTenant(), randomTenant()];
      proTenants.add(proTenant);
      const statuses = async (tenant: string, n: number) => {
        const out: number[] = [];
        for (let i = 0; i < n; i++) out.push((await post(a.url, tenant)).status);
        return out;
      };
      assert.deepEqual(await statuses(freeTenant, 2), [201, 429]);
      assert.deepEqual(await statuses(proTenant, 4), [201, 201, 201, 429]);
      assert.equal(a.handled(), 4);
    });

    it('HEAD shares GET’s quota: the GET handler never runs past the limit', async () => {
      const a = await start({
        limiter: new RateLimiter({ timeoutMs: TEST_TIMEOUT_MS, client: await redis.client() }),
        limit: 2,
      });
      const tenant = randomTenant();
      const statuses: number[] = [];
      for (const method of ['HEAD', 'HEAD', 'GET', 'HEAD']) {
        const res = await fetch(`${a.url}/search`, {
          method,
          headers: { authorization: `Bearer ${issueToken(secret, tenant)}` },
        });
        await res.arrayBuffer();
        statuses.push(res.status);
      }
      assert.deepEqual(statuses, [200, 200, 429, 429]);
      assert.ok(a.searched() <= 2, `GET handler ran ${a.searched()} times for a limit of 2`);
    });

    it('skip: skipped requests pass without spending, others are limited as usual', async () => {
      const a = await start({
        limiter: new RateLimiter({ timeoutMs: TEST_TIMEOUT_MS, client: await redis.client() }),
        limit: 1,
        skipHeader: 'x-internal-probe',
      });
      const tenant = randomTenant();
      for (let i = 0; i < 3; i++) {
        const r = await post(a.url, tenant, '', { 'x-internal-probe': '1' });
        assert.equal(r.status, 201);
        assert.equal(r.headers.get('ratelimit'), null);
      }
      assert.deepEqual(
        [(await post(a.url, tenant)).status, (await post(a.url, tenant)).status],
        [201, 429],
      );
      assert.equal(a.handled(), 4);
    });

    it('no verified identity → 401, handler never run', async () => {
      const a = await start({
        limiter: new RateLimiter({ timeoutMs: TEST_TIMEOUT_MS, client: await redis.client() }),
        limit: 1,
      });
      const res = await fetch(`${a.url}/orders`, {
        method: 'POST',
        headers: { 'x-tenant': 'spoofed' },
      });
      const body = (await res.json()) as { status: number };
      assert.equal(res.status, 401);
      assert.equal(res.headers.get('www-authenticate'), 'Bearer');
      assert.match(res.headers.get('content-type') ?? '', /^application\/problem\+json\b/);
      assert.equal(body.status, 401);
      assert.equal(a.handled(), 0);
    });
  });
}
