import { serve } from '@hono/node-server';
import { Hono } from 'hono';
import { fixedWindow, RateLimiter } from 'sluice';
import { fetchRateLimit } from 'sluice/fetch';
import { connectRedis } from 'sluice/node-redis';

const redis = await connectRedis({ url: process.env.REDIS_URL ?? 'redis://127.0.0.1:6379' });
const limiter = new RateLimiter({ client: redis });
const orders = fixedWindow({ limit: 10, windowMs: 60_000 });

// Stands in for your authentication (see the node:http example).
const tenants = new Map([
  ['token-of-acme', 'acme'],
  ['token-of-globex', 'globex'],
]);
const verifiedTenantOf = (request: Request) =>
  tenants.get(/^Bearer (\S+)$/.exec(request.headers.get('authorization') ?? '')?.[1] ?? '');

const limitOrders = fetchRateLimit({
  limiter,
  policy: orders,
  route: 'POST/orders',
  identify: verifiedTenantOf,
});
const app = new Hono();
app.post(
  '/orders',
  async (c, next) => {
    const verdict = await limitOrders.check(c.req.raw);
    if (!verdict.pass) return verdict.response; // 429, 503 or 401: the handler never runs
    await next();
    // The RateLimit fields (and a shadow route's header) on the handler's response.
    for (const [name, value] of Object.entries(verdict.headers)) c.res.headers.set(name, value);
  },
  (c) => c.json({ created: true }, 201),
);

const server = serve({ fetch: app.fetch, port: Number(process.env.PORT ?? 3000) });
const shutdown = () => server.close(() => void redis.close());
process.once('SIGTERM', shutdown).once('SIGINT', shutdown);
