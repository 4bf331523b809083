/**
 * Every object the public API accepts refuses a key it does not know, naming it, and
 * changes nothing: a misspelled scope part (`usr`) would collapse per-user limits into one
 * shared quota, a misspelled cost (`Cost`, `cots`) would charge 1 unit, a misspelled option
 * would silently keep its default. One row per object; the limiter's rows run against a
 * `MemoryStore` that must stay empty.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import express from 'express';
import Fastify from 'fastify';
import {
  fixedWindow,
  gcra,
  InvalidInputError,
  MemoryStore,
  RateLimiter,
  slidingWindowCounter,
  slidingWindowLog,
  tokenBucket,
} from 'sluice';
import { expressRateLimit } from 'sluice/express';
import { fastifyRateLimit } from 'sluice/fastify';
import { fetchRateLimit } from 'sluice/fetch';
import { clientAddressOf, createGuard } from 'sluice/http';
import { nodeRateLimit, withRateLimit } from 'sluice/node';
import { connectRedis } from 'sluice/node-redis';
import { openTelemetryMetrics } from 'sluice/opentelemetry';
import { prometheusMetrics } from 'sluice/prometheus';

const policy = fixedWindow({ limit: 5, windowMs: 60_000 });
const scope = { tenant: 't', route: 'GET/x' };
const identify = () => 't';

/** Asserts `run` throws or rejects an `InvalidInputError` whose field is `field`. */
async function refuses(run: () => unknown, field: string): Promise<void> {
  await assert.rejects(
    async () => run(),
    (error: unknown) => {
      assert.ok(error instanceof InvalidInputError, `${field}: ${String(error)}`);
      assert.equal(error.field, field);
      assert.match(error.message, /absent|not a connectRedis option/);
      return true;
    },
  );
}

describe('every object of the public API refuses an unknown key, naming it', () => {
  it('the limiter: scopes, take/peek/reset options, takeAll items and options — nothing written', async () => {
    const store = new MemoryStore();
    const limiter = new RateLimiter({ store });
    const rows: [string, () => unknown][] = [
      ['scope.usr', () => limiter.take({ tenant: 't', usr: 'alice' } as never, policy)],
      ['scope.Route', () => limiter.take({ tenant: 't', Route: 'GET/x' } as never, policy)],
      ['options.Cost', () => limiter.take(scope, policy, { Cost: 5 } as never)],
      ['options.requestID', () => limiter.take(scope, policy, { requestID: 'r' } as never)],
      ['scope.usr', () => limiter.peek({ tenant: 't', usr: 'a' } as never, policy)],
      ['options.Cost', () => limiter.peek(scope, policy, { Cost: 5 } as never)],
      ['scope.usr', () => limiter.reset({ tenant: 't', usr: 'a' } as never, policy)],
      ['scope.usr', () => limiter.keyOf({ tenant: 't', usr: 'a' } as never, policy)],
      ['items[0].cots', () => limiter.takeAll([{ scope, policy, cots: 5 } as never])],
      [
        'items[1].scope.usr',
        () =>
          limiter.takeAll([
            { scope, policy },
            {
              scope: { tenant: 't', usr: 'a' } as never,
              policy: tokenBucket({ capacity: 2, refillIntervalMs: 10 }),
            },
          ]),
      ],
      ['items[0].requestId', () => limiter.takeAll([{ scope, policy, requestId: 'r' } as never])],
      [
        'options.requestID',
        () => limiter.takeAll([{ scope, policy }], { requestID: 'r' } as never),
      ],
    ];
    for (const [field, run] of rows) await refuses(run, field);
    assert.equal(store.size, 0, 'nothing was written');
    assert.equal(limiter.stats().invalid, rows.length - 1, 'each counted invalid (keyOf throws)');
  });

  it('constructors and factories', async () => {
    const store = new MemoryStore();
    const limiter = new RateLimiter({ store });
    const rows: [string, () => unknown][] = [
      ['options.timeout', () => new RateLimiter({ store, timeout: 10 } as never)],
      [
        'options.denialCache.maxEntry',
        () => new RateLimiter({ store, denialCache: { maxEntry: 1 } } as never),
      ],
      ['options.maxkeys', () => new MemoryStore({ maxkeys: 10 } as never)],
      ['policy.window', () => fixedWindow({ limit: 1, windowMs: 1, window: 2 } as never)],
      ['policy.windowMS', () => slidingWindowLog({ limit: 1, windowMs: 1, windowMS: 2 } as never)],
      ['policy.limits', () => slidingWindowCounter({ limit: 1, windowMs: 1, limits: 2 } as never)],
      [
        'policy.refilTokens',
        () => tokenBucket({ capacity: 1, refillIntervalMs: 1, refilTokens: 1 } as never),
      ],
      ['policy.bursts', () => gcra({ limit: 1, periodMs: 1, bursts: 2 } as never)],
      ['options.stallTimeout', () => connectRedis({ stallTimeout: 100 } as never)],
      [
        'options.tls.rejectUnauthorised',
        () => connectRedis({ tls: { rejectUnauthorised: false } } as never),
      ],
      [
        'options.failureMod',
        () =>
          createGuard({
            limiter,
            policy,
            route: 'GET/x',
            identify,
            failureMod: 'fail-open',
          } as never),
      ],
      [
        'responses.limted',
        () =>
          createGuard({
            limiter,
            policy,
            route: 'GET/x',
            identify,
            responses: { limted: () => undefined },
          } as never),
      ],
      [
        'headers.legacyy',
        () =>
          createGuard({
            limiter,
            policy,
            route: 'GET/x',
            identify,
            headers: { legacyy: true },
          } as never),
      ],
      [
        'policy.pr',
        () =>
          createGuard({
            limiter,
            policy: { policy, pr: 'tenant' },
            route: 'GET/x',
            identify,
          } as never),
      ],
      ['options.trustproxy', () => clientAddressOf({ trustproxy: 'loopback' } as never)],
      ['options.prefx', () => prometheusMetrics({ prefx: 'x_' } as never)],
      ['options.meterprovider', () => openTelemetryMetrics({ meterprovider: {} } as never)],
      [
        'options.identfy',
        () => expressRateLimit({ limiter, policy, identify, identfy: identify } as never),
      ],
      [
        'options.rout',
        () => fetchRateLimit({ limiter, policy, route: 'GET/x', identify, rout: 'x' } as never),
      ],
      [
        'options.shadw',
        () => nodeRateLimit({ limiter, policy, route: 'GET/x', identify, shadw: true } as never),
      ],
      [
        'options.onErorr',
        () =>
          withRateLimit(
            { limiter, policy, route: 'GET/x', identify, onErorr: () => {} } as never,
            () => {},
          ),
      ],
    ];
    for (const [field, run] of rows) await refuses(run, field);
    assert.equal(store.size, 0);
  });

  it('Fastify: the plugin options at registration, a route config.rateLimit when it is added', async () => {
    const limiter = new RateLimiter({ store: new MemoryStore() });
    const app = Fastify();
    await app
      .register(fastifyRateLimit, { limiter, identify, identfy: identify } as never)
      .ready()
      .then(
        () => assert.fail('registered'),
        (error: unknown) => {
          assert.ok(error instanceof InvalidInputError);
          assert.equal(error.field, 'options.identfy');
        },
      );
    const ok = Fastify();
    await ok.register(fastifyRateLimit, { limiter, identify });
    assert.throws(
      () => ok.get('/x', { config: { rateLimit: { policy, cosst: 2 } as never } }, () => 'x'),
      (error: unknown) => error instanceof InvalidInputError && error.field === 'options.cosst',
    );
  });

  it('an Express app route option object too', () => {
    const limiter = new RateLimiter({ store: new MemoryStore() });
    const app = express();
    assert.throws(
      () => app.get('/x', expressRateLimit({ limiter, policy, identify, polcy: policy } as never)),
      (error: unknown) => error instanceof InvalidInputError && error.field === 'options.polcy',
    );
  });
});
