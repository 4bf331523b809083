import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import { RateLimiter } from 'sluice';
import { loadPolicies } from 'sluice/config';
import { withRateLimit } from 'sluice/node';
import { connectRedis } from 'sluice/node-redis';

const redis = await connectRedis({ url: process.env.REDIS_URL ?? 'redis://127.0.0.1:6379' });
const limiter = new RateLimiter({ client: redis });

// Stands in for your authentication: a token's verified tenant and user.
const sessions = new Map([
  ['token-of-ann', { tenant: 'acme', user: 'ann' }], // plan "pro" in the file
  ['token-of-bob', { tenant: 'globex', user: 'bob' }], // limits of its own in the file
  ['token-of-eve', { tenant: 'initech', user: 'eve' }], // the default plan, "free"
]);
const sessionOf = (req: IncomingMessage) =>
  sessions.get(/^Bearer (\S+)$/.exec(req.headers.authorization ?? '')?.[1] ?? '');

// Validated once, at start: every problem is reported with its path in the file.
const routes = loadPolicies(new URL('./plans-file.json', import.meta.url));

// Each route's settings carry its limits: on a route with plans, a function that picks the
// tenant's own limits, else its plan's, on every request.
function limited(route: string, handler: (req: IncomingMessage, res: ServerResponse) => void) {
  const settings = routes.get(route);
  if (settings === undefined) throw new Error(`no policy for ${route}`);
  const identify = (req: IncomingMessage) => sessionOf(req)?.tenant;
  const user = (req: IncomingMessage) => sessionOf(req)?.user; // for "per": "route-user"
  return withRateLimit({ limiter, identify, user, ...settings }, handler);
}
const createOrder = limited('POST/orders', (_req, res) => res.writeHead(201).end());
const search = limited('GET/search', (_req, res) => res.writeHead(200).end('[]'));

const server = createServer((req, res) => {
  const path = req.url?.split('?')[0];
  if (req.method === 'POST' && path === '/orders') return createOrder(req, res);
  if (req.method === 'GET' && path === '/search') return search(req, res);
  res.writeHead(404).end();
}).listen(Number(process.env.PORT ?? 3000));

const shutdown = () => server.close(() => void redis.close());
process.once('SIGTERM', shutdown).once('SIGINT', shutdown);
