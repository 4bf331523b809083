/**
 * An acquisition whose caller got a `TimeoutError` (Redis busy: `DEBUG SLEEP` longer than
 * the deadline) but which Redis admitted later holds no slot: the late admission is released
 * at once — for `acquire`, `wait`, `schedule` and `takeAll` (the HTTP guard's call). Before,
 * each such call left a member under an id nobody knew, holding a slot for `leaseMs`.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { concurrency, RateLimiter, TimeoutError, tokenBucket } from 'sluice';
import { keyFor, randomTenant, useRedis } from '../helpers/redis.js';

const redis = useRedis(['--enable-debug-command', 'yes']);

describe('a late admission of a timed-out acquisition', () => {
  it('is released at once: acquire, wait, schedule, takeAll', async () => {
    const limiter = new RateLimiter({ client: await redis.client(), timeoutMs: 100 });
    const admin = await redis.admin();
    const policy = concurrency({ limit: 1, leaseMs: 60_000 });
    const rate = tokenBucket({ capacity: 100, refillTokens: 1, refillIntervalMs: 1000 });
    const attempts: Record<string, (scope: { tenant: string }) => Promise<unknown>> = {
      acquire: (scope) => limiter.acquire(scope, policy),
      wait: (scope) => limiter.wait(scope, policy, { maxWaitMs: 1000 }),
      schedule: (scope) => limiter.schedule(scope, policy, () => 1, { maxWaitMs: 1000 }),
      takeAll: (scope) =>
        limiter.takeAll([
          { scope, policy: rate },
          { scope, policy },
        ]),
    };
    for (const [name, attempt] of Object.entries(attempts)) {
      const scope = { tenant: randomTenant() };
      const sleeping = admin.client.sendCommand(['DEBUG', 'SLEEP', '0.4']);
      await sleep(20);
      await assert.rejects(attempt(scope), TimeoutError, name);
      await sleeping;
      await sleep(100); // the late admission, then its release
      const key = keyFor(policy, scope.tenant);
      assert.equal(await admin.client.zCard(key), 0, `${name}: no slot held by nobody`);
      const lease = await limiter.acquire(scope, policy);
      assert.equal(lease.allowed, true, `${name}: the slot is free`);
      await lease.release();
    }
  });
});
