/**
 * One table of HTTP scenarios, run against every adapter on a real server on loopback
 * (`node:http`, Express 5, Fastify 5, Hono through the Fetch adapter): allowed; limited
 * with every header checked; Redis down in fail-closed and fail-open; shadow mode; spoofed
 * headers; query-string variants sharing one quota; the handler never run when refused.
 */
import assert from 'node:assert/strict';
import { createServer, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, describe, it } from 'node:test';
import { getRequestListener } from '@hono/node-server';
import express from 'express';
import Fastify from 'fastify';
import { Hono } from 'hono';
import { fixedWindow } from '../../src/algorithms/fixed-window.js';
import { issueToken, tenantFromAuthorization } from '../../src/demo/identity.js';
import { expressRateLimit } from '../../src/http/express.js';
import { fastifyRateLimit } from '../../src/http/fastify.js';
import { fetchRateLimit } from '../../src/http/fetch.js';
import type { GuardOptions } from '../../src/http/guard.js';
import { withRateLimit } from '../../src/http/node.js';
import { RateLimiter } from '../../src/limiter.js';
import { randomTenant, useRedis } from '../helpers/redis.js';

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
};

interface Running {
  readonly url: string;
  readonly handled: () => number;
}

const listen = async (server: Server): Promise<string> => {
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  closers.push(() => void server.close());
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
};

const ADAPTERS: Record<string, (o: Shared) => Promise<Running>> = {
  'node:http': async ({ limiter, limit, ...rest }) => {
    let handled = 0;
    const guarded = withRateLimit(
      {
        limiter,
        policy: fixedWindow({ limit, windowMs: 60_000 }),
        route: 'POST/orders',
        identify: (req: IncomingMessage) =>
          tenantFromAuthorization(secret, req.headers.authorization),
        ...rest,
      },
      (_req, res) => {
        handled++;
        res.writeHead(201).end('{}');
      },
    );
    return { url: await listen(createServer(guarded)), handled: () => handled };
  },
  'Express 5': async ({ limiter, limit, ...rest }) => {
    let handled = 0;
    const app = express();
    app.post(
      '/orders',
      expressRateLimit({
        limiter,
        policy: fixedWindow({ limit, windowMs: 60_000 }),
        identify: (req) => tenantFromAuthorization(secret, req.headers.authorization),
        ...rest,
      }),
      (_req, res) => {
        handled++;
        res.status(201).json({});
      },
    );
    return { url: await listen(createServer(app)), handled: () => handled };
  },
  'Fastify 5': async ({ limiter, limit, ...rest }) => {
    let handled = 0;
    const app = Fastify();
    await app.register(fastifyRateLimit, {
      limiter,
      identify: (request) => tenantFromAuthorization(secret, request.headers.authorization),
    });
    app.post(
      '/orders',
      { config: { rateLimit: { policy: fixedWindow({ limit, windowMs: 60_000 }), ...rest } } },
      async (_req, reply) => {
        handled++;
        return reply.code(201).send({});
      },
    );
    await app.listen({ port: 0, host: '127.0.0.1' });
    closers.push(() => app.close());
    return {
      url: `http://127.0.0.1:${(app.server.address() as AddressInfo).port}`,
      handled: () => handled,
    };
  },
  'Hono (Fetch)': async ({ limiter, limit, ...rest }) => {
    let handled = 0;
    const guard = fetchRateLimit({
      limiter,
      policy: fixedWindow({ limit, windowMs: 60_000 }),
      route: 'POST/orders',
      identify: (request) => tenantFromAuthorization(secret, request.headers.get('authorization')),
      ...rest,
    });
    const app = new Hono();
    app.post(
      '/orders',
      async (c, next) => (await guard(c.req.raw)) ?? next(),
      (c) => {
        handled++;
        return c.json({}, 201);
      },
    );
    return {
      url: await listen(createServer(getRequestListener(app.fetch))),
      handled: () => handled,
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
        limiter: new RateLimiter({ client: await redis.client() }),
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
      const a = await start({ limiter: new RateLimiter({ client }), limit: 2 });
      client.destroy();
      const r = await post(a.url, randomTenant());
      assert.equal(r.status, 503);
      assert.equal(r.headers.get('retry-after'), '1');
      assert.equal(r.headers.get('ratelimit'), null);
      assert.equal(a.handled(), 0);
    });

    it('Redis down, fail-open → admitted within the local limit, then 503', async () => {
      const client = await redis.client();
      const a = await start({
        limiter: new RateLimiter({ client }),
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
        limiter: new RateLimiter({ client: await redis.client() }),
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

    it('no verified identity → 401, handler never run', async () => {
      const a = await start({
        limiter: new RateLimiter({ client: await redis.client() }),
        limit: 1,
      });
      const res = await fetch(`${a.url}/orders`, {
        method: 'POST',
        headers: { 'x-tenant': 'spoofed' },
      });
      await res.arrayBuffer();
      assert.equal(res.status, 401);
      assert.equal(a.handled(), 0);
    });
  });
}
