/**
 * The limiter's start-up checks against real servers: an eviction policy that can evict
 * quota keys (allkeys-*, volatile-*), a replica, and — by its parsing, since only Redis 7
 * runs here — a Redis older than 7.0; reported once, to `onWarning` or as a process warning,
 * whatever client the application built.
 */
import assert from 'node:assert/strict';
import { after, describe, it } from 'node:test';
import { createClient } from 'redis';
import type { StartupWarning } from 'sluice';
import { fixedWindow, RateLimiter, UnavailableError } from 'sluice';
import { connectRedis } from 'sluice/node-redis';
import { type PrivateRedis, startRedisServer } from '../../src/demo/redis-server.js';
import { factsFromInfo, olderThan, warningsFor } from '../../src/redis/server-checks.js';
import { TEST_TIMEOUT_MS } from '../helpers/redis.js';

const servers: PrivateRedis[] = [];
const clients: { destroy(): void }[] = [];
after(async () => {
  for (const client of clients) client.destroy();
  for (const server of servers) await server.stop();
});

async function server(args: string[] = []): Promise<PrivateRedis> {
  const started = await startRedisServer(args);
  servers.push(started);
  return started;
}

/** The warnings a limiter on `url` reports, waiting until `count` came (or 3 s). */
async function warningsOf(url: string, count: number): Promise<StartupWarning[]> {
  const client = await connectRedis({ url, onError: () => {} });
  clients.push(client);
  const warnings: StartupWarning[] = [];
  new RateLimiter({
    timeoutMs: TEST_TIMEOUT_MS,
    client,
    onWarning: (warning) => warnings.push(warning),
  });
  const deadline = Date.now() + 3000;
  while (warnings.length < count && Date.now() < deadline) {
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
  // Anything more would have come with the same INFO reply.
  await new Promise((resolve) => setTimeout(resolve, 50));
  return warnings;
}

describe('start-up checks', () => {
  it('allkeys-* and volatile-* eviction policies are reported once; noeviction is not', async () => {
    for (const policy of ['allkeys-lru', 'volatile-ttl']) {
      const { url } = await server(['--maxmemory-policy', policy]);
      const warnings = await warningsOf(url, 1);
      assert.deepEqual(
        warnings.map((w) => [w.code, w.facts.maxmemoryPolicy]),
        [['SLUICE_EVICTION_POLICY', policy]],
      );
      assert.match(warnings[0]?.message ?? '', /noeviction/);
    }
    const { url } = await server();
    assert.deepEqual(await warningsOf(url, 0), []);
  });

  it('a replica is reported', async () => {
    const primary = await server();
    const replica = await server(['--replicaof', '127.0.0.1', String(primary.port)]);
    const warnings = await warningsOf(replica.url, 1);
    assert.deepEqual(
      warnings.map((w) => w.code),
      ['SLUICE_REPLICA'],
    );
  });

  it('a replica refuses a take with the same UnavailableError (READONLY) alone and in a batch', async () => {
    const primary = await server();
    const replica = await server(['--replicaof', '127.0.0.1', String(primary.port)]);
    const client = await connectRedis({ url: replica.url, onError: () => {} });
    clients.push(client);
    const limiter = new RateLimiter({ timeoutMs: TEST_TIMEOUT_MS, client, onWarning: () => {} });
    const policy = fixedWindow({ limit: 5, windowMs: 60_000 });
    const alone = await limiter.take({ tenant: 'a' }, policy).then(
      () => assert.fail('a replica admitted'),
      (error: unknown) => error,
    );
    const batched = await Promise.allSettled([
      limiter.take({ tenant: 'b' }, policy),
      limiter.take({ tenant: 'c' }, policy),
      limiter.takeAll([
        { scope: { tenant: 'd' }, policy },
        { scope: { tenant: 'd', route: 'r' }, policy },
      ]),
    ]);
    for (const error of [alone, ...batched.map((r) => (r as PromiseRejectedResult).reason)]) {
      assert.ok(error instanceof UnavailableError, String(error));
      assert.match((error as Error).message, /READONLY/);
    }
  });

  it('without onWarning: a process warning with the code, also for a client the application built', async () => {
    const { url } = await server(['--maxmemory-policy', 'allkeys-random']);
    const client = createClient({ url, disableOfflineQueue: true });
    client.on('error', () => {});
    await client.connect();
    clients.push(client);
    const seen: string[] = [];
    const onWarning = (warning: Error & { code?: string }) => seen.push(String(warning.code));
    process.on('warning', onWarning);
    try {
      new RateLimiter({ timeoutMs: TEST_TIMEOUT_MS, client });
      const deadline = Date.now() + 3000;
      while (!seen.includes('SLUICE_EVICTION_POLICY') && Date.now() < deadline) {
        await new Promise((resolve) => setTimeout(resolve, 20));
      }
      assert.ok(seen.includes('SLUICE_EVICTION_POLICY'), `warnings: ${seen.join(', ')}`);
    } finally {
      process.off('warning', onWarning);
    }
  });

  it('versions: 7.0 is the minimum (parsed from INFO)', () => {
    assert.equal(olderThan('6.2.14', '7.0.0'), true);
    assert.equal(olderThan('7.0.0', '7.0.0'), false);
    assert.equal(olderThan('7.2.4', '7.0.0'), false);
    assert.equal(olderThan('10.0.0', '7.0.0'), false);
    const facts = factsFromInfo(
      '# Server\r\nredis_version:6.2.14\r\n# Replication\r\nrole:master\r\n# Memory\r\nmaxmemory_policy:noeviction\r\n',
    );
    assert.deepEqual(facts, {
      version: '6.2.14',
      role: 'master',
      maxmemoryPolicy: 'noeviction',
      clusterEnabled: false,
      connectedReplicas: 0,
      minReplicasToWrite: false,
    });
    assert.deepEqual(
      warningsFor(facts).map((w) => w.code),
      ['SLUICE_REDIS_VERSION'],
    );
  });

  it('a primary with a replica and no min-replicas-to-write is reported; with it, not', async () => {
    const primary = await server();
    const replica = await server(['--replicaof', '127.0.0.1', String(primary.port)]);
    const admin = await connectRedis({ url: primary.url, onError: () => {} });
    clients.push(admin);
    for (let i = 0; i < 100; i++) {
      if (/connected_slaves:1/.test(String(await admin.client.info('replication')))) break;
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
    const codes = (await warningsOf(primary.url, 1)).map((w) => w.code);
    assert.deepEqual(codes, ['SLUICE_NO_MIN_REPLICAS']);
    const [warning] = await warningsOf(primary.url, 1);
    assert.match(warning?.message ?? '', /min-replicas-to-write 1/);
    assert.match(warning?.message ?? '', /waitForReplicas/);
    await admin.client.sendCommand(['CONFIG', 'SET', 'min-replicas-to-write', '1']);
    assert.deepEqual(await warningsOf(primary.url, 0), []);
    // A client of a failover topology is warned without a replica attached too.
    const lone = factsFromInfo('# Replication\r\nrole:master\r\nconnected_slaves:0\r\n');
    assert.deepEqual(
      warningsFor({ ...lone, version: '7.0.0', maxmemoryPolicy: 'noeviction' }, false, true).map(
        (w) => w.code,
      ),
      ['SLUICE_NO_MIN_REPLICAS'],
    );
    void replica;
  });
});
