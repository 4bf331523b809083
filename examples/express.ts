import express, { type Request } from 'express';
import { fixedWindow, RateLimiter } from 'sluice';
import { expressRateLimit } from 'sluice/express';
import { connectRedis } from 'sluice/node-redis';

const redis = await connectRedis({ url: process.env.REDIS_URL ?? 'redis://127.0.0.1:6379' });
const limiter = new RateLimiter({ client: redis });
const orders = fixedWindow({ limit: 10, windowMs: 60_000 });

// Stands in for your authentication (see the node:http example).
const tenants = new Map([
  ['token-of-acme', 'acme'],
  ['token-of-globex', 'globex'],
]);
const verifiedTenantOf = (req: Request) =>
  tenants.get(/^Bearer (\S+)$/.exec(req.get('authorization') ?? '')?.[1] ?? '');

const app = express();
// Mount it on the route: the quota is named by the route template, "POST/orders/:id".
app.post(
  '/orders/:id',
  expressRateLimit({ limiter, policy: orders, identify: verifiedTenantOf }),
  (req, res) => {
    res.status(201).json({ created: req.params.id });
  },
);

const server = app.listen(Number(process.env.PORT ?? 3000));
const shutdown = () => server.close(() => void redis.close());
process.once('SIGTERM', shutdown).once('SIGINT', shutdown);
