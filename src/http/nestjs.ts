/**
 * `sluice/nestjs`: NestJS integration, two ways.
 *
 * - **sluice's guard**: `SluiceModule.forRoot({ limiter, identify })` (or `forRootAsync`),
 *   `@RateLimit(policy)` on a controller or a handler (the handler's wins), `@SkipRateLimit()`,
 *   and `SluiceGuard` applied with `@UseGuards(SluiceGuard)` or as an `APP_GUARD`. It answers
 *   like every adapter — `429` + `Retry-After` + RateLimit headers + an RFC 9457 body, `503`
 *   fail-closed, fail-open within a local limit, `401` without an identity — and names each
 *   quota by the route's templates (`NestRouteNamer`), never the URL.
 * - **`SluiceThrottlerStorage`**, for apps that keep `@nestjs/throttler`'s `ThrottlerGuard`
 *   and `@Throttle()`: `ThrottlerModule.forRoot({ throttlers, storage: new
 *   SluiceThrottlerStorage(limiter) })` counts in Redis, exactly across processes.
 *
 * Needs `@nestjs/common` and `@nestjs/core` (optional peer dependencies), which load
 * `reflect-metadata` themselves. Written without decorator syntax and without
 * `emitDecoratorMetadata`: every injection names its token.
 *
 * @packageDocumentation
 */
export {
  RATE_LIMIT_METADATA,
  RateLimit,
  RateLimitException,
  type RateLimitSetting,
  SKIP_RATE_LIMIT_METADATA,
  SkipRateLimit,
  SLUICE_OPTIONS,
  SluiceGuard,
  SluiceModule,
  type SluiceModuleAsyncOptions,
  type SluiceModuleOptions,
} from './nestjs-guard.js';
export { NestRouteNamer } from './nestjs-route.js';
export {
  SluiceThrottlerStorage,
  type ThrottlerStorageRecord,
} from './nestjs-throttler.js';
