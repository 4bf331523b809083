import Router from '@koa/router';
import Koa, { type Context } from 'koa';
import { fixedWindow, RateLimiter } from 'sluice';
import { koaRateLimit } from 'sluice/koa';
import { connectRedis } from 'sluice/node-redis';

const redis = await connectRedis({ url: process.env.REDIS_URL ?? 'redis://127.0.0.1:6379' });
const limiter = new RateLimiter({ client: redis });
const orders = fixedWindow({ limit: 10, windowMs: 60_000 });

// Stands in for your authentication (see the node:http example).
const tenants = new Map([
  ['token-of-acme', 'acme'],
  ['token-of-globex', 'globex'],
]);
const verifiedTenantOf = (ctx: Context) =>
  tenants.get(/^Bearer (\S+)$/.exec(ctx.get('authorization'))?.[1] ?? '');

const router = new Router();
// Mount it on the route: the quota is named by the route template, "POST/orders/:id".
router.post(
  '/orders/:id',
  koaRateLimit<Context>({ limiter, policy: orders, identify: verifiedTenantOf }),
  (ctx) => {
    ctx.status = 201;
    ctx.body = { created: ctx.params.id };
  },
);

const app = new Koa();
app.use(router.routes());
const server = app.listen(Number(process.env.PORT ?? 3000));
const shutdown = () => server.close(() => void redis.close());
process.once('SIGTERM', shutdown).once('SIGINT', shutdown);
