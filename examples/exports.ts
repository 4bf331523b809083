import express, { type Request } from 'express';
import { concurrency, RateLimiter } from 'sluice';
import { expressRateLimit } from 'sluice/express';
import { connectRedis } from 'sluice/node-redis';

const redis = await connectRedis({ url: process.env.REDIS_URL ?? 'redis://127.0.0.1:6379' });
const limiter = new RateLimiter({ client: redis });
// At most 2 exports running per tenant, over every replica. A lease is renewed while its
// export runs; a replica that dies mid-export frees the slot within 30 s.
const running = concurrency({ name: 'exports', limit: 2, leaseMs: 30_000 });

// Stands in for your authentication (see the node:http example).
const tenants = new Map([
  ['token-of-acme', 'acme'],
  ['token-of-globex', 'globex'],
]);
const verifiedTenantOf = (req: Request) =>
  tenants.get(/^Bearer (\S+)$/.exec(req.get('authorization') ?? '')?.[1] ?? '');

const app = express();
app.post(
  '/exports',
  expressRateLimit({ limiter, policy: running, identify: verifiedTenantOf }),
  async (_req, res) => {
    await new Promise((resolve) => setTimeout(resolve, 500)); // the export's work
    res.json({ exported: true });
  },
);

const server = app.listen(Number(process.env.PORT ?? 3000));
const shutdown = () => server.close(() => void redis.close());
process.once('SIGTERM', shutdown).once('SIGINT', shutdown);
