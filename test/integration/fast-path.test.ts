/**
 * The script connection of `connectRedis` (`src/stores/resp/`): the limiter's EVALSHA
 * and EVAL go over a second connection of sluice's own, written at once, while everything
 * else stays on node-redis — with the same setup (AUTH, ACL user, SELECT), the same
 * failure rules (no queue, nothing resent, reconnect reported, stalls recycled) and the
 * same close.
 */
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { after, describe, it } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { fixedWindow, RateLimiter, UnavailableError } from 'sluice';
import { connectRedis } from 'sluice/node-redis';
import { type PrivateRedis, startRedisServer } from '../../src/demo/redis-server.js';
import { startTcpProxy, type TcpProxy } from '../../src/demo/tcp-proxy.js';
import type { RespConnection } from '../../src/redis/resp/connection.js';
import { outcome, parseClientList, until } from '../helpers/connections.js';
import { nodeScript } from '../helpers/node-script.js';
import {
  type Client,
  commandCalls,
  keyFor,
  randomTenant,
  TEST_TIMEOUT_MS,
  useRedis,
} from '../helpers/redis.js';
import { boundFor, within } from '../helpers/within.js';

const redis = useRedis();
const servers: PrivateRedis[] = [];
const proxies: TcpProxy[] = [];
after(async () => {
  for (const proxy of proxies) await proxy.close();
  for (const server of servers) await server.stop();
});
const route = 'POST/orders';

/** The connections of `CLIENT LIST`, each as its fields. */
async function clientList(admin: Client): Promise<Record<string, string>[]> {
  return parseClientList(await admin.client.sendCommand(['CLIENT', 'LIST']));
}

/** The script connection of a connection (its test hook). */
function fastPathOf(client: { readonly scriptConnection: RespConnection | undefined }) {
  return client.scriptConnection;
}

function tally(outcomes: readonly string[]): Record<string, number> {
  const counts: Record<string, number> = {};
  for (const o of outcomes) counts[o] = (counts[o] ?? 0) + 1;
  return counts;
}

describe('script connection: routing', () => {
  it('takes go over the script connection (named sluice), INFO and other commands over node-redis', async () => {
    // No watchdog: its PING on an idle connection (every second) would be the script
    // connection's last command in CLIENT LIST when the takes are slow (a loaded run).
    const client = await redis.client({ stallTimeoutMs: 0 });
    const admin = await redis.admin();
    assert.ok(fastPathOf(client), 'connectRedis attached a script connection');
    const id = String(await client.client.sendCommand(['CLIENT', 'ID']));
    const limiter = new RateLimiter({ timeoutMs: TEST_TIMEOUT_MS, client });
    const policy = fixedWindow({ limit: 100, windowMs: 60_000 });
    for (let i = 0; i < 20; i++) await limiter.take({ tenant: randomTenant(), route }, policy);
    await sleep(50); // the start-up checks' INFO, on node-redis
    const connections = await clientList(admin);
    const scripts = connections.filter((c) => c.name === 'sluice');
    assert.equal(scripts.length >= 1, true, 'a connection named sluice');
    assert.ok(
      scripts.some((c) => c.cmd === 'evalsha'),
      `the script connection ran EVALSHA: ${JSON.stringify(scripts)}`,
    );
    const own = connections.find((c) => c.id === id);
    assert.ok(own, 'the node-redis connection is listed');
    assert.notEqual(own.cmd, 'evalsha', 'no script went over node-redis');
    assert.equal(own.name, '', 'node-redis keeps its connection unnamed');
    client.destroy();
  });

  it('fastPath: false: node-redis alone, one connection', async () => {
    const client = await connectRedis({
      url: redis.server.url,
      fastPath: false,
      onError: () => {},
    });
    try {
      assert.equal(fastPathOf(client), undefined);
      const id = String(await client.client.sendCommand(['CLIENT', 'ID']));
      const limiter = new RateLimiter({ timeoutMs: TEST_TIMEOUT_MS, client });
      const policy = fixedWindow({ limit: 100, windowMs: 60_000 });
      assert.equal((await limiter.take({ tenant: randomTenant(), route }, policy)).allowed, true);
      const connections = await clientList(await redis.admin());
      assert.equal(connections.find((c) => c.id === id)?.cmd, 'evalsha');
    } finally {
      client.destroy();
    }
  });

  it('decisions stay exact under 200 concurrent takes', async () => {
    const client = await redis.client();
    const limiter = new RateLimiter({ client, timeoutMs: 5000 });
    const policy = fixedWindow({ limit: 37, windowMs: 60_000 });
    const tenants = [randomTenant(), randomTenant(), randomTenant()];
    const decisions = await Promise.all(
      Array.from({ length: 200 }, (_, i) =>
        limiter.take({ tenant: tenants[i % 3] as string, route }, policy),
      ),
    );
    for (const tenant of tenants) {
      const mine = decisions.filter((_, i) => tenants[i % 3] === tenant);
      assert.equal(mine.filter((d) => d.allowed).length, Math.min(37, mine.length), tenant);
      // Every admitted take saw a distinct remaining count: each ran once, in some order.
      const remaining = mine.filter((d) => d.allowed).map((d) => d.remaining);
      assert.equal(new Set(remaining).size, remaining.length);
    }
    const admin = await redis.admin();
    for (const tenant of tenants) {
      const counted = await admin.client.get(keyFor(policy, tenant, route));
      assert.ok(counted !== null && Number(counted) >= 37, `${tenant}: counted ${counted}`);
    }
    client.destroy();
  });

  it('after SCRIPT FLUSH, NOSCRIPT is answered with EVAL on the script connection', async () => {
    const client = await redis.client();
    const admin = await redis.admin();
    const limiter = new RateLimiter({ timeoutMs: TEST_TIMEOUT_MS, client });
    const policy = fixedWindow({ limit: 2, windowMs: 60_000 });
    const tenant = randomTenant();
    assert.equal((await limiter.take({ tenant, route }, policy)).allowed, true);
    await admin.client.sendCommand(['SCRIPT', 'FLUSH']);
    const evals = await commandCalls(admin, 'eval');
    const after = await Promise.all([
      limiter.take({ tenant, route }, policy),
      limiter.take({ tenant, route }, policy),
    ]);
    assert.deepEqual(
      after.map((d) => d.allowed).sort(),
      [false, true],
      'one more admitted, then limited: each take counted once',
    );
    assert.ok((await commandCalls(admin, 'eval')) > evals, 'the script was sent again as EVAL');
    assert.equal((await limiter.take({ tenant, route }, policy)).allowed, false);
    client.destroy();
  });
});

describe('script connection: setup', () => {
  it('AUTH (requirepass, an ACL user) and SELECT: the keys land in the database chosen', async () => {
    const server = await startRedisServer(['--requirepass', 'sesame']);
    servers.push(server);
    const admin = await connectRedis({ url: server.url, password: 'sesame', fastPath: false });
    try {
      await admin.client.sendCommand(['ACL', 'SETUSER', 'app', 'on', '>apppw', '+@all', '~*']);
      const policy = fixedWindow({ limit: 5, windowMs: 60_000 });
      for (const [options, user, db] of [
        [{ password: 'sesame' }, 'default', '0'],
        [{ username: 'app', password: 'apppw', database: 3 }, 'app', '3'],
        [{ url: `${server.url.replace('redis://', 'redis://app:apppw@')}/5` }, 'app', '5'],
      ] as const) {
        const client = await connectRedis({ url: server.url, ...options, onError: () => {} });
        try {
          const tenant = randomTenant();
          const limiter = new RateLimiter({ timeoutMs: TEST_TIMEOUT_MS, client });
          assert.equal((await limiter.take({ tenant, route }, policy)).allowed, true);
          const scripts = (await clientList(admin)).filter((c) => c.name === 'sluice');
          assert.ok(
            scripts.some((c) => c.user === user && c.db === db && /^eval/.test(c.cmd ?? '')),
            `${JSON.stringify(options)}: ${JSON.stringify(scripts)}`,
          );
          await admin.client.sendCommand(['SELECT', db]);
          assert.equal(
            await admin.client.exists(keyFor(policy, tenant, route)),
            1,
            `the key is in db ${db}`,
          );
          await admin.client.sendCommand(['SELECT', '0']);
        } finally {
          client.destroy();
        }
      }
    } finally {
      admin.destroy();
    }
  });
});

describe('script connection: failures', () => {
  it('a script connection the server refuses fails the start, and closes the node-redis client', async () => {
    // One client allowed: node-redis's connection takes it, the script connection is refused.
    const server = await startRedisServer(['--maxclients', '1']);
    servers.push(server);
    const error = await connectRedis({ url: server.url, onError: () => {} }).then(
      (client) => {
        client.destroy();
        return 'connected';
      },
      (e: unknown) => e,
    );
    assert.ok(error instanceof UnavailableError, String(error));
    assert.match(error.message, /max number of clients/);
    // The node-redis connection was closed: the one slot is free again.
    const deadline = performance.now() + 2000;
    let again: unknown;
    while (performance.now() < deadline) {
      again = await connectRedis({ url: server.url, fastPath: false }).then(
        (client) => {
          client.destroy();
          return 'connected';
        },
        (e: unknown) => e,
      );
      if (again === 'connected') break;
      await sleep(20);
    }
    assert.equal(again, 'connected');
  });

  it('a server restart: calls fail at once with UnavailableError, then succeed after the reconnect, each step reported once', async () => {
    const server = await startRedisServer();
    servers.push(server);
    const errors: Error[] = [];
    const reconnects: number[] = [];
    const client = await connectRedis({
      url: server.url,
      onError: (error) => errors.push(error),
      onReconnect: (attempt) => reconnects.push(attempt),
    });
    try {
      const limiter = new RateLimiter({ client, timeoutMs: 1000 });
      const policy = fixedWindow({ limit: 100, windowMs: 60_000 });
      assert.equal(
        await outcome(limiter.take({ tenant: randomTenant(), route }, policy)),
        'allowed',
      );
      await server.kill();
      await until(() => !fastPathOf(client)?.isReady, 2000, 'the loss is seen');
      const started = performance.now();
      assert.equal(
        await outcome(limiter.take({ tenant: randomTenant(), route }, policy)),
        'SLUICE_UNAVAILABLE',
      );
      assert.ok(performance.now() - started < 100, 'failed at once, not at the deadline');
      await sleep(600); // a few reconnect attempts of both connections
      await server.restart();
      const deadline = performance.now() + 5000;
      let last = '';
      while (performance.now() < deadline) {
        last = await outcome(limiter.take({ tenant: randomTenant(), route }, policy));
        if (last === 'allowed') break;
        await sleep(20);
      }
      assert.equal(last, 'allowed', 'decisions again after the reconnect');
      // Both connections went through the outage; each attempt and each error of it is
      // reported once (they were reported once per connection: 1,1,2,2,3,3…).
      assert.ok(reconnects.length >= 2, `reconnects: ${reconnects}`);
      assert.deepEqual(
        reconnects,
        reconnects.map((_, i) => i + 1),
        `each attempt once: ${reconnects}`,
      );
      assert.ok(errors.length >= 1, 'the loss was reported');
      assert.ok(
        errors.length <= reconnects.length + 1,
        `${errors.length} errors for ${reconnects.length} attempts: ${errors.map((e) => e.message).join('; ')}`,
      );
      assert.ok(fastPathOf(client)?.isReady);
    } finally {
      client.destroy();
    }
  });

  it('a call that may have run is never sent again: a cut after the send fails it, once', async () => {
    const proxy = await startTcpProxy('127.0.0.1', redis.server.port);
    proxies.push(proxy);
    const client = await redis.client({ url: `redis://127.0.0.1:${proxy.port}`, reconnect: true });
    const admin = await redis.admin();
    const limiter = new RateLimiter({ client, timeoutMs: 2000 });
    const policy = fixedWindow({ limit: 100, windowMs: 60_000 });
    const tenant = randomTenant();
    assert.equal(await outcome(limiter.take({ tenant, route }, policy)), 'allowed');
    proxy.mode = 'cut-after-send';
    assert.equal(await outcome(limiter.take({ tenant, route }, policy)), 'SLUICE_UNAVAILABLE');
    proxy.mode = 'pass';
    await until(() => client.isReady && fastPathOf(client)?.isReady === true, 5000, 'reconnected');
    await sleep(200); // a resend would have landed by now
    // The first take and the cut one (it ran): 2, never 3.
    assert.equal(await admin.client.get(keyFor(policy, tenant, route)), '2');
    client.destroy();
  });

  it('a black-holed script connection: pending calls rejected within stallTimeoutMs, the recycle reported once, service resumes', async () => {
    const proxy = await startTcpProxy('127.0.0.1', redis.server.port);
    proxies.push(proxy);
    const stalls: UnavailableError[] = [];
    const client = await redis.client({
      url: `redis://127.0.0.1:${proxy.port}`,
      reconnect: true,
      stallTimeoutMs: 300,
      onStall: (error) => {
        stalls.push(error);
      },
    });
    // A deadline far beyond the stall timeout: what ends the calls is the recycle.
    const limiter = new RateLimiter({ client, timeoutMs: 10_000, maxBatchSize: 1 });
    const policy = fixedWindow({ limit: 1000, windowMs: 60_000 });
    assert.equal(await outcome(limiter.take({ tenant: randomTenant(), route }, policy)), 'allowed');
    proxy.mode = 'blackhole';
    const started = performance.now();
    const pending = Array.from({ length: 10 }, () =>
      outcome(limiter.take({ tenant: randomTenant(), route }, policy)),
    );
    const outcomes = await within(Promise.all(pending), boundFor(300), 'the pending takes');
    const ms = performance.now() - started;
    assert.deepEqual(tally(outcomes), { SLUICE_UNAVAILABLE: 10 });
    // The stall is confirmed within 2 × stallTimeoutMs at worst (a probe sent just before).
    assert.ok(ms < 300 * 2 + 400, `rejected after ${ms.toFixed(0)} ms`);
    assert.equal(stalls.length, 1, 'one recycle of the pair, reported once');
    assert.match(stalls[0]?.message ?? '', /^Redis connection stalled: no reply to PING/);
    assert.equal(limiter.stats().inFlight, 0, 'every slot freed');
    proxy.mode = 'pass';
    await until(
      () => client.isReady && fastPathOf(client)?.isReady === true,
      3000,
      'both connections back once the path is',
    );
    assert.equal(await outcome(limiter.take({ tenant: randomTenant(), route }, policy)), 'allowed');
    client.destroy();
    await sleep(100);
    assert.equal(proxy.connections, 0, 'destroy() closed both connections');
  });

  it('reconnect: false: losing the script connection closes the client for good', async () => {
    const client = await redis.client({ reconnect: false });
    const admin = await redis.admin();
    const scripts = (await clientList(admin)).filter((c) => c.name === 'sluice');
    const mine = scripts.at(-1);
    assert.ok(mine);
    await admin.client.sendCommand(['CLIENT', 'KILL', 'ID', mine.id as string]);
    await until(() => !client.isOpen, 2000, 'the client is closed');
    assert.equal(fastPathOf(client)?.isOpen, false);
    const limiter = new RateLimiter({ timeoutMs: TEST_TIMEOUT_MS, client });
    const policy = fixedWindow({ limit: 5, windowMs: 60_000 });
    assert.equal(
      await outcome(limiter.take({ tenant: randomTenant(), route }, policy)),
      'SLUICE_UNAVAILABLE',
    );
  });
});

/**
 * A client through a fresh TCP proxy (to cut or black-hole), with a 300 ms stall watchdog and
 * reconnection, and a limiter whose deadline (10 s) never ends a call first.
 */
async function watchedThroughProxy() {
  const proxy = await startTcpProxy('127.0.0.1', redis.server.port);
  proxies.push(proxy);
  const client = await redis.client({
    url: `redis://127.0.0.1:${proxy.port}`,
    stallTimeoutMs: 300,
    reconnect: true,
  });
  const limiter = new RateLimiter({ client, timeoutMs: 10_000 });
  const policy = fixedWindow({ limit: 100, windowMs: 60_000 });
  return { proxy, client, limiter, policy };
}

describe('script connection: close', () => {
  it('close() waits for the script replies already sent, then closes both connections', async () => {
    const proxy = await startTcpProxy('127.0.0.1', redis.server.port);
    proxies.push(proxy);
    const client = await redis.client({ url: `redis://127.0.0.1:${proxy.port}` });
    const limiter = new RateLimiter({ timeoutMs: TEST_TIMEOUT_MS, client, maxBatchSize: 1 });
    const policy = fixedWindow({ limit: 100, windowMs: 60_000 });
    const takes = Array.from({ length: 20 }, () =>
      outcome(limiter.take({ tenant: randomTenant(), route }, policy)),
    );
    // The coalescer sends in the next turn; close once they are written.
    await new Promise((resolve) => setImmediate(resolve));
    assert.ok((fastPathOf(client)?.pending ?? 0) > 0, 'calls pending on the script connection');
    await within(client.close(), 2000, 'close()');
    assert.deepEqual(tally(await Promise.all(takes)), { allowed: 20 });
    assert.equal(fastPathOf(client)?.isOpen, false);
    await sleep(100);
    assert.equal(proxy.connections, 0, 'no connection left open');
  });

  it('close() of a black-holed client settles within stallTimeoutMs and leaves no connection', async () => {
    const { proxy, client, limiter, policy } = await watchedThroughProxy();
    proxy.mode = 'blackhole';
    const take = outcome(limiter.take({ tenant: randomTenant(), route }, policy));
    await sleep(50);
    await within(client.close(), boundFor(300), 'close() during a black hole');
    assert.equal(await take, 'SLUICE_UNAVAILABLE');
    await sleep(100);
    assert.equal(proxy.connections, 0);
  });

  for (const how of ['close', 'destroy'] as const) {
    it(`connect() after ${how}(): both connections and the watchdog open again, takes are decided`, async () => {
      const { proxy, client, limiter, policy } = await watchedThroughProxy();
      assert.equal(
        await outcome(limiter.take({ tenant: randomTenant(), route }, policy)),
        'allowed',
      );
      if (how === 'close') await client.close();
      else client.destroy();
      assert.equal(
        await outcome(limiter.take({ tenant: randomTenant(), route }, policy)),
        'SLUICE_UNAVAILABLE',
      );
      // Before the fix: node-redis answered again, every take stayed UnavailableError.
      await client.connect();
      assert.equal(client.isReady, true);
      assert.equal(
        await outcome(limiter.take({ tenant: randomTenant(), route }, policy)),
        'allowed',
      );
      // The watchdog runs again: a black hole is recycled, pending calls rejected.
      proxy.mode = 'blackhole';
      const stalled = outcome(limiter.take({ tenant: randomTenant(), route }, policy));
      assert.equal(
        await within(stalled, boundFor(300), 'a take during a black hole'),
        'SLUICE_UNAVAILABLE',
      );
      proxy.mode = 'pass';
      client.destroy();
    });
  }

  for (const how of ['close', 'quit', 'destroy']) {
    it(`${how}(): nothing keeps the process alive`, async () => {
      const fixture = new URL('../fixtures/fast-path-exit.ts', import.meta.url);
      const child = spawn(process.execPath, nodeScript(fixture), {
        env: { ...process.env, REDIS_URL: redis.server.url, CLOSE: how },
        stdio: ['ignore', 'pipe', 'inherit'],
      });
      let output = '';
      child.stdout.on('data', (data: Buffer) => {
        output += data.toString();
      });
      // 'close': its stdout read to the end.
      const exited = new Promise<number | null>((resolve) => child.once('close', resolve));
      try {
        const code = await within(exited, 10_000, `the process exits after ${how}()`);
        assert.equal(code, 0);
        assert.equal(output.trim(), 'closed');
      } finally {
        if (child.exitCode === null) child.kill('SIGKILL');
      }
    });
  }
});
