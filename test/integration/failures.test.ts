/**
 * When Redis misbehaves, sluice fails in the documented way: a typed error, fast, never
 * "allowed" — and recovers by itself where it can (C01).
 */
import assert from 'node:assert/strict';
import { after, describe, it } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import {
  fixedWindow,
  OverloadError,
  RateLimiter,
  SluiceError,
  StoreError,
  TimeoutError,
  UnavailableError,
} from 'sluice';
import { connectRedis } from 'sluice/node-redis';
import { type PrivateRedis, startRedisServer } from '../../src/demo/redis-server.js';
import { startTcpProxy } from '../../src/demo/tcp-proxy.js';
import { watchLoop } from '../helpers/lag.js';
import { fillMemory, keyFor, randomTenant, TEST_TIMEOUT_MS, useRedis } from '../helpers/redis.js';
import { boundFor, within } from '../helpers/within.js';

const redis = useRedis();
const route = 'POST/orders';
const policy = fixedWindow({ limit: 100, windowMs: 60_000 });
const keyOf = (tenant: string) => keyFor(policy, tenant, route);

/** Servers started by a single test, stopped (by pid) after the file. */
const ownServers: PrivateRedis[] = [];
after(async () => {
  for (const server of ownServers) await server.stop();
});
async function ownServer(): Promise<PrivateRedis> {
  const server = await startRedisServer();
  ownServers.push(server);
  return server;
}

describe('failures are typed, bounded and never "allowed"', () => {
  it('a closed client throws UnavailableError, never allowed', async () => {
    const client = await redis.client();
    const limiter = new RateLimiter({ timeoutMs: TEST_TIMEOUT_MS, client });
    client.destroy();
    await assert.rejects(
      within(limiter.take({ tenant: randomTenant(), route }, policy), boundFor(150), 'the take'),
      UnavailableError,
    );
    assert.equal(limiter.stats().unavailable, 1);
    assert.equal(limiter.stats().allowed, 0);
  });

  it('Redis killed → UnavailableError well under the deadline; no promise left pending', async () => {
    const server = await ownServer();
    const client = await redis.client({ url: server.url });
    const limiter = new RateLimiter({ client, timeoutMs: 1000 });
    const tenant = randomTenant();
    assert.equal((await limiter.take({ tenant, route }, policy)).allowed, true);
    await server.kill();
    const lag = watchLoop();
    const started = performance.now();
    const results = await within(
      Promise.allSettled(Array.from({ length: 50 }, () => limiter.take({ tenant, route }, policy))),
      boundFor(1000),
      '50 takes on a killed Redis',
    );
    const elapsed = performance.now() - started;
    for (const result of results) {
      assert.equal(result.status, 'rejected');
      assert.ok(result.reason instanceof UnavailableError, String(result.reason));
    }
    const lagMs = lag.stop();
    assert.ok(
      elapsed < 500 + lagMs,
      `answered in ${elapsed.toFixed(0)} ms, deadline 1000 ms (loop late ≤ ${lagMs} ms)`,
    );
    assert.equal(limiter.stats().inFlight, 0);
  });

  it('CLIENT PAUSE longer than the deadline → TimeoutError close to the deadline', async () => {
    const client = await redis.client();
    const admin = await redis.admin();
    const limiter = new RateLimiter({ client, timeoutMs: 150 });
    const tenant = randomTenant();
    await admin.client.sendCommand(['CLIENT', 'PAUSE', '600', 'ALL']);
    const lag = watchLoop();
    const started = performance.now();
    await assert.rejects(
      within(limiter.take({ tenant, route }, policy), boundFor(150), 'the take'),
      TimeoutError,
    );
    const elapsed = performance.now() - started;
    const lagMs = lag.stop();
    assert.ok(
      elapsed >= 145 && elapsed < 450 + lagMs,
      `timed out after ${elapsed.toFixed(0)} ms (deadline 150 ms, loop late ≤ ${lagMs} ms)`,
    );
    assert.equal(limiter.stats().timeout, 1);
    await sleep(700); // the pause ends; the late reply is ignored, the call is not refunded
    assert.equal(limiter.stats().inFlight, 0);
    assert.equal(
      await admin.client.get(keyOf(tenant)),
      '1',
      'the timed-out take ran on the server and stays counted',
    );
  });

  it('connection lost after the command was sent → typed error; the quota was spent, not refunded', async () => {
    const proxy = await startTcpProxy('127.0.0.1', redis.server.port);
    try {
      const client = await redis.client({ url: `redis://127.0.0.1:${proxy.port}` });
      const limiter = new RateLimiter({ client, timeoutMs: 500 });
      const tenant = randomTenant();
      assert.equal((await limiter.take({ tenant, route }, policy)).remaining, 99);
      proxy.mode = 'cut-after-send';
      const lag = watchLoop();
      const started = performance.now();
      const error = await within(
        limiter.take({ tenant, route }, policy).catch((e: unknown) => e),
        boundFor(500),
        'the take',
      );
      const elapsed = performance.now() - started;
      assert.ok(error instanceof UnavailableError || error instanceof TimeoutError, String(error));
      const lagMs = lag.stop();
      assert.ok(
        elapsed < 600 + lagMs,
        `answered in ${elapsed.toFixed(0)} ms (loop late ≤ ${lagMs} ms)`,
      );
      await sleep(50);
      assert.equal(
        await (await redis.admin()).client.get(keyOf(tenant)),
        '2',
        'the lost call was counted by Redis',
      );
    } finally {
      await proxy.close();
    }
  });

  it('case C01: SCRIPT FLUSH between takes → the next takes succeed (NOSCRIPT is reloaded, not a failure)', async () => {
    const client = await redis.client();
    const admin = await redis.admin();
    const limiter = new RateLimiter({ timeoutMs: TEST_TIMEOUT_MS, client });
    const tenant = randomTenant();
    const p = fixedWindow({ limit: 100, windowMs: 60_000 });
    assert.equal((await limiter.take({ tenant, route }, p)).remaining, 99);
    assert.equal((await limiter.take({ tenant, route }, p)).remaining, 98);
    await admin.client.scriptFlush();
    const burst = await Promise.all(
      Array.from({ length: 50 }, () => limiter.take({ tenant, route }, p)),
    );
    assert.equal(burst.filter((d) => d.allowed).length, 50);
    assert.equal(Math.min(...burst.map((d) => d.remaining)), 48);
    assert.equal(limiter.stats().unavailable + limiter.stats().storeError, 0);
  });

  it('case C01 (restart variant): Redis restarted without persistence → reconnect, reload, all allowed', async () => {
    const server = await ownServer();
    const client = await redis.client({ url: server.url, reconnect: true });
    const limiter = new RateLimiter({ client, timeoutMs: 1000 });
    const tenant = randomTenant();
    await limiter.take({ tenant, route }, policy);
    await limiter.take({ tenant, route }, policy);
    await server.kill();
    await server.restart();
    const deadline = Date.now() + 5000;
    while (!client.isReady && Date.now() < deadline) await sleep(20);
    assert.ok(client.isReady, 'client reconnected');
    const burst = await Promise.all(
      Array.from({ length: 50 }, () => limiter.take({ tenant, route }, policy)),
    );
    assert.equal(burst.filter((d) => d.allowed).length, 50);
    assert.equal(
      Math.min(...burst.map((d) => d.remaining)),
      50,
      'a fresh server starts a fresh window',
    );
  });

  it('Redis paused, cap 8 → the 9th concurrent take rejects at once with OverloadError', async () => {
    const client = await redis.client();
    const admin = await redis.admin();
    const limiter = new RateLimiter({ client, maxInFlight: 8, timeoutMs: 1000 });
    await admin.client.sendCommand(['CLIENT', 'PAUSE', '400', 'WRITE']);
    const pending = Array.from({ length: 8 }, () =>
      limiter.take({ tenant: randomTenant(), route }, policy),
    );
    const lag = watchLoop();
    const started = performance.now();
    await assert.rejects(
      within(limiter.take({ tenant: randomTenant(), route }, policy), boundFor(1000), 'the take'),
      OverloadError,
    );
    assert.ok(
      performance.now() - started < 200 + lag.stop(),
      'rejected at once (the pause is 400 ms)',
    );
    assert.equal(limiter.stats().inFlight, 8);
    const results = await within(
      Promise.allSettled(pending),
      boundFor(1000),
      'the 8 takes in flight',
    );
    assert.ok(
      results.every((r) => r.status === 'fulfilled'),
      'the 8 admitted calls complete after the pause',
    );
    assert.equal(limiter.stats().overload, 1);
    assert.equal(limiter.stats().inFlight, 0);
  });

  it('case C02 (single node): a key of the wrong type → StoreError, never allowed', async () => {
    const client = await redis.client();
    const admin = await redis.admin();
    const limiter = new RateLimiter({ timeoutMs: TEST_TIMEOUT_MS, client });
    const tenant = randomTenant();
    await admin.client.hSet(keyOf(tenant), 'x', '1');
    const error = await within(
      limiter.take({ tenant, route }, policy).catch((e: unknown) => e),
      boundFor(150),
      'the take',
    );
    assert.ok(error instanceof StoreError, String(error));
    assert.equal(error.redisCode, 'WRONGTYPE');
    assert.equal(limiter.stats().storeError, 1);
    await admin.client.del(keyOf(tenant));
  });

  it('connectRedis with Redis down at start rejects at once with UnavailableError (never hangs retrying)', async () => {
    const server = await ownServer();
    await server.kill();
    const started = performance.now();
    const warnings: Error[] = [];
    await assert.rejects(
      within(
        connectRedis({ url: server.url, onError: (e) => warnings.push(e) }),
        boundFor(1000),
        'connectRedis',
      ),
      UnavailableError,
    );
    assert.ok(performance.now() - started < 2000);
    assert.ok(warnings.length >= 1, 'the connection error was reported, not swallowed');
  });

  it('a callback-style client (node-redis .legacy()) → UnavailableError, not a crash', async () => {
    const client = await redis.client();
    const limiter = new RateLimiter({
      timeoutMs: TEST_TIMEOUT_MS,
      client: client.client.legacy() as never,
    });
    await assert.rejects(
      within(limiter.take({ tenant: randomTenant(), route }, policy), boundFor(150), 'the take'),
      UnavailableError,
    );
    assert.equal(limiter.stats().inFlight, 0);
  });

  it('maxmemory reached under noeviction → StoreError OOM, never allowed', async () => {
    const server = await startRedisServer(['--maxmemory-policy', 'noeviction']);
    ownServers.push(server);
    const client = await redis.client({ url: server.url });
    const limiter = new RateLimiter({ client, timeoutMs: 1000 });
    await fillMemory(client);
    const error = await within(
      limiter.take({ tenant: randomTenant(), route }, policy).catch((e: unknown) => e),
      boundFor(1000),
      'the take',
    );
    assert.ok(error instanceof StoreError, String(error));
    assert.equal(error.redisCode, 'OOM');
    assert.equal(limiter.stats().allowed, 0);
  });

  it('DEBUG SLEEP (Redis busy) longer than the deadline → TimeoutError at the deadline', async () => {
    const server = await startRedisServer(['--enable-debug-command', 'yes']);
    ownServers.push(server);
    const client = await redis.client({ url: server.url });
    const admin = await redis.client({ url: server.url });
    const limiter = new RateLimiter({ client, timeoutMs: 150 });
    const sleeping = admin.client.sendCommand(['DEBUG', 'SLEEP', '1']);
    await sleep(20);
    const lag = watchLoop();
    const started = performance.now();
    await assert.rejects(
      within(limiter.take({ tenant: randomTenant(), route }, policy), boundFor(150), 'the take'),
      TimeoutError,
    );
    const elapsed = performance.now() - started;
    const lagMs = lag.stop();
    assert.ok(
      elapsed >= 145 && elapsed < 450 + lagMs,
      `timed out after ${elapsed.toFixed(0)} ms (loop late ≤ ${lagMs} ms)`,
    );
    await sleeping;
  });

  it('every failure is a SluiceError with a stable code', async () => {
    const client = await redis.client();
    const limiter = new RateLimiter({ timeoutMs: TEST_TIMEOUT_MS, client });
    client.destroy();
    const error = await within(
      limiter.take({ tenant: 'a', route }, policy).catch((e: unknown) => e),
      boundFor(150),
      'the take',
    );
    assert.ok(error instanceof SluiceError);
    assert.equal(error.code, 'SLUICE_UNAVAILABLE');
  });
});
