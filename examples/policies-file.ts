import { createServer, type IncomingMessage } from 'node:http';
import { createRedisClient, loadPolicies, RateLimiter, withRateLimit } from 'sluice';

const client = await createRedisClient({ url: process.env.REDIS_URL ?? 'redis://127.0.0.1:6379' });
const limiter = new RateLimiter({ client });
const tenants = new Map([['token-of-acme', 'acme']]); // stands in for your authentication
const identify = (req: IncomingMessage) =>
  tenants.get(/^Bearer (\S+)$/.exec(req.headers.authorization ?? '')?.[1] ?? '');

// Validated once, at start (zod); a bad file throws an InvalidInputError naming the field.
const routes = loadPolicies('examples/policies.json');
// { route, policy, cost, failureMode, failOpenLimit?, shadow }, ready for withRateLimit
const orders = routes.get('POST/orders');
if (orders === undefined) throw new Error('no policy for POST/orders');

createServer(
  withRateLimit({ limiter, identify, ...orders }, (_req, res) => res.writeHead(201).end()),
).listen(Number(process.env.PORT ?? 3000));
