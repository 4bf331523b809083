import { Redis } from 'ioredis';
import { createClient } from 'redis';
import { fixedWindow, RateLimiter } from 'sluice';
import { IOREDIS_OPTIONS } from 'sluice/ioredis';

const url = process.env.REDIS_URL ?? 'redis://127.0.0.1:6379';
const orders = fixedWindow({ name: 'orders', limit: 10, windowMs: 60_000 });
const scope = { tenant: 'acme', route: 'POST/orders' };

// A node-redis client of your own: without its offline queue (else refused), connected.
const nodeRedis = createClient({ url, disableOfflineQueue: true });
nodeRedis.on('error', (error) => console.error(`node-redis: ${error.message}`));
await nodeRedis.connect();

// An ioredis client: IOREDIS_OPTIONS turn off its offline queue, its retries and its resends,
// and replace a connection that stops answering (socketTimeout).
const ioredis = new Redis(url, { ...IOREDIS_OPTIONS, lazyConnect: true });
ioredis.on('error', (error) => console.error(`ioredis: ${error.message}`));
await ioredis.connect();

// Either goes to a limiter as it is; both decide on the same keys.
for (const [name, client] of [
  ['node-redis', nodeRedis],
  ['ioredis', ioredis],
] as const) {
  const limiter = new RateLimiter({ client });
  const d = await limiter.take(scope, orders);
  console.log(`${name}: ${d.allowed ? 'admitted' : 'limited'}, ${d.remaining} left`);
}

await nodeRedis.close();
await ioredis.quit();
