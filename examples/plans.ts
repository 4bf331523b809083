import express, { type Request } from 'express';
import { fixedWindow, RateLimiter, tokenBucket } from 'sluice';
import { expressRateLimit } from 'sluice/express';
import { connectRedis } from 'sluice/node-redis';

const redis = await connectRedis({ url: process.env.REDIS_URL ?? 'redis://127.0.0.1:6379' });
const limiter = new RateLimiter({ client: redis });

// Stand in for your authentication and your billing data.
const sessions = new Map([
  ['token-of-ann', { tenant: 'acme', user: 'ann' }],
  ['token-of-bob', { tenant: 'globex', user: 'bob' }],
]);
const plans = new Map([['acme', 'pro']]);
const sessionOf = (req: Request) =>
  sessions.get(/^Bearer (\S+)$/.exec(req.get('authorization') ?? '')?.[1] ?? '');

const free = fixedWindow({ name: 'free', limit: 2, windowMs: 60_000 });
const pro = [
  fixedWindow({ name: 'pro', limit: 100, windowMs: 60_000 }),
  tokenBucket({ name: 'pro-burst', capacity: 20, refillIntervalMs: 100 }),
];
const perUser = fixedWindow({ name: 'per-user', limit: 5, windowMs: 60_000 });
const tenantWide = fixedWindow({ name: 'tenant-api', limit: 1000, windowMs: 60_000 });

const limitReports = expressRateLimit<Request>({
  limiter,
  identify: (req) => sessionOf(req)?.tenant,
  user: (req) => sessionOf(req)?.user,
  // Chosen per request from the tenant's plan, so an upgrade applies at once. Every limit
  // is decided in one atomic call: a request refused by one of them spends none of them.
  policy: (_req, tenant) => [
    ...(plans.get(tenant) === 'pro' ? pro : [free]), // this route, per tenant
    { policy: perUser, per: 'route-user' }, // this route, per user of the tenant
    { policy: tenantWide, per: 'tenant' }, // every route that lists it, per tenant
  ],
});

const app = express();
app.get('/healthz', (_req, res) => {
  res.send('ok'); // no limiter on this route: it spends nothing
});
app.post('/reports', limitReports, (_req, res) => {
  res.status(201).json({ created: true });
});
const server = app.listen(Number(process.env.PORT ?? 3000));
const shutdown = () => server.close(() => void redis.close());
process.once('SIGTERM', shutdown).once('SIGINT', shutdown);
