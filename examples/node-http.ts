import { createServer, type IncomingMessage } from 'node:http';
import { fixedWindow, RateLimiter } from 'sluice';
import { withRateLimit } from 'sluice/node';
import { connectRedis } from 'sluice/node-redis';

const redis = await connectRedis({ url: process.env.REDIS_URL ?? 'redis://127.0.0.1:6379' });
const limiter = new RateLimiter({ client: redis });
const orders = fixedWindow({ limit: 10, windowMs: 60_000 }); // 10 per minute per tenant

// The tenant comes from your authentication, never from a header the client chooses;
// this token table stands in for your session store.
const tenants = new Map([
  ['token-of-acme', 'acme'],
  ['token-of-globex', 'globex'],
]);
const verifiedTenantOf = (req: IncomingMessage) =>
  tenants.get(/^Bearer (\S+)$/.exec(req.headers.authorization ?? '')?.[1] ?? '');

// The wrapped handler is guarded for every request it receives, so wrap only the handler
// of the route the quota is for. It runs only when the request is admitted.
const createOrder = withRateLimit(
  {
    limiter,
    policy: orders,
    route: 'POST/orders', // the route template, never the raw URL
    identify: verifiedTenantOf,
    failureMode: 'fail-closed', // the default: 503 when the limiter fails
  },
  (_req, res) => res.writeHead(201, { 'content-type': 'application/json' }).end('{"created":true}'),
);

const server = createServer((req, res) => {
  if (req.method === 'POST' && req.url?.split('?')[0] === '/orders') return createOrder(req, res);
  res.writeHead(404).end();
}).listen(Number(process.env.PORT ?? 3000));

const shutdown = () => server.close(() => void redis.close());
process.once('SIGTERM', shutdown).once('SIGINT', shutdown);
