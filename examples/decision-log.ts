import pino from 'pino';
import { fixedWindow, isSluiceError, RateLimiter } from 'sluice';
import type { DecisionEvent } from 'sluice/metrics';
import { connectRedis } from 'sluice/node-redis';

const logger = pino({ base: undefined }); // JSON lines on stdout; no pid/hostname here

// One line per decided policy (a takeAll of 3 gives 3). No tenant: events carry it only with
// `eventTenant: true` — tenant ids are often personal data, log them only where allowed.
function logDecision(event: DecisionEvent): void {
  const line = {
    requestId: event.requestId,
    outcome: event.outcome, // allowed, limited, not_charged, invalid, timeout, unavailable, overload, store_error, config_error
    policy: event.policy,
    route: event.route,
    latencyMs: Number(event.latencyMs.toFixed(3)), // 0 when answered without Redis
    cached: event.cached, // a denial answered by the local denial cache
  };
  if (event.error === undefined) logger.info(line, 'rate limit decision');
  else {
    const code = isSluiceError(event.error) ? event.error.code : undefined; // SLUICE_TIMEOUT…
    logger.warn({ ...line, code }, 'rate limiter failed');
  }
}

const redis = await connectRedis({ url: process.env.REDIS_URL ?? 'redis://127.0.0.1:6379' });
const limiter = new RateLimiter({ client: redis, onDecision: logDecision });
const orders = fixedWindow({ name: 'orders', limit: 2, windowMs: 60_000 });

// The request id comes from your server (e.g. an X-Request-Id your edge sets).
for (const requestId of ['req-1', 'req-2', 'req-3']) {
  await limiter.take({ tenant: 'acme', route: 'POST/orders' }, orders, { requestId });
}
// A bad input (an empty tenant) is a failure: logged as a warning with its code.
await limiter.take({ tenant: '', route: 'POST/orders' }, orders).catch(() => {});

await redis.close();
