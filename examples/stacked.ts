import { fixedWindow, RateLimiter, tokenBucket } from 'sluice';
import { connectRedis } from 'sluice/node-redis';

const redis = await connectRedis({ url: process.env.REDIS_URL ?? 'redis://127.0.0.1:6379' });
const limiter = new RateLimiter({ client: redis });

// Named policies: the name shows in RateLimit-Policy and outcome events. A policy's
// identity is its algorithm, parameters, version and name: change any and it gets a fresh
// quota of its own, never another policy's state.
const apiCalls = tokenBucket({ name: 'api-calls', capacity: 100, refillIntervalMs: 600 });
const burst = fixedWindow({ name: 'orders-burst', limit: 2, windowMs: 10_000 });
const hourly = fixedWindow({ name: 'orders-per-hour', limit: 3, windowMs: 3_600_000 });

const tenant = 'acme';
const orders = { tenant, route: 'POST/orders', user: 'u-42' }; // one user, one route
const items = [
  { scope: { tenant }, policy: apiCalls }, // tenant-wide: every route, every user
  { scope: orders, policy: burst },
  { scope: orders, policy: hourly },
];

// All or nothing, in one atomic script call: when one limit refuses, none is spent.
async function order(): Promise<string> {
  const result = await limiter.takeAll(items);
  if (result.allowed) return 'admitted';
  const by = items.filter((_, i) => (result.decisions[i]?.retryAfterMs ?? 0) > 0);
  return `limited by ${by.map((item) => item.policy.name).join(', ')}`;
}

console.log(await order()); // admitted
console.log(await order()); // admitted
console.log(await order()); // limited by orders-burst
// What a take would decide now, spending nothing:
console.log(`peek: ${(await limiter.peek(orders, hourly)).allowed}`); // peek: true
// An operator clears one scope's state for one policy (every replica's cache follows):
console.log(`reset: ${await limiter.reset(orders, burst)}`); // reset: true
console.log(await order()); // admitted
console.log(await order()); // limited by orders-per-hour

await redis.close();
