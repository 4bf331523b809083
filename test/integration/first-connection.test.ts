/**
 * A client still making its first connection when the limiter gets it: the calls issued
 * meanwhile wait for it within their deadline and are decided once it is up; a deadline that
 * passes first is `UnavailableError` with nothing sent (never a `TimeoutError`, which says
 * quota may have been spent); `ready()` resolves once the client is usable and rejects,
 * typed, when no server answers. (Fresh cluster clients: cluster.test.ts.)
 */
import assert from 'node:assert/strict';
import { createServer, type Server, type Socket } from 'node:net';
import { after, describe, it } from 'node:test';
import { Redis } from 'ioredis';
import { createClient } from 'redis';
import { fixedWindow, isSluiceError, RateLimiter, UnavailableError } from 'sluice';
import { IOREDIS_OPTIONS } from 'sluice/ioredis';
import { type PrivateRedis, startRedisServer } from '../../src/demo/redis-server.js';
import { randomTenant, TEST_TIMEOUT_MS } from '../helpers/redis.js';

const policy = fixedWindow({ limit: 50, windowMs: 60_000 });
const servers: PrivateRedis[] = [];
const closers: (() => unknown)[] = [];
after(async () => {
  for (const close of closers) await Promise.resolve(close()).catch(() => {});
  for (const server of servers) await server.stop();
});

const outcome = (p: Promise<{ allowed: boolean }>) =>
  p.then(
    (d) => (d.allowed ? 'allowed' : 'limited'),
    (error: unknown) => (isSluiceError(error) ? error.code : `untyped: ${String(error)}`),
  );

/** A TCP server that accepts and never answers (a Redis stuck before its first reply). */
async function silentServer(): Promise<number> {
  const sockets: Socket[] = [];
  const server: Server = createServer((socket) => sockets.push(socket));
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  closers.push(() => {
    for (const socket of sockets) socket.destroy();
    return new Promise((resolve) => server.close(resolve));
  });
  return (server.address() as { port: number }).port;
}

describe('a client on its first connection', () => {
  it('ioredis and node-redis clients not connected yet: the first takes are decided, exactly the limit', async () => {
    const redis = await startRedisServer();
    servers.push(redis);
    const io = new Redis({ port: redis.port, ...IOREDIS_OPTIONS });
    io.on('error', () => {});
    closers.push(() => io.disconnect());
    const nr = createClient({ url: redis.url, disableOfflineQueue: true });
    nr.on('error', () => {});
    nr.connect().catch(() => {});
    closers.push(() => nr.destroy());
    for (const client of [io, nr]) {
      const limiter = new RateLimiter({ client, timeoutMs: 5_000 });
      const tenant = randomTenant();
      const outcomes = await Promise.all(
        Array.from({ length: 80 }, () => outcome(limiter.take({ tenant }, policy))),
      );
      assert.deepEqual(
        [...new Set(outcomes)].sort(),
        ['allowed', 'limited'],
        `only decisions: ${[...new Set(outcomes)]}`,
      );
      assert.equal(outcomes.filter((o) => o === 'allowed').length, policy.limit);
      await limiter.ready();
    }
  });

  it('many limiters on one client add its listeners once (no listener per limiter)', async () => {
    const redis = await startRedisServer();
    servers.push(redis);
    const io = new Redis({ port: redis.port, ...IOREDIS_OPTIONS });
    io.on('error', () => {});
    closers.push(() => io.disconnect());
    const nr = createClient({ url: redis.url, disableOfflineQueue: true });
    nr.on('error', () => {});
    await nr.connect();
    closers.push(() => nr.destroy());
    for (const client of [io, nr]) {
      const before = client.listenerCount('error') + client.listenerCount('ready');
      for (let i = 0; i < 20; i++) new RateLimiter({ timeoutMs: TEST_TIMEOUT_MS, client });
      const added = client.listenerCount('error') + client.listenerCount('ready') - before;
      // The refusals' two, one shared wait while a client still connects, and the script
      // connection beside the client's one 'ready' (its 'end' is not counted here).
      assert.ok(added <= 4, `${added} listeners added by 20 limiters`);
    }
  });

  it('a server that never answers the handshake: UnavailableError at the deadline, nothing sent, no timeout', async () => {
    const port = await silentServer();
    const io = new Redis({ port, ...IOREDIS_OPTIONS, connectTimeout: 60_000 });
    io.on('error', () => {});
    closers.push(() => io.disconnect());
    const limiter = new RateLimiter({ client: io, timeoutMs: 300 });
    const error = await limiter.take({ tenant: randomTenant() }, policy).then(
      () => assert.fail('decided'),
      (e: unknown) => e,
    );
    assert.ok(error instanceof UnavailableError, String(error));
    assert.match(error.message, /still connecting.*nothing was sent/);
    const stats = limiter.stats();
    assert.equal(stats.timeout, 0);
    assert.equal(stats.unavailable, 1);
    assert.equal(stats.inFlight, 0, 'its slot is free');
  });

  it('ready() rejects with UnavailableError when no server answers; later calls fail as before', async () => {
    const redis = await startRedisServer();
    const port = redis.port;
    await redis.stop(); // nothing listens there now
    const io = new Redis({ port, ...IOREDIS_OPTIONS, retryStrategy: () => 50 });
    io.on('error', () => {});
    closers.push(() => io.disconnect());
    const limiter = new RateLimiter({ client: io, timeoutMs: 300 });
    await assert.rejects(limiter.ready(), UnavailableError);
    assert.equal(
      await outcome(limiter.take({ tenant: randomTenant() }, policy)),
      'SLUICE_UNAVAILABLE',
    );
  });
});
