/**
 * `sluice/nestjs`'s guard on real NestJS 12 apps (Express platform, listening on loopback),
 * against a real Redis: the quota is named by the route's templates (module path, controller
 * path, handler path, method, version), never the URL; a handler's `@RateLimit()` replaces its
 * controller's; refusals keep their status, headers and RFC 9457 body through Nest's exception
 * filter; 401, 503 fail-closed, fail-open, plans and stacked limits; bad options and
 * settings are refused with an `InvalidInputError` naming the field.
 */
import assert from 'node:assert/strict';
import type { IncomingMessage } from 'node:http';
import { after, describe, it } from 'node:test';
import {
  All,
  Controller,
  Get,
  type INestApplication,
  Module,
  Post,
  UseGuards,
  Version,
  VersioningType,
} from '@nestjs/common';
import { APP_GUARD, NestFactory, RouterModule } from '@nestjs/core';
import { fixedWindow, InvalidInputError, type Policy, RateLimiter } from 'sluice';
import type { HttpOutcomeEvent } from 'sluice/http';
import {
  RateLimit,
  SkipRateLimit,
  SluiceGuard,
  SluiceModule,
  type SluiceModuleOptions,
} from 'sluice/nestjs';
import { issueToken, verifiedTenant } from '../../src/demo/identity.js';
import { keyFor, randomTenant, TEST_TIMEOUT_MS, useRedis } from '../helpers/redis.js';

const redis = useRedis();
const secret = 'nest-secret';
const apps: INestApplication[] = [];
after(async () => {
  for (const app of apps) await app.close();
});

const orders = fixedWindow({ name: 'orders', limit: 2, windowMs: 60_000 });
const wide = fixedWindow({ name: 'wide', limit: 5, windowMs: 60_000 });
const one = fixedWindow({ name: 'one', limit: 1, windowMs: 60_000 });

let handled = 0;

@Controller('orders')
@RateLimit(wide)
class OrdersController {
  @Post(':id')
  @RateLimit(orders)
  create() {
    handled++;
    return { created: true };
  }

  @Get()
  list() {
    handled++;
    return { orders: [] };
  }

  @Get('health')
  @SkipRateLimit()
  health() {
    return 'ok';
  }

  @All('any')
  @RateLimit(one)
  any() {
    return 'any';
  }
}

@Controller({ path: '/reports/' })
class ReportsController {
  @Post('/:kind/')
  @Version('1')
  @RateLimit({ policy: one })
  v1() {
    return 'v1';
  }

  @Post(':kind')
  @Version('2')
  @RateLimit({ policy: one })
  v2() {
    return 'v2';
  }
}

/** Two controllers whose settings name one quota: the explicit `route` wins. */
@Controller('a')
class AController {
  @Post()
  @RateLimit({ policy: orders, route: 'POST/shared' })
  post() {
    return 'a';
  }
}
@Controller('b')
class BController {
  @Post()
  @RateLimit({ policy: orders, route: 'POST/shared' })
  post() {
    return 'b';
  }
}

/** Not limited by any decorator: only the module's default policy, under the APP_GUARD. */
@Controller('plain')
class PlainController {
  @Get()
  get() {
    return 'plain';
  }
}

@Controller('admin-orders')
@UseGuards(SluiceGuard)
class AdminController {
  @Post()
  @RateLimit(one)
  post() {
    return 'admin';
  }
}
@Module({ controllers: [AdminController] })
class AdminModule {}

type Options = SluiceModuleOptions<IncomingMessage>;

/** A Nest app on loopback with SluiceModule.forRoot(options) and SluiceGuard as APP_GUARD. */
async function start(options: Partial<Options> & { limiter: RateLimiter }) {
  const events: HttpOutcomeEvent[] = [];
  @Module({
    imports: [
      SluiceModule.forRoot<IncomingMessage>({
        identify: (req) => verifiedTenant(secret, req),
        onOutcome: (event) => events.push(event),
        ...options,
      }),
      AdminModule,
      RouterModule.register([{ path: 'v9', module: AdminModule }]),
    ],
    controllers: [OrdersController, ReportsController, AController, BController, PlainController],
    providers: [{ provide: APP_GUARD, useClass: SluiceGuard }],
  })
  class AppModule {}
  const app = await NestFactory.create(AppModule, { logger: false });
  app.enableVersioning({ type: VersioningType.URI });
  apps.push(app);
  await app.listen(0, '127.0.0.1');
  const base = (await app.getUrl()).replace('[::1]', '127.0.0.1');
  const call = async (
    method: string,
    path: string,
    tenant: string | undefined,
  ): Promise<{ status: number; headers: Headers; text: string }> => {
    const res = await fetch(`${base}${path}`, {
      method,
      headers:
        tenant === undefined ? {} : { authorization: `Bearer ${issueToken(secret, tenant)}` },
    });
    return { status: res.status, headers: res.headers, text: await res.text() };
  };
  return { call, events };
}

const statuses = (results: { status: number }[]) => results.map((r) => r.status);

describe('NestJS guard (Express platform)', () => {
  it('the route templates name the quota: ids and query strings share "POST/orders/:id"; the 429 keeps its headers and problem body through Nest', async () => {
    const limiter = new RateLimiter({ client: await redis.client(), timeoutMs: 5000 });
    const { call, events } = await start({ limiter });
    const tenant = randomTenant();
    handled = 0;
    const results = [
      await call('POST', '/orders/1?x=1', tenant),
      await call('POST', '/orders/2?x=2', tenant),
      await call('POST', '/ORDERS/3', tenant),
    ];
    assert.deepEqual(statuses(results), [201, 201, 429]);
    assert.equal(handled, 2, 'the refused request never reached the handler');
    assert.equal(results[0]?.headers.get('ratelimit-policy'), '"orders";q=2;w=60');
    assert.match(results[0]?.headers.get('ratelimit') ?? '', /^"orders";r=1;t=(59|60)$/);
    const limited = results[2] as { status: number; headers: Headers; text: string };
    assert.ok(['60', '61'].includes(limited.headers.get('retry-after') ?? ''));
    // Express's res.json() adds the charset; the media type stays the guard's.
    assert.equal(limited.headers.get('content-type'), 'application/problem+json; charset=utf-8');
    assert.match(limited.headers.get('ratelimit') ?? '', /^"orders";r=0;t=\d+$/);
    const body = JSON.parse(limited.text);
    assert.equal(body.type, 'https://iana.org/assignments/http-problem-types#quota-exceeded');
    assert.equal(body.status, 429);
    assert.equal(body.error, 'rate_limited');
    assert.deepEqual(body['violated-policies'], ['orders']);
    assert.deepEqual(
      events.map((e) => [e.outcome, e.route]),
      [
        ['allowed', 'POST/orders/:id'],
        ['allowed', 'POST/orders/:id'],
        ['limited', 'POST/orders/:id'],
      ],
    );
    // The Redis key is the scope's: tenant + the template, hashed.
    const admin = await redis.admin();
    assert.equal(await admin.client.get(keyFor(orders, tenant, 'POST/orders/:id')), '2');
  });

  it("a handler's @RateLimit replaces its controller's; @SkipRateLimit spends nothing; @All is one quota", async () => {
    const limiter = new RateLimiter({ client: await redis.client(), timeoutMs: 5000 });
    const { call, events } = await start({ limiter });
    const tenant = randomTenant();
    const list = await call('GET', '/orders', tenant);
    assert.equal(list.status, 200);
    assert.equal(list.headers.get('ratelimit-policy'), '"wide";q=5;w=60', "the controller's");
    assert.equal(
      (await call('POST', '/orders/1', tenant)).headers.get('ratelimit-policy'),
      '"orders";q=2;w=60',
    );
    for (let i = 0; i < 3; i++) {
      const health = await call('GET', '/orders/health', tenant);
      assert.equal(health.status, 200);
      assert.equal(health.headers.get('ratelimit'), null);
    }
    assert.equal(
      (await call('GET', '/orders/health', undefined)).status,
      200,
      'skipped before identify',
    );
    assert.deepEqual(
      statuses([
        await call('PUT', '/orders/any', tenant),
        await call('DELETE', '/orders/any', tenant),
      ]),
      [200, 429],
    );
    assert.deepEqual(
      events.map((e) => e.route),
      ['GET/orders', 'POST/orders/:id', 'ALL/orders/any', 'ALL/orders/any'],
    );
  });

  it('versions and RouterModule paths are part of the name; an explicit route wins over the templates', async () => {
    const limiter = new RateLimiter({ client: await redis.client(), timeoutMs: 5000 });
    const { call, events } = await start({ limiter });
    const tenant = randomTenant();
    assert.deepEqual(
      statuses([
        await call('POST', '/v1/reports/x', tenant),
        await call('POST', '/v2/reports/y', tenant),
        await call('POST', '/v1/reports/z', tenant),
        await call('POST', '/v9/admin-orders', tenant),
        await call('POST', '/a', tenant),
        await call('POST', '/b', tenant),
        await call('POST', '/a', tenant),
      ]),
      [201, 201, 429, 201, 201, 201, 429],
    );
    assert.deepEqual(
      events.map((e) => e.route),
      [
        'POST/reports/:kind;version=1',
        'POST/reports/:kind;version=2',
        'POST/reports/:kind;version=1',
        'POST/v9/admin-orders',
        'POST/shared',
        'POST/shared',
        'POST/shared',
      ],
    );
    // AdminController has @UseGuards(SluiceGuard) under the APP_GUARD: decided once.
    const admin = await redis.admin();
    assert.equal(await admin.client.get(keyFor(one, tenant, 'POST/v9/admin-orders')), '1');
  });

  it("the module's policy limits every route without a @RateLimit of its own, each route its own quota", async () => {
    const limiter = new RateLimiter({ client: await redis.client(), timeoutMs: 5000 });
    const { call, events } = await start({ limiter, policy: one });
    const tenant = randomTenant();
    assert.deepEqual(
      statuses([await call('GET', '/plain', tenant), await call('GET', '/plain?x=1', tenant)]),
      [200, 429],
    );
    assert.equal((await call('POST', '/orders/1', tenant)).status, 201, 'its own @RateLimit');
    assert.deepEqual(
      events.map((e) => [e.route, e.policy]),
      [
        ['GET/plain', 'one'],
        ['GET/plain', 'one'],
        ['POST/orders/:id', 'orders'],
      ],
    );
  });

  it('no verified identity → 401 with WWW-Authenticate; the handler never runs', async () => {
    const limiter = new RateLimiter({ client: await redis.client(), timeoutMs: 5000 });
    const { call } = await start({ limiter, wwwAuthenticate: 'Bearer realm="api"' });
    handled = 0;
    const res = await call('POST', '/orders/1', undefined);
    assert.equal(res.status, 401);
    assert.equal(res.headers.get('www-authenticate'), 'Bearer realm="api"');
    assert.equal(res.headers.get('content-type'), 'application/problem+json; charset=utf-8');
    assert.equal(JSON.parse(res.text).error, 'unauthenticated');
    assert.equal(handled, 0);
  });

  it('Redis unreachable: 503 + Retry-After: 1 on a fail-closed route; fail-open admits within its local limit, then 503', async () => {
    const client = await redis.client();
    client.destroy();
    const limiter = new RateLimiter({ timeoutMs: TEST_TIMEOUT_MS, client });
    const closed = await start({ limiter });
    const tenant = randomTenant();
    const res = await closed.call('POST', '/orders/1', tenant);
    assert.equal(res.status, 503);
    assert.equal(res.headers.get('retry-after'), '1');
    assert.equal(res.headers.get('ratelimit'), null, 'no invented quota');
    const body = JSON.parse(res.text);
    assert.equal(
      body.type,
      'https://iana.org/assignments/http-problem-types#temporary-reduced-capacity',
    );
    assert.equal(body.error, 'rate_limiter_unavailable');
    const open = await start({ limiter, failureMode: 'fail-open', failOpenLimit: 2 });
    assert.deepEqual(
      statuses([
        await open.call('POST', '/orders/1', tenant),
        await open.call('POST', '/orders/2', tenant),
        await open.call('POST', '/orders/3', tenant),
      ]),
      [201, 201, 503],
    );
    assert.deepEqual(
      open.events.map((e) => e.outcome),
      ['fail-open', 'fail-open', 'fail-open-limited'],
    );
  });

  it('plans and stacked limits: a policy function of the tenant, decided in one atomic takeAll', async () => {
    const limiter = new RateLimiter({ client: await redis.client(), timeoutMs: 5000 });
    const pro = randomTenant();
    const plan = (_req: IncomingMessage, tenant: string): Policy[] =>
      tenant === pro ? [wide, orders] : [one];
    const { call } = await start({ limiter, policy: plan });
    const free = randomTenant();
    const plain = await call('GET', '/plain', pro);
    assert.equal(plain.headers.get('ratelimit-policy'), '"wide";q=5;w=60, "orders";q=2;w=60');
    assert.equal((await call('GET', '/plain', pro)).status, 200);
    const limited = await call('GET', '/plain', pro);
    assert.equal(limited.status, 429);
    assert.deepEqual(JSON.parse(limited.text)['violated-policies'], ['orders']);
    assert.deepEqual(
      statuses([await call('GET', '/plain', free), await call('GET', '/plain', free)]),
      [200, 429],
    );
    // The refusal spent nothing: "wide" holds the two admitted requests only.
    const admin = await redis.admin();
    assert.equal(await admin.client.get(keyFor(wide, pro, 'GET/plain')), '2');
  });

  it('bad module options and @RateLimit settings throw an InvalidInputError naming the field', async () => {
    const limiter = new RateLimiter({ client: await redis.client(), timeoutMs: 5000 });
    const field = (fn: () => unknown) => {
      try {
        fn();
      } catch (error) {
        assert.ok(error instanceof InvalidInputError, String(error));
        return error.field;
      }
      assert.fail('no error');
    };
    const identify = () => 'acme';
    assert.equal(
      field(() => SluiceModule.forRoot({ identify } as never)),
      'limiter',
    );
    assert.equal(
      field(() => SluiceModule.forRoot({ limiter } as never)),
      'identify',
    );
    assert.equal(
      field(() => SluiceModule.forRoot({ limiter, identify, route: 'x' } as never)),
      'route',
    );
    assert.equal(
      field(() => SluiceModule.forRoot({ limiter, identify, failureMode: 'fail-open' })),
      'failOpenLimit',
    );
    assert.equal(
      field(() => SluiceModule.forRoot({ limiter, identify, polcy: orders } as never)),
      'options.polcy',
    );
    assert.equal(
      field(() => RateLimit({ policy: orders, cots: 2 } as never)),
      'RateLimit.cots',
    );
    assert.equal(
      field(() => RateLimit({ limit: 2 } as never)),
      'RateLimit.limit',
    );
    assert.equal(
      field(() => RateLimit(42 as never)),
      'RateLimit',
    );
    assert.match(field(() => RateLimit([orders, orders])) ?? '', /^policy/);
    // A route's own overrides are checked when the class is declared, not per request.
    assert.equal(
      field(() => RateLimit({ policy: orders, failureMode: 'open' } as never)),
      'failureMode',
    );
    for (const cost of [-1, 0, 0.5, Number.NaN]) {
      assert.equal(
        field(() => RateLimit({ policy: orders, cost })),
        'cost',
        String(cost),
      );
    }
    assert.equal(
      field(() => RateLimit({ policy: orders, route: '' })),
      'route',
    );
    assert.equal(
      field(() => RateLimit({ policy: orders, route: 5 } as never)),
      'route',
    );
    // Stacked limits are one array: a second argument is refused, never dropped.
    assert.equal(
      field(() => (RateLimit as (...a: unknown[]) => unknown)(orders, orders)),
      'RateLimit',
    );
    // A fail-open route whose failOpenLimit the module gives is fine here.
    RateLimit({ policy: orders, failureMode: 'fail-open' });
    assert.equal(
      field(() => SkipRateLimit('yes' as never)),
      'SkipRateLimit',
    );
  });
});
