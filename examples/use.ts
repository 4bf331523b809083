import { fixedWindow, RateLimiter } from 'sluice';
import { connectRedis } from 'sluice/node-redis';

// node-redis, set up for rate limiting: no offline queue, reconnects with backoff and jitter
// after the first connection, rejects with UnavailableError at once when Redis is down at start.
const redis = await connectRedis({ url: process.env.REDIS_URL ?? 'redis://127.0.0.1:6379' });
const limiter = new RateLimiter({ client: redis, timeoutMs: 150, maxInFlight: 1000 });
const orders = fixedWindow({ limit: 10, windowMs: 1000 }); // build once, reuse

const scope = { tenant: 'acme', route: 'POST/orders' };
const d = await limiter.take(scope, orders);
// d = { allowed, remaining, limit, resetMs, retryAfterMs }
if (d.allowed) console.log(`admitted, ${d.remaining} left`);
else console.log(`limited: retry in ${Math.max(1, Math.ceil(d.retryAfterMs / 1000))} s`);

// Your own commands go through the connection's node-redis client.
console.log(`counted in Redis: ${await redis.client.get(limiter.keyOf(scope, orders))}`);

await redis.close(); // at shutdown
