import { RateLimiter } from 'sluice';
import { connectRedis, type RedisConnection } from 'sluice/node-redis';

// One Redis connection per server process. `next dev` evaluates this module again on every
// hot reload, and the proxy and the routes are bundled apart: a module variable would open a
// new connection each time. globalThis outlives all of them.
const slot = globalThis as typeof globalThis & { sluiceRedis?: Promise<RedisConnection> };
slot.sluiceRedis ??= connectRedis({
  url: process.env.REDIS_URL ?? 'redis://127.0.0.1:6379',
}).catch((error: unknown) => {
  slot.sluiceRedis = undefined; // unreachable at start: the next load tries again
  throw error;
});
export const redis = await slot.sluiceRedis;

// A limiter per evaluation, on the shared connection: each bundle has its own copy of
// sluice, and a limiter takes only the policies of its own copy (fixedWindow() below it).
export const limiter = new RateLimiter({ client: redis });

// Stands in for your authentication (e.g. the session your auth library verified).
const tenants = new Map([
  ['token-of-acme', 'acme'],
  ['token-of-globex', 'globex'],
]);
export const verifiedTenantOf = (request: Request) =>
  tenants.get(/^Bearer (\S+)$/.exec(request.headers.get('authorization') ?? '')?.[1] ?? '');
