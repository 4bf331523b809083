import { fixedWindow, RateLimiter } from 'sluice';
import { connectRedis } from 'sluice/node-redis';

// node-redis v6, no offline queue, reconnect with backoff + jitter after the first connection.
// Rejects with UnavailableError at once when Redis is unreachable at start.
const client = await connectRedis({ url: process.env.REDIS_URL ?? 'redis://127.0.0.1:6379' });
const limiter = new RateLimiter({ client, namespace: 'rate', timeoutMs: 150, maxInFlight: 1000 });
const orders = fixedWindow({ limit: 10, windowMs: 1000 }); // build once, reuse

const d = await limiter.take({ tenant: 'acme', route: 'POST/orders' }, orders);
// d = { allowed, remaining, limit, resetMs, retryAfterMs }
if (d.allowed) console.log(`admitted, ${d.remaining} left`);
else console.log(`limited: retry in ${Math.max(1, Math.ceil(d.retryAfterMs / 1000))} s`);

await client.close(); // at shutdown
