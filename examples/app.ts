import express, { type Request } from 'express';
import { RateLimiter } from 'sluice';
import { loadPolicies } from 'sluice/config';
import { expressRateLimit } from 'sluice/express';
import { connectRedis } from 'sluice/node-redis';
import { prometheusMetrics } from 'sluice/prometheus';

// One metrics sink for the connection, the limiter and every route (prom-client's registry).
const metrics = prometheusMetrics();
const url = process.env.REDIS_URL ?? 'redis://127.0.0.1:6379';
const redis = await connectRedis({ url, metrics }); // node-redis, set up for rate limiting
const limiter = new RateLimiter({ client: redis, metrics });

// The limits live in a file, checked once, at start: a bad file throws, naming the field.
const routes = loadPolicies(new URL('./app-policies.json', import.meta.url));

// Stands in for your authentication: the verified tenant and user of a bearer token.
const sessions = new Map([
  ['token-of-ann', { tenant: 'acme', user: 'ann' }], // acme is on the "pro" plan
  ['token-of-bob', { tenant: 'globex', user: 'bob' }], // globex has the route's own limits
  ['token-of-cy', { tenant: 'globex', user: 'cy' }],
]);
const sessionOf = (req: Request) =>
  sessions.get(/^Bearer (\S+)$/.exec(req.get('authorization') ?? '')?.[1] ?? '');

/** The middleware of one route of the policy file. */
function limit(route: string) {
  const settings = routes.get(route);
  if (settings === undefined) throw new Error(`no limits for ${route} in the policy file`);
  return expressRateLimit<Request>({
    limiter,
    metrics,
    identify: (req) => sessionOf(req)?.tenant, // no tenant: 401
    user: (req) => sessionOf(req)?.user, // for the limit counted "per": "route-user"
    ...settings, // the route's name, its limits (the tenant's plan's, chosen per request)…
  });
}

const app = express();
app.post('/orders', limit('POST/orders'), (_req, res) => {
  res.status(201).json({ created: true });
});
app.get('/healthz', (_req, res) => {
  res.send('ok'); // no limiter here: spends nothing
});
app.get('/metrics', async (_req, res) => {
  res.set('content-type', metrics.registry.contentType).send(await metrics.registry.metrics());
});

const server = app.listen(Number(process.env.PORT ?? 3000));
// At shutdown: stop taking requests, then close the Redis connection.
const shutdown = () => server.close(() => void redis.close());
process.once('SIGTERM', shutdown).once('SIGINT', shutdown);
