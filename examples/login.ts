import express from 'express';
import { fixedWindow, RateLimiter } from 'sluice';
import { expressRateLimit } from 'sluice/express';
import { clientAddressOf } from 'sluice/http';
import { connectRedis } from 'sluice/node-redis';

const redis = await connectRedis({ url: process.env.REDIS_URL ?? 'redis://127.0.0.1:6379' });
const limiter = new RateLimiter({ client: redis, namespace: 'login' });

// Only failed attempts count. Per user and address: 5 per 15 minutes, then that user is
// blocked from that address for a minute, twice as long each time (up to an hour) while the
// failures go on. Per address, over every user: a looser 50 per 15 minutes.
const perUserAndAddress = fixedWindow({
  name: 'login-user-address',
  limit: 5,
  windowMs: 15 * 60_000,
  blockMs: 60_000,
  escalate: { factor: 2, maxMs: 3_600_000, withinMs: 3_600_000 },
});
const perAddress = fixedWindow({ name: 'login-address', limit: 50, windowMs: 15 * 60_000 });

const users = new Map([['ada', 'correct horse battery staple']]); // your user store
const addressOf = clientAddressOf(); // behind proxies: clientAddressOf({ trustProxy: […] })
const usernameOf = (body: unknown) => {
  const name = (body as { username?: unknown } | undefined)?.username;
  return typeof name === 'string' && name.length > 0 ? name : undefined;
};

const app = express();
app.use(express.json());
app.post(
  '/login',
  expressRateLimit<express.Request>({
    limiter,
    route: 'POST/login',
    policy: [{ policy: perUserAndAddress, per: 'route-user' }, perAddress],
    identify: addressOf, // the client address is the tenant: an outer limit
    user: (req) => usernameOf(req.body),
    // Reserved before the handler, settled when the response ends: a success gives it back.
    settle: (_req, res) => (res.statusCode < 400 ? 0 : 1),
  }),
  async (req, res) => {
    const username = usernameOf(req.body) as string;
    if (users.get(username) !== req.body.password) {
      res.status(401).json({ error: 'invalid username or password' });
      return;
    }
    // Signed in: forget this user's failures from this address (not the address's others).
    const tenant = addressOf(req) as string;
    await limiter.reset({ tenant, route: 'POST/login', user: username }, perUserAndAddress);
    res.json({ ok: true });
  },
);
app.get('/healthz', (_req, res) => {
  res.send('ok');
});

const server = app.listen(Number(process.env.PORT ?? 3000));
const shutdown = () => server.close(() => void redis.close());
process.once('SIGTERM', shutdown).once('SIGINT', shutdown);
