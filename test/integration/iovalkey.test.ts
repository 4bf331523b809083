/**
 * iovalkey (a fork of ioredis) clients given as `new RateLimiter({ timeoutMs: TEST_TIMEOUT_MS, client })`: recognised as
 * ioredis is, with the same option checks (`IOREDIS_OPTIONS` from `sluice/ioredis` is what
 * they need), exact counts across clients, and failures typed as for ioredis — WRONGTYPE a
 * `StoreError`, a wrong password a `RedisConfigError`, a stopped server an
 * `UnavailableError`. Its `Cluster` runs on a real cluster in the cluster suite.
 */
import assert from 'node:assert/strict';
import { after, describe, it } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { Cluster, Redis, type RedisOptions } from 'iovalkey';
import {
  fixedWindow,
  InvalidInputError,
  RateLimiter,
  type RateLimiterOptions,
  RedisConfigError,
  StoreError,
  UnavailableError,
} from 'sluice';
import { IOREDIS_CLUSTER_OPTIONS, IOREDIS_OPTIONS } from 'sluice/ioredis';
import { startRedisServer } from '../../src/demo/redis-server.js';
import { clientKind } from '../../src/redis/select.js';
import { keyFor, randomTenant, TEST_TIMEOUT_MS, useRedis } from '../helpers/redis.js';

// Registered before useRedis's: each client closes while its server runs.
const closers: (() => unknown)[] = [];
after(async () => {
  for (const close of closers) await close();
});
const redis = useRedis();
const route = 'POST/orders';
const policy = fixedWindow({ limit: 10, windowMs: 60_000, version: 'iovalkey' });

/** A connected iovalkey client with `IOREDIS_OPTIONS`, disconnected after the file. */
async function iovalkey(options: RedisOptions = {}, port = redis.server.port): Promise<Redis> {
  const client = new Redis({
    host: '127.0.0.1',
    port,
    ...IOREDIS_OPTIONS,
    lazyConnect: true,
    ...options,
  });
  client.on('error', () => {}); // the tests assert on the typed outcomes instead
  closers.push(() => client.disconnect());
  await client.connect().catch(() => {});
  return client;
}

const asClient = (client: unknown) => client as RateLimiterOptions['client'];

async function rejection(promise: Promise<unknown>): Promise<unknown> {
  return promise.then(
    (value) => assert.fail(`resolved with ${JSON.stringify(value)}`),
    (error: unknown) => error,
  );
}

describe('iovalkey clients', () => {
  it('Redis and Cluster are recognised as ioredis clients', async () => {
    assert.equal(clientKind(await iovalkey()), 'ioredis');
    const cluster = new Cluster([{ host: '127.0.0.1', port: 1 }], {
      ...IOREDIS_CLUSTER_OPTIONS,
      lazyConnect: true,
    });
    closers.push(() => cluster.disconnect());
    assert.equal(clientKind(cluster), 'ioredis-cluster');
    new RateLimiter({ timeoutMs: TEST_TIMEOUT_MS, client: asClient(cluster) }); // its options pass the checks
  });

  it('the ioredis option checks apply: an offline queue, retries or resends are refused', async () => {
    for (const [options, named] of [
      [{ enableOfflineQueue: true }, /enableOfflineQueue: false/],
      [{ maxRetriesPerRequest: 20 }, /maxRetriesPerRequest: 0/],
      [{ autoResendUnfulfilledCommands: true }, /autoResendUnfulfilledCommands: false/],
      [{ socketTimeout: undefined }, /socketTimeout/],
    ] as const) {
      const client = await iovalkey(options as RedisOptions);
      assert.throws(
        () => new RateLimiter({ timeoutMs: TEST_TIMEOUT_MS, client: asClient(client) }),
        (error: unknown) => error instanceof InvalidInputError && named.test(error.message),
      );
    }
  });

  it('3 clients × 10 concurrent takes, limit 10 → exactly 10', async () => {
    const limiters = await Promise.all(
      [0, 1, 2].map(
        async () =>
          new RateLimiter({ timeoutMs: TEST_TIMEOUT_MS, client: asClient(await iovalkey()) }),
      ),
    );
    const tenant = randomTenant();
    const decisions = await Promise.all(
      Array.from({ length: 30 }, (_, i) =>
        (limiters[i % 3] as RateLimiter).take({ tenant, route }, policy),
      ),
    );
    assert.deepEqual(
      decisions
        .filter((d) => d.allowed)
        .map((d) => d.remaining)
        .sort((a, b) => a - b),
      [0, 1, 2, 3, 4, 5, 6, 7, 8, 9],
    );
  });

  it('WRONGTYPE is a StoreError; a wrong password a RedisConfigError; a stopped server UnavailableError', async () => {
    const client = await iovalkey();
    const tenant = randomTenant();
    await client.lpush(keyFor(policy, tenant, route), 'x');
    const limiter = new RateLimiter({ timeoutMs: TEST_TIMEOUT_MS, client: asClient(client) });
    const wrongType = await rejection(limiter.take({ tenant, route }, policy));
    assert.ok(wrongType instanceof StoreError && wrongType.redisCode === 'WRONGTYPE');

    // As with ioredis: the refusal is an event, heard from the limiter's construction on (a
    // refusal before it explains nothing yet); the client retries its handshake, and from
    // then on a call fails as that refusal.
    const refused = await iovalkey({ username: 'ghost', password: 'x' });
    const refusedLimiter = new RateLimiter({ client: asClient(refused), timeoutMs: 2000 });
    const seen: unknown[] = [];
    const end = Date.now() + 5000;
    while (!(seen.at(-1) instanceof RedisConfigError) && Date.now() < end) {
      seen.push(await rejection(refusedLimiter.take({ tenant: randomTenant() }, policy)));
      await sleep(50);
    }
    const config = seen.at(-1);
    assert.ok(config instanceof RedisConfigError, String(config));
    assert.equal(config.reason, 'wrong-password');
    assert.ok(seen.every((e) => e instanceof UnavailableError || e instanceof RedisConfigError));

    const server = await startRedisServer();
    closers.push(() => server.stop());
    const doomed = await iovalkey({ retryStrategy: () => null }, server.port);
    const doomedLimiter = new RateLimiter({ client: asClient(doomed), timeoutMs: 1000 });
    assert.equal((await doomedLimiter.take({ tenant: randomTenant() }, policy)).allowed, true);
    await server.kill();
    const down = await rejection(doomedLimiter.take({ tenant: randomTenant() }, policy));
    assert.ok(down instanceof UnavailableError, String(down));
  });
});
