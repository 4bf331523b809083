/**
 * `SluiceThrottlerStorage` under `@nestjs/throttler` 6's own `ThrottlerGuard`: two Nest apps
 * (two limiters, two connections) on one private Redis admit exactly the limit between them;
 * the throttler's key reaches Redis only hashed; the record's times are whole seconds; what
 * `blockDuration` does not do; bad arguments are refused before Redis; a failing limiter is a
 * `503`.
 */
import assert from 'node:assert/strict';
import { after, describe, it } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { Controller, HttpException, type INestApplication, Module, Post } from '@nestjs/common';
import { APP_GUARD, NestFactory } from '@nestjs/core';
import { ThrottlerGuard, ThrottlerModule } from '@nestjs/throttler';
import { InvalidInputError, RateLimiter } from 'sluice';
import { SluiceThrottlerStorage } from 'sluice/nestjs';
import { randomTenant, TEST_TIMEOUT_MS, useRedis } from '../helpers/redis.js';

const redis = useRedis();
const apps: INestApplication[] = [];
after(async () => {
  for (const app of apps) await app.close();
});

let handled = 0;

@Controller('orders')
class OrdersController {
  @Post()
  create() {
    handled++;
    return { created: true };
  }
}

/** A Nest app with ThrottlerModule on its own limiter and Redis connection. */
async function start(limit: number, ttl: number): Promise<string> {
  const storage = new SluiceThrottlerStorage(
    new RateLimiter({ client: await redis.client(), namespace: 'throttle', timeoutMs: 5000 }),
  );
  @Module({
    imports: [ThrottlerModule.forRoot({ throttlers: [{ ttl, limit }], storage })],
    controllers: [OrdersController],
    providers: [{ provide: APP_GUARD, useClass: ThrottlerGuard }],
  })
  class AppModule {}
  const app = await NestFactory.create(AppModule, { logger: false });
  apps.push(app);
  await app.listen(0, '127.0.0.1');
  return (await app.getUrl()).replace('[::1]', '127.0.0.1');
}

describe('SluiceThrottlerStorage', () => {
  it('two Nest apps on one Redis: 30 concurrent requests, exactly 10 admitted; the key is hashed', async () => {
    const [a, b] = await Promise.all([start(10, 60_000), start(10, 60_000)]);
    handled = 0;
    const responses = await Promise.all(
      Array.from({ length: 30 }, (_, i) =>
        fetch(`${i % 2 === 0 ? a : b}/orders`, { method: 'POST' }),
      ),
    );
    for (const res of responses) await res.arrayBuffer();
    const statuses = responses.map((r) => r.status);
    assert.equal(statuses.filter((s) => s === 201).length, 10, statuses.join());
    assert.equal(statuses.filter((s) => s === 429).length, 20);
    assert.equal(handled, 10);
    const refused = responses.find((r) => r.status === 429);
    const retryAfter = Number(refused?.headers.get('retry-after'));
    assert.ok(retryAfter >= 59 && retryAfter <= 61, `Retry-After ${retryAfter} (seconds)`);
    const admitted = responses.find((r) => r.status === 201);
    assert.equal(admitted?.headers.get('x-ratelimit-limit'), '10');
    const reset = Number(admitted?.headers.get('x-ratelimit-reset'));
    assert.ok(reset >= 59 && reset <= 60, `X-RateLimit-Reset ${reset} (seconds)`);
    // One counter in Redis, under sluice's key scheme: the throttler's key is not in it.
    const admin = await redis.admin();
    const keys = await admin.client.keys('throttle:*');
    assert.equal(keys.length, 1, keys.join());
    assert.match(keys[0] ?? '', /^throttle:\{[0-9a-f]+\}/);
    assert.equal(await admin.client.get(keys[0] as string), '10');
  });

  it('a fixed window of ttl: refused until it ends, whatever blockDuration is; a refusal is not counted', async () => {
    const client = await redis.client();
    const storage = new SluiceThrottlerStorage(new RateLimiter({ client, timeoutMs: 5000 }));
    const key = randomTenant();
    const first = await storage.increment(key, 1000, 2, 60_000, 'default');
    assert.deepEqual(first, {
      totalHits: 1,
      timeToExpire: 1,
      isBlocked: false,
      timeToBlockExpire: 0,
    });
    assert.equal((await storage.increment(key, 1000, 2, 60_000, 'default')).totalHits, 2);
    const refused = await storage.increment(key, 1000, 2, 60_000, 'default');
    assert.deepEqual(refused, {
      totalHits: 3,
      timeToExpire: 1,
      isBlocked: true,
      timeToBlockExpire: 1,
    });
    // Another throttler name is another quota.
    assert.equal((await storage.increment(key, 1000, 2, 60_000, 'burst')).isBlocked, false);
    // The in-memory storage would block for blockDuration (60 s); sluice's window ends.
    await sleep(1100);
    const again = await storage.increment(key, 1000, 2, 60_000, 'default');
    assert.deepEqual(again, {
      totalHits: 1,
      timeToExpire: 1,
      isBlocked: false,
      timeToBlockExpire: 0,
    });
  });

  it('bad arguments: an InvalidInputError naming the field, and nothing written to Redis', async () => {
    const admin = await redis.admin();
    const storage = new SluiceThrottlerStorage(
      new RateLimiter({ client: await redis.client(), timeoutMs: 5000 }),
    );
    const before = await admin.client.dbSize();
    const cases: [unknown[], string][] = [
      [['', 1000, 1, 0, 'default'], 'key'],
      [['k', 0, 1, 0, 'default'], 'ttl'],
      [['k', 1.5, 1, 0, 'default'], 'ttl'],
      [['k', 1000, 0, 0, 'default'], 'limit'],
      [['k', 1000, Number.NaN, 0, 'default'], 'limit'],
      [['k', 1000, 1, -1, 'default'], 'blockDuration'],
      [['k', 1000, 1, 0, ''], 'throttlerName'],
      // Past what a scope part may hold: still the throttler's arguments, not the scope's.
      [['k'.repeat(70_000), 1000, 1, 0, 'default'], 'key'],
      [['k', 1000, 1, 0, 'n'.repeat(70_000)], 'throttlerName'],
    ];
    for (const [args, field] of cases) {
      await assert.rejects(
        (storage.increment as (...a: unknown[]) => Promise<unknown>)(...args),
        (error: unknown) => error instanceof InvalidInputError && error.field === field,
        field,
      );
    }
    assert.throws(() => new SluiceThrottlerStorage(undefined as never), InvalidInputError);
    assert.equal(await admin.client.dbSize(), before);
  });

  it('a failing limiter rejects with a 503 HttpException and the problem body, never a fake 429', async () => {
    const client = await redis.client();
    client.destroy();
    const storage = new SluiceThrottlerStorage(
      new RateLimiter({ timeoutMs: TEST_TIMEOUT_MS, client }),
    );
    await assert.rejects(
      storage.increment(randomTenant(), 1000, 1, 0, 'default'),
      (error: unknown) => {
        assert.ok(error instanceof HttpException);
        assert.equal(error.getStatus(), 503);
        assert.equal((error.getResponse() as { error: string }).error, 'rate_limiter_unavailable');
        return true;
      },
    );
  });
});
