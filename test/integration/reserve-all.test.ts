/**
 * reserveAll on a real Redis: several reservations all or nothing in one script call (a
 * refused call consumes nothing anywhere), replayed with its id, each item settled alone;
 * and the guard's `settle` option on stacked limits, which reserves through it: a request
 * refused by one limit never takes the unit of another that a concurrent request needed.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { fixedWindow, InvalidInputError, RateLimiter, slidingWindowLog, tokenBucket } from 'sluice';
import { fetchRateLimit } from 'sluice/fetch';
import { randomTenant, useRedis } from '../helpers/redis.js';

const redis = useRedis();
const route = 'POST/complete';

async function limiter(): Promise<RateLimiter> {
  // A deadline far above a loaded machine's latency: what is reserved is under test, not time.
  return new RateLimiter({ client: await redis.client(), timeoutMs: 2000 });
}

describe('reserveAll: all or nothing', () => {
  const window = fixedWindow({ limit: 3, windowMs: 60_000, name: 'ra-window' });
  const bucket = tokenBucket({ capacity: 5, refillIntervalMs: 3_600_000, name: 'ra-bucket' });

  it('a refused call consumes nothing on any item; an admitted one reserves every item, each settled alone', async () => {
    const l = await limiter();
    const tenant = randomTenant();
    const a = { tenant, route };
    const b = { tenant, route, user: 'u' };
    const refused = await l.reserveAll([
      { scope: a, policy: window, cost: 2 },
      { scope: b, policy: bucket, cost: 6 },
    ]);
    assert.equal(refused.allowed, false);
    assert.equal(refused.reservations[0]?.retryAfterMs, 0, 'the item that fitted');
    assert.ok(refused.retryAfterMs > 0);
    assert.equal((await l.peek(a, window)).remaining, 3, 'nothing taken on the window');
    assert.equal((await l.peek(b, bucket)).remaining, 5, 'nothing taken on the bucket');
    assert.equal((await refused.reservations[0]?.cancel())?.applied, 0);

    const admitted = await l.reserveAll(
      [
        { scope: a, policy: window, cost: 2 },
        { scope: b, policy: bucket, cost: 4 },
      ],
      { id: 'call-1' },
    );
    assert.equal(admitted.allowed, true);
    assert.deepEqual(
      admitted.reservations.map((r) => [r.allowed, r.remaining, r.id]),
      [
        [true, 1, 'call-1'],
        [true, 1, 'call-1'],
      ],
    );
    // A repeat with the id replays, taking nothing.
    const again = await l.reserveAll(
      [
        { scope: a, policy: window, cost: 2 },
        { scope: b, policy: bucket, cost: 4 },
      ],
      { id: 'call-1' },
    );
    assert.equal(again.replayed, true);
    assert.equal(again.allowed, true);
    assert.equal((await l.peek(a, window)).remaining, 1);
    // Each item settles alone: from the object, or by id from another limiter.
    assert.equal((await admitted.reservations[0]?.settle(1))?.applied, -1);
    const other = await limiter();
    assert.equal((await other.settle(b, bucket, 'call-1', 1)).applied, -3);
    assert.equal((await other.settle(b, bucket, 'call-1', 0)).replayed, true);
    assert.equal((await l.peek(a, window)).remaining, 2);
    assert.equal((await l.peek(b, bucket)).remaining, 4);
  });

  it('a sliding window log item: reserved all or nothing with the others, settled alone', async () => {
    const l = await limiter();
    const tenant = randomTenant();
    const log = slidingWindowLog({ limit: 4, windowMs: 60_000, name: 'ra-log-item' });
    const a = { tenant, route };
    const b = { tenant, route, user: 'u' };
    const refused = await l.reserveAll([
      { scope: a, policy: log, cost: 3 },
      { scope: b, policy: window, cost: 4 },
    ]);
    assert.equal(refused.allowed, false);
    assert.equal((await l.peek(a, log)).remaining, 4, 'nothing taken on the log');
    const admitted = await l.reserveAll(
      [
        { scope: a, policy: log, cost: 3 },
        { scope: b, policy: window, cost: 2 },
      ],
      { id: 'log-call' },
    );
    assert.deepEqual(
      admitted.reservations.map((r) => [r.allowed, r.remaining]),
      [
        [true, 1],
        [true, 1],
      ],
    );
    await l.take(a, log);
    assert.equal((await l.settle(a, log, 'log-call', 1)).applied, -2);
    assert.equal((await l.peek(a, log)).remaining, 2);
    assert.equal((await admitted.reservations[0]?.cancel())?.replayed, true);
  });

  it('concurrent calls on two shared limits never admit more than either allows, and a refused call holds nothing', async () => {
    const l = await limiter();
    const tenant = randomTenant();
    const shared = fixedWindow({ limit: 5, windowMs: 60_000, name: 'ra-shared' });
    const perUser = fixedWindow({ limit: 2, windowMs: 60_000, name: 'ra-user' });
    const calls = Array.from({ length: 30 }, (_, i) =>
      l.reserveAll([
        { scope: { tenant, route, user: `u${i % 4}` }, policy: perUser },
        { scope: { tenant, route }, policy: shared },
      ]),
    );
    const results = await Promise.all(calls);
    const admitted = results.filter((r) => r.allowed).length;
    assert.equal(admitted, 5, 'exactly the shared limit: no refused call held a unit');
    assert.equal((await l.peek({ tenant, route }, shared)).remaining, 0);
  });

  it('names the field; nothing is sent for bad input', async () => {
    const l = await limiter();
    const scope = { tenant: randomTenant(), route };
    const log = slidingWindowLog({ limit: 10_000, windowMs: 1000, name: 'ra-log' });
    await assert.rejects(
      l.reserveAll([
        { scope, policy: window },
        { scope: { ...scope, user: 'x' }, policy: log },
      ]),
      (error: unknown) =>
        error instanceof InvalidInputError && error.field === 'items[1].policy.limit',
    );
    await assert.rejects(
      l.reserveAll([{ scope, policy: window }], { id: '' }),
      (error: unknown) => error instanceof InvalidInputError && error.field === 'options.id',
    );
    await assert.rejects(l.reserveAll([]), InvalidInputError);
  });
});

describe('the guard settle option on stacked limits reserves all or nothing', () => {
  it('a request refused per user takes no unit of the tenant limit that a concurrent request needs', async () => {
    const l = await limiter();
    const perUser = fixedWindow({ limit: 1, windowMs: 60_000, name: 'ra-login-user' });
    const perTenant = fixedWindow({ limit: 2, windowMs: 60_000, name: 'ra-login-tenant' });
    const limit = fetchRateLimit({
      limiter: l,
      policy: [
        { policy: perUser, per: 'user' },
        { policy: perTenant, per: 'tenant' },
      ],
      route: 'POST/login',
      identify: (request) => request.headers.get('x-tenant') ?? undefined,
      user: (request) => request.headers.get('x-user') ?? undefined,
      settle: (_req, res) => (res.statusCode < 400 ? 0 : 1),
    });
    const tenant = randomTenant();
    const login = (user: string) =>
      new Request('http://x/login', {
        method: 'POST',
        headers: { 'x-tenant': tenant, 'x-user': user },
      });
    // u1 fails once: its user limit is spent, the tenant has one attempt left.
    const first = await limit.check(login('u1'));
    assert.equal(first.pass, true);
    if (first.pass) await first.settle?.(new Response('', { status: 401 }));
    // u1 again (refused per user) and u2 at once: u2 must get the tenant's last attempt.
    const [again, other] = await Promise.all([limit.check(login('u1')), limit.check(login('u2'))]);
    assert.equal(again.pass, false, 'u1 is refused per user');
    assert.equal(
      other.pass,
      true,
      `u2 is admitted: the refused u1 held no tenant unit (${JSON.stringify(other)})`,
    );
  });
});
