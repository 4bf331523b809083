import { concurrency, RateLimiter, tokenBucket } from 'sluice';
import { connectRedis } from 'sluice/node-redis';

const redis = await connectRedis({ url: process.env.REDIS_URL ?? 'redis://127.0.0.1:6379' });
const limiter = new RateLimiter({ client: redis });
// At most 2 transcodes at once per tenant; a lease not renewed within 10 s frees its slot.
const transcodes = concurrency({ name: 'transcodes', limit: 2, leaseMs: 10_000 });
const scope = { tenant: 'acme', route: 'POST/transcodes' };

const a = await limiter.acquire(scope, transcodes);
await limiter.acquire(scope, transcodes, { id: 'job-42' }); // an id of your own
const c = await limiter.acquire(scope, transcodes);
console.log(
  `acquired: ${a.allowed}, ${c.allowed} (a slot expires in ${c.retryAfterMs} ms at most)`,
);
console.log(`released: ${await a.release()}, again: ${await a.release()}`); // applied once
// Any process can end or extend a lease by its id:
console.log(`renewed: ${(await limiter.renew(scope, transcodes, 'job-42')).allowed}`);

// Both slots held: wait for one instead of being refused. A release wakes the waiter at once.
const e = await limiter.acquire(scope, transcodes);
setTimeout(() => void e.release(), 100);
const waited = await limiter.wait(scope, transcodes, { maxWaitMs: 5000 });
console.log(`waited: ${waited.allowed}`);

// schedule: run a function holding a lease (renewed while it runs, released when it ends).
const transcode = async () => 'transcoded';
const full = await limiter.schedule(scope, transcodes, transcode, { maxWaitMs: 50 });
console.log(`scheduled: ${full.admitted}`); // both slots held: refused after 50 ms
await waited.release();
const ran = await limiter.schedule(scope, transcodes, transcode, { maxWaitMs: 50 });
console.log(`scheduled: ${ran.admitted && ran.value}`);

// Stacked with a rate limit: a lease and a token, all or nothing.
const perHour = tokenBucket({ name: 'per-hour', capacity: 100, refillIntervalMs: 36_000 });
const stacked = await limiter.takeAll([
  { scope: { tenant: 'acme' }, policy: perHour },
  { scope, policy: transcodes },
]);
console.log(`stacked: ${stacked.allowed}, ${stacked.leases?.length} lease`);
for (const lease of stacked.leases ?? []) await lease.release();
await limiter.release(scope, transcodes, 'job-42');

await redis.close();
