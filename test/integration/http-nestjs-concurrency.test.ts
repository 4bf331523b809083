/**
 * A concurrency limit on a NestJS route (Express platform, loopback, real Redis): a request
 * holds a lease while its handler runs and frees it when its response finishes; over the
 * limit, `429` with the `qu="concurrent-requests"` quota.
 */
import assert from 'node:assert/strict';
import type { IncomingMessage } from 'node:http';
import { after, describe, it } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { Controller, type INestApplication, Module, Post } from '@nestjs/common';
import { APP_GUARD, NestFactory } from '@nestjs/core';
import { concurrency, RateLimiter } from 'sluice';
import { RateLimit, SluiceGuard, SluiceModule } from 'sluice/nestjs';
import { randomTenant, useRedis } from '../helpers/redis.js';

const redis = useRedis();
const apps: INestApplication[] = [];
after(async () => {
  for (const app of apps) await app.close();
});

const running = concurrency({ name: 'exports', limit: 1, leaseMs: 60_000 });
let entered = 0;

@Controller('exports')
class ExportsController {
  @Post()
  @RateLimit(running)
  async create() {
    entered++;
    await sleep(200);
    return { exported: true };
  }
}

describe('a concurrency limit on a NestJS route', () => {
  it('holds a lease per request and frees it when the response finishes; 429 over the limit', async () => {
    const limiter = new RateLimiter({ client: await redis.client(), timeoutMs: 2000 });
    @Module({
      imports: [
        SluiceModule.forRoot<IncomingMessage>({
          limiter,
          identify: (req) => req.headers['x-tenant'] as string | undefined,
        }),
      ],
      controllers: [ExportsController],
      providers: [{ provide: APP_GUARD, useClass: SluiceGuard }],
    })
    class AppModule {}
    const app = await NestFactory.create(AppModule, { logger: false });
    apps.push(app);
    await app.listen(0, '127.0.0.1');
    const base = (await app.getUrl()).replace('[::1]', '127.0.0.1');
    const tenant = randomTenant();
    const post = () =>
      fetch(`${base}/exports`, { method: 'POST', headers: { 'x-tenant': tenant } });
    const first = post();
    while (entered === 0) await sleep(5);
    const refused = await post();
    assert.equal(refused.status, 429);
    assert.match(
      refused.headers.get('ratelimit-policy') ?? '',
      /"exports";q=1;qu="concurrent-requests"/,
    );
    const scope = { tenant, route: 'POST/exports' };
    assert.equal((await limiter.peek(scope, running)).remaining, 0, 'the lease is on this scope');
    assert.equal((await first).status, 201);
    // The release, sent when the response finished.
    const deadline = performance.now() + 2000;
    while ((await limiter.peek(scope, running)).remaining !== 1) {
      assert.ok(performance.now() < deadline, 'the slot was not freed within 2 s');
      await sleep(5);
    }
    assert.equal((await post()).status, 201, 'the slot was freed');
  });
});
