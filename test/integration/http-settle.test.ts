/**
 * The guard's `settle` option in every Node.js adapter (node:http, Express, Koa, Fastify) and
 * the Fetch one: a login route that counts only failures — successes give their reservation
 * back, failures keep it; at most the limit of attempts in flight or failed, under
 * concurrency; stacked limits each settled. Real servers on loopback, a private real Redis.
 */
import assert from 'node:assert/strict';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, describe, it } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import Router from '@koa/router';
import express from 'express';
import Fastify from 'fastify';
import Koa from 'koa';
import { fixedWindow, type Policy, RateLimiter } from 'sluice';
import { expressRateLimit } from 'sluice/express';
import { fastifyRateLimit } from 'sluice/fastify';
import { fetchRateLimit } from 'sluice/fetch';
import type { SettledResponse, SettleInfo } from 'sluice/http';
import { koaRateLimit } from 'sluice/koa';
import { nodeRateLimit } from 'sluice/node';
import { randomTenant, TEST_TIMEOUT_MS, useRedis } from '../helpers/redis.js';

const redis = useRedis();
const closers: (() => Promise<void> | void)[] = [];
after(async () => {
  for (const close of closers) await close();
});

/** Counts only failed attempts: the one-liner. */
const settle = (_req: unknown, res: SettledResponse) => (res.statusCode < 400 ? 0 : 1);
const perUser = fixedWindow({ limit: 3, windowMs: 60_000, name: 'login-user' });
const perTenant = fixedWindow({ limit: 10, windowMs: 60_000, name: 'login-tenant' });

/** The login handler's answer: 200 for the right password, else 401, after `delayMs`. */
async function login(password: string | undefined, delayMs: number): Promise<number> {
  if (delayMs > 0) await sleep(delayMs);
  return password === 'right' ? 200 : 401;
}

function listen(server: Server): string {
  closers.push(() => new Promise<void>((resolve) => server.close(() => resolve())));
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
}

type App = (
  limiter: RateLimiter,
  policy: Policy | Policy[],
  delayMs: number,
  aborts?: boolean[],
) => Promise<string>;

/** `settle`, recording each call's `aborted` in `aborts` (when given). */
const settleInto =
  (aborts: boolean[] | undefined) => (req: unknown, res: SettledResponse, info: SettleInfo) => {
    aborts?.push(info.aborted);
    return settle(req, res);
  };

const header = (h: unknown) => (typeof h === 'string' ? h : undefined);
const identify = (headers: Record<string, unknown>) => header(headers['x-tenant']);

const apps: Record<string, App> = {
  'node:http': async (limiter, policy, delayMs, aborts) => {
    const guard = nodeRateLimit({
      limiter,
      policy,
      route: 'POST/login',
      identify: (req: IncomingMessage) => identify(req.headers),
      settle: settleInto(aborts),
    });
    const server = createServer(async (req: IncomingMessage, res: ServerResponse) => {
      if (!(await guard(req, res))) return;
      res.statusCode = await login(header(req.headers['x-password']), delayMs);
      res.end();
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    return listen(server);
  },
  express: async (limiter, policy, delayMs, aborts) => {
    const app = express();
    app.post(
      '/login',
      expressRateLimit({
        limiter,
        policy,
        identify: (req) => identify(req.headers),
        settle: settleInto(aborts),
      }),
      async (req, res) => {
        res.status(await login(header(req.headers['x-password']), delayMs)).end();
      },
    );
    const server = app.listen(0, '127.0.0.1');
    await new Promise((resolve) => server.once('listening', resolve));
    return listen(server);
  },
  koa: async (limiter, policy, delayMs, aborts) => {
    const app = new Koa();
    const router = new Router();
    router.post(
      '/login',
      koaRateLimit<Koa.Context>({
        limiter,
        policy,
        identify: (ctx) => identify(ctx.headers),
        settle: settleInto(aborts),
      }),
      async (ctx) => {
        ctx.status = await login(ctx.get('x-password'), delayMs);
        ctx.body = '';
      },
    );
    app.use(router.routes());
    const server = app.listen(0, '127.0.0.1');
    await new Promise((resolve) => server.once('listening', resolve));
    return listen(server);
  },
  fastify: async (limiter, policy, delayMs, aborts) => {
    const app = Fastify();
    await app.register(fastifyRateLimit, {
      limiter,
      identify: (request) => identify(request.headers),
    });
    app.post(
      '/login',
      { config: { rateLimit: { policy, settle: settleInto(aborts) } as never } },
      async (request, reply) => {
        reply.code(await login(header(request.headers['x-password']), delayMs));
        return '';
      },
    );
    await app.listen({ port: 0, host: '127.0.0.1' });
    closers.push(() => app.close());
    return `http://127.0.0.1:${(app.server.address() as AddressInfo).port}`;
  },
  fetch: async (limiter, policy, delayMs) => {
    const limit = fetchRateLimit({
      limiter,
      policy,
      route: 'POST/login',
      identify: (request) => request.headers.get('x-tenant') ?? undefined,
      settle,
    });
    // A Fetch handler behind node:http, as Hono or Bun would run it.
    const handle = async (request: Request): Promise<Response> => {
      const verdict = await limit.check(request);
      if (!verdict.pass) return verdict.response;
      const response = new Response('', {
        status: await login(request.headers.get('x-password') ?? undefined, delayMs),
      });
      await verdict.settle?.(response);
      return response;
    };
    const server = createServer(async (req, res) => {
      const headers = new Headers();
      for (const [k, v] of Object.entries(req.headers))
        if (typeof v === 'string') headers.set(k, v);
      const response = await handle(new Request(`http://x${req.url}`, { method: 'POST', headers }));
      res.statusCode = response.status;
      res.end();
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    return listen(server);
  },
};

async function attempt(base: string, tenant: string, password: string): Promise<number> {
  const res = await fetch(`${base}/login`, {
    method: 'POST',
    headers: { 'x-tenant': tenant, 'x-password': password },
  });
  await res.arrayBuffer();
  return res.status;
}

/** An attempt whose client disconnects after `afterMs`, while the handler still runs. */
async function abortedAttempt(base: string, tenant: string, password: string, afterMs: number) {
  const controller = new AbortController();
  const sent = fetch(`${base}/login`, {
    method: 'POST',
    headers: { 'x-tenant': tenant, 'x-password': password },
    signal: controller.signal,
  }).then(
    (res) => res.arrayBuffer(),
    () => undefined,
  );
  await sleep(afterMs);
  controller.abort();
  await sent;
}

/** Waits until the settles of answered requests have run (they follow the response). */
const settled = () => sleep(50);

describe('guard option settle: a login that counts only failures', () => {
  let limiter: RateLimiter | undefined;
  const shared = async () => {
    limiter ??= new RateLimiter({ timeoutMs: TEST_TIMEOUT_MS, client: await redis.client() });
    return limiter;
  };

  for (const [name, app] of Object.entries(apps)) {
    it(`${name}: successes give back, failures count; the 4th failure is refused`, async () => {
      const l = await shared();
      const base = await app(l, perUser, 0);
      const tenant = randomTenant();
      for (let i = 0; i < 5; i++) assert.equal(await attempt(base, tenant, 'right'), 200);
      await settled();
      for (let i = 0; i < 3; i++) assert.equal(await attempt(base, tenant, 'wrong'), 401);
      await settled();
      assert.equal(await attempt(base, tenant, 'wrong'), 429);
      assert.equal(await attempt(base, tenant, 'right'), 429, 'three failures: refused');
      const peek = await l.peek({ tenant, route: 'POST/login' }, perUser);
      assert.equal(peek.remaining, 0);
    });
  }

  for (const name of ['node:http', 'express', 'koa', 'fastify']) {
    it(`${name}: a client that disconnects before the answer gets no attempt back`, async () => {
      const l = await shared();
      const seen: boolean[] = [];
      const base = await (apps[name] as App)(l, perUser, 250, seen);
      const tenant = randomTenant();
      await abortedAttempt(base, tenant, 'right', 100);
      await sleep(300);
      const route = 'POST/login';
      assert.equal((await l.peek({ tenant, route }, perUser)).remaining, 3, 'a 200 gives back');
      for (let i = 0; i < 3; i++) await abortedAttempt(base, tenant, 'wrong', 100);
      await sleep(300);
      assert.equal((await l.peek({ tenant, route }, perUser)).remaining, 0, 'failures count');
      assert.equal(await attempt(base, tenant, 'wrong'), 429);
      assert.deepEqual(seen, [true, true, true, true], 'the hook is told it was aborted');
    });
  }

  it('node:http, concurrent attempts: at most the limit in flight; all given back on success', async () => {
    const l = await shared();
    const base = await apps['node:http']?.(l, perUser, 100);
    const tenant = randomTenant();
    const statuses = await Promise.all(
      Array.from({ length: 6 }, () => attempt(base as string, tenant, 'right')),
    );
    assert.deepEqual(
      statuses.sort(),
      [200, 200, 200, 429, 429, 429],
      'three reserved at once, three refused',
    );
    await settled();
    assert.equal((await l.peek({ tenant, route: 'POST/login' }, perUser)).remaining, 3);
  });

  it('express, stacked limits: each is reserved and settled', async () => {
    const l = await shared();
    const base = await apps.express?.(l, [perUser, perTenant], 0);
    const tenant = randomTenant();
    assert.equal(await attempt(base as string, tenant, 'wrong'), 401);
    assert.equal(await attempt(base as string, tenant, 'right'), 200);
    await settled();
    const route = 'POST/login';
    assert.equal((await l.peek({ tenant, route }, perUser)).remaining, 2);
    assert.equal((await l.peek({ tenant, route }, perTenant)).remaining, 9);
  });
});

describe('guard option retryId: a retried request counts once', () => {
  it('node:http: the same Idempotency-Key counts once and runs the handler once', async () => {
    const limiter = new RateLimiter({ timeoutMs: TEST_TIMEOUT_MS, client: await redis.client() });
    const policy = fixedWindow({ limit: 2, windowMs: 60_000, name: 'orders' });
    const guard = nodeRateLimit({
      limiter,
      policy,
      route: 'POST/orders',
      identify: (req: IncomingMessage) => identify(req.headers),
      retryId: (req: IncomingMessage) => header(req.headers['idempotency-key']),
    });
    let runs = 0;
    const server = createServer(async (req, res) => {
      if (!(await guard(req, res))) return;
      runs++;
      res.statusCode = 201;
      res.end();
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const base = listen(server);
    const tenant = randomTenant();
    const post = async (key?: string) => {
      const headers: Record<string, string> = { 'x-tenant': tenant };
      if (key !== undefined) headers['idempotency-key'] = key;
      const res = await fetch(`${base}/orders`, { method: 'POST', headers });
      await res.arrayBuffer();
      return res.status;
    };
    assert.equal(await post('order-1'), 201);
    for (let i = 0; i < 3; i++) {
      assert.equal(await post('order-1'), 409, `repeat ${i}: served once, never run again`);
    }
    assert.equal(await post('x'.repeat(129)), 201, 'a key too long is no key: counted');
    assert.equal(await post('order-2'), 429, 'the limit of 2: order-1 once, the long one');
    assert.equal(await post('order-1'), 409, 'order-1 is still its first admission');
    assert.equal(guard.counts.duplicate, 4);
    assert.equal(runs, 2, 'the handler ran for order-1 once and the long key once');
  });

  it('express with settle: concurrent copies of one key run the handler once', async () => {
    const limiter = new RateLimiter({ timeoutMs: TEST_TIMEOUT_MS, client: await redis.client() });
    const policy = fixedWindow({ limit: 2, windowMs: 60_000, name: 'idem-login' });
    let runs = 0;
    const app = express();
    app.post(
      '/login',
      expressRateLimit({
        limiter,
        policy,
        identify: (req) => identify(req.headers),
        settle,
        retryId: (req) => header(req.headers['idempotency-key']),
      }),
      async (_req, res) => {
        runs++;
        await sleep(50);
        res.status(401).end();
      },
    );
    const server = app.listen(0, '127.0.0.1');
    await new Promise((resolve) => server.once('listening', resolve));
    const base = listen(server);
    const tenant = randomTenant();
    const send = async () => {
      const res = await fetch(`${base}/login`, {
        method: 'POST',
        headers: { 'x-tenant': tenant, 'idempotency-key': 'K1' },
      });
      await res.arrayBuffer();
      return res.status;
    };
    const first = await Promise.all(Array.from({ length: 5 }, send));
    const later = [];
    for (let i = 0; i < 5; i++) later.push(await send());
    assert.deepEqual(first.sort(), [401, 409, 409, 409, 409]);
    assert.deepEqual(later, [409, 409, 409, 409, 409]);
    assert.equal(runs, 1);
  });

  it('a retryId that throws or answers a promise is no key, never an unhandled rejection', async () => {
    const limiter = new RateLimiter({ timeoutMs: TEST_TIMEOUT_MS, client: await redis.client() });
    const policy = fixedWindow({ limit: 5, windowMs: 60_000, name: 'async-key' });
    const unhandled: unknown[] = [];
    const onUnhandled = (reason: unknown) => unhandled.push(reason);
    process.on('unhandledRejection', onUnhandled);
    try {
      const tenant = randomTenant();
      for (const retryId of [
        async () => {
          throw new Error('no key store');
        },
        async () => 'k1',
        () => {
          throw new Error('sync');
        },
      ]) {
        const guard = nodeRateLimit({
          limiter,
          policy,
          route: 'POST/async',
          identify: () => tenant,
          retryId: retryId as never,
        });
        const res = { setHeader() {}, once() {}, headersSent: false } as never;
        assert.equal(await guard({ headers: {} } as never, res), true);
      }
      await sleep(20);
      assert.deepEqual(unhandled, []);
      assert.equal((await limiter.peek({ tenant, route: 'POST/async' }, policy)).remaining, 2);
    } finally {
      process.off('unhandledRejection', onUnhandled);
    }
  });
});
