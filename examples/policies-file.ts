import { createServer, type IncomingMessage } from 'node:http';
import { RateLimiter } from 'sluice';
import { loadPolicies } from 'sluice/config';
import { withRateLimit } from 'sluice/node';
import { connectRedis } from 'sluice/node-redis';

const redis = await connectRedis({ url: process.env.REDIS_URL ?? 'redis://127.0.0.1:6379' });
const limiter = new RateLimiter({ client: redis });
const tenants = new Map([['token-of-acme', 'acme']]); // stands in for your authentication
const identify = (req: IncomingMessage) =>
  tenants.get(/^Bearer (\S+)$/.exec(req.headers.authorization ?? '')?.[1] ?? '');

// Validated once, at start (zod); a bad file throws an InvalidInputError naming the field.
const routes = loadPolicies(new URL('./policies.json', import.meta.url));
// { route, policy, cost, failureMode, failOpenLimit?, shadow }, ready for withRateLimit
const orders = routes.get('POST/orders');
if (orders === undefined) throw new Error('no policy for POST/orders');

const createOrder = withRateLimit({ limiter, identify, ...orders }, (_req, res) =>
  res.writeHead(201).end(),
);
// The guard names one route's quota: give it only that route's requests.
const server = createServer((req, res) => {
  const path = req.url?.split('?')[0];
  if (req.method === 'POST' && path === '/orders') return createOrder(req, res);
  if (req.method === 'GET' && path === '/healthz') return res.writeHead(200).end('ok');
  res.writeHead(404).end();
}).listen(Number(process.env.PORT ?? 3000));

const shutdown = () => server.close(() => void redis.close());
process.once('SIGTERM', shutdown).once('SIGINT', shutdown);
