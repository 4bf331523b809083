import type { IncomingMessage } from 'node:http';
import { Controller, Get, Module, Post } from '@nestjs/common';
import { APP_GUARD, NestFactory } from '@nestjs/core';
import { fixedWindow, RateLimiter } from 'sluice';
import { RateLimit, SkipRateLimit, SluiceGuard, SluiceModule } from 'sluice/nestjs';
import { connectRedis } from 'sluice/node-redis';

const redis = await connectRedis({ url: process.env.REDIS_URL ?? 'redis://127.0.0.1:6379' });
const limiter = new RateLimiter({ client: redis });
const orders = fixedWindow({ name: 'orders', limit: 10, windowMs: 60_000 });

// Stands in for your authentication (a guard or middleware that verifies the session).
const tenants = new Map([
  ['token-of-acme', 'acme'],
  ['token-of-globex', 'globex'],
]);
const verifiedTenantOf = (req: IncomingMessage) =>
  tenants.get(/^Bearer (\S+)$/.exec(req.headers.authorization ?? '')?.[1] ?? '');

@Controller('orders')
class OrdersController {
  // The quota is named by the templates, "POST/orders/:id": every id shares it.
  @Post(':id')
  @RateLimit(orders)
  create() {
    return { created: true };
  }
}

@Controller('healthz')
@SkipRateLimit()
class HealthController {
  @Get()
  check() {
    return 'ok';
  }
}

@Module({
  imports: [SluiceModule.forRoot({ limiter, identify: verifiedTenantOf })],
  controllers: [OrdersController, HealthController],
  // Every route with a @RateLimit() is limited; or put @UseGuards(SluiceGuard) on controllers.
  providers: [{ provide: APP_GUARD, useClass: SluiceGuard }],
})
class AppModule {}

const app = await NestFactory.create(AppModule, { logger: ['error', 'warn'] });
await app.listen(Number(process.env.PORT ?? 3000));
const shutdown = () => void app.close().then(() => redis.close());
process.once('SIGTERM', shutdown).once('SIGINT', shutdown);
