/**
 * The guard's `settle` option on a sliding window log above `MAX_PRICED_LOG_LIMIT` (500):
 * every adapter (node:http, Express, Koa, Fastify, Fetch, NestJS: also a handler's
 * `@RateLimit()` under the module's `settle`, at the app's start) and `createGuard` refuse it
 * when the guard is made — an `InvalidInputError` naming the policy's `limit` and the bound —
 * never on its first request; nothing is sent to Redis. A log at the bound, or a larger one
 * without `settle`, is built as before.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { Controller, Module, Post } from '@nestjs/common';
import { APP_GUARD, NestFactory } from '@nestjs/core';
import Fastify from 'fastify';
import {
  fixedWindow,
  InvalidInputError,
  MAX_PRICED_LOG_LIMIT,
  RateLimiter,
  slidingWindowLog,
} from 'sluice';
import { expressRateLimit } from 'sluice/express';
import { fastifyRateLimit } from 'sluice/fastify';
import { fetchRateLimit } from 'sluice/fetch';
import { createGuard } from 'sluice/http';
import { koaRateLimit } from 'sluice/koa';
import { RateLimit, SkipRateLimit, SluiceGuard, SluiceModule } from 'sluice/nestjs';
import { nodeRateLimit } from 'sluice/node';
import { commandCalls, useRedis } from '../helpers/redis.js';

const redis = useRedis();
const big = slidingWindowLog({ limit: MAX_PRICED_LOG_LIMIT + 1, windowMs: 60_000 });
const atBound = slidingWindowLog({ limit: MAX_PRICED_LOG_LIMIT, windowMs: 60_000 });
const other = fixedWindow({ limit: 10, windowMs: 60_000, name: 'other' });
const settle = () => 1;
const identify = () => 'acme';

/** The error of `fn`, which must be an `InvalidInputError` naming the bound. */
async function refusal(fn: () => unknown): Promise<InvalidInputError> {
  try {
    await fn();
  } catch (error) {
    assert.ok(error instanceof InvalidInputError, String(error));
    assert.match(error.expected, new RegExp(`at most ${MAX_PRICED_LOG_LIMIT}\\b`));
    assert.match(error.expected, /settle/);
    assert.equal(error.received, `number ${MAX_PRICED_LOG_LIMIT + 1}`);
    return error;
  }
  assert.fail('the guard was built');
}

describe('guard option settle: a sliding window log above MAX_PRICED_LOG_LIMIT', () => {
  it('every adapter refuses it when the guard is made; nothing is sent to Redis', async () => {
    const limiter = new RateLimiter({ client: await redis.client(), timeoutMs: 5000 });
    const admin = await redis.admin();
    const sent = async () =>
      (await commandCalls(admin, 'evalsha')) + (await commandCalls(admin, 'eval'));
    const before = await sent();
    const route = 'POST/login';
    const options = { limiter, route, identify, settle };
    const builders: [string, () => unknown][] = [
      ['createGuard', () => createGuard({ ...options, policy: big })],
      ['node:http', () => nodeRateLimit({ ...options, policy: big })],
      ['express', () => expressRateLimit({ ...options, policy: big })],
      ['koa', () => koaRateLimit({ ...options, policy: big })],
      ['fetch', () => fetchRateLimit({ ...options, policy: big })],
      [
        'fastify',
        async () => {
          const app = Fastify();
          try {
            await app.register(fastifyRateLimit, { limiter, identify, settle });
            app.post('/login', { config: { rateLimit: { policy: big } } }, async () => '');
            await app.ready();
          } finally {
            await app.close().catch(() => undefined);
          }
        },
      ],
      ['nestjs module', () => SluiceModule.forRoot({ limiter, identify, settle, policy: big })],
      ['nestjs @RateLimit', () => RateLimit({ policy: big, settle } as never)],
    ];
    for (const [name, build] of builders) {
      const error = await refusal(build);
      assert.equal(error.field, 'policy.limit', name);
    }
    assert.equal(await sent(), before, 'nothing was sent');
  });

  it("nestjs: the module's settle and a handler's @RateLimit fail the app's start, not a request", async () => {
    const limiter = new RateLimiter({ client: await redis.client(), timeoutMs: 5000 });
    const admin = await redis.admin();
    const sent = async () =>
      (await commandCalls(admin, 'evalsha')) + (await commandCalls(admin, 'eval'));
    const before = await sent();
    const create = async (policy: typeof big, skip: boolean) => {
      @Controller('auth')
      class AuthController {
        @Post('login')
        @RateLimit(policy)
        @SkipRateLimit(skip)
        login() {
          return 'ok';
        }
      }
      @Module({
        imports: [SluiceModule.forRoot({ limiter, identify, settle })],
        controllers: [AuthController],
        providers: [{ provide: APP_GUARD, useClass: SluiceGuard }],
      })
      class AppModule {}
      const app = await NestFactory.create(AppModule, { logger: false, abortOnError: false });
      await app.close();
    };
    const error = await refusal(() => create(big, false));
    assert.equal(error.field, 'policy.limit');
    assert.equal(await sent(), before, 'nothing was sent');
    await create(atBound, false);
    await create(big, true); // a skipped handler is never limited
  });

  it('in a list: policy[i].limit, or policy[i].policy.limit for { policy, per }', async () => {
    const limiter = new RateLimiter({ client: await redis.client(), timeoutMs: 5000 });
    const options = { limiter, route: 'POST/login', identify, settle };
    let error = await refusal(() => createGuard({ ...options, policy: [other, big] }));
    assert.equal(error.field, 'policy[1].limit');
    error = await refusal(() =>
      createGuard({
        ...options,
        user: () => 'u',
        policy: [{ policy: big, per: 'user' }, other],
      }),
    );
    assert.equal(error.field, 'policy[0].policy.limit');
    error = await refusal(() =>
      createGuard({ ...options, policy: { policy: big, per: 'tenant' } }),
    );
    assert.equal(error.field, 'policy.policy.limit');
  });

  it('at the bound, or without settle, the guard is built as before', async () => {
    const limiter = new RateLimiter({ client: await redis.client(), timeoutMs: 5000 });
    const options = { limiter, route: 'POST/login', identify };
    createGuard({ ...options, settle, policy: atBound });
    createGuard({ ...options, settle, policy: [other, atBound] });
    createGuard({ ...options, policy: big });
    nodeRateLimit({ ...options, policy: [other, big] });
    // A policy function's answer is known only per request: checked then, by the limiter.
    createGuard({ ...options, settle, policy: () => big });
  });
});
