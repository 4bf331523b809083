/**
 * The Express 5 adapter on a real server on loopback, against a real Redis: the quota is
 * named by the route template, refused requests never reach the handler, failures are
 * 503, and a middleware mounted where there is no route is an error, not a shared quota.
 */
import assert from 'node:assert/strict';
import type { Server } from 'node:http';
import { after, describe, it } from 'node:test';
import express from 'express';
import { fixedWindow, RateLimiter } from 'sluice';
import { expressRateLimit } from 'sluice/express';
import { issueToken, verifiedTenant } from '../../src/demo/identity.js';
import { randomTenant, TEST_TIMEOUT_MS, useRedis } from '../helpers/redis.js';

const redis = useRedis();
const secret = 'express-secret';
const servers: Server[] = [];
after(() => {
  for (const server of servers) server.close();
});

async function start(limiter: RateLimiter, mountOnRoute = true) {
  const limit = expressRateLimit({
    limiter,
    policy: fixedWindow({ limit: 2, windowMs: 60_000 }),
    identify: (req) => verifiedTenant(secret, req),
  });
  let handled = 0;
  const app = express();
  const handler = (_req: express.Request, res: express.Response) => {
    handled++;
    res.status(201).json({ ok: true });
  };
  if (mountOnRoute) app.post('/orders/:id', limit, handler);
  else app.use(limit).post('/orders/:id', handler);
  app.use(
    (
      _error: unknown,
      _req: express.Request,
      res: express.Response,
      _next: express.NextFunction,
    ) => {
      res.status(500).json({ error: 'internal_error' });
    },
  );
  const server = app.listen(0, '127.0.0.1');
  servers.push(server);
  await new Promise<void>((resolve) => server.once('listening', () => resolve()));
  const address = server.address();
  const base = `http://127.0.0.1:${typeof address === 'object' && address ? address.port : 0}`;
  const post = async (tenant: string, path: string, headers: Record<string, string> = {}) => {
    const res = await fetch(`${base}${path}`, {
      method: 'POST',
      headers: { authorization: `Bearer ${issueToken(secret, tenant)}`, ...headers },
    });
    await res.arrayBuffer();
    return res;
  };
  return { post, handled: () => handled, counts: limit.counts };
}

describe('Express adapter', () => {
  it('the route template names the quota: ids, query strings and forged XFF share "POST/orders/:id"', async () => {
    const a = await start(
      new RateLimiter({ timeoutMs: TEST_TIMEOUT_MS, client: await redis.client() }),
    );
    const tenant = randomTenant();
    const statuses: number[] = [];
    let retryAfter: string | null = null;
    for (const [path, xff] of [
      ['/orders/1?x=1', '10.0.0.1'],
      ['/orders/2?x=2', '10.0.0.2'],
      ['/orders/3', '10.0.0.3'],
    ] as const) {
      const res = await a.post(tenant, path, { 'x-forwarded-for': xff });
      statuses.push(res.status);
      if (res.status === 429) retryAfter = res.headers.get('retry-after');
    }
    assert.deepEqual(statuses, [201, 201, 429]);
    assert.ok(['60', '61'].includes(retryAfter ?? ''));
    assert.equal(a.handled(), 2);
    assert.deepEqual(a.counts.allowed + a.counts.limited, 3);
  });

  it('Redis unreachable → 503 + Retry-After: 1, the handler never runs', async () => {
    const client = await redis.client();
    const a = await start(new RateLimiter({ timeoutMs: TEST_TIMEOUT_MS, client }));
    client.destroy();
    const res = await a.post(randomTenant(), '/orders/1');
    assert.equal(res.status, 503);
    assert.equal(res.headers.get('retry-after'), '1');
    assert.equal(a.handled(), 0);
  });

  it('mounted with app.use (no route template) → an error through next(), never one quota for everything', async () => {
    const a = await start(
      new RateLimiter({ timeoutMs: TEST_TIMEOUT_MS, client: await redis.client() }),
      false,
    );
    const res = await a.post(randomTenant(), '/orders/1');
    assert.equal(res.status, 500);
    assert.equal(a.handled(), 0);
  });
});
