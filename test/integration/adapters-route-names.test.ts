/**
 * One rule names a quota in every adapter: an explicit `route` wins over the adapter's own
 * template. The settings of a policy file carry the file's route key, so the same settings
 * spread into `node:http`, Express 5, Fastify 5, Hono (Fetch) and Koa 3 routes mounted under a
 * prefix all write the key of the file's route — the one `sluice inspect --route` reads —
 * never one named by the mount.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { getRequestListener } from '@hono/node-server';
import Router from '@koa/router';
import express from 'express';
import Fastify from 'fastify';
import { Hono } from 'hono';
import Koa from 'koa';
import { type Policy, RateLimiter } from 'sluice';
import { loadPolicies } from 'sluice/config';
import { expressRateLimit } from 'sluice/express';
import { fastifyRateLimit } from 'sluice/fastify';
import { fetchRateLimit } from 'sluice/fetch';
import { koaRateLimit } from 'sluice/koa';
import { withRateLimit } from 'sluice/node';
import { randomTenant, TEST_TIMEOUT_MS, useRedis } from '../helpers/redis.js';

const redis = useRedis();
const closers: (() => Promise<void> | void)[] = [];
const dir = mkdtempSync(join(tmpdir(), 'sluice-route-names-'));
after(async () => {
  for (const close of closers) await close();
  rmSync(dir, { recursive: true, force: true });
});

const file = join(dir, 'policies.json');
writeFileSync(
  file,
  JSON.stringify({
    routes: { 'POST/orders': { algorithm: 'fixed-window', limit: 5, windowMs: 60_000 } },
  }),
);
const routes = loadPolicies(file);
const settings = routes.get('POST/orders');
if (settings === undefined) throw new Error('no POST/orders in the file');

/** The tenant is the `x-test-tenant` header: fine for a test, never for an application. */
const tenantOf = (value: string | null | undefined) => value ?? undefined;

const listen = async (server: Server): Promise<string> => {
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  closers.push(() => void server.close());
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
};

/** Each adapter, with the file's settings on `POST /v2/orders`; resolves the server's URL. */
const ADAPTERS: Record<string, (limiter: RateLimiter) => Promise<string>> = {
  'node:http': async (limiter) => {
    const orders = withRateLimit(
      {
        limiter,
        identify: (req: IncomingMessage) => tenantOf(req.headers['x-test-tenant'] as string),
        ...settings,
      },
      (_req, res) => res.writeHead(201).end('{}'),
    );
    return listen(
      createServer((req, res) => {
        if (req.method === 'POST' && req.url?.split('?')[0] === '/v2/orders') {
          return orders(req, res);
        }
        res.writeHead(404).end();
      }),
    );
  },
  'Express 5': async (limiter) => {
    const router = express.Router();
    router.post(
      '/orders',
      expressRateLimit({
        limiter,
        identify: (req) => tenantOf(req.headers['x-test-tenant'] as string),
        ...settings,
      }),
      (_req, res) => {
        res.status(201).json({});
      },
    );
    const app = express();
    app.use('/v2', router);
    return listen(createServer(app));
  },
  'Fastify 5': async (limiter) => {
    const app = Fastify();
    await app.register(fastifyRateLimit, {
      limiter,
      identify: (request) => tenantOf(request.headers['x-test-tenant'] as string),
    });
    await app.register(
      (v2, _options, done) => {
        v2.post('/orders', { config: { rateLimit: settings } }, async (_req, reply) =>
          reply.code(201).send({}),
        );
        done();
      },
      { prefix: '/v2' },
    );
    await app.listen({ port: 0, host: '127.0.0.1' });
    closers.push(() => app.close());
    return `http://127.0.0.1:${(app.server.address() as AddressInfo).port}`;
  },
  'Hono (Fetch)': async (limiter) => {
    const limit = fetchRateLimit({
      limiter,
      identify: (request) => tenantOf(request.headers.get('x-test-tenant')),
      ...settings,
    });
    const v2 = new Hono();
    v2.post(
      '/orders',
      async (c, next) => (await limit(c.req.raw)) ?? next(),
      (c) => c.json({}, 201),
    );
    const app = new Hono();
    app.route('/v2', v2);
    return listen(createServer(getRequestListener(app.fetch)));
  },
  'Koa 3': async (limiter) => {
    const v2 = new Router();
    v2.post(
      '/orders',
      koaRateLimit({
        limiter,
        identify: (ctx: Koa.Context) => tenantOf(ctx.get('x-test-tenant') || undefined),
        ...settings,
      }),
      (ctx) => {
        ctx.status = 201;
        ctx.body = {};
      },
    );
    const router = new Router();
    router.use('/v2', v2.routes());
    const app = new Koa();
    app.use(router.routes());
    return listen(createServer(app.callback()));
  },
};

describe('the same policy-file settings name the same quota in every adapter', () => {
  for (const [name, start] of Object.entries(ADAPTERS)) {
    it(`${name}: a route mounted under /v2 spends the file's "POST/orders", not "POST/v2/orders"`, async () => {
      const limiter = new RateLimiter({ timeoutMs: TEST_TIMEOUT_MS, client: await redis.client() });
      const admin = await redis.admin();
      const url = await start(limiter);
      const tenant = randomTenant();
      for (let i = 0; i < 2; i++) {
        const res = await fetch(`${url}/v2/orders?n=${i}`, {
          method: 'POST',
          headers: { 'x-test-tenant': tenant },
        });
        await res.arrayBuffer();
        assert.equal(res.status, 201);
      }
      const policy = settings.policy as Policy;
      const fileKey = limiter.keyOf({ tenant, route: 'POST/orders' }, policy);
      const mountKey = limiter.keyOf({ tenant, route: 'POST/v2/orders' }, policy);
      // The key `sluice inspect --route POST/orders` reads holds both requests.
      assert.equal(await admin.client.get(fileKey), '2');
      assert.equal(await admin.client.exists(mountKey), 0, 'no quota named by the mount');
    });
  }
});
