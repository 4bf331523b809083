/**
 * Prefetched quota (docs/prefetch.md) on a real Redis: a fixed window with `prefetch` admits
 * from local grants, yet the fleet never admits more than the limit; unused units go back
 * into their own window at close and before the window ends; keys live within the horizon;
 * the in-memory twin decides as Redis does.
 */
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { createInterface } from 'node:readline';
import { describe, it } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { fixedWindow, InvalidInputError, MemoryStore, RateLimiter } from 'sluice';
import { connectRedis } from 'sluice/node-redis';
import { startRedisServer } from '../../src/demo/redis-server.js';
import { startTcpProxy, type TcpProxy } from '../../src/demo/tcp-proxy.js';
import { nodeScript } from '../helpers/node-script.js';
import { commandCalls, keyFor, randomTenant, TEST_TIMEOUT_MS, useRedis } from '../helpers/redis.js';

const redis = useRedis();
const hammer = new URL('../fixtures/prefetch-hammer.ts', import.meta.url);
const route = 'GET/hot';

async function scriptCalls(): Promise<number> {
  const admin = await redis.admin();
  return (await commandCalls(admin, 'evalsha')) + (await commandCalls(admin, 'eval'));
}

async function counter(key: string): Promise<number> {
  return Number((await (await redis.admin()).client.get(key)) ?? 0);
}

/** A prefetching fixed window and a fresh scope under it: the policy, the scope, its key. */
function hotScope(limiter: RateLimiter, limit: number, windowMs: number, maxUnits: number) {
  const policy = fixedWindow({ limit, windowMs, prefetch: { maxUnits } });
  const scope = { tenant: randomTenant(), route };
  return { policy, scope, key: limiter.keyOf(scope, policy) };
}

/** Runs `body` with a limiter whose connection goes through a TCP proxy (to delay replies). */
async function throughProxy(
  body: (limiter: RateLimiter, proxy: TcpProxy) => Promise<void>,
): Promise<void> {
  const proxy = await startTcpProxy('127.0.0.1', redis.server.port);
  try {
    const client = await redis.client({ url: `redis://127.0.0.1:${proxy.port}` });
    await body(new RateLimiter({ client, timeoutMs: 2_000 }), proxy);
  } finally {
    await proxy.close();
  }
}

describe('prefetch', () => {
  it('3 processes hammering one scope of limit 10,000 admit exactly 10,000, in few calls', async () => {
    const tenant = randomTenant();
    const admin = await redis.admin();
    const before = await commandCalls(admin, 'incrby');
    const children = Array.from({ length: 3 }, () =>
      spawn(process.execPath, nodeScript(hammer), {
        env: {
          ...process.env,
          REDIS_URL: redis.server.url,
          TENANT: tenant,
          LIMIT: '10000',
          WORKERS: '64',
          MAX_UNITS: '64',
        },
        stdio: ['pipe', 'pipe', 'inherit'],
      }),
    );
    const lines = children.map((child) =>
      createInterface({ input: child.stdout })[Symbol.asyncIterator](),
    );
    for (const line of lines) assert.equal((await line.next()).value, 'ready');
    for (const child of children) child.stdin.write('go\n');
    const reports = await Promise.all(
      lines.map(
        async (line) =>
          JSON.parse((await line.next()).value as string) as { admitted: number; stats: number },
      ),
    );
    await Promise.all(
      children.map((child) => (child.exitCode === null ? once(child, 'exit') : undefined)),
    );
    const policy = fixedWindow({ limit: 10_000, windowMs: 600_000 });
    assert.equal(
      reports.reduce((sum, r) => sum + r.admitted, 0),
      10_000,
    );
    for (const r of reports) assert.equal(r.stats, r.admitted); // every local admission counted
    assert.equal(await counter(keyFor(policy, tenant, route)), 10_000);
    // Without prefetch every admission is an INCRBY in Redis: 10,000 of them.
    const calls = (await commandCalls(admin, 'incrby')) - before;
    assert.ok(calls < 2_000, `${calls} INCRBY for 10,000 admissions`);
  });

  it('a grant is consumed in Redis at once and its unused units go back at close', async () => {
    const client = await redis.client();
    const events: { outcome: string; cached: boolean }[] = [];
    const limiter = new RateLimiter({
      timeoutMs: TEST_TIMEOUT_MS,
      client,
      onDecision: (event) => events.push(event),
    });
    const { policy, scope, key } = hotScope(limiter, 1_000, 60_000, 64);
    const first = await limiter.take(scope, policy);
    assert.equal(first.allowed, true);
    // The take, then min(64, ⌊999 / 8⌋) more: consumed at once.
    assert.equal(await counter(key), 65);
    assert.equal(first.remaining, 999);
    const calls = await scriptCalls();
    const local = [];
    for (let i = 0; i < 10; i++) local.push(await limiter.take(scope, policy));
    assert.equal(await scriptCalls(), calls); // answered in process
    assert.deepEqual(
      local.map((d) => d.remaining),
      Array.from({ length: 10 }, (_, i) => 998 - i),
    );
    for (const d of local) assert.ok(d.allowed && d.resetMs > 59_000 && d.resetMs <= 60_000);
    assert.equal(limiter.stats().allowed, 11);
    assert.equal(events.length, 11);
    assert.deepEqual(
      events.map((e) => [e.outcome, e.cached]),
      [['allowed', false], ...Array.from({ length: 10 }, () => ['allowed', true])],
    );
    await limiter.close();
    assert.equal(await counter(key), 11); // 54 unused units back
    // After close, takes go to Redis one by one.
    await limiter.take(scope, policy);
    assert.equal(await counter(key), 12);
  });

  it('a grant half used is refilled ahead: takes do not wait for it, and no more than maxUnits is held', async () => {
    const client = await redis.client();
    const events: { cached: boolean }[] = [];
    const limiter = new RateLimiter({
      client,
      timeoutMs: 2_000,
      onDecision: (event) => events.push(event),
    });
    const { policy, scope, key } = hotScope(limiter, 100_000, 60_000, 64);
    await limiter.take(scope, policy); // 1 + 64
    for (let i = 0; i < 32; i++) await limiter.take(scope, policy);
    // 32 units left: the refill asks 64 - 32 - 1 = 31 more, and its own take of 1.
    for (let i = 0; i < 200 && (await counter(key)) < 97; i++) await sleep(5);
    assert.equal(await counter(key), 97);
    events.length = 0;
    for (let i = 0; i < 64; i++) assert.equal((await limiter.take(scope, policy)).allowed, true);
    // Without a refill ahead, the 33rd of these would have waited for a grant call.
    assert.deepEqual(
      events.map((e) => e.cached),
      Array.from({ length: 64 }, () => true),
    );
    await limiter.close();
    assert.equal(await counter(key), 1 + 32 + 64);
  });

  it('a refill ahead that Redis never answers: the units held still admit, close() ends, and it is counted', async () => {
    const server = await startRedisServer();
    let frozen = false;
    try {
      const client = await connectRedis({ url: server.url, reconnect: false, onError: () => {} });
      const limiter = new RateLimiter({ client, timeoutMs: 200 });
      const policy = fixedWindow({ limit: 100_000, windowMs: 60_000, prefetch: { maxUnits: 8 } });
      const scope = { tenant: randomTenant(), route };
      await limiter.take(scope, policy); // 1 + 8
      for (let i = 0; i < 3; i++) await limiter.take(scope, policy); // 5 left
      process.kill(server.pid, 'SIGSTOP');
      frozen = true;
      // This take leaves 4 (half of 8): it sends the refill, to a Redis that does not answer.
      for (let i = 0; i < 4; i++) assert.equal((await limiter.take(scope, policy)).allowed, true);
      const closing = Date.now();
      await limiter.close();
      assert.ok(Date.now() - closing < 2_000, 'close() waited for the frozen refill for too long');
      // Two calls timed out: the refill, and the give-back of the 4 units at close().
      assert.equal(limiter.stats().timeout, 2);
      assert.equal(limiter.stats().allowed, 8);
      process.kill(server.pid, 'SIGCONT');
      frozen = false;
      await client.close();
    } finally {
      if (frozen) process.kill(server.pid, 'SIGCONT');
      await server.stop();
    }
  });

  it('a replica never holds more than maxUnits: a burst that uses a grant up to its last unit', async () => {
    const limiter = new RateLimiter({ client: await redis.client(), timeoutMs: 2_000 });
    const { policy, scope, key } = hotScope(limiter, 100_000, 60_000, 64);
    // One grant call for the first take; the other 63 are admitted from its 64 units.
    await Promise.all(Array.from({ length: 64 }, () => limiter.take(scope, policy)));
    // This take uses the last unit and refills ahead, with no take waiting on the refill.
    await limiter.take(scope, policy);
    for (let i = 0; i < 200 && (await counter(key)) === 65; i++) await sleep(5);
    await sleep(20);
    assert.ok((await counter(key)) - 65 <= 64, `held ${(await counter(key)) - 65} > maxUnits`);
    await limiter.close();
    assert.equal(await counter(key), 65);
  });

  it('reset while a refill is in flight: its grant goes with the deleted window', async () => {
    const admin = await redis.admin();
    await throughProxy(async (limiter, proxy) => {
      const { policy, scope, key } = hotScope(limiter, 100, 60_000, 64);
      await limiter.take(scope, policy); // 1 + ⌊99 / 8⌋ = 13
      proxy.delayMs = 100;
      proxy.mode = 'delay';
      await limiter.take(scope, policy); // 11 units left: the refill goes ahead, delayed
      const reset = limiter.reset(scope, policy);
      proxy.mode = 'pass';
      assert.equal(await reset, true);
      await sleep(200); // the refill's answer (units of the deleted window) has landed
      let admitted = 0;
      for (let i = 0; i < 200; i++) {
        if (!(await limiter.take(scope, policy)).allowed) break;
        admitted++;
      }
      assert.equal(admitted, 100, 'the window after the reset admits its limit, no more');
      await limiter.close();
      assert.equal(Number(await admin.client.get(key)), 100);
    });
  });

  it('a take that waits for a refill sent before it came: resetMs ends no later than the window', async () => {
    const admin = await redis.admin();
    await throughProxy(async (limiter, proxy) => {
      const { policy, scope, key } = hotScope(limiter, 100_000, 3_000, 64);
      await limiter.take(scope, policy); // 1 + 64
      proxy.delayMs = 150;
      proxy.mode = 'delay';
      for (let i = 0; i < 64; i++) await limiter.take(scope, policy); // the refill goes at 32
      await sleep(100);
      const before = Date.now();
      const d = await limiter.take(scope, policy); // answered by that refill
      proxy.mode = 'pass';
      const end = Number(await admin.client.sendCommand(['PEXPIRETIME', key]));
      assert.equal(d.allowed, true);
      assert.ok(before + d.resetMs <= end + 2, `resetMs ends ${before + d.resetMs - end} ms late`);
      await limiter.close();
    });
  });

  it('the grant shrinks near the limit and cost > 1 bypasses it', async () => {
    const limiter = new RateLimiter({ timeoutMs: TEST_TIMEOUT_MS, client: await redis.client() });
    const { policy, scope, key } = hotScope(limiter, 20, 60_000, 64);
    await limiter.take(scope, policy); // 1 + ⌊19 / 8⌋ = 3
    assert.equal(await counter(key), 3);
    const big = await limiter.take(scope, policy, { cost: 5 });
    assert.equal(big.allowed, true);
    assert.equal(await counter(key), 8);
    let admitted = 3; // the first take, and the 2 units of its grant still to use
    for (;;) {
      const d = await limiter.take(scope, policy);
      if (!d.allowed) break;
      admitted++;
    }
    assert.equal(admitted + 5, 20 + 2);
    assert.equal(await counter(key), 20);
    await limiter.close();
    assert.equal(await counter(key), 20);
  });

  it('at the end of a window the grant goes back into it, and the next window grants afresh', async () => {
    const limiter = new RateLimiter({ timeoutMs: TEST_TIMEOUT_MS, client: await redis.client() });
    const { policy, scope, key } = hotScope(limiter, 1_000, 400, 32);
    await limiter.take(scope, policy);
    assert.equal(await counter(key), 33);
    await sleep(400 - 20 + 10); // past the give-back, before the window ends
    // Read together: on a loaded machine the window may end between two separate reads.
    const [stored, left] = (await (
      await redis.admin()
    ).client
      .multi()
      .get(key)
      .pTTL(key)
      .exec()) as unknown as [string | null, number];
    if (left > 0) assert.equal(Number(stored), 1);
    await sleep(Math.max(0, left) + 5);
    const next = await limiter.take(scope, policy);
    assert.equal(next.allowed, true);
    assert.equal(next.remaining, 999);
    assert.equal(await counter(key), 33);
    await limiter.close();
    assert.equal(await counter(key), 1);
  });

  it('keeps no key beyond the horizon', async () => {
    const limiter = new RateLimiter({ timeoutMs: TEST_TIMEOUT_MS, client: await redis.client() });
    const { policy, scope, key } = hotScope(limiter, 100, 300, 16);
    const admin = await redis.admin();
    await Promise.all(Array.from({ length: 30 }, () => limiter.take(scope, policy)));
    assert.ok((await counter(key)) > 30); // grants held
    const ttl = await admin.client.pTTL(key);
    assert.ok(ttl > 0 && ttl <= 300, `TTL ${ttl}`);
    await limiter.close();
    assert.equal(await counter(key), 30);
    const after = await admin.client.pTTL(key);
    assert.ok(after > 0 && after <= ttl, `TTL ${after} after the give-back`);
    await sleep(320);
    assert.equal(await admin.client.exists(key), 0);
    const keys = await admin.client.keys(`*${scope.tenant}*`);
    assert.deepEqual(keys, []);
  });

  it('the in-memory twin decides as Redis does', async () => {
    const policy = fixedWindow({ limit: 200, windowMs: 60_000, prefetch: { maxUnits: 16 } });
    const run = async (limiter: RateLimiter, tenant: string) => {
      const scope = { tenant, route };
      // `remaining` of a local answer depends on when a refill ahead was answered: not compared.
      const out: boolean[] = [];
      await limiter.take(scope, policy);
      // The take, then min(16, ⌊199 / 8⌋) more, consumed at once.
      assert.equal((await limiter.peek(scope, policy)).remaining, 183);
      for (let i = 1; i < 150; i++) {
        const d = await limiter.take(scope, policy, { cost: i % 37 === 0 ? 3 : 1 });
        out.push(d.allowed);
      }
      await limiter.close();
      const peek = await limiter.peek(scope, policy);
      return { out, left: peek.remaining };
    };
    const store = new MemoryStore();
    const twin = await run(new RateLimiter({ store }), 'twin');
    const real = await run(
      new RateLimiter({ timeoutMs: TEST_TIMEOUT_MS, client: await redis.client() }),
      randomTenant(),
    );
    assert.deepEqual(twin, real);
    assert.equal(real.left, 200 - 150 - 2 * 4);
  });

  it('refuses a bad prefetch option', () => {
    for (const prefetch of [null, 3, {}, { maxUnits: 0 }, { maxUnits: 1.5 }, { maxUnits: 1e6 }]) {
      assert.throws(
        () => fixedWindow({ limit: 10, windowMs: 1000, prefetch } as never),
        (error) => error instanceof InvalidInputError && error.field.startsWith('policy.prefetch'),
      );
    }
    assert.throws(
      () => fixedWindow({ limit: 10, windowMs: 1000, prefetch: { maxUnits: 2, x: 1 } } as never),
      InvalidInputError,
    );
  });
});
