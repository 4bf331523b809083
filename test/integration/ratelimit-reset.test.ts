/**
 * The `t` of the `RateLimit` field on real Redis decisions, through the guard every adapter
 * uses: the seconds until additional quota is made available
 * (draft-ietf-httpapi-ratelimit-headers-10 §4.1.2) — for a token bucket and a GCRA the next
 * unit, not the time until the whole quota is back; for a fixed window its end.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { fixedWindow, gcra, type Policy, RateLimiter, tokenBucket } from 'sluice';
import { createGuard } from 'sluice/http';
import { randomTenant, TEST_TIMEOUT_MS, useRedis } from '../helpers/redis.js';

const redis = useRedis();

/** The `RateLimit` field of each of `n` admitted requests of one tenant. */
async function fields(policy: Policy, n: number): Promise<string[]> {
  const limiter = new RateLimiter({ timeoutMs: TEST_TIMEOUT_MS, client: await redis.client() });
  const tenant = randomTenant();
  const guard = createGuard<object>({
    limiter,
    policy,
    route: 'POST/orders',
    identify: () => tenant,
  });
  const out: string[] = [];
  for (let i = 0; i < n; i++) {
    const verdict = await guard({});
    assert.ok(verdict.pass, `request ${i + 1} admitted`);
    out.push(verdict.headers.ratelimit ?? '');
  }
  return out;
}

describe('RateLimit t: seconds until additional quota is made available', () => {
  it('token bucket: the next token (10 s), not the bucket full again (30 s)', async () => {
    // One token per 10 s: after 3 takes, 7 left and the next token in under 10 s.
    const got = await fields(tokenBucket({ capacity: 10, refillIntervalMs: 10_000 }), 3);
    assert.equal(got[2], '"POST/orders";r=7;t=10');
  });

  it('GCRA: the next unit of the burst (6 s), not the whole burst back (30 s)', async () => {
    // 10 per minute: one unit every 6 s; after 5 takes of a burst of 10, the next in 6 s.
    const got = await fields(gcra({ limit: 10, periodMs: 60_000 }), 5);
    assert.equal(got[4], '"POST/orders";r=5;t=6');
  });

  it('fixed window: every unit comes back at the window’s end', async () => {
    const got = await fields(fixedWindow({ limit: 10, windowMs: 60_000 }), 3);
    assert.match(got[2] ?? '', /^"POST\/orders";r=7;t=(59|60)$/);
  });
});
