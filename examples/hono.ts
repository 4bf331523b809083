import { serve } from '@hono/node-server';
import { Hono } from 'hono';
import { createRedisClient, fetchRateLimit, fixedWindow, RateLimiter } from 'sluice';

const client = await createRedisClient({ url: process.env.REDIS_URL ?? 'redis://127.0.0.1:6379' });
const limiter = new RateLimiter({ client });
const orders = fixedWindow({ limit: 10, windowMs: 60_000 });

// Stands in for your authentication (see the node:http example).
const tenants = new Map([
  ['token-of-acme', 'acme'],
  ['token-of-globex', 'globex'],
]);
const verifiedTenantOf = (request: Request) =>
  tenants.get(request.headers.get('authorization')?.replace(/^Bearer /, '') ?? '');

// A Response to send at once, or undefined to run the handler.
const limitOrders = fetchRateLimit({
  limiter,
  policy: orders,
  route: 'POST/orders',
  identify: verifiedTenantOf,
});
const app = new Hono();
app.post(
  '/orders',
  async (c, next) => (await limitOrders(c.req.raw)) ?? next(),
  (c) => c.json({ created: true }, 201),
);
serve({ fetch: app.fetch, port: Number(process.env.PORT ?? 3000) });
