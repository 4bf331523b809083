import { createSentinel } from 'redis';
import { fixedWindow, RateLimiter } from 'sluice';

// The sentinels to ask, and the name of the primary they monitor.
const sentinels = (process.env.REDIS_SENTINELS ?? '127.0.0.1:26379').split(',');
const name = process.env.REDIS_SENTINEL_NAME ?? 'mymaster';

const client = createSentinel({
  name,
  sentinelRootNodes: sentinels.map((address) => {
    const { hostname, port } = new URL(`redis://${address}`);
    return { host: hostname, port: Number(port) };
  }),
  nodeClientOptions: { disableOfflineQueue: true },
  // Never send a command again to the next primary: one the dead primary ran would count twice.
  maxCommandRediscovers: 0,
});
client.on('error', (error) => console.error(`sentinel: ${error.message}`));
await client.connect();

// Decisions run on the primary the sentinels name, and follow it through a failover.
const limiter = new RateLimiter({ client });
const orders = fixedWindow({ name: 'orders', limit: 10, windowMs: 60_000 });
const d = await limiter.take({ tenant: 'acme', route: 'POST/orders' }, orders);
console.log(`sentinel: ${d.allowed ? 'admitted' : 'limited'}, ${d.remaining} left`);

await client.close();
