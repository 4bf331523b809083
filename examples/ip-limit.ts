import { createServer } from 'node:http';
import { fixedWindow, RateLimiter } from 'sluice';
import { clientAddressOf } from 'sluice/http';
import { withRateLimit } from 'sluice/node';
import { connectRedis } from 'sluice/node-redis';

const redis = await connectRedis({ url: process.env.REDIS_URL ?? 'redis://127.0.0.1:6379' });
const limiter = new RateLimiter({ client: redis, namespace: 'ip' });
const loginAttempts = fixedWindow({ limit: 5, windowMs: 60_000 });

// Behind your own proxies (here: loopback and 10.0.0.0/8). Without trustProxy,
// X-Forwarded-For is ignored and the socket's peer address is used.
const identify = clientAddressOf({ trustProxy: ['loopback', '10.0.0.0/8'] });

const login = withRateLimit(
  { limiter, policy: loginAttempts, route: 'POST/login', identify },
  (_req, res) => res.writeHead(204).end(),
);
// Only POST /login spends the login quota; health checks and other paths never reach it.
const server = createServer((req, res) => {
  const path = req.url?.split('?')[0];
  if (req.method === 'POST' && path === '/login') return login(req, res);
  if (req.method === 'GET' && path === '/healthz') return res.writeHead(200).end('ok');
  res.writeHead(404).end();
}).listen(Number(process.env.PORT ?? 3000));

const shutdown = () => server.close(() => void redis.close());
process.once('SIGTERM', shutdown).once('SIGINT', shutdown);
