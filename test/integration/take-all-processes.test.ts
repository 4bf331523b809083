/**
 * Stacked limits across replicas: 3 processes × 40 callers released together, each call a
 * `takeAll` of a tenant-wide limit and a per-user limit (5 users). Whichever limit binds,
 * the admitted total is exactly that limit, no user passes its own limit, and each user's
 * remaining matches what was admitted — a refused `takeAll` consumed nothing anywhere.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { RateLimiter } from 'sluice';
import { POLICY_OF } from '../fixtures/take-all-taker.js';
import { randomTenant, TEST_TIMEOUT_MS, useRedis } from '../helpers/redis.js';
import { useTakers } from '../helpers/takers.js';

const redis = useRedis();
const takers = useTakers(new URL('../fixtures/take-all-taker.ts', import.meta.url), 3, redis);
const USERS = ['u0', 'u1', 'u2', 'u3', 'u4'];

/** One race: the users admitted, over every process. */
async function race(tenant: string, algorithm: string, tenantLimit: number, userLimit: number) {
  const line = `${tenant} ${algorithm} ${tenantLimit} ${userLimit}`;
  return (await takers.race<string[]>(line, tenant)).flat();
}

describe('takeAll across 3 processes: tenant-wide + per-user limits', () => {
  for (const algorithm of Object.keys(POLICY_OF)) {
    it(`${algorithm}: exactly the binding limit is admitted, and a refused takeAll consumes nothing`, async () => {
      const of = POLICY_OF[algorithm] as (typeof POLICY_OF)[string];
      const limiter = new RateLimiter({
        timeoutMs: TEST_TIMEOUT_MS,
        client: await redis.client(),
        denialCache: false,
      });
      for (const [tenantLimit, userLimit, binding] of [
        [20, 6, 20], // the tenant-wide limit binds (5 users × 6 > 20)
        [100, 4, 20], // the per-user limits bind (5 × 4 < 100)
      ] as const) {
        const tenant = randomTenant();
        const admitted = await race(tenant, algorithm, tenantLimit, userLimit);
        const context = `${tenantLimit}/${userLimit}`;
        assert.equal(admitted.length, binding, context);
        const tenantWide = of(tenantLimit, 'tenant-wide');
        const perUser = of(userLimit, 'per-user');
        const whole = await limiter.peek({ tenant }, tenantWide);
        assert.equal(whole.remaining, tenantLimit - binding, context);
        for (const user of USERS) {
          const count = admitted.filter((u) => u === user).length;
          assert.ok(count <= userLimit, `${context}: ${user} admitted ${count}`);
          const mine = await limiter.peek({ tenant, route: 'POST/orders', user }, perUser);
          // A peek reports the units left now.
          assert.equal(mine.remaining, userLimit - count, `${context}: ${user}`);
        }
      }
    });
  }
});
