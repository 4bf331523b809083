/**
 * A concurrency limit on a route, through the Express, Fastify, Koa and node:http adapters
 * on real servers on loopback and a real Redis: a request holds a lease while it runs and
 * frees it when its response ends; a client that hangs up frees its slot only when its
 * handler's response ends or its lease (no longer renewed) expires; a handler
 * running longer than the lease keeps it (renewed); over the limit, `429` with a
 * `Retry-After` from the earliest lease expiry and the `qu="concurrent-requests"` quota.
 */
import assert from 'node:assert/strict';
import { createServer, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, describe, it } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import express from 'express';
import Fastify from 'fastify';
import Koa from 'koa';
import { type ConcurrencyPolicy, concurrency, RateLimiter, tokenBucket } from 'sluice';
import { expressRateLimit } from 'sluice/express';
import { fastifyRateLimit } from 'sluice/fastify';
import { fetchRateLimit } from 'sluice/fetch';
import { koaRateLimit } from 'sluice/koa';
import { withRateLimit } from 'sluice/node';
import { randomTenant, useRedis } from '../helpers/redis.js';

const redis = useRedis();
const servers: Server[] = [];
after(() => {
  for (const server of servers) server.close();
});

/** A handler's life: it runs until `open()`, or for `holdMs` when the request asks. */
interface Gate {
  entered: number;
  open(): void;
  wait(req: IncomingMessage): Promise<void>;
}

function gate(): Gate {
  let open: () => void = () => {};
  let opened = new Promise<void>((resolve) => {
    open = resolve;
  });
  const g: Gate = {
    entered: 0,
    open: () => {
      open();
      opened = new Promise<void>((resolve) => {
        open = resolve;
      });
    },
    wait: async (req) => {
      g.entered++;
      const hold = req.headers['x-hold-ms'];
      await (typeof hold === 'string' ? sleep(Number(hold)) : opened);
    },
  };
  return g;
}

const tenantOf = (req: IncomingMessage) => req.headers['x-tenant'] as string | undefined;
const route = 'POST/exports';

type Start = (limiter: RateLimiter, policy: ConcurrencyPolicy, g: Gate) => Promise<Server>;

const ADAPTERS: Record<string, Start> = {
  express: async (limiter, policy, g) => {
    const app = express();
    app.post(
      '/exports',
      expressRateLimit({ limiter, policy, route, identify: (req) => tenantOf(req as never) }),
      (req, res) => {
        void g.wait(req).then(() => res.json({ ok: true }));
      },
    );
    return createServer(app);
  },
  fastify: async (limiter, policy, g) => {
    const app = Fastify();
    await app.register(fastifyRateLimit, {
      limiter,
      identify: (request) => tenantOf(request.raw),
    });
    app.post('/exports', { config: { rateLimit: { policy, route } } }, async (request) => {
      await g.wait(request.raw);
      return { ok: true };
    });
    await app.ready();
    return app.server;
  },
  koa: async (limiter, policy, g) => {
    const app = new Koa();
    app.use(
      koaRateLimit<Koa.Context>({ limiter, policy, route, identify: (ctx) => tenantOf(ctx.req) }),
    );
    app.use(async (ctx) => {
      await g.wait(ctx.req);
      ctx.body = { ok: true };
    });
    return createServer(app.callback());
  },
  node: async (limiter, policy, g) =>
    createServer(
      withRateLimit({ limiter, policy, route, identify: tenantOf }, (req, res) => {
        void g.wait(req).then(() => {
          res.writeHead(200, { 'content-type': 'application/json' });
          res.end('{"ok":true}');
        });
      }),
    ),
};

async function until(what: string, condition: () => boolean, ms = 2000): Promise<void> {
  const deadline = performance.now() + ms;
  while (!condition()) {
    if (performance.now() > deadline) assert.fail(`not within ${ms} ms: ${what}`);
    await sleep(5);
  }
}

/** Waits (2 s at most) until `remaining` slots of the scope are free. */
async function freed(
  limiter: RateLimiter,
  scope: { tenant: string; route: string },
  policy: ConcurrencyPolicy,
  remaining: number,
): Promise<void> {
  const deadline = performance.now() + 2000;
  while ((await limiter.peek(scope, policy)).remaining !== remaining) {
    if (performance.now() > deadline) assert.fail(`not ${remaining} free within 2 s`);
    await sleep(5);
  }
}

for (const [name, start] of Object.entries(ADAPTERS)) {
  describe(`a concurrency limit on a ${name} route`, () => {
    it('holds a lease per request until its response ends (a hang-up stops the renewals), renews a long one; 429 over the limit', async () => {
      const limiter = new RateLimiter({ client: await redis.client(), timeoutMs: 2000 });
      const policy = concurrency({ limit: 2, leaseMs: 600, name: 'exports' });
      const g = gate();
      const server = await start(limiter, policy, g);
      servers.push(server);
      await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
      const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/exports`;
      const tenant = randomTenant();
      const post = (headers: Record<string, string> = {}, signal?: AbortSignal) =>
        fetch(url, { method: 'POST', headers: { 'x-tenant': tenant, ...headers }, signal });

      // Two run; a third is refused.
      const aborter = new AbortController();
      const first = post({}, aborter.signal).catch(() => undefined);
      const second = post();
      await until('two handlers running', () => g.entered === 2);
      const refused = await post();
      assert.equal(refused.status, 429);
      const retryAfter = Number(refused.headers.get('retry-after'));
      assert.ok(retryAfter >= 1 && retryAfter <= 1, `Retry-After ${retryAfter}`);
      assert.match(
        refused.headers.get('ratelimit-policy') ?? '',
        /^"exports";q=2;qu="concurrent-requests"$/,
      );
      assert.match(refused.headers.get('ratelimit') ?? '', /^"exports";r=0;t=1$/);

      // A client that hangs up does not free its slot while its handler runs (else any
      // client could run unbounded handlers): its lease is no longer renewed and ends at
      // the latest leaseMs after the hang-up.
      aborter.abort();
      await first;
      await sleep(50);
      assert.equal((await post({ 'x-hold-ms': '0' })).status, 429, 'the hung-up handler runs');
      await freed(limiter, { tenant, route }, policy, 1); // expired: 600 ms after a renewal
      const third = post();
      await until('the freed slot taken again', () => g.entered === 3, 1000);

      // Past the lease: both leases renewed, still held.
      await sleep(800);
      assert.equal((await post()).status, 429, 'renewed leases still held');
      g.open();
      assert.equal((await second).status, 200);
      assert.equal((await third).status, 200);
      // Released when the responses finished (sent right behind them).
      await freed(limiter, { tenant, route }, policy, 2);
    });
  });
}

describe('a concurrency limit through the Fetch-API adapter', () => {
  it('check() holds a lease until its release(); the plain form frees it when the request aborts', async () => {
    const limiter = new RateLimiter({ client: await redis.client(), timeoutMs: 2000 });
    const policy = concurrency({ limit: 1, leaseMs: 60_000, name: 'exports' });
    const limit = fetchRateLimit({
      limiter,
      policy,
      route,
      identify: (request) => request.headers.get('x-tenant') ?? undefined,
    });
    const tenant = randomTenant();
    const request = (signal?: AbortSignal) =>
      new Request('http://localhost/exports', {
        method: 'POST',
        headers: { 'x-tenant': tenant },
        signal,
      });
    const held = await limit.check(request());
    assert.ok(held.pass && held.release !== undefined);
    const refused = await limit(request());
    assert.equal(refused?.status, 429);
    assert.match(refused?.headers.get('ratelimit-policy') ?? '', /qu="concurrent-requests"/);
    if (held.pass) held.release?.();
    await freed(limiter, { tenant, route }, policy, 1);
    const controller = new AbortController();
    assert.equal(await limit(request(controller.signal)), undefined, 'admitted');
    assert.equal((await limit(request()))?.status, 429);
    controller.abort();
    await sleep(30);
    assert.equal(
      (await limiter.peek({ tenant, route }, policy)).remaining,
      1,
      'freed by the abort',
    );
  });
});

describe('the Fetch-API adapter never renews a lease for ever', () => {
  it('the plain form holds it leaseMs at most; check() renews it maxHoldMs at most', async () => {
    const limiter = new RateLimiter({ client: await redis.client(), timeoutMs: 2000 });
    const policy = concurrency({ limit: 1, leaseMs: 300, name: 'exports' });
    const limit = fetchRateLimit({
      limiter,
      policy,
      route,
      identify: () => tenant,
      maxHoldMs: 700,
    });
    const tenant = randomTenant();
    const request = () => new Request('http://localhost/exports', { method: 'POST' });
    const scope = { tenant, route };
    const started = performance.now();
    assert.equal(await limit(request()), undefined, 'admitted; its signal never aborts');
    await freed(limiter, scope, policy, 1); // expired, not renewed every 150 ms for ever
    assert.ok(performance.now() - started < 1000);
    const held = await limit.check(request()); // its release() is never called
    assert.ok(held.pass);
    await sleep(500);
    assert.equal((await limiter.peek(scope, policy)).remaining, 0, 'renewed past leaseMs');
    await freed(limiter, scope, policy, 1); // maxHoldMs 700, then leaseMs 300 at most
    // A lease holds one slot: a cost of 2 is a programming error, alone or stacked.
    const rate = tokenBucket({ capacity: 10, refillTokens: 1, refillIntervalMs: 1000 });
    for (const limits of [policy, [rate, policy]]) {
      const costly = fetchRateLimit({
        limiter,
        policy: limits,
        route,
        identify: () => tenant,
        cost: 2,
      });
      await assert.rejects(costly.check(request()), /cost/);
    }
    assert.throws(
      () => fetchRateLimit({ limiter, policy, route, identify: () => tenant, maxHoldMs: 0 }),
      /options\.maxHoldMs/,
    );
  });
});
